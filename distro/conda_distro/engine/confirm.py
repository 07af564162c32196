"""Confirmation before blocking: one run of a test is not evidence of a failure.

A test that fails would block something (its own package: ``test-failed``; a parent it is re-tested with:
``regression``). Before it counts, the orchestrator runs it again on the same inputs (the same artifact,
release view, dependency view and channels, each run in a fresh sandbox), up to ``policy.confirm_runs``
more times (distro.yaml; default 2), stopping at the first pass:

* every run failed: ``failed`` (confirmed);
* it passed and failed on the same inputs: ``flaky``. A flaky test never blocks (its package, or a parent)
  and never counts as a pass for a regression check; it is reported with its maintainers.

The **baseline side** too: a dependent already in main whose confirmed failure would make a regression is
run again with main's packages in place of this run's (:func:`baseline_artifacts`), up to
``1 + confirm_runs`` times, stopping at the first failure. A baseline that fails as well makes the failure
``always-failed`` (not a regression); one that passes and fails makes the dependent ``flaky``; only a
baseline that passed every run leaves a regression standing.

An ``error`` run (killed, timed out, no verdict, or no test ran at all) says nothing either way: it is kept in ``attempts`` and
neither confirms nor clears. Pure functions over a ``run`` callable: the sandboxes are the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from conda_distro.channels.base import ChannelFile, newest_by_name
from conda_distro.engine.phases import TestOut
from conda_distro.state.results import Attempt

#: the default of ``policy.confirm_runs``: how many more runs a blocking failure gets
DEFAULT_CONFIRM_RUNS = 2


def attempt_of(out: TestOut) -> Attempt:
    """One run's outcome. A run that ran no test (rattler-build found none, though the package's tests
    failed on the same inputs) passed nothing: it says nothing either way, an ``error``, never a pass
    that would make a failing test ``flaky``."""
    return "error" if out.error or (out.ok and out.no_tests) else "passed" if out.ok else "failed"


def status_of(attempts: Iterable[Attempt]) -> Literal["passed", "failed", "flaky", "error"]:
    """The verdict of several runs on the same inputs: ``flaky`` when they passed and failed."""
    seen = set(attempts) - {"error"}
    if seen == {"passed", "failed"}:
        return "flaky"
    return "passed" if seen == {"passed"} else "failed" if seen == {"failed"} else "error"


@dataclass(frozen=True)
class Confirmed:
    """A test's runs on one set of inputs: ``first`` stands for them (its log, message and environment;
    the first failure's when there is one), ``attempts`` are every run's outcome in order."""

    first: TestOut
    attempts: tuple[Attempt, ...]

    @property
    def status(self) -> Literal["passed", "failed", "flaky", "error"]:
        return status_of(self.attempts)


def needs_confirmation(out: TestOut) -> bool:
    """A failure recipe code could repeat or not: a test script that failed. An error (no verdict) and an
    environment that could not be set up (a solve: the same inputs give the same answer) are not re-run."""
    return not out.ok and not out.error and not out.env_failed and not out.no_tests


def confirm_failure(first: TestOut, run: Callable[[int], TestOut], more: int) -> Confirmed:
    """``first`` failed: run it again (``run(i)``, i = 1..more) until it passes once."""
    attempts: list[Attempt] = [attempt_of(first)]
    for i in range(1, more + 1):
        got = run(i)
        attempts.append(attempt_of(got))
        if attempts[-1] == "passed":
            break
    return Confirmed(first, tuple(attempts))


def run_baseline(run: Callable[[int], TestOut], runs: int) -> Confirmed | None:
    """The baseline side: up to ``runs`` runs (``run(i)``, i = 1..runs) with main's packages, until one
    fails. None when none of them could say anything (every run an error)."""
    attempts: list[Attempt] = []
    first: TestOut | None = None
    for i in range(1, runs + 1):
        got = run(i)
        attempts.append(attempt_of(got))
        if first is None or (attempts[-1] == "failed" and first.ok):
            first = got
        if attempts[-1] == "failed":
            break
    if first is None or status_of(attempts) == "error":
        return None
    return Confirmed(first, tuple(attempts))


def baseline_artifacts(pinned: Iterable[str], staging: Path, main_dir: Path, main: Mapping[str, ChannelFile]
                       ) -> dict[str, Path]:
    """The dependency view of the baseline side: this run's artifacts of the dependencies (``pinned``,
    ``subdir/filename`` in ``staging``), each name that main has replaced by main's newest version of it
    (files in ``main_dir``). Returns {artifact: the file}; empty when main has none of them in another
    build (no baseline to compare with)."""
    pinned = list(pinned)
    names = {_name(a) for a in pinned}
    newest = newest_by_name(f for f in main.values() if f.name in names)
    out: dict[str, Path] = {}
    changed = False
    for a in pinned:
        mains = newest.get(_name(a))
        if not mains:
            out[a] = staging / a
            continue
        out.update({f.artifact: main_dir / f.artifact for f in mains})
        changed |= a not in {f.artifact for f in mains}
    return out if changed else {}


def _name(artifact: str) -> str:
    return artifact.split("/")[-1].rsplit("-", 2)[0]
