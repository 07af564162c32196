"""Channel backends behind one small interface (:class:`Channel`).

* :class:`LocalChannel` — a folder indexed by rattler (the embedded default);
* :class:`AnacondaChannel` — one label of an anaconda.org owner, through anaconda-client's API;
* :func:`open_channel` — picks the backend for a distro.yaml reference.
"""

from conda_distro.channels.anaconda import AnacondaChannel, AnacondaRef, mask_secret, parse_anaconda_ref
from conda_distro.channels.base import Channel, ChannelFile, Progress, no_progress, split_artifact
from conda_distro.channels.factory import anaconda_api_url, open_anaconda_channel, open_channel
from conda_distro.channels.hooks import TEST_CRASH_ENV, crash_point
from conda_distro.channels.local import LocalChannel, sha256_of

__all__ = [
    "AnacondaChannel", "AnacondaRef", "Channel", "ChannelFile", "LocalChannel", "Progress", "TEST_CRASH_ENV",
    "anaconda_api_url", "crash_point", "mask_secret", "no_progress", "open_anaconda_channel", "open_channel", "parse_anaconda_ref",
    "sha256_of", "split_artifact",
]
