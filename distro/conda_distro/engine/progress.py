"""Progress reporting: a rich progress bar on a terminal; plain log lines under CI=true or a pipe."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

from conda_distro.engine.unit import UnitOutcome

if TYPE_CHECKING:
    from rich.progress import TaskID


def interactive() -> bool:
    return sys.stderr.isatty() and os.environ.get("CI", "").lower() not in ("true", "1")


def _summary(o: UnitOutcome) -> str:
    builds = ", ".join(f"{b.status}" for b in o.builds) or "nothing to build"
    counts: dict[str, int] = {}
    for t in o.tests:
        counts[t.status] = counts.get(t.status, 0) + 1
    tests = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no tests"
    return f"{o.name}: build {builds}; tests {tests}" + (f" ({o.cached_tests} unchanged, reused)" if o.cached_tests else "")


class LogReporter:
    """One line per event on stderr (CI logs)."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.total = 0
        self.done = 0

    def _log(self, msg: str) -> None:
        sys.stderr.write(f"[{time.monotonic() - self.t0:7.1f}s] {msg}\n")
        sys.stderr.flush()

    def started(self, total: int) -> None:
        self.total = total
        self._log(f"building and testing {total} package(s)")

    def unit_started(self, name: str) -> None:
        self._log(f"start {name}")

    def unit_done(self, outcome: UnitOutcome) -> None:
        self.done += 1
        self._log(f"({self.done}/{self.total}) {_summary(outcome)}")
        for t in outcome.tests:
            if t.status == "failed":
                self._log(f"    {t.status}: {t.artifact} on pytorch {t.pytorch} ({t.variant})"
                          + (f" — {t.reason}" if t.reason else "") + (f" — log: {t.log}" if t.log else ""))

    def finished(self) -> None:
        self._log("done")


class RichReporter(LogReporter):
    """A live progress bar; finished packages are printed above it."""

    def __init__(self) -> None:
        super().__init__()
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.console = Console(stderr=True)
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                 console=self.console, transient=True)
        self.task: TaskID | None = None
        self.running: list[str] = []

    def started(self, total: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task("building", total=total)

    def unit_started(self, name: str) -> None:
        self.running.append(name)
        self.progress.update(self._task_id(), description=f"building {', '.join(self.running)}")

    def unit_done(self, outcome: UnitOutcome) -> None:
        if outcome.name in self.running:
            self.running.remove(outcome.name)
        ok = all(t.status == "passed" for t in outcome.tests) and all(b.status in ("built", "skipped-existing") for b in outcome.builds)
        self.progress.console.print(("[green]✓[/] " if ok else "[red]✗[/] ") + _summary(outcome), highlight=False)
        self.progress.update(self._task_id(), advance=1, description=f"building {', '.join(self.running)}")

    def finished(self) -> None:
        self.progress.stop()

    def _task_id(self) -> TaskID:
        if self.task is None:
            raise RuntimeError("a unit was reported before started()")
        return self.task


def make_reporter() -> LogReporter:
    return RichReporter() if interactive() else LogReporter()
