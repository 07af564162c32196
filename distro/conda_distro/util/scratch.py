"""Scratch folders in a shared temp folder that converge after kill -9.

A folder made with :class:`ScratchDir` (or :func:`new_scratch`) is named after the process that made it::

    <prefix><pid>-<start>-<pidns>-<8 random characters>     e.g. conda-distro-solve-4711-88123456-4026531836-k2j9x_0a

``start`` is the process's start time (clock ticks after boot, field 22 of ``/proc/<pid>/stat``) and
``pidns`` the inode of its pid namespace (``/proc/self/ns/pid``). Its owner is alive exactly when
``/proc/<pid>/stat`` exists and shows that start time: a pid reused by another process shows another one.
A new folder first sweeps the dead owners' folders of its own kind (same prefix, same parent folder):
the first one a process makes there, then at most once every :data:`SWEEP_EVERY` seconds (at once again
after a sweep that hit its cap).

What a sweep removes, and why that is safe:

* only entries whose whole name is ``<the same prefix><pid>-<start>-<pidns>-<random>`` (prefixes are
  ``conda-distro-<letters and hyphens>-``, so one kind never matches another's names and nobody else's);
* only real folders (``lstat``: a symbolic link is never followed nor removed) owned by this user;
* only folders of this pid namespace (another namespace's pids cannot be checked here: left alone);
* only when the owner is dead: no process with that pid, or one with another start time. When
  ``/proc/<pid>/stat`` cannot be read or parsed for another reason the owner counts as alive;
* at most :data:`MAX_SWEPT` folders per call; every error is ignored (a sweep never fails a command).

A zombie owner still counts as alive until it is reaped. After a reboot a folder's pid and start time can
only name a live process by chance, and then it is kept until that process ends: never a live owner's
folder removed. Where there is no ``/proc`` (not Linux) folders get plain ``tempfile`` names and nothing
is swept.

Libraries looked at (PyPI, 2026-11): ``tempfile``/``backports.tempfile``, ``tempdir``, ``pytmpdir``,
``atexit-tempfile``, ``temp`` remove a folder when the process ends normally (context manager, garbage
collection, atexit), none after kill -9; ``pid``, ``python-pidfile`` and friends detect a stale *pid file*,
not folders, and by pid alone (a reused pid passes); ``psutil`` would give the start time but is not a
dependency and is not installed here, and two reads of ``/proc`` do the same. An ``flock`` held on a file
in each folder (the engine's private folders, ``engine/phases.py``) needs a descriptor open for the
folder's whole life and a file opened inside it; here the name alone says who owns it.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import time
import weakref
from pathlib import Path
from types import TracebackType

from conda_distro.util.fsutil import remove_tree

#: the kinds of scratch folders: ours only, letters and hyphens (a kind never ends in a digit)
PREFIX_RE = re.compile(r"conda-distro-[a-z]+(?:-[a-z]+)*-")
#: the most folders one call removes (a temp folder full of leftovers converges over a few calls)
MAX_SWEPT = 16
#: seconds: a process sweeps a kind's folders in one temp folder at most this often (a scan of a temp folder
#: of 8,000 entries costs ~5 ms: a sweep's many recipe edits would pay it for each)
SWEEP_EVERY = 60.0
_RANDOM = r"[a-z0-9_]{8}"  # tempfile's names: 8 characters of this alphabet
_last_sweep: dict[tuple[str, str], float] = {}  # (prefix, folder) -> when this process last swept there


def _start_time(pid: int | str) -> int | None:
    """Field 22 of ``/proc/<pid>/stat`` (after the command name, which may hold spaces and parentheses).
    Raises FileNotFoundError/ProcessLookupError when there is no such process."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        data = fh.read(4096)
    fields = data[data.rfind(b")") + 2:].split()
    try:
        return int(fields[19])  # (fields[0] is field 3, the state)
    except (IndexError, ValueError):
        return None


def _pid_namespace() -> int | None:
    link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    m = re.fullmatch(r"pid:\[(\d+)\]", link)
    return int(m.group(1)) if m else None


def owner_tag() -> str | None:
    """``<pid>-<start>-<pidns>`` of this process; None where ``/proc`` cannot tell (then nothing is swept)."""
    try:
        start, ns = _start_time("self"), _pid_namespace()
    except OSError:
        return None
    if start is None or ns is None:
        return None
    return f"{os.getpid()}-{start}-{ns}"


def owner_alive(pid: int, start: int) -> bool:
    """Whether the process ``pid`` that started at ``start`` (clock ticks after boot) still runs (in this
    pid namespace). Anything that cannot be read for another reason than its absence counts as alive."""
    try:
        now = _start_time(pid)
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        return True
    return now is None or now == start


def _check_prefix(prefix: str) -> None:
    if not PREFIX_RE.fullmatch(prefix):
        raise ValueError(f"scratch folder prefix {prefix!r} is not conda-distro-<letters and hyphens>-")


def sweep_dead(prefix: str, folder: str | os.PathLike[str] | None = None, *, limit: int = MAX_SWEPT) -> list[Path]:
    """Remove (at most ``limit``) folders of kind ``prefix`` in ``folder`` (default: the temp folder) whose
    owners are dead; returns them. Never raises for what it finds (module docstring: what is swept)."""
    _check_prefix(prefix)
    tag = owner_tag()
    if tag is None:
        return []
    ns = tag.rsplit("-", 1)[1]
    names = re.compile(re.escape(prefix) + r"(\d+)-(\d+)-" + re.escape(ns) + "-" + _RANDOM)
    where = Path(folder if folder is not None else tempfile.gettempdir())
    removed: list[Path] = []
    alive: dict[tuple[int, int], bool] = {}
    uid = os.getuid()
    try:
        with os.scandir(where) as entries:
            for entry in entries:
                if len(removed) >= limit:
                    break
                m = names.fullmatch(entry.name) if entry.name.startswith(prefix) else None
                if m is None:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
                    continue
                owner = (int(m.group(1)), int(m.group(2)))
                if owner not in alive:
                    alive[owner] = owner_alive(*owner)
                if alive[owner]:
                    continue
                remove_scratch(Path(entry.path))
                removed.append(Path(entry.path))
    except OSError:
        pass
    return removed


def new_scratch(prefix: str, folder: str | os.PathLike[str] | None = None) -> Path:
    """A new empty folder ``<prefix><owner>-<random>`` in ``folder`` (default: the temp folder), made after
    sweeping the dead owners' folders of the same kind there. The caller removes it
    (:func:`remove_scratch`); if it is killed first, a later one of the kind does."""
    _check_prefix(prefix)
    tag = owner_tag()
    if tag is None:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=folder))
    where = os.path.abspath(folder if folder is not None else tempfile.gettempdir())
    last = _last_sweep.get((prefix, where))
    if last is None or time.monotonic() - last >= SWEEP_EVERY:
        full = len(sweep_dead(prefix, where)) >= MAX_SWEPT
        _last_sweep[(prefix, where)] = float("-inf") if full else time.monotonic()  # (full: more next time)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{tag}-", dir=folder))


def remove_scratch(path: Path) -> None:
    """Remove a scratch folder and all in it (:func:`~conda_distro.util.fsutil.remove_tree`: whatever modes
    were left inside, never through a symbolic link); errors are ignored (a folder left behind is swept
    once its owner is dead)."""
    with contextlib.suppress(OSError):
        remove_tree(path)


class ScratchDir:
    """A scratch folder (:func:`new_scratch`) removed on exit of a ``with`` block, by :meth:`cleanup`, or at
    the latest when the object is collected or the interpreter exits (as ``tempfile.TemporaryDirectory``);
    after a kill -9 by the next folder of the same kind. ``with ScratchDir(prefix) as path:`` gives a Path."""

    def __init__(self, prefix: str, folder: str | os.PathLike[str] | None = None) -> None:
        self.path = new_scratch(prefix, folder)
        self.name = str(self.path)
        self._finalizer = weakref.finalize(self, remove_scratch, self.path)

    def cleanup(self) -> None:
        self._finalizer()

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.cleanup()


__all__ = ["MAX_SWEPT", "ScratchDir", "new_scratch", "owner_alive", "owner_tag", "remove_scratch", "sweep_dead"]
