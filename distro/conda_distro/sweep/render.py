"""The sweep's documents for people: the pull-request bodies (one per bumped package), the
tracking issue's body and the whole markdown report, from the templates
``templates/sweep_pr.md.j2``, ``sweep_issue.md.j2`` and ``sweep.md.j2``; and the text
report's lines. (The JSON document is :class:`~conda_distro.sweep.model.SweepDocument`.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from conda_distro.templating import render

# The model calls these (SweepResult.text_lines / markdown), so this module does not import the model:
# what it reads of Decision, SweepPlan and SweepResult (conda_distro.sweep.model) is described here.


class Decision(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def old_pin(self) -> str | None: ...
    @property
    def new_pin(self) -> str | None: ...
    @property
    def applied(self) -> bool: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def log(self) -> str | None: ...


class SweepPlan(Protocol):
    @property
    def decisions(self) -> Sequence[Decision]: ...
    @property
    def dry_run(self) -> bool: ...


class SweepResult(Protocol):
    @property
    def plan(self) -> SweepPlan: ...
    @property
    def message(self) -> str | None: ...
    @property
    def branch(self) -> str | None: ...
    @property
    def start(self) -> str | None: ...
    @property
    def commits(self) -> Sequence[Any]: ...
    @property
    def pr_bodies(self) -> Mapping[str, Mapping[str, Any]]: ...
    @property
    def summary(self) -> Mapping[str, int]: ...
    @property
    def next_steps(self) -> Sequence[str]: ...


def pr_body(dec: Decision, release: str, dry_run: bool = False) -> dict[str, str]:
    return {"title": f"{dec.name}: admit pytorch {release}",
            "body": render("sweep_pr.md.j2", d=dec, release=release, dry_run=dry_run)}


def _pin_cell(d: Decision) -> str:
    if d.old_pin == d.new_pin:
        return f"`{d.old_pin}`" if d.old_pin else "–"
    if d.applied:
        return f"`{d.old_pin}` → `{d.new_pin}`"
    return f"`{d.old_pin}` (tried `{d.new_pin}`, reverted)"


def _note_cell(d: Decision) -> str:
    return d.reason.replace("|", "\\|").splitlines()[0] if d.reason else ""


def tracking_issue(plan: SweepPlan, result: SweepResult | None = None) -> str:
    """The tracking issue's body: the summary, a checklist of the per-package pull requests (the
    release workflow replaces each ``branch`` by the link of the PR it opened), the table, the logs."""
    prs = result.pr_bodies if result else {}
    checklist = []
    for d in plan.decisions:
        if d.status == "bumped":
            branch = prs.get(d.name, {}).get("branch")
            checklist.append((d.name, f"branch `{branch}`" if branch else
                              "planned" if plan.dry_run else "not committed yet"))
    pings = [(d, "publish the release made for this pytorch (a new version)" if d.status == "needs-new-version"
              else "fix the package for this release (the log is below)")
             for d in plan.decisions if d.status in ("failed", "needs-new-version", "not-solvable")]
    return render("sweep_issue.md.j2", plan=plan,
                  counts=", ".join(f"{n} {st}" for st, n in (result.summary if result else {}).items()),
                  prs=checklist, pings=pings, rows=[(d, _pin_cell(d), _note_cell(d)) for d in plan.decisions],
                  logs=[d for d in plan.decisions if d.status == "failed" and d.log])


def markdown(result: SweepResult) -> str:
    """What ``sweep --format markdown`` prints: the tracking issue (or the message), then each PR body."""
    return render("sweep.md.j2", result=result)


def text_lines(result: SweepResult) -> list[str]:
    """What ``sweep`` prints: the message, one line per package, the branches, the summary, the next steps."""
    lines = [result.message] if result.message else []
    for d in result.plan.decisions:
        pin = f"{d.old_pin} -> {d.new_pin}" if d.old_pin != d.new_pin else (d.old_pin or "")
        if d.old_pin != d.new_pin and not d.applied:
            pin += " (reverted)"
        lines.append(f"  {d.status:18} {d.name:24} {pin}" + (f"  ({d.reason})" if d.reason else ""))
    if result.branch:
        lines.append(f"branch {result.branch}: {len(result.commits)} commit(s)")
        lines += [f"  {pr['branch']}  ({name})" for name, pr in result.pr_bodies.items() if pr.get("branch")]
        if result.start:
            lines.append(f"back on {result.start} (the sweep's edits are on the branches)")
    if result.summary:
        lines.append(("planned: " if result.plan.dry_run else "summary: ")
                     + ", ".join(f"{n} {st}" for st, n in result.summary.items()))
    lines += [f"next: {step}" for step in result.next_steps]
    return lines
