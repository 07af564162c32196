"""`conda-distro solve`."""

from __future__ import annotations

from typing import Annotated

import typer

from conda_distro.cli.app import Format, FormatOpt, RootOpt, app, emit


@app.command()
def solve(
    pytorch: Annotated[list[str] | None, typer.Option("--pytorch", help="Only this release (repeatable).")] = None,
    source: Annotated[str, typer.Option("--from", help="recipes (before building), staging or main (built artifacts).")] = "recipes",
    solver: Annotated[str, typer.Option("--solver", help="rattler (default) or libmamba (when importable).")] = "rattler",
    root: RootOpt = None,
    format: FormatOpt = Format.text,
) -> int:
    """Co-installability of the whole distribution with each release × variant."""
    from conda_distro.solve import SolveOptions
    from conda_distro.solve import solve as run_solve

    return emit(run_solve(SolveOptions(pytorch=tuple(pytorch or ()), source=source, solver=solver, root=root)), format)
