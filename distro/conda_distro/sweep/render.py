"""The sweep's documents for people: the pull-request bodies (one per bumped package) and the tracking
issue's body, from the templates ``templates/sweep_pr.md.j2`` and ``sweep_issue.md.j2``. (The result prints
itself: :meth:`~conda_distro.sweep.model.SweepResult.text_lines` and ``markdown``, from ``sweep.md.j2``;
the JSON document is :class:`~conda_distro.sweep.model.SweepDocument`.)"""

from __future__ import annotations

from conda_distro.sweep.model import Decision, SweepPlan, SweepResult
from conda_distro.util.templating import render


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
    """The first line of the reason (the template shows it through ``shown``)."""
    return d.reason.splitlines()[0] if d.reason else ""


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
