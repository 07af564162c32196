"""`conda-distro graph`."""

from __future__ import annotations

import enum
import json
from typing import Annotated, Optional

import typer

from conda_distro.cli.app import RootOpt, app, out, print_json, report_unreadable


class GraphFormat(str, enum.Enum):
    text = "text"
    json = "json"
    dot = "dot"
    github_matrix = "github-matrix"
    github_runners = "github-runners"


@app.command()
def graph(
    root: RootOpt = None,
    affected_by: Annotated[Optional[list[str]], typer.Option("--affected-by", help="Package name(s) that changed (repeatable).")] = None,
    changed_since: Annotated[Optional[str], typer.Option("--changed-since", help="Git ref: recipes changed since it are the changed set.")] = None,
    shards: Annotated[int, typer.Option("--shards", min=1, help="With --format github-matrix: number of runners.")] = 1,
    format: Annotated[GraphFormat, typer.Option("--format", help="text, json, dot (Graphviz), github-matrix, or github-runners (the CI runner of each variant, from distro.yaml's ci: section).")] = GraphFormat.text,
) -> int:
    """Dependency order among distribution packages; the affected set of a change."""
    if format is GraphFormat.github_runners:
        from conda_distro.ci import runner_plan
        from conda_distro.distribution import open_distro

        out(json.dumps(runner_plan(open_distro(root).config)))  # distro.yaml only: no recipe is read
        return 0
    from conda_distro.distribution import load_distribution
    from conda_distro.gitutil import changed_recipes
    from conda_distro.graph import RecipeGraph

    dist = load_distribution(root, strict=False)
    if affected_by:
        dist.require(affected_by)
    g = RecipeGraph.from_recipes(dist.readable().recipes)  # unreadable recipes and their dependents are reported
    changed: list[str] | None = None
    if affected_by:
        changed = list(affected_by)
    if changed_since:
        changed = sorted(set(changed or []) | set(changed_recipes(dist.root, changed_since)))
    affected = g.affected(changed) if changed is not None else g.order()
    excluded = dist.exclusions()  # {unreadable, blocked}, as build and check-pr report them
    unreadable = excluded["unreadable"]
    doc = {
        "ok": not unreadable,
        "order": g.order(),
        "levels": g.levels(),
        "edges": g.edges(),
        "affected": affected,
        "changed": changed if changed is not None else None,
        **excluded,
    }
    if format is not GraphFormat.json:
        report_unreadable(dist)
    if format is GraphFormat.json:
        print_json(doc)
    elif format is GraphFormat.dot:
        out(g.to_dot(highlight=affected if changed is not None else ()).rstrip("\n"))
    elif format is GraphFormat.github_matrix:
        parts = g.shards(affected, shards)
        include = [{"shard": i, "levels": json.dumps(levels), "packages": " ".join(n for lv in levels for n in lv)}
                   for i, levels in enumerate(parts) if any(levels)]
        out(json.dumps({"include": include}))
    else:
        out("order (dependencies first):")
        for i, level in enumerate(g.levels()):
            out(f"  level {i}: {', '.join(level)}")
        if changed is not None:
            out(f"changed: {', '.join(changed) or '(none)'}")
            out(f"affected ({len(affected)}): {', '.join(affected) or '(none)'}")
    return 1 if unreadable else 0
