"""`conda-distro sweep`."""

from __future__ import annotations

from typing import Annotated

import typer

from conda_distro.cli.app import DEFAULT_LOCK_TIMEOUT, Format, RootOpt, TextJsonMarkdown, app, emit, warn_no_sandbox


@app.command()
def sweep(
    pytorch: Annotated[str, typer.Option("--pytorch", help="The new PyTorch release, e.g. 2.7.0.")],
    commit: Annotated[bool, typer.Option("--commit",
            help="Make a git branch sweep/pytorch-VER with one commit per package, and a branch sweep/pytorch-VER-NAME"
                 " per bumped package, then return to the current branch. After a run without --commit, commits what "
                 "that run left.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run",
            help="Print the plan (as a real run would, marked dry); edit, build and commit nothing. The release must "
                 "be published upstream.")] = False,
    no_build: Annotated[bool, typer.Option("--no-build", help="Edit only; skip building and testing.")] = False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, max=256,
            help="How many packages to build and test at once (one worker process each).")] = 1,
    no_sandbox: Annotated[bool, typer.Option("--no-sandbox",
            help="Run build and test scripts unsandboxed (no bubblewrap); never in CI.")] = False,
    author: Annotated[str, typer.Option("--author", help="Commit author 'Name <email>'.")] = "conda-distro bot <bot@conda-distro.invalid>",
    lock_timeout: Annotated[float, typer.Option("--lock-timeout", min=0, max=86400,
            help="Seconds to wait, in all, for another sweep, a build, promote or retire of this repository "
                 "(and for a build into the same staging channel).")] = DEFAULT_LOCK_TIMEOUT,
    root: RootOpt = None,
    format: Annotated[TextJsonMarkdown, typer.Option("--format",
            help="text, json or markdown (PR and tracking-issue bodies).")] = Format.text,
) -> int:
    """Release-day sweep: admit a new PyTorch release, widening pins where tests allow.

    Exit 0 when the sweep ran, even when packages failed (their statuses say so; JSON `ok` is false);
    2 on bad input."""
    from conda_distro.sweep import SweepOptions
    from conda_distro.sweep import sweep as run_sweep

    warn_no_sandbox(no_sandbox)
    return emit(run_sweep(SweepOptions(release=pytorch, commit=commit, dry_run=dry_run, build=not no_build, jobs=jobs,
                                       author=author, sandbox=not no_sandbox, lock_timeout=lock_timeout, root=root)),
                format)
