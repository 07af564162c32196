"""The build's progress, as events on the tool's one progress protocol (:mod:`conda_distro.util.progress`):
the task ``build`` starts with the number of packages, each package is a step (begun when its unit starts,
finished with a one-line summary when it is done, a failed test logged as a warning), and it finishes."""

from __future__ import annotations

from conda_distro.engine.unit import UnitOutcome
from conda_distro.util.progress import NULL_SINK, LogEvent, ProgressSink, TaskFinish, TaskProgress, TaskStart, TaskStep

TASK = "build"


def summary(o: UnitOutcome) -> str:
    """One package's outcome in a line: its builds' statuses and its tests' counts."""
    builds = ", ".join(f"{b.status}" for b in o.builds) or "nothing to build"
    counts: dict[str, int] = {}
    for t in o.tests:
        counts[t.status] = counts.get(t.status, 0) + 1
    tests = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no tests"
    return f"{o.name}: build {builds}; tests {tests}" + (f" ({o.cached_tests} unchanged, reused)" if o.cached_tests else "")


class BuildEvents:
    """What the executor says as it runs units, told to ``sink``."""

    def __init__(self, sink: ProgressSink | None = None) -> None:
        self.sink = sink or NULL_SINK
        self.total = 0
        self.done = 0

    def started(self, total: int) -> None:
        self.total = total
        self.sink.on_start(TaskStart(TASK, total, f"building and testing {total} package(s)"))

    def unit_started(self, name: str) -> None:
        self.sink.on_step(TaskStep(TASK, name))

    def unit_done(self, outcome: UnitOutcome) -> None:
        self.done += 1
        ok = all(t.status == "passed" for t in outcome.tests) and \
            all(b.status in ("built", "skipped-existing") for b in outcome.builds)
        self.sink.on_progress(TaskProgress(TASK, self.done, self.total, step=outcome.name, note=summary(outcome), ok=ok))
        for t in outcome.tests:
            if t.status == "failed":
                self.sink.on_log(LogEvent("warn", f"{t.status}: {t.artifact} on pytorch {t.pytorch} ({t.variant})"
                                                  + (f" — {t.reason}" if t.reason else "") + (f" — log: {t.log}" if t.log else "")))

    def finished(self) -> None:
        self.sink.on_finish(TaskFinish(TASK, "done"))
