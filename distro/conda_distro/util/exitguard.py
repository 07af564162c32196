"""A process of the tool does not end while a native thread is still inside Python.

py-rattler runs its ``async`` functions (``index_fs``, ``solve``, ``Gateway.query``, ``install``) on a
tokio runtime of its own: native threads Python did not start. Such a thread completes the Python future
from inside Python (``loop.call_soon_threadsafe``, whose write to the loop's wake-up socket lets go of the
GIL); ``asyncio.run`` can return in the main thread while that thread is still in there. A command that
ends right then finalizes the interpreter under it, and the native thread, coming back, kills the process:
``Fatal Python error: PyGILState_Release: thread state ... must be current when releasing`` with ``Python
runtime state: finalizing`` and ``<no Python frame>`` (SIGABRT), or a segmentation fault, after the
command's work was done (a `prune` whose last upstream query, ``Gateway.query``, returned 15 ms before
its exit). Measured on this machine (py-rattler 0.28, Python 3.11, the process pinned to one core): of 100
processes that end right after prune's upstream query, 43 died that way, and 7 to 11 of 100 after
``index_fs``; with this wait, none of 100 and none of 150.

:func:`guard_exit` (called first by every entry point: the CLI, the build and test worker, the
test-environment solver) registers :func:`settle_native_threads` with :mod:`atexit`; it runs before the
interpreter starts finalizing and waits, at most :data:`SETTLE_TIMEOUT` seconds, until no thread unknown
to :mod:`threading` (or known only as a "dummy" thread: a foreign thread that asked for its name) is
running Python code. Python's own threads are not its business: non-daemon ones are joined before it runs,
and the tool starts no daemon threads.

Stdlib only: the CLI loads it when a command runs, not when it parses arguments.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time

#: the most a process's exit waits for native threads to leave Python (they take microseconds; a
#: thread still in there after this is left to the interpreter, and the exit goes on)
SETTLE_TIMEOUT = 5.0
_POLL = 0.001

_installed = False


def native_threads_in_python() -> list[int]:
    """Idents of the threads running Python code that :mod:`threading` did not start (a native runtime's)."""
    ours = {t.ident for t in threading.enumerate() if not isinstance(t, threading._DummyThread)}
    return [ident for ident in sys._current_frames() if ident not in ours]


def settle_native_threads(timeout: float = SETTLE_TIMEOUT) -> bool:
    """Wait (sleeping, so that the GIL is free for them) until no native thread runs Python code, at most
    ``timeout`` seconds. True when none does."""
    end = time.monotonic() + timeout
    while native_threads_in_python():
        if time.monotonic() >= end:
            return False
        time.sleep(_POLL)
    return True


def guard_exit() -> None:
    """Make this process's exit wait for native threads to leave Python (:func:`settle_native_threads`,
    run by :mod:`atexit`, before the interpreter finalizes). Idempotent."""
    global _installed
    if not _installed:
        atexit.register(settle_native_threads)
        _installed = True
