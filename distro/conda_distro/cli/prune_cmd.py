"""`conda-distro prune`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from conda_distro.cli.app import DEFAULT_LOCK_TIMEOUT, Format, FormatOpt, RootOpt, app, emit

LockTimeoutOpt = Annotated[float, typer.Option(
    "--lock-timeout", min=0, max=86400,
    help="Seconds to wait, in all, for the locks of the repository (a sweep) and staging (a build or promote).")]


def _log(line: str) -> None:
    sys.stderr.write(f"{line}\n")


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
    from conda_distro.gate.prune import PruneOptions
    from conda_distro.gate.prune import prune as run_prune

    return emit(run_prune(PruneOptions(root=root, dry_run=dry_run, lock_timeout=lock_timeout, progress=_log)), format)
