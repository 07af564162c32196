"""The locks the writing commands take, in one place: which command takes which, in what order, and
how long it waits.

Three locks, each an ``flock`` on a file (the kernel releases it when its process ends, even by kill -9:
a crashed run never leaves a stale lock behind):

* **the repository** (``build/locks/repository.lock``): ``sweep`` holds it *exclusively* for its whole run
  (it edits ``recipes/`` and ``distro.yaml``, builds against the edits, then puts them back or commits
  them); ``build`` (and ``check-pr``'s build), ``promote`` and ``retire`` hold it *shared* while they read
  the recipes and ``distro.yaml`` and act on what they read, so they never see a sweep's temporary edits
  and a sweep never edits under them. Commands that only read and write nothing (``--dry-run``, lint,
  graph, status, reports) take no lock;
* **staging** (``.conda-distro.lock`` in the folder builds write: the local staging channel, or
  ``build/channels/staging`` for an ``anaconda://`` staging label; check-pr's scope has its own):
  ``build`` holds it *exclusively* while it writes packages, repodata and ``build/results/``; ``prune``
  holds it *exclusively* while it removes stale builds, their results and logs (and the repository's lock
  shared, as it reads the recipes); ``promote`` holds it *shared* while it reads them and copies from staging;
* **main** (``.conda-distro.lock`` in a local main channel; for anaconda.org, a lock file under
  ``build/locks/``): ``promote`` and ``retire`` hold it *exclusively*.

Always taken in this order (repository, staging, main), so two commands never wait for each other in
a circle. One ``--lock-timeout`` (default :data:`DEFAULT_LOCK_TIMEOUT`) bounds a command's whole wait
for its locks (:class:`Deadline`); then it exits 2 naming the lock and the commands that take it. A
command checks its input before taking a lock (bad input writes nothing, not even a lock file) and reads
it again under the lock when it changed meanwhile.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from conda_distro.errors import LockTimeoutError

if TYPE_CHECKING:
    from conda_distro.config import DistroRepo

DEFAULT_LOCK_TIMEOUT = 600.0  # seconds: --lock-timeout of build, sweep, promote and retire
LOCK_NAME = ".conda-distro.lock"  # the lock file inside a channel folder (staging, main)
REPOSITORY_LOCK = "locks/repository.lock"  # under build/
LOCAL_STAGING = "channels/staging"  # under build/: where builds for an anaconda.org staging label are made
_POLL = 0.05  # seconds between two tries of a held lock


class Deadline:
    """One ``--lock-timeout`` for every lock a command takes: the time spent waiting for them adds up, and
    each waits at most what is left (the work done between two locks does not count)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.waited = 0.0

    def left(self) -> float:
        return max(0.0, self.seconds - self.waited)


def _budget(timeout: float | Deadline) -> Deadline:
    return timeout if isinstance(timeout, Deadline) else Deadline(timeout)


@contextmanager
def hold(lock_path: Path, timeout: float | Deadline, what: str, *, others: str, shared: bool = False) -> Iterator[None]:
    """Hold ``lock_path`` (exclusively, or ``shared`` with other readers) for the duration of the block;
    wait at most ``timeout`` seconds for it, then raise :class:`LockTimeoutError` (exit 2). ``what``: what
    the lock guards; ``others``: the commands whose hold makes this one wait (both named in the message)."""
    budget = _budget(timeout)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        start = time.monotonic()
        end = start + budget.left()
        try:
            while True:
                try:
                    fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                        raise
                left = end - time.monotonic()
                if left <= 0:
                    raise LockTimeoutError(
                        f"another conda-distro process ({others}) is using {what}; gave up waiting after "
                        f"{budget.seconds:g} s", path=lock_path,
                        hint="wait for it to finish and run again (the lock is released automatically when "
                             "that process ends); build, promote, retire, prune, rollback and sweep wait longer "
                             "with --lock-timeout SECONDS")
                time.sleep(min(_POLL, left))
        finally:
            budget.waited += time.monotonic() - start
        yield
    finally:
        os.close(fd)  # releases the lock


def repository_lock(build_dir: Path, root: Path, timeout: float | Deadline, *, shared: bool) -> AbstractContextManager[None]:
    """The repository's lock (module docstring): exclusive for ``sweep``, shared for the commands that read
    the recipes and ``distro.yaml`` and write from them."""
    return hold(build_dir / REPOSITORY_LOCK, timeout, f"the repository {root}", shared=shared,
                others="a sweep" if shared else "a sweep, build, check-pr, promote or retire")


def staging_folder(distro: DistroRepo) -> Path:
    """The folder builds write and hold the staging lock in: the local staging channel, or
    ``build/channels/staging`` (the local builds of an ``anaconda://`` staging label, which ``upload`` puts
    there)."""
    ref = distro.config.channels.staging
    return distro.build_dir / LOCAL_STAGING if distro.is_anaconda(ref) else distro.resolve_local(ref)


def staging_lock(folder: Path, timeout: float | Deadline, *, shared: bool = False) -> AbstractContextManager[None]:
    """The lock of the folder builds write (module docstring): exclusive for ``build``, shared for ``promote``."""
    return hold(folder / LOCK_NAME, timeout, f"the staging channel {folder}", shared=shared,
                others="a build or sweep" if shared else "a build, sweep or promote")


def main_lock(lock_path: Path, timeout: float | Deadline, what: str) -> AbstractContextManager[None]:
    """The main channel's lock (module docstring): exclusive, for ``promote`` and ``retire``."""
    return hold(lock_path, timeout, what, others="a promote or retire")
