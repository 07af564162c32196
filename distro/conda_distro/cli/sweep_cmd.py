"""`conda-distro sweep`."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Annotated

import typer

from conda_distro.cli.app import DEFAULT_LOCK_TIMEOUT, RootOpt, app, out, print_json, warn_no_sandbox

if TYPE_CHECKING:
    from conda_distro.sweep import SweepResult


class SweepFormat(str, enum.Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


def _text(res: SweepResult) -> None:
    if res.message:
        out(res.message)
    for d in res.plan.decisions:
        pin = f"{d.old_pin} -> {d.new_pin}" if d.old_pin != d.new_pin else (d.old_pin or "")
        if d.old_pin != d.new_pin and not d.applied:
            pin += " (reverted)"
        out(f"  {d.status:18} {d.name:24} {pin}" + (f"  ({d.reason})" if d.reason else ""))
    if res.branch:
        out(f"branch {res.branch}: {len(res.commits)} commit(s)")
        for name, pr in res.pr_bodies.items():
            if pr.get("branch"):
                out(f"  {pr['branch']}  ({name})")
        if res.start:
            out(f"back on {res.start} (the sweep's edits are on the branches)")
    if res.summary:
        out(("planned: " if res.plan.dry_run else "summary: ") + ", ".join(f"{n} {st}" for st, n in res.summary.items()))
    for step in res.next_steps:
        out(f"next: {step}")


@app.command()
def sweep(
    pytorch: Annotated[str, typer.Option("--pytorch", help="The new PyTorch release, e.g. 2.7.0.")],
    commit: Annotated[bool, typer.Option("--commit", help="Make a git branch sweep/pytorch-VER with one commit per package, and a branch sweep/pytorch-VER-NAME per bumped package, then return to the current branch. After a run without --commit, commits what that run left.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (as a real run would, marked dry); edit, build and commit nothing. The release must be published upstream.")] = False,
    no_build: Annotated[bool, typer.Option("--no-build", help="Edit only; skip building and testing.")] = False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="How many packages to build and test at once (one worker process each).")] = 1,
    no_sandbox: Annotated[bool, typer.Option("--no-sandbox", help="Run build and test scripts unsandboxed (no bubblewrap); never in CI.")] = False,
    author: Annotated[str, typer.Option("--author", help="Commit author 'Name <email>'.")] = "conda-distro bot <bot@conda-distro.invalid>",
    lock_timeout: Annotated[float, typer.Option("--lock-timeout", min=0, help="Seconds to wait for another sweep of this repository (and for a build into the same staging channel).")] = DEFAULT_LOCK_TIMEOUT,
    root: RootOpt = None,
    format: Annotated[SweepFormat, typer.Option("--format", help="text, json or markdown (PR and tracking-issue bodies).")] = SweepFormat.text,
) -> int:
    """Release-day sweep: admit a new PyTorch release, widening pins where tests allow.

    Exit 0 when the sweep ran, even when packages failed (their statuses say so; JSON `ok` is false);
    2 on bad input."""
    from conda_distro.progress import make_reporter
    from conda_distro.sweep import SweepOptions, run_sweep

    warn_no_sandbox(no_sandbox)
    res = run_sweep(root, SweepOptions(release=pytorch, commit=commit, dry_run=dry_run, build=not no_build, jobs=jobs,
                                       author=author, sandbox=not no_sandbox,
                                       lock_timeout=lock_timeout), make_reporter() if not dry_run else None)
    if format is SweepFormat.json:
        print_json(res.to_dict())
    elif format is SweepFormat.markdown:
        if res.message and not res.tracking_issue:
            out(res.message)
        if res.tracking_issue:
            out(res.tracking_issue.rstrip("\n"))
        for name, pr in res.pr_bodies.items():
            out(f"\n---\n## PR: {pr['title']}\n\n{pr['body']}")
    else:
        _text(res)
    return 0  # spec §7: the sweep ran; failures are statuses in the report, not an error
