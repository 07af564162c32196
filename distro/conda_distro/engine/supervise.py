"""Run one runner (:mod:`.worker`) in its sandbox and watch it, from outside: the orchestrator's side.

:func:`supervise` starts ``bwrap … python -m conda_distro.engine.worker`` with a fresh pipe as the
runner's private report descriptor, then reads two streams until the runner is done:

* the report (:mod:`.jobs`): its ``log`` lines go to the log file of the build or test under way,
  every other message is kept as the runner's word;
* the sandbox's own output (the runner's stdout and stderr, and whatever reaches them): appended to
  the same log, never parsed.

Limits (distro.yaml's ``limits:``, a recipe's ``extra: limits:``): a wall-clock limit per build (restarted when the runner begins the next
variant) and per test, and a cap on each log. At either, the whole sandbox is killed: SIGKILL to
``bwrap``, whose PID namespace takes every process of the sandbox with it, background children
included (unsandboxed, ``--no-sandbox``: the runner's process group). Memory stays bounded: the
streams are read in chunks and written straight to the log.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from conda_distro.engine.jobs import MAX_LINE, BeginMsg, Envelope, LogMsg, Message
from conda_distro.engine.sandbox import SandboxSpec, wrap

READ_CHUNK = 64 << 10
TAIL_BYTES = 16 << 10  # how much of the sandbox's own output is kept to explain a crash
EXIT_GRACE = 10.0  # seconds a runner that said "done" (or closed its report) has to exit
TIMEOUT = "timeout"
OUTPUT_LIMIT = "output limit"


@dataclass(frozen=True)
class Launch:
    """One runner to start: what it runs, where, and how it is watched."""

    mode: str  # "build" | "test"
    job: str  # the job file as the runner sees it
    env: dict[str, str]
    cwd: Path  # host folder the process starts in
    timeout: float  # seconds per part (a build: per variant; a test: the test)
    log_limit: int  # bytes per log
    logs: tuple[Path, ...]  # the log of each part (lines before the first `begin` go to the first)
    spec: SandboxSpec | None = None  # None: unsandboxed (--no-sandbox)
    bwrap: str | None = None


@dataclass
class Supervised:
    """What came of one runner: its messages (other than log lines), and whether it was killed."""

    messages: list[Message] = field(default_factory=list)
    done: bool = False
    killed: str | None = None  # TIMEOUT | OUTPUT_LIMIT
    part: int = 0  # the part under way when the runner ended
    status: int | None = None  # exit status of the sandbox
    tail: str = ""  # the end of the sandbox's own output
    started: bool = True
    error: str | None = None  # could not start / broke the protocol
    mode: str = "build"

    def why(self, limits_note: str) -> str:
        """Why the runner gave no outcome, as a record's reason."""
        if self.killed:
            return f"{self.killed}: {limits_note}"
        if self.error:
            return self.error
        lines = [ln for ln in self.tail.strip().splitlines() if ln.strip()]
        return f"the {self.mode} worker exited with status {self.status}: " + (lines[-1][:300] if lines else "no output")


def runner_argv(mode: str, report_fd: int, job: str) -> list[str]:
    return [sys.executable, "-I", "-B", "-m", "conda_distro.engine.worker", mode, "--report-fd", str(report_fd), job]


class _Logs:
    """The log files of one runner, written as the streams arrive; counts bytes per part."""

    def __init__(self, paths: Sequence[Path], limit: int) -> None:
        self.paths, self.limit = list(paths), limit
        self.part, self.size = 0, 0
        self.fh: IO[bytes] | None = None

    def _open(self) -> IO[bytes]:
        if self.fh is None:
            path = self.paths[min(self.part, len(self.paths) - 1)]
            path.parent.mkdir(parents=True, exist_ok=True)
            self.fh = open(path, "wb")  # noqa: SIM115 - closed by switch()/close()
        return self.fh

    def write(self, data: bytes) -> bool:
        """Append (cut at the cap); False once the cap is passed."""
        room = self.limit - self.size
        fh = self._open()
        fh.write(data[:max(room, 0)])
        self.size += len(data)
        return self.size <= self.limit

    def switch(self, part: int) -> None:
        """The next part begins: its own log (lines so far stay in the current one) and its own cap."""
        if part != self.part:
            self.close()
            self.part = part
        self.size = 0
        self._open()

    def note(self, text: str) -> None:
        """A line of the orchestrator's own (past the cap too)."""
        self._open().write(f"\n=== {text}\n".encode())

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def _kill(proc: subprocess.Popen, sandboxed: bool) -> None:
    """Kill the sandbox (bwrap: its PID namespace ends every process in it) or, unsandboxed, the
    runner's process group."""
    with contextlib.suppress(OSError):
        if sandboxed:
            proc.kill()
        else:
            os.killpg(proc.pid, signal.SIGKILL)


def supervise(launch: Launch) -> Supervised:
    """Run ``launch`` to its end or its limit; never raises for what recipe code does."""
    out = Supervised(mode=launch.mode)
    logs = _Logs(launch.logs, launch.log_limit)
    r, w = os.pipe()
    try:
        argv = wrap(runner_argv(launch.mode, w, launch.job), launch.spec, launch.bwrap)
        sandboxed = launch.spec is not None and launch.bwrap is not None
        try:
            proc = subprocess.Popen(argv, env=launch.env, cwd=launch.cwd, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=(w,),
                                    start_new_session=not sandboxed)
        except OSError as exc:
            out.started, out.error = False, f"the {launch.mode} worker could not start: {exc}"
            logs.note(out.error)
            return out
        finally:
            os.close(w)
        _watch(proc, r, logs, launch, out, sandboxed)
    finally:
        os.close(r)
        logs.close()
    return out


def _watch(proc: subprocess.Popen, report_fd: int, logs: _Logs, launch: Launch, out: Supervised,
           sandboxed: bool) -> None:
    assert proc.stdout is not None
    stream = proc.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(report_fd, selectors.EVENT_READ, "report")
    sel.register(stream, selectors.EVENT_READ, "stream")
    pending = b""
    tail: deque[bytes] = deque()
    tail_size = 0
    deadline = time.monotonic() + launch.timeout
    grace: float | None = None  # set once the report is closed: the sandbox has that long to end

    def stop(why: str) -> None:
        out.killed = why
        _kill(proc, sandboxed)

    while sel.get_map():
        now = time.monotonic()
        if grace is not None and now >= grace:
            _kill(proc, sandboxed)
            break
        if now >= deadline:
            stop(TIMEOUT)
            logs.note(f"killed: {TIMEOUT} after {launch.timeout:g} s (the limit)")
            break
        limit = min(deadline, grace) if grace is not None else deadline
        for key, _ in sel.select(timeout=max(0.05, min(1.0, limit - now))):
            data = os.read(key.fd, READ_CHUNK)
            if not data:
                sel.unregister(key.fd)
                if key.data == "report":
                    grace = time.monotonic() + EXIT_GRACE
                continue
            if key.data == "stream":
                tail.append(data)
                tail_size += len(data)
                while tail_size > TAIL_BYTES and len(tail) > 1:
                    tail_size -= len(tail.popleft())
                ok = logs.write(data)
            else:
                pending += data
                ok, pending, deadline = _messages(pending, logs, out, deadline, launch.timeout)
                if len(pending) > 8 * MAX_LINE:  # the runner never sends such a line
                    out.error = "the build worker's report is unreadable (a line without end)"
            if not ok:
                stop(OUTPUT_LIMIT)
                logs.note(f"killed: {OUTPUT_LIMIT}: the log passed {launch.log_limit} bytes (the limit)")
                break
        if out.error and not out.killed:
            _kill(proc, sandboxed)
        if out.killed or out.error:
            break
    sel.close()
    try:
        out.status = proc.wait(timeout=EXIT_GRACE)
    except subprocess.TimeoutExpired:
        _kill(proc, sandboxed)
        out.status = proc.wait()
    proc.stdout.close()
    out.tail = b"".join(tail).decode("utf-8", "replace")
    out.part = logs.part


def _messages(pending: bytes, logs: _Logs, out: Supervised, deadline: float, timeout: float) -> tuple[bool, bytes, float]:
    """Handle the complete lines of ``pending``: (within the log cap, what is left, the deadline)."""
    ok = True
    *lines, rest = pending.split(b"\n")
    for raw in lines:
        try:
            msg = Envelope.model_validate_json(raw).msg
        except (ValidationError, ValueError):
            out.error = "the build worker's report is unreadable"
            continue
        if isinstance(msg, LogMsg):
            ok = logs.write(msg.line.encode("utf-8", "replace") + b"\n") and ok
        elif isinstance(msg, BeginMsg):
            logs.switch(msg.index)
            deadline = time.monotonic() + timeout
        else:
            out.messages.append(msg)
            out.done = out.done or msg.kind == "done"
    return ok, rest, deadline
