"""One cross-process lock per channel (filelock), with a clear error when it cannot be had."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

from conda_distro.errors import LockTimeoutError


@contextmanager
def channel_lock(lock_path: Path, timeout: float, what: str) -> Iterator[None]:
    """Hold ``lock_path`` for the duration of the block; wait at most ``timeout`` seconds for it."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path), timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise LockTimeoutError(
            f"another conda-distro process is writing to {what}; gave up waiting after {timeout:g} s",
            path=lock_path,
            hint="wait for the other promote/retire to finish, or pass a longer --lock-timeout "
                 "(the lock is released automatically when that process ends)",
        ) from None
    try:
        yield
    finally:
        lock.release()
