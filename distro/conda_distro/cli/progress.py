"""The CLI's progress sinks (:mod:`conda_distro.util.progress` is the protocol library code calls).

:func:`progress_sink` is the one choice, made once for every command: a person watching (stderr is a
terminal and ``CI`` is not true) gets :class:`RichSink`, a live bar per task with the time left (ETA), the
finished steps and log lines printed above it; anyone else (CI logs, a pipe) gets :class:`LineSink`, the
same lines with the elapsed time and no bar. Only this module draws progress (rich is imported here, on
first use, never by library code).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO

from conda_distro.util.progress import LogEvent, ProgressSink, TaskFinish, TaskProgress, TaskStart, TaskStep


def interactive() -> bool:
    """Live progress only for a person watching: stderr is a terminal and not under CI (``CI=true``)."""
    return sys.stderr.isatty() and os.environ.get("CI", "").lower() not in ("true", "1")


class LineSink:
    """One plain line per event that says something, with the seconds since the start (CI logs, pipes).
    Progress ticks without a note print nothing."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self.t0 = time.monotonic()

    def _line(self, msg: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(f"[{time.monotonic() - self.t0:7.1f}s] {msg}\n")
        stream.flush()

    def on_start(self, event: TaskStart) -> None:
        if event.message:
            self._line(event.message)

    def on_step(self, event: TaskStep) -> None:
        if event.message:
            self._line(event.message)

    def on_progress(self, event: TaskProgress) -> None:
        if event.note:
            self._line((f"({event.done}/{event.total}) " if event.total else "") + event.note)

    def on_finish(self, event: TaskFinish) -> None:
        if event.message:
            self._line(event.message)

    def on_log(self, event: LogEvent) -> None:
        self._line(event.message if event.level == "info" else f"{event.level}: {event.message}")


class RichSink:
    """A rich bar per running task on stderr (transient: it goes away when the task finishes), with its
    steps in progress as its description; finished steps with a note and log lines are printed above."""

    def __init__(self, console: Any = None) -> None:
        self._console = console
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}  # task -> rich task id
        self._running: dict[str, list[str]] = {}  # task -> steps begun and not finished

    def _bar(self) -> Any:
        if self._progress is None:
            import atexit

            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                      console=self._console or Console(stderr=True), transient=True)
            atexit.register(self._progress.stop)
        return self._progress

    def _describe(self, task: str) -> str:
        running = self._running.get(task, [])
        return f"{task} {', '.join(running)}" if running else task

    def on_start(self, event: TaskStart) -> None:
        bar = self._bar()
        bar.start()
        self._running[event.task] = []
        self._tasks[event.task] = bar.add_task(event.message or event.task, total=event.total)

    def on_step(self, event: TaskStep) -> None:
        if event.task not in self._tasks:
            self.on_start(TaskStart(event.task))
        self._running[event.task].append(event.step)
        self._bar().update(self._tasks[event.task], description=self._describe(event.task))

    def on_progress(self, event: TaskProgress) -> None:
        if event.task not in self._tasks:
            self.on_start(TaskStart(event.task, event.total))
        running = self._running[event.task]
        if event.step in running:
            running.remove(event.step)
        bar = self._bar()
        if event.note:  # (a Text: a note's brackets are never read as markup)
            from rich.text import Text

            bar.console.print(Text.assemble(("✓ ", "green") if event.ok else ("✗ ", "red"), event.note), highlight=False)
        bar.update(self._tasks[event.task], completed=event.done, total=event.total, description=self._describe(event.task))

    def on_finish(self, event: TaskFinish) -> None:
        task = self._tasks.pop(event.task, None)
        self._running.pop(event.task, None)
        if task is not None and self._progress is not None:
            self._progress.remove_task(task)
            if not self._tasks:
                self._progress.stop()

    def on_log(self, event: LogEvent) -> None:
        if self._progress is not None and self._tasks:
            self._progress.console.print(event.message, highlight=False, markup=False)
        else:
            sys.stderr.write(f"{event.message}\n")
            sys.stderr.flush()


def progress_sink() -> ProgressSink:
    """The sink a command hands to the library: :class:`RichSink` for a person watching, else :class:`LineSink`."""
    return RichSink() if interactive() else LineSink()
