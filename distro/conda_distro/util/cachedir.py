"""Where the tool keeps caches that outlive a repository checkout (sandbox upstream, renders), and
:class:`PackedCache`: many entries in one file."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CACHE_ENV = "CONDA_DISTRO_CACHE"


def default_cache_dir() -> Path:
    """``$CONDA_DISTRO_CACHE``, else ``$XDG_CACHE_HOME/conda-distro``, else ``~/.cache/conda-distro``
    (read when called, never at import)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "conda-distro"


def _restricted_loads(data: bytes, allowed: dict[tuple[str, str], type]) -> Any:
    """``pickle.loads`` that builds plain data (dict, list, tuple, str, numbers, None) and instances of
    the ``allowed`` classes only (made without calling them: ``__new__`` + their attributes set), never
    anything else: a pack is never code, whatever is written in its file."""
    import io
    import pickle

    class Restricted(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            cls = allowed.get((module, name))
            if cls is None:
                raise pickle.UnpicklingError(f"a packed cache does not hold {module}.{name}")
            return cls

    return Restricted(io.BytesIO(data)).load()


class PackedCache:
    """Many cache entries in one file: ``key -> value`` (plain data and instances of the ``allowed``
    classes, plain dataclasses without a ``__setstate__``), read in one go. A warm load of thousands
    of recipes reads this one file instead of one file per recipe.

    * Keys are content hashes made by the caller (they carry what invalidates an entry: for recipe
      models, the recipe text, the variant configuration, the target platform and rattler-build's
      version), so a stale entry is never found, only left to age out.
    * The file is a pickle read by an unpickler that refuses every class but ``allowed``: a file that is
      corrupt, truncated, of another format or holding anything else reads as empty and is rebuilt; so
      does a FIFO, device or folder in its place (opened non-blocking and refused: it never hangs a
      command) and a file larger than ``MAX_BYTES``.
    * Writers take ``<file>.lock`` (filelock; a writer that cannot get it within ``lock_timeout``
      writes nothing: a cache only costs time), merge their entries into what is in the file then,
      and replace it atomically (temporary file + ``os.replace``): readers never lock and never see a
      half-written file; kill -9 leaves at most a ``.<name>.<pid>.tmp`` file, removed by the next writer.
    * Bounded: at most ``max_entries`` entries; a write drops the least recently written or used ones
      (each entry carries the time it was last written or used by a writing run).
    """

    FORMAT = 1
    MAX_BYTES = 1 << 30  # a pack of the largest distributions measured is far below this

    def __init__(self, path: Path, *, allowed: tuple[type, ...] = (), max_entries: int = 20_000,
                 lock_timeout: float = 10.0) -> None:
        self.path = path
        self.allowed = {(c.__module__, c.__qualname__): c for c in allowed}
        self.max_entries = max_entries
        self.lock_timeout = lock_timeout

    def load(self) -> dict[str, Any]:
        """``key -> value`` of every entry ({} when the file is missing or unreadable)."""
        return {k: v[1] for k, v in self._read().items()}

    def _read(self) -> dict[str, list]:
        from conda_distro.util.fsutil import read_bounded

        try:  # a FIFO, device or folder in its place is refused without blocking; a huge file is not read
            data = _restricted_loads(read_bounded(self.path, self.MAX_BYTES), self.allowed)
        except Exception:  # noqa: BLE001 - missing, truncated, corrupt, refused: an empty cache
            return {}
        if not isinstance(data, dict) or data.get("format") != self.FORMAT or not isinstance(data.get("entries"), dict):
            return {}
        return {k: v for k, v in data["entries"].items() if isinstance(k, str) and isinstance(v, list) and len(v) == 2}

    def update(self, new: dict[str, Any], used: Iterable[str] = (), *, drop_after: float | None = None) -> bool:
        """Add ``new`` entries and mark ``used`` keys as used now; with ``drop_after`` (seconds), drop the
        entries neither written nor used for that long. True when the file was written."""
        import pickle
        import time

        from filelock import FileLock, Timeout

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(self.path) + ".lock", timeout=self.lock_timeout):
                for stale in self.path.parent.glob(f".{self.path.name}.*.tmp"):
                    stale.unlink(missing_ok=True)  # (a writer killed before its replace; we hold the lock)
                entries = self._read()
                now = time.time()
                for key in used:
                    if key in entries:
                        entries[key][0] = now
                for key, value in new.items():
                    entries[key] = [now, value]
                if drop_after is not None:
                    entries = {k: v for k, v in entries.items() if v[0] >= now - drop_after}
                if len(entries) > self.max_entries:
                    keep = sorted(entries, key=lambda k: entries[k][0], reverse=True)[:self.max_entries]
                    entries = {k: entries[k] for k in keep}
                tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
                tmp.write_bytes(pickle.dumps({"format": self.FORMAT, "entries": entries}, protocol=pickle.HIGHEST_PROTOCOL))
                os.replace(tmp, self.path)
        except (OSError, Timeout):
            return False
        return True


def prune_packs(folder: Path, keep: int, *, spare: Path | None = None, min_age: float = 86400.0) -> None:
    """Remove the ``*.pack`` files of ``folder`` (and their lock files) beyond the ``keep`` most recently
    written, except ``spare`` and any written within ``min_age`` seconds (a writer may hold its lock)."""
    import time

    try:
        packs = sorted(folder.glob("*.pack"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    now = time.time()
    for pack in packs[keep:]:
        try:
            if pack != spare and pack.stat().st_mtime < now - min_age:
                pack.unlink(missing_ok=True)
                Path(str(pack) + ".lock").unlink(missing_ok=True)
        except OSError:
            pass
