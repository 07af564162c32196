"""Pick the channel backend from a reference: ``anaconda://OWNER[/LABEL]`` or a local path."""

from __future__ import annotations

import os
from collections.abc import Mapping

from conda_distro.channels.anaconda import API_URL_ENV, TOKEN_ENV, AnacondaChannel, parse_anaconda_ref
from conda_distro.channels.base import Channel
from conda_distro.channels.local import LocalChannel
from conda_distro.config import DistroRepo
from conda_distro.util.secret import read_secret


def anaconda_api_url(distro: DistroRepo, env: Mapping[str, str]) -> str:
    """``$ANACONDA_API_URL`` wins over distro.yaml's ``anaconda.api_url``."""
    return env.get(API_URL_ENV) or distro.config.anaconda.api_url


def open_anaconda_channel(distro: DistroRepo, ref: str, *, env: Mapping[str, str] | None = None) -> AnacondaChannel:
    """The anaconda.org backend of the ``anaconda://OWNER[/LABEL]`` reference ``ref`` (as :func:`open_channel`)."""
    env = os.environ if env is None else env
    parsed = parse_anaconda_ref(ref)
    return AnacondaChannel(parsed.owner, parsed.label, api_url=anaconda_api_url(distro, env),
                           token=read_secret(env, TOKEN_ENV), lock_dir=distro.build_dir / "locks", ref=ref)


def open_channel(distro: DistroRepo, ref: str, *, env: Mapping[str, str] | None = None) -> Channel:
    """The backend for a staging/main reference of ``distro``. ``env`` defaults to ``os.environ``
    (read here, at call time). The token is stripped of surrounding whitespace, checked (a non-ASCII one
    is a ChannelError, exit 2) and registered for masking."""
    if distro.is_anaconda(ref):
        return open_anaconda_channel(distro, ref, env=env)
    return LocalChannel(distro.resolve_local(ref), ref=ref, subdirs=distro.subdirs)
