"""`conda-distro prune`."""

from __future__ import annotations

from typing import Annotated

import typer

from conda_distro.cli.app import DEFAULT_LOCK_TIMEOUT, Format, FormatOpt, RootOpt, app, emit, lock_timeout_opt

LockTimeoutOpt = Annotated[float, lock_timeout_opt(
    "the locks of the repository (a sweep) and staging (a build or promote)")]


@app.command()
def prune(
    root: RootOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be removed and kept; change nothing.")] = False,
    format: FormatOpt = Format.text,
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT,
) -> int:
    """Remove the staging builds that can never be promoted from this checkout (superseded, reverted tries,
    built from other recipes, retired), with their results and logs; keep what main or a pending candidate
    needs. Each removed and kept build is listed with why."""
    from conda_distro.cli.progress import progress_sink
    from conda_distro.gate.prune import PruneOptions
    from conda_distro.gate.prune import prune as run_prune

    return emit(run_prune(PruneOptions(root=root, dry_run=dry_run, lock_timeout=lock_timeout, progress=progress_sink())),
                format)
