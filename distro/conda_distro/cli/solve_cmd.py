"""`conda-distro solve`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from conda_distro.cli.app import FormatOpt, RootOpt, TextJson, app, out, print_json, report_unreadable


@app.command()
def solve(
    pytorch: Annotated[Optional[list[str]], typer.Option("--pytorch", help="Only this release (repeatable).")] = None,
    source: Annotated[str, typer.Option("--from", help="recipes (before building), staging or main (built artifacts).")] = "recipes",
    solver: Annotated[str, typer.Option("--solver", help="rattler (default) or libmamba (when importable).")] = "rattler",
    root: RootOpt = None,
    format: FormatOpt = TextJson.text,
) -> int:
    """Co-installability of the whole distribution with each release × variant."""
    from conda_distro.distribution import load_distribution
    from conda_distro.solve import SolveOptions, solve_distribution

    dist = load_distribution(root, strict=False)
    unreadable = report_unreadable(dist)  # reported; the others are solved
    report = solve_distribution(dist, SolveOptions(pytorch=tuple(pytorch or ()), source=source, solver=solver))
    if format is TextJson.json:
        print_json(report.to_dict())
    else:
        for r in report.results:
            n = len(r.requested) - 1
            out(f"pytorch {r.pytorch} ({r.variant}): {'ok' if r.ok else 'CONFLICT'} — {n} distribution package(s)")
            if r.conflict:
                for line in r.conflict.splitlines():
                    out(f"    {line}")
    return 0 if report.ok and not unreadable else 1
