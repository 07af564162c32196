"""`conda-distro promote`, `conda-distro excuses` and `conda-distro retire`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from conda_distro.cli.app import DEFAULT_LOCK_TIMEOUT, Format, FormatOpt, RootOpt, TextJsonMarkdown, app, emit, lock_timeout_opt

LockTimeoutOpt = Annotated[float, lock_timeout_opt(
    "the locks of the repository (a sweep), staging (a build) and main (another promote or retire)")]


def _log(line: str) -> None:
    sys.stderr.write(f"{line}\n")


@app.command()
def promote(
    root: RootOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; write nothing.")] = False,
    format: FormatOpt = Format.text,
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT,
) -> int:
    """Copy every staging artifact whose tests all passed (and whose distribution dependencies are in
    main or promoted with it) to the main channel, and record it in channel_state/."""
    from conda_distro.cli.progress import progress_sink
    from conda_distro.gate.promote import PromoteOptions
    from conda_distro.gate.promote import promote as run_promote

    return emit(run_promote(PromoteOptions(root=root, dry_run=dry_run, lock_timeout=lock_timeout,
                                           progress=progress_sink())), format)


@app.command()
def excuses(
    root: RootOpt = None,
    format: Annotated[TextJsonMarkdown, typer.Option("--format", help="text, json or markdown.")] = Format.text,
) -> int:
    """Why each candidate in staging is not in main: verdict (promote, waiting, held-temporarily,
    held-permanently), reasons, what blocks it, what it must go with, days waiting, maintainers; grouped
    by what blocks them. Writes nothing (`promote` also writes them to build/excuses.json)."""
    from conda_distro.gate.excuses import ExcusesOptions
    from conda_distro.gate.promote import explain_promotion

    return emit(explain_promotion(ExcusesOptions(root=root)), format)


@app.command()
def retire(
    name: Annotated[str, typer.Argument(help="The package to take out of the main channel.", show_default=False)],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded in channel_state/).", show_default=False)],
    root: RootOpt = None,
    by: Annotated[str | None, typer.Option("--by", help="Who retires it (default: git user.name, else the login).",
                                              show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="Retire it even though distribution packages depend on it.")] = False,
    format: FormatOpt = Format.text,
    lock_timeout: LockTimeoutOpt = DEFAULT_LOCK_TIMEOUT,
) -> int:
    """Remove a package from the main channel (local: files out + re-index; anaconda.org: `broken` label),
    and write a request record to channel_state/retirements/. Refused (exit 2) when other distribution
    packages depend on it, unless --force."""
    from conda_distro.gate.retire import RetireOptions
    from conda_distro.gate.retire import retire as run_retire
    from conda_distro.reports.unmaintained import unmaintained_entry

    return emit(run_retire(RetireOptions(name=name, reason=reason, root=root, by=by, lock_timeout=lock_timeout,
                                         progress=_log, force=force, unmaintained=unmaintained_entry)), format)
