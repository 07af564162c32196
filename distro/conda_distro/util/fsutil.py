"""Small file and process helpers shared by the whole package: bounded reads of input files, atomic
writes, hard links, emptying a folder, a paused garbage collector."""

from __future__ import annotations

import contextlib
import errno
import gc
import glob
import hashlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from conda_distro.errors import DistroError

#: what :func:`read_bounded` calls a file that is not a regular one (by its ``stat`` type)
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


_KERNEL_FILE_SYSTEMS = ("/proc/", "/sys/")


def _megabytes(n: int) -> str:
    return f"{n / (1024 * 1024):g} MB" if n >= 1024 * 1024 else f"{n // 1024} KB"


class _NotRegular(Exception):
    """A path that is not a regular file; ``what`` it is instead, for the caller's own message."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


_REPLACE_HINT = "replace it with the regular file it should be"


def _open_regular_fd(path: str | Path, real: str | None = None) -> tuple[int, os.stat_result]:
    """``path`` opened read-only and non-blocking (a FIFO cannot hang the open), with its ``fstat``, when it is
    a regular file (after symbolic links) outside ``/proc`` and ``/sys``; else :class:`_NotRegular` naming
    what it is (the descriptor closed, nothing read). ``OSError`` and ``ValueError`` pass through. The one
    check behind :func:`read_bounded`, :func:`hash_file` and :func:`open_regular`. ``real``: the caller's
    ``realpath`` of ``path`` when it already knows it (a scan of a folder resolved once, that saw no
    symbolic link below it), not resolved again: opened without following a link (``O_NOFOLLOW``), so that
    a file made a link since the caller looked is resolved and checked as any other."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
    if real is not None and not real.startswith(_KERNEL_FILE_SYSTEMS):
        try:  # (no link followed: a file made a link since the caller saw it is resolved below, as any other)
            fd = os.open(real, flags | os.O_NOFOLLOW)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
        else:
            return fd, _regular_stat(fd)
    real = os.path.realpath(path)
    if real.startswith(_KERNEL_FILE_SYSTEMS):
        raise _NotRegular(f"a file of the kernel ({real})")
    fd = os.open(path, flags)
    return fd, _regular_stat(fd)


def _regular_stat(fd: int) -> os.stat_result:
    """``fstat`` of ``fd`` when it is a regular file; else :class:`_NotRegular` (``fd`` closed)."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _NotRegular(next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file"))
    except BaseException:
        os.close(fd)
        raise
    return st


def read_bounded(path: Path, limit: int, *, error: type[DistroError] = DistroError, hint: str | None = None,
                 real: str | None = None) -> bytes:
    """The bytes of the input file ``path``: a regular file (after symbolic links) of at most ``limit`` bytes.

    The one way the tool reads a file it did not just write itself. A FIFO, a device (or a symbolic link
    to one, such as ``/dev/zero``), a socket or a folder is refused without reading (a FIFO is opened
    non-blocking, so it cannot hang the command); a file larger than ``limit`` is refused after reading
    at most ``limit + 1`` bytes. Every refusal, and every ``OSError``, is ``error`` naming the file.
    ``FileNotFoundError`` passes through unchanged for callers to whom a missing file means something.
    Files of the kernel's own file systems (``/proc``, ``/sys``) are refused too: they are regular files
    whose size says nothing (``/proc/self/mem``, ``/proc/self/environ``)."""
    try:
        fd, st = _open_regular_fd(path, real)
    except FileNotFoundError:
        raise
    except _NotRegular as exc:
        raise error(f"is {exc.what}, not a regular file: refused", path=path, hint=hint or _REPLACE_HINT) from None
    except (OSError, ValueError) as exc:  # ValueError: an embedded NUL in the path
        raise error(f"cannot read: {getattr(exc, 'strerror', None) or exc}", path=path, hint=hint) from None
    try:
        if st.st_size > limit:
            raise error(f"the file is {_megabytes(st.st_size)}; at most {_megabytes(limit)} is read from a file "
                        "of this kind", path=path, hint=hint or "this is not the file it should be; check what wrote it")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # it grew while being read
            raise error(f"the file is larger than {_megabytes(limit)}, the most read from a file of this kind",
                        path=path, hint=hint or "this is not the file it should be; check what wrote it")
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", path=path, hint=hint) from None
    finally:
        os.close(fd)


def read_bounded_text(path: Path, limit: int, *, error: type[DistroError] = DistroError,
                      hint: str | None = None, real: str | None = None) -> str:
    """:func:`read_bounded`, decoded as UTF-8 (text that is not UTF-8 is ``error`` naming the file)."""
    data = read_bounded(path, limit, error=error, hint=hint, real=real)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"the file is not UTF-8 text (byte {exc.start})", path=path, hint=hint) from None


def hash_file(path: Path, h: Any, *, error: type[DistroError] = DistroError, hint: str | None = None) -> None:
    """Feed the bytes of the regular file ``path`` to the hash ``h``, in chunks (no size cap: package
    sources can be large). A FIFO, device, socket or file of ``/proc`` or ``/sys`` (also behind a symbolic
    link) is ``error`` naming it, without reading it; so is any ``OSError``."""
    try:
        fd, _ = _open_regular_fd(path)
        with os.fdopen(fd, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    except _NotRegular as exc:
        raise error(f"is {exc.what}, not a regular file: refused", path=path, hint=hint) from None
    except (OSError, ValueError) as exc:
        raise error(f"cannot read: {getattr(exc, 'strerror', None) or exc}", path=path, hint=hint) from None


def open_regular(path: str | Path, *, error: type[Exception] = DistroError) -> Any:
    """``path`` opened for reading in binary (a file object; no size cap, for package and source files that
    are streamed), only when it is a regular file (after symbolic links): a FIFO, device, socket, folder or
    file of ``/proc`` or ``/sys`` is ``error(message)`` without reading it. The file is opened non-blocking
    and checked before any read, so a FIFO left in a file's place cannot hang the command. An ``OSError``
    while opening passes through (the caller names its own input)."""
    try:
        fd, _ = _open_regular_fd(path)
    except _NotRegular as exc:
        raise error(f"{path} is {exc.what}, not a regular file: refused") from None
    return os.fdopen(fd, "rb")


def sha256_regular(path: str | Path, *, error: type[Exception] = DistroError) -> str:
    """The sha256 (hex) of the regular file ``path``, read in chunks through :func:`open_regular`: a FIFO,
    device, socket, folder or kernel file in its place is ``error(message)`` without reading it; an
    ``OSError`` passes through (the caller names its own input)."""
    h = hashlib.sha256()
    with open_regular(path, error=error) as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def naming(path: Path) -> Iterator[None]:
    """An ``OSError`` raised inside that names no file (a write stopped by a file size limit, ``EFBIG``,
    or a full disk) is given ``path``'s name, so that the CLI can say which file it was."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


def check_writable(path: Path, *, folder: bool, error: type[DistroError] = DistroError,
                   field: str | None = None, hint: str | None = None) -> None:
    """Will writing ``path`` work: a folder to create files in (``folder``), or a file replaced atomically?
    For a command that must refuse before it writes anything. ``path`` (if it exists) must be a folder, or a
    regular file; the nearest folder that exists at or above where it is created must be a folder this
    process can write to; nothing of ``/proc`` or ``/sys``. Otherwise ``error`` naming it and ``field``."""
    def fail(why: str) -> None:
        raise error(f"cannot be written: {why}", path=path, field=field, hint=hint)

    try:
        if os.path.realpath(path).startswith(_KERNEL_FILE_SYSTEMS) or os.path.realpath(path) in ("/proc", "/sys"):
            fail("it is on a file system of the kernel")
        if path.exists():
            if folder and not path.is_dir():
                fail("it is not a folder")
            if not folder and not path.is_file():
                fail("it exists and is not a regular file")
        elif path.is_symlink():
            fail("it is a symbolic link to nothing")
        parent = path if folder and path.exists() else path.parent
        while not parent.exists() and parent != parent.parent:
            if parent.is_symlink():
                fail(f"{parent} is a symbolic link to nothing")
            parent = parent.parent
        if not parent.is_dir():
            fail(f"{parent} is not a folder")
        if not os.access(parent, os.W_OK | os.X_OK):
            fail(f"{parent} is not writable by this user")
    except (OSError, ValueError) as exc:  # (ValueError: an embedded NUL)
        fail(str(getattr(exc, "strerror", None) or exc))

def new_file_mode() -> int:
    """The permissions a new file gets: ``0o666`` less the process's umask (``mkstemp`` would give 0600, and a
    page or ledger file a web server running as another user reads must follow the umask)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            umask = next((int(ln.split()[1], 8) for ln in fh if ln.startswith("Umask:")), None)
    except OSError:
        umask = None
    if umask is None:
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o666 & ~umask


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically as UTF-8 (:func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temp file of its own in the same folder, so writers side by
    side never share one, + ``os.replace``). The file keeps its permissions (a recipe the sweep edits and
    puts back stays as git checked it out); a new one gets :func:`new_file_mode` (what the umask allows, as
    any program creating a file). An ``OSError`` names ``path`` (:func:`naming`)."""
    with naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            mode = new_file_mode()
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            os.fchmod(fd, mode)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    _clear_old_temps(path)


STALE_TEMP_AGE = 86400.0  # seconds: a writer's temp file this old was left by a writer killed with -9


def remove_stale(paths: Iterable[Path], age: float = STALE_TEMP_AGE) -> list[Path]:
    """Remove each of ``paths`` (files left by a process killed with -9) last modified more than ``age``
    seconds ago: a younger one may be another process's, at work. Errors are ignored. Returns what was
    removed."""
    now, removed = time.time(), []
    with contextlib.suppress(OSError):
        for p in paths:
            with contextlib.suppress(OSError):
                if now - p.lstat().st_mtime > age:
                    p.unlink()
                    removed.append(p)
    return removed


def _clear_old_temps(path: Path) -> None:
    """Remove the temp files writers of ``path`` killed with -9 left beside it (``.<name>.*.tmp``), once a
    day old (no writer takes a day)."""
    remove_stale(path.parent.glob(f".{glob.escape(path.name)}.*.tmp"))


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
    not each walk a million objects again; they stay collectable by full collections as usual.

    Kept because bench_spine shows the warm target needs it (measured 2026-11-26 in one run, 1,000
    generated recipes, warm, best of 3 each, load 13 on 2 cores: with it 0.249 s CPU / 0.41 s wall,
    without it 0.359 s CPU / 1.98 s wall; the packed cache's unpickling of a whole distribution is
    what the collector would otherwise walk again and again)."""

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


def remove_tree(folder: Path) -> None:
    """Remove ``folder`` and all in it, whatever modes were left on the folders inside (recipe code may make
    one read-only); a symbolic link is neither followed nor removed (``shutil.rmtree`` works through
    descriptors). Only folders inside ``folder`` are made writable: never the folder that holds it (a
    shared ``/tmp``). What cannot be removed is left."""
    top = os.path.abspath(folder)

    def retry(func: Callable[[str], object], path: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            parent = os.path.dirname(path)
            if path != top and (parent + os.sep).startswith(top + os.sep) and not os.path.islink(parent):
                os.chmod(parent, 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
            func(path)

    if os.path.lexists(top):
        shutil.rmtree(top, onerror=retry)


def clear_folder(path: Path) -> None:
    """Delete everything inside ``path`` (symbolic links themselves, not what they point at); keep ``path``."""
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


COPY_SUFFIX = ".copy"  # the temp file :func:`link_or_copy` copies into, beside ``dst``


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link ``src`` to ``dst`` (package files are never rewritten in place), copying across devices.
    A copy is made under a temp name of its own beside ``dst`` (``.<name>.<random>.copy``) and renamed:
    killed mid-copy, it leaves a hidden temp file, never a truncated file under ``dst``'s name that the
    next run would take for the package."""
    try:
        os.link(src, dst)
        return
    except OSError:
        pass
    copy_atomic(src, dst)


def copy_atomic(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` (replacing it) through a temp name of its own beside ``dst``
    (``.<name>.<random>.copy``), renamed once complete: a kill leaves that hidden temp, never a truncated file
    under ``dst``'s name."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=COPY_SUFFIX, dir=dst.parent)
    try:
        os.close(fd)
        shutil.copy2(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
