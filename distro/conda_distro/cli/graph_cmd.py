"""`conda-distro graph`."""

from __future__ import annotations

from typing import Annotated

import typer

from conda_distro.cli.app import Format, GraphFormat, RootOpt, app, emit


@app.command()
def graph(
    root: RootOpt = None,
    affected_by: Annotated[list[str] | None, typer.Option("--affected-by", help="Package name(s) that changed (repeatable).")] = None,
    changed_since: Annotated[str | None, typer.Option("--changed-since",
            help="Git ref: recipes changed since it are the changed set.")] = None,
    shards: Annotated[int, typer.Option("--shards", min=1, max=256,
            help="With --format github-matrix: number of runners (at most 256, GitHub's matrix limit).")] = 1,
    format: Annotated[GraphFormat, typer.Option("--format",
            help="text, json, dot (Graphviz), github-matrix, or github-runners (the CI runner of each variant, from "
                 "distro.yaml's ci: section).")] = Format.text,
) -> int:
    """Dependency order among distribution packages; the affected set of a change."""
    from conda_distro.graph import GraphOptions, graph_report

    return emit(graph_report(GraphOptions(root=root, affected_by=tuple(affected_by or ()), changed_since=changed_since,
                                          shards=shards, runners=format is Format.github_runners)), format)
