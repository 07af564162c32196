"""The sandbox world: a self-contained, offline distribution repository (spec section 9).

Public API:

* :func:`create_sandbox` (:class:`SandboxOptions` in, :class:`SandboxResult` out): the whole world in
  a folder (``conda-distro sandbox DIR``); :func:`create_world` also makes the real one (``--real``).
* :func:`build_pytorch_standins`: add stand-in pytorch releases (cpu + cuda) to an existing local
  channel and re-index it, e.g. to publish "2.7.0" into a sandbox's upstream for a release-day sweep.
* :func:`publish_release` (:class:`PublishOptions` in, :class:`PublishResult` out): a new stand-in
  release in a sandbox world's upstream channel (``conda-distro sandbox publish-release DIR VERSION``);
  ``sandbox.release.publish_package`` any other (noarch: python) package (``sandbox publish-package``).
* :func:`build_upstream_channel`: build a fresh upstream channel (python + stand-ins), no cache.
* :func:`ensure_upstream_cached` / :func:`copy_channel` / :func:`default_cache_dir`: the cache.
* :func:`pytorch_packages`, :func:`reindex`, :func:`write_run_exports`: channel helpers.
"""

from pathlib import Path
from typing import TYPE_CHECKING

from conda_distro.config import find_root
from conda_distro.sandbox.cache import (
    CachedChannel,
    copy_channel,
    default_cache_dir,
    ensure_upstream_cached,
)
from conda_distro.sandbox.release import PublishOptions, PublishResult, publish_release
from conda_distro.sandbox.upstream import (
    DEFAULT_RELEASES,
    HostPython,
    SandboxError,
    UpstreamChannel,
    build_pytorch_standins,
    build_upstream_channel,
    cuda_version_for,
    pytorch_packages,
    reindex,
    write_run_exports,
)
from conda_distro.sandbox.world import SandboxOptions, SandboxResult, create_sandbox

if TYPE_CHECKING:
    from conda_distro.sandbox.real import RealResult

__all__ = [
    "DEFAULT_RELEASES",
    "CachedChannel",
    "HostPython",
    "PublishOptions",
    "PublishResult",
    "SandboxError",
    "SandboxOptions",
    "SandboxResult",
    "UpstreamChannel",
    "build_pytorch_standins",
    "build_upstream_channel",
    "create_world",
    "copy_channel",
    "create_sandbox",
    "cuda_version_for",
    "default_cache_dir",
    "ensure_upstream_cached",
    "publish_release",
    "pytorch_packages",
    "reindex",
    "write_run_exports",
]


def create_world(options: SandboxOptions) -> "SandboxResult | RealResult":
    """`conda-distro sandbox DIR [--real]`: the sandbox world, or with ``options.real`` the real one (this
    repository's recipes, found from the current folder, against real PyTorch bridged from PyPI)."""
    if not options.real:
        if options.refresh:
            from conda_distro.errors import UsageError

            raise UsageError("--refresh re-resolves the real world's lock: it needs --real", field="--refresh",
                             hint="run `conda-distro sandbox DIR --real --refresh`")
        return create_sandbox(options)
    from conda_distro.sandbox.real import RealOptions, create_real_world  # the PyPI bridge: only for --real

    return create_real_world(RealOptions(path=options.path, repo=find_root(Path.cwd()), force=options.force,
                                         use_cache=options.use_cache, refresh=options.refresh,
                                         progress=options.progress))
