"""One cross-process lock per channel or repository (filelock), with a clear error when it cannot be had.

Writers take it for the duration of their writes: promote and retire lock the main channel, build
locks the staging channel it builds into, sweep locks the repository it edits (and, through its
build, staging). A second writer waits at most ``timeout`` seconds (``--lock-timeout``), then exits 2.
The lock is an ``flock`` on a file: the kernel releases it when its process ends, even by kill -9, so a
crashed run never leaves a stale lock behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from conda_distro.errors import LockTimeoutError

DEFAULT_LOCK_TIMEOUT = 600.0  # seconds; the same default as promote's --lock-timeout
LOCK_NAME = ".conda-distro.lock"  # the lock file inside a local channel folder
REPOSITORY_LOCK = "locks/repository.lock"  # under build/: held while a sweep edits the repository


@contextmanager
def channel_lock(lock_path: Path, timeout: float, what: str, *, others: str = "promote/retire") -> Iterator[None]:
    """Hold ``lock_path`` for the duration of the block; wait at most ``timeout`` seconds for it.
    ``others``: the commands that take the same lock (named in the hint)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path), timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise LockTimeoutError(
            f"another conda-distro process is writing to {what}; gave up waiting after {timeout:g} s",
            path=lock_path,
            hint=f"wait for the other {others} to finish, or pass a longer --lock-timeout "
                 "(the lock is released automatically when that process ends)",
        ) from None
    try:
        yield
    finally:
        lock.release()
