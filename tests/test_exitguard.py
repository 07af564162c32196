"""No process of the tool dies at exit because a native thread of py-rattler is still inside Python.

The repro: a rerun of `prune` (which re-indexes staging with py-rattler's ``index_fs``) did its work, then
died with SIGABRT at interpreter finalization ("Fatal Python error: PyGILState_Release ... Python runtime
state: finalizing", a thread with ``<no Python frame>``). py-rattler's tokio thread completes the
asyncio future from inside Python (``loop.call_soon_threadsafe``, which lets go of the GIL while it wakes
the loop); ``asyncio.run`` returned and the process ended under it. On a busy machine that window is
rare; here it is held open on purpose: the native thread sleeps inside ``call_soon_threadsafe`` after
waking the loop, so the main thread certainly ends first. Without the exit guard every one of these
processes dies (SIGABRT or SIGSEGV); with it, each exits with its own code after the native thread left.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

HOLD_OPEN = textwrap.dedent("""
    import asyncio.base_events as base_events, os, sys, threading, time
    from pathlib import Path

    MAIN = threading.get_ident()
    complete = base_events.BaseEventLoop.call_soon_threadsafe

    def say(line):  # one write(2) per line: print() writes the text and its newline apart, and two threads'
        os.write(2, (line + "\\n").encode())  # lines then mix ("native thread in pythonmain thread ends")

    def held_open(self, *args, **kwargs):
        handle = complete(self, *args, **kwargs)
        if threading.get_ident() != MAIN:  # py-rattler's native thread, completing the future
            say("native thread in python")
            time.sleep(1.5)  # (sleeping lets go of the GIL: the main thread goes on and ends the process)
            say("native thread leaves python")
        return handle

    base_events.BaseEventLoop.call_soon_threadsafe = held_open
    from conda_distro.channels.local import LocalChannel

    LocalChannel(Path(sys.argv[1]), subdirs=("linux-64",)).publish()  # asyncio.run(rattler's index_fs)
    say("main thread ends")
""")

ENTRY_POINTS = {
    "cli": ("from conda_distro.cli import entrypoint\nsys.argv = ['conda-distro', '--help']\nentrypoint()\n", 0),
    "worker": ("from conda_distro.engine.worker import main\nsys.exit(main([]))\n", 2),
    "needs": ("from conda_distro.engine.needs import main\nsys.exit(main([]))\n", 2),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_an_exit_while_rattlers_thread_is_in_python_waits_for_it(entry, tmp_path):
    code, expected = ENTRY_POINTS[entry]
    proc = subprocess.run([sys.executable, "-c", HOLD_OPEN + code, str(tmp_path / "channel")],
                          capture_output=True, text=True, timeout=120)
    said = [ln for ln in proc.stderr.splitlines() if ln.endswith(("python", "ends"))]
    # the window was open: the main thread ended while the native thread was inside Python ...
    assert said == ["native thread in python", "main thread ends", "native thread leaves python"], proc.stderr
    # ... and the process exited with the entry point's own code, not killed at finalization
    assert proc.returncode == expected, proc.stderr[-2000:]
    assert "Fatal Python error" not in proc.stderr
    assert (tmp_path / "channel" / "noarch" / "repodata.json").is_file()


def test_python_threads_are_not_waited_for():
    """Only threads Python's :mod:`threading` did not start count: the program's own (joined by the
    interpreter before the guard runs) never delay an exit. (In a subprocess: pytest-xdist's own worker
    threads are started with ``_thread``.)"""
    probe = textwrap.dedent("""
        import threading, time
        from conda_distro.util.exitguard import native_threads_in_python, settle_native_threads

        stop = threading.Event()
        t = threading.Thread(target=stop.wait, args=(60,))
        t.start()
        start = time.monotonic()
        print(native_threads_in_python(), settle_native_threads(timeout=10), time.monotonic() - start < 5)
        stop.set()
        t.join(timeout=60)
    """)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout.strip()) == (0, "[] True True"), proc.stderr
