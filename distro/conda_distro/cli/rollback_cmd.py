"""`conda-distro rollback`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from conda_distro.cli.app import DEFAULT_LOCK_TIMEOUT, Format, FormatOpt, RootOpt, app, emit


def _log(line: str) -> None:
    sys.stderr.write(f"{line}\n")


@app.command()
def rollback(
    to: Annotated[str, typer.Option("--to", help="The snapshot main becomes (see `conda-distro snapshots`).")],
    why: Annotated[str | None, typer.Option("--why", help="Why main goes back (recorded in the ledger).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
    root: RootOpt = None,
    format: FormatOpt = Format.text,
    lock_timeout: Annotated[float, typer.Option("--lock-timeout", min=0, max=86400,
                                                help="Seconds to wait for the locks of the repository and main.")]
    = DEFAULT_LOCK_TIMEOUT,
) -> int:
    """Make main exactly an earlier snapshot: the plan (files to remove and to restore) is printed first;
    the files removed are recorded retired, with who and why, in channel_state/."""
    from conda_distro.enduser.rollback import RollbackOptions
    from conda_distro.enduser.rollback import rollback as run_rollback

    return emit(run_rollback(RollbackOptions(to=to, why=why, root=root, dry_run=dry_run, lock_timeout=lock_timeout,
                                             progress=_log)), format)
