"""Small file and process helpers shared by the whole package: atomic writes, hard links, emptying a
folder, a paused garbage collector."""

from __future__ import annotations

import contextlib
import gc
import glob
import os
import shutil
import stat
import tempfile
from pathlib import Path

NEW_FILE_MODE = 0o644  # the permissions atomic_write_text gives a file it creates


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder + ``os.replace``). The file keeps
    its permissions (a recipe the sweep edits and puts back stays as git checked it out); a new one gets
    :data:`NEW_FILE_MODE`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = NEW_FILE_MODE
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def clear_stale_temps(path: Path) -> list[Path]:
    """Remove the temp files :func:`atomic_write_text` left next to ``path`` when it was killed mid-write
    (``.<name>.*.tmp``); only for a caller that holds the lock of every writer of ``path``."""
    stale = sorted(path.parent.glob(f".{glob.escape(path.name)}.*.tmp")) if path.parent.is_dir() else []
    for tmp in stale:
        tmp.unlink(missing_ok=True)
    return stale


class paused_gc(contextlib.ContextDecorator):
    """Pause Python's cyclic garbage collector during bulk work (loading or linting thousands of
    recipes). The objects made then are long-lived and free of reference cycles, and each automatic
    collection would walk all of them: with 5,000 recipes that was about half of the run time.
    Reference counting still frees everything as usual; collection resumes on exit.

    On exit, what survived is moved straight to the oldest generation (``gc.freeze()`` followed by
    ``gc.unfreeze()``: two list splices), so that the young-generation collections that follow do
    not each walk a million objects again; they stay collectable by full collections as usual."""

    _was_enabled = False

    def _recreate_cm(self) -> paused_gc:
        return type(self)()  # a fresh one per decorated call: nesting and recursion restore correctly

    def __enter__(self) -> paused_gc:
        self._was_enabled = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._was_enabled:
            if not gc.get_freeze_count():  # (nobody else uses the permanent generation)
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def clear_folder(path: Path) -> None:
    """Delete everything inside ``path`` (symbolic links themselves, not what they point at); keep ``path``."""
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link ``src`` to ``dst`` (package files are never rewritten in place), copying across devices."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
