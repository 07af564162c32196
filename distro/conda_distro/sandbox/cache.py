"""A machine-wide cache of built sandbox upstream channels.

Building python and six pytorch stand-ins takes 15–30 s; copying a cached channel takes well under a
second. An entry is keyed by everything its content depends on: the host python (version and
prefix), the sandbox's upstream data files (recipes and the stand-in ``torch`` sources), the
rattler-build version, the releases, and :data:`CACHE_FORMAT`. Entries are never modified after
they are complete, so a sandbox may hardlink their package files.

Layout: ``$CONDA_DISTRO_CACHE/sandbox-upstream/<key>/`` (default cache root
``$XDG_CACHE_HOME/conda-distro`` or ``~/.cache/conda-distro``), each with ``cache-entry.json``
describing its inputs. Creation is serialised by a file lock (``<key>.lock``), so concurrent test
workers build an entry once; the entry is built in ``<key>.tmp-*`` and renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from conda_distro.cachedir import CACHE_ENV, default_cache_dir  # noqa: F401  (re-exported)
from conda_distro.errors import LockTimeoutError
from conda_distro.sandbox.upstream import (
    SUBDIRS,
    HostPython,
    SandboxError,
    build_upstream_channel,
    data_dir,
    iter_data_files,
    read_repodata,
)

log = logging.getLogger(__name__)

CACHE_FORMAT = 1  # bump when the layout or the way entries are built changes
ENTRY_FILE = "cache-entry.json"
PACKAGE_SUFFIXES = (".conda", ".tar.bz2")
LOCK_TIMEOUT_S = 900.0


def rattler_build_version_string() -> str:
    try:
        from rattler_build import rattler_build_version

        return str(rattler_build_version())
    except Exception:  # noqa: BLE001 - an unknown version only makes the key more specific
        from importlib.metadata import version

        return version("py-rattler-build")


def cache_inputs(releases: Sequence[str], host: HostPython) -> dict:
    """Everything an upstream channel's content depends on (hashed into the cache key)."""
    upstream = data_dir() / "upstream"
    files = hashlib.sha256()
    for f in iter_data_files(upstream):
        files.update(f.relative_to(upstream).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return {
        "format": CACHE_FORMAT,
        "python_version": host.version,
        "python_prefix": str(host.prefix),
        "rattler_build": rattler_build_version_string(),
        "releases": list(releases),
        "data_sha256": files.hexdigest(),
    }


def cache_key(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:24]


@dataclass(frozen=True)
class CachedChannel:
    """A complete cache entry."""

    path: Path
    key: str
    built: bool  # True if this call built it (a cache miss)
    build_seconds: float


def _entry_complete(entry: Path) -> bool:
    """The entry's marker exists and every package its repodata lists is present."""
    if not (entry / ENTRY_FILE).is_file():
        return False
    for subdir in SUBDIRS:
        if not (entry / subdir / "repodata.json").is_file():
            return False
        try:
            repodata = read_repodata(entry, subdir)
        except SandboxError:
            return False
        except Exception:  # noqa: BLE001 - a damaged entry is rebuilt
            return False
        for key in ("packages", "packages.conda"):
            if any(not (entry / subdir / fn).is_file() for fn in repodata.get(key) or {}):
                return False
    return True


def ensure_upstream_cached(releases: Sequence[str], *, cache_dir: Path | None = None, host: HostPython | None = None,
                           lock_timeout: float = LOCK_TIMEOUT_S,
                           progress: Callable[[str], None] | None = None) -> CachedChannel:
    """The cache entry for an upstream channel with these releases, building it if needed.

    Safe against concurrent callers (other processes, other test workers): a file lock serialises
    building, and the entry appears atomically (built in a temporary folder, then renamed).
    """
    from filelock import FileLock, Timeout

    host = host or HostPython.current()
    inputs = cache_inputs(releases, host)
    key = cache_key(inputs)
    root = (cache_dir or default_cache_dir()).expanduser().absolute() / "sandbox-upstream"
    entry = root / key
    if _entry_complete(entry):
        return CachedChannel(entry, key, False, 0.0)
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(root / f"{key}.lock"))
    try:
        lock.acquire(timeout=lock_timeout)
    except Timeout:
        raise LockTimeoutError(f"another process has been building the sandbox cache entry {key} for over "
                               f"{lock_timeout:.0f} s", path=root / f"{key}.lock",
                               hint="wait for it to finish, or remove the lock file if no conda-distro is running") from None
    try:
        if _entry_complete(entry):  # built by another process while we waited
            return CachedChannel(entry, key, False, 0.0)
        for stale in root.glob(f"{key}.tmp-*"):  # left by a crashed builder (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        if entry.exists():
            shutil.rmtree(entry)
        tmp = root / f"{key}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        if progress:
            progress(f"building the upstream channel (python {host.version} + pytorch stand-ins "
                     f"{', '.join(releases)}), cached for next time in {root}")
        t0 = time.monotonic()
        try:
            built = build_upstream_channel(tmp, releases, host=host)
            (tmp / ENTRY_FILE).write_text(json.dumps({
                **inputs, "key": key, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "python": built.python.name,
                "pytorch": sorted(p.name for p in built.pytorch.values()),
            }, indent=2) + "\n")
            os.rename(tmp, entry)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        seconds = time.monotonic() - t0
        log.info("built sandbox upstream cache entry %s in %.1fs", entry, seconds)
        return CachedChannel(entry, key, True, seconds)
    finally:
        lock.release()


def copy_channel(src: Path, dest: Path) -> None:
    """Copy a local channel: package files are hardlinked when possible (they are never modified in
    place), metadata (repodata.json, run_exports.json) is copied, so that re-indexing ``dest``
    never touches ``src``. The cache's own marker file is left out."""
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        target = dest / rel
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        if rel.as_posix() == ENTRY_FILE or path.name.endswith(".lock"):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.name.endswith(PACKAGE_SUFFIXES):
            try:
                os.link(path, target)
                continue
            except OSError:
                pass
        shutil.copy2(path, target)
