"""A machine-wide cache of built upstream channels (the sandbox's and the real world's).

Building python and six pytorch stand-ins takes 15–30 s, bridging the real world's PyPI wheels 10–30
min; copying a cached channel takes about a second. An entry is keyed by everything its content depends
on (:func:`ensure_entry` hashes the inputs it is given): for the stand-in channel the host python
(version and prefix), the sandbox's upstream data files (recipes and the stand-in ``torch`` sources), the
rattler-build version, the releases and :data:`CACHE_FORMAT`; for the real world's, the content of its
lock (``sandbox.real``). Entries are never modified after they are complete, so a world may hardlink
their package files.

Layout: ``$CONDA_DISTRO_CACHE/<kind>/<key>/`` (``sandbox-upstream``, ``real-upstream``; default cache root
``$XDG_CACHE_HOME/conda-distro`` or ``~/.cache/conda-distro``), each with ``cache-entry.json``
describing its inputs. Creation is serialised by a file lock (``<key>.lock``), so concurrent test
workers build an entry once; the entry is built in ``<key>.tmp-*`` and renamed into place. Every use
touches the marker; :func:`prune_entries` removes entries of a kind left unused for a while (a real
world's entry is 6 GB, and each refreshed lock makes a new one) and temporary folders of builders that
were killed.
"""

from __future__ import annotations

import contextlib
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
from typing import Any

from conda_distro.errors import LockTimeoutError
from conda_distro.sandbox.upstream import (
    SUBDIRS,
    HostPython,
    SandboxError,
    Toolchain,
    build_upstream_channel,
    data_dir,
    read_repodata,
    tree_sha256,
)
from conda_distro.util.cachedir import CACHE_ENV, default_cache_dir  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)

CACHE_FORMAT = 1  # bump when the layout or the way entries are built changes
ENTRY_FILE = "cache-entry.json"
PACKAGE_SUFFIXES = (".conda", ".tar.bz2")
LOCK_TIMEOUT_S = 900.0
UPSTREAM_KIND = "sandbox-upstream"  # the stand-in upstream channels' entries
IDLE_DAYS = 14.0  # an entry unused this long is removed (so are the temp folders of builders that are gone)


def rattler_build_version_string() -> str:
    try:
        from rattler_build import rattler_build_version

        return str(rattler_build_version())
    except Exception:  # noqa: BLE001 - an unknown version only makes the key more specific
        from importlib.metadata import version

        return version("py-rattler-build")


def cache_inputs(releases: Sequence[str], host: HostPython, toolchain: Toolchain | None = None) -> dict:
    """Everything an upstream channel's content depends on (hashed into the cache key)."""
    return {
        "format": CACHE_FORMAT,
        "python_version": host.version,
        "python_prefix": str(host.prefix),
        "rattler_build": rattler_build_version_string(),
        "releases": list(releases),
        "data_sha256": tree_sha256(data_dir() / "upstream"),
        "toolchain": (toolchain or Toolchain.detect()).to_dict(),
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


def _marker_exists(entry: Path) -> bool:
    return (entry / ENTRY_FILE).is_file()


@dataclass(frozen=True)
class EntrySpec:
    """One cache entry to find or build (:func:`ensure_entry`)."""

    kind: str  # the folder under the cache root: sandbox-upstream, real-upstream
    inputs: dict[str, Any]  # everything the entry's content depends on: hashed into its key, kept in its marker
    build: Callable[[Path], dict[str, Any]]  # fills a new folder; returns what else its marker records
    what: str  # for messages: "the upstream channel (python + pytorch stand-ins 2.4.1, ...)"
    complete: Callable[[Path], bool] = _marker_exists
    lock_timeout: float = LOCK_TIMEOUT_S


def _touch(entry: Path) -> None:
    with contextlib.suppress(OSError):  # read-only cache: pruning only sees it as older
        os.utime(entry / ENTRY_FILE)


def ensure_entry(spec: EntrySpec, *, cache_dir: Path | None = None,
                 progress: Callable[[str], None] | None = None) -> CachedChannel:
    """The cache entry for ``spec``, building it if needed.

    Safe against concurrent callers (other processes, other test workers): a file lock serialises
    building, and the entry appears atomically (built in a temporary folder, then renamed).
    """
    from filelock import FileLock, Timeout

    key = cache_key(spec.inputs)
    root = (cache_dir or default_cache_dir()).expanduser().absolute() / spec.kind
    entry = root / key
    if spec.complete(entry):
        _touch(entry)
        return CachedChannel(entry, key, False, 0.0)
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(root / f"{key}.lock"))
    try:
        lock.acquire(timeout=spec.lock_timeout)
    except Timeout:
        raise LockTimeoutError(f"another process has been building the cache entry {entry} for over "
                               f"{spec.lock_timeout:.0f} s", path=root / f"{key}.lock",
                               hint="wait for it to finish and run again (the lock is an flock: it is let go when that "
                                    "process ends, even killed with -9, so removing the file would not help)") from None
    try:
        if spec.complete(entry):  # built by another process while we waited
            _touch(entry)
            return CachedChannel(entry, key, False, 0.0)
        for stale in root.glob(f"{key}.tmp-*"):  # left by a crashed builder (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        if entry.exists():
            shutil.rmtree(entry)
        tmp = root / f"{key}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        if progress:
            progress(f"building {spec.what}, cached for next time in {root}")
        t0 = time.monotonic()
        try:
            tmp.mkdir(parents=True)
            extra = spec.build(tmp)
            (tmp / ENTRY_FILE).write_text(json.dumps({
                **spec.inputs, "key": key, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **extra,
            }, indent=2) + "\n")
            os.rename(tmp, entry)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        seconds = time.monotonic() - t0
        log.info("built cache entry %s in %.1fs", entry, seconds)
        return CachedChannel(entry, key, True, seconds)
    finally:
        lock.release()


def prune_entries(kind: str, *, keep: Sequence[str] = (), max_idle_days: float, cache_dir: Path | None = None) -> list[Path]:
    """Remove the entries of ``kind`` whose marker was last touched more than ``max_idle_days`` ago (never
    those in ``keep``, nor one being built: its builder holds its lock), and the temporary folders of
    builders that are gone. Returns what was removed."""
    from filelock import FileLock, Timeout

    root = (cache_dir or default_cache_dir()).expanduser().absolute() / kind
    if not root.is_dir():
        return []
    removed: list[Path] = []
    horizon = time.time() - max_idle_days * 86400
    for entry in sorted(root.iterdir()):
        if not entry.is_dir() or entry.name in keep:
            continue
        key = entry.name.split(".tmp-", 1)[0]
        if ".tmp-" in entry.name:
            pid = entry.name.split(".tmp-", 1)[1].split("-", 1)[0]
            if pid.isdigit() and Path(f"/proc/{pid}").exists():
                continue
        else:
            marker = entry / ENTRY_FILE
            if marker.is_file() and marker.stat().st_mtime > horizon:
                continue
        lock = FileLock(str(root / f"{key}.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            continue  # being built or rebuilt right now
        except OSError:
            continue  # (a read-only cache: nothing is removed from it)
        try:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
        finally:
            lock.release()
    if removed:
        log.info("removed %d unused cache entries of %s", len(removed), root)
    return removed


def ensure_upstream_cached(releases: Sequence[str], *, cache_dir: Path | None = None, host: HostPython | None = None,
                           lock_timeout: float = LOCK_TIMEOUT_S,
                           progress: Callable[[str], None] | None = None) -> CachedChannel:
    """The cache entry for a stand-in upstream channel with these releases, building it if needed
    (:func:`ensure_entry`)."""
    host = host or HostPython.current()
    toolchain = Toolchain.detect()

    def build(tmp: Path) -> dict[str, Any]:
        built = build_upstream_channel(tmp, releases, host=host, toolchain=toolchain)
        return {"python": built.python.name, "pytorch": sorted(p.name for p in built.pytorch.values())}

    entry = ensure_entry(EntrySpec(UPSTREAM_KIND, cache_inputs(releases, host, toolchain), build,
                                   f"the upstream channel (python {host.version} + pytorch stand-ins {', '.join(releases)})",
                                   complete=_entry_complete, lock_timeout=lock_timeout),
                         cache_dir=cache_dir, progress=progress)
    # (each new set of inputs — a release list, a python, rattler-build — makes another entry of ~14 MB)
    prune_entries(UPSTREAM_KIND, keep=[entry.key], max_idle_days=IDLE_DAYS, cache_dir=cache_dir)
    return entry


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
