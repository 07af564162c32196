"""``conda-distro sweep report --pytorch VER``: a release's sweep report, read-only.

Nothing is written: no lock, no journal, no report file, no edit (git is asked without its optional
locks). The repository is authoritative (:mod:`.state`): where the release stands, and which packages'
pins still leave it out (read from the checked-out recipes, with what each waits for). The saved report
(``build/sweep/pytorch-VER.json``, written by the last sweep of the release and not versioned) adds the
details of the runs: each package's tests, failure reason and log excerpt, the pull-request bodies and
the tracking issue. It is shown as saved, with the state, what waits and the next steps of today; when
there is none (a fresh clone) the report is made from the repository alone and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from conda_distro.distribution import load_distribution, open_distro
from conda_distro.sweep.admit import waiting_packages
from conda_distro.sweep.model import SweepDocument, SweepPlan, SweepResult, Waiting
from conda_distro.sweep.plan import check_release
from conda_distro.sweep.state import load_report, release_state, report_path
from conda_distro.util.templating import render

STATE_TEXT = {
    "not-swept": "not swept: distro.yaml does not list it and no sweep branch of it exists",
    "interrupted": "a sweep of it was interrupted: rerunning the sweep rolls it back or finishes it",
    "uncommitted": "swept; its edits are in the work tree, not committed",
    "committed": "swept; its branches wait to be merged (the checked-out distro.yaml does not list it yet)",
    "supported": "supported: distro.yaml lists it",
}


@dataclass(frozen=True)
class SweepReportOptions:
    release: str
    root: Path | None = None


@dataclass
class SweepReport:
    """The result of ``sweep report``: the state of the release, what waits, and the saved report."""

    result: SweepResult  # the saved report's (or one made from the repository), with today's state and waits
    saved: str | None  # the saved report's path (relative to the root), None when there is none
    exit_code: int = 0

    def to_dict(self) -> dict:
        doc = self.result.to_dict()
        doc["report_file"] = self.saved
        doc["authoritative"] = "repository"
        return doc

    def text_lines(self) -> list[str]:
        r = self.result
        lines = [f"pytorch {r.plan.release}: {STATE_TEXT.get(r.state or '', r.state)}",
                 f"report: {self.saved} (saved by the last sweep; the repository decides the state and what waits)"
                 if self.saved else "report: none saved here (build/ is not versioned): made from the repository"]
        return lines + r.text_lines()

    def markdown(self) -> str:
        return render("sweep_report.md.j2", r=self.result, saved=self.saved,
                      state=STATE_TEXT.get(self.result.state or "", self.result.state))


def sweep_report(options: SweepReportOptions) -> SweepReport:
    """Read the release's state, the packages that still leave it out, and the saved report; write nothing."""
    distro = open_distro(options.root)
    check_release(options.release)
    state = release_state(distro, options.release)
    saved = load_report(distro, options.release)
    dist = load_distribution(strict=False, distro=distro)
    waiting: list[Waiting] = waiting_packages(dist, options.release, saved, state.branches) \
        if state.state in ("supported", "uncommitted") and state.listed else []
    if saved is None:
        doc = SweepDocument(release=options.release, noop=True)
        saved_path = None
    else:
        doc = saved
        path = report_path(distro, options.release)
        saved_path = path.relative_to(distro.root).as_posix() if path.is_relative_to(distro.root) else str(path)
    result = doc.result()
    result.message = None
    result.state = state.state
    result.plan = SweepPlan(result.plan.release, result.plan.decisions, noop=result.plan.noop, mode=result.plan.mode,
                            waiting=waiting)
    result.commits, result.replay = list(doc.commits), True
    return SweepReport(result, saved_path)
