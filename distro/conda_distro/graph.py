"""RecipeGraph: dependency order among distribution packages (run + host requirements)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from conda_distro.ci import RunnerPlan, github_matrix, runner_plan
from conda_distro.distribution import Exclusions, load_distribution, open_distro
from conda_distro.errors import GraphError
from conda_distro.recipe.model import Recipe
from conda_distro.util.fsutil import paused_gc
from conda_distro.util.gitutil import changed_recipes

GRAPH_SECTIONS = ("host", "run")


@dataclass
class RecipeGraph:
    """Edges point from a dependency to its dependent (``torchvision -> timm``)."""

    g: nx.DiGraph

    @classmethod
    @paused_gc()
    def from_recipes(cls, recipes: Mapping[str, Recipe], check_cycles: bool = True) -> RecipeGraph:
        """The graph of ``recipes``; ``check_cycles``: refuse a graph that is not well-formed (a cycle, or
        one package name produced by two recipes) with :class:`GraphError`."""
        g: nx.DiGraph[str] = nx.DiGraph()
        # every output a recipe produces maps to the recipe (a dependency on libtorch is an edge from
        # the recipe that makes libtorch)
        by_pkg: dict[str, str] = {}
        for folder, r in sorted(recipes.items()):
            for out in r.output_names:
                if check_cycles and by_pkg.setdefault(out, folder) != folder:
                    raise GraphError(f"package '{out}' is produced by two recipes: recipes/{by_pkg[out]} and "
                                     f"recipes/{folder}", field="package.name",
                                     hint="a package name belongs to one recipe: `conda-distro lint` says which "
                                          "(package_owners.yaml decides a change of owner)")
                by_pkg.setdefault(out, folder)
        g.add_nodes_from(sorted(recipes))
        for folder, recipe in recipes.items():
            for dep in recipe.deps(*GRAPH_SECTIONS):
                target = by_pkg.get(dep.name)
                if target is not None and target != folder:
                    if g.has_edge(target, folder):
                        g.edges[target, folder]["via"].add(dep.name)
                    else:
                        g.add_edge(target, folder, via={dep.name})
        graph = cls(g)
        if check_cycles:
            graph.check_acyclic()
        return graph

    def check_acyclic(self) -> None:
        """Raise :class:`GraphError` naming one cycle (deterministically: the one through the smallest
        name of the first strongly connected component) when the graph is not a DAG."""
        if nx.is_directed_acyclic_graph(self.g):
            return
        # (nx.find_cycle over the whole graph is quadratic on large DAG-like graphs; only look inside
        # the components that actually hold a cycle)
        loops = [set(c) for c in nx.strongly_connected_components(self.g)
                 if len(c) > 1 or any(self.g.has_edge(n, n) for n in c)]
        comp = min(loops, key=min)
        cycle = nx.find_cycle(self.g.subgraph(comp), source=min(comp))
        names = [u for u, _ in cycle] + [cycle[0][0]]
        raise GraphError(f"dependency cycle: {' -> '.join(names)}", field="requirements",
                         hint="a distribution package cannot depend on itself through others; break the cycle")

    @property
    def names(self) -> list[str]:
        return sorted(self.g.nodes)

    def order(self, subset: Iterable[str] | None = None) -> list[str]:
        """Dependencies first; ties broken by name so the order is stable."""
        g = self.g if subset is None else self.g.subgraph(set(subset))
        return list(nx.lexicographical_topological_sort(g))

    def levels(self, subset: Iterable[str] | None = None) -> list[list[str]]:
        g = self.g if subset is None else self.g.subgraph(set(subset))
        return [sorted(level) for level in nx.topological_generations(g)]

    def dependencies(self, name: str) -> set[str]:
        """Direct distribution dependencies."""
        return set(self.g.predecessors(name))

    def dependents(self, name: str) -> set[str]:
        return set(self.g.successors(name))

    def ancestors(self, name: str) -> set[str]:
        return nx.ancestors(self.g, name)

    def descendants(self, name: str) -> set[str]:
        return nx.descendants(self.g, name)

    def affected(self, changed: Iterable[str]) -> list[str]:
        """changed ∪ transitive reverse dependencies, in dependency order."""
        out: set[str] = set()
        for name in changed:
            if name in self.g:
                out.add(name)
                out |= nx.descendants(self.g, name)
        return self.order(out)

    def shards(self, names: list[str], n: int) -> list[list[list[str]]]:
        """Split each dependency level of ``names`` over ``n`` shards: shards[i] = levels for runner i."""
        out: list[list[list[str]]] = [[] for _ in range(max(1, n))]
        for level in self.levels(names):
            for i in range(len(out)):
                out[i].append(level[i:: len(out)])
        return out

    def edges(self, subset: Iterable[str] | None = None) -> list[dict]:
        """``[{from, to, via}]``: ``from`` is the dependency, ``to`` the dependent, ``via`` the package
        names (outputs of ``from``) that ``to`` requires."""
        keep = None if subset is None else set(subset)
        return [{"from": u, "to": v, "via": sorted(d.get("via") or ())}
                for u, v, d in sorted(self.g.edges(data=True), key=lambda e: (e[0], e[1]))
                if keep is None or (u in keep and v in keep)]

    def to_dot(self, highlight: Iterable[str] = ()) -> str:
        hl = set(highlight)
        lines = ["digraph distribution {", "  rankdir=LR;", "  node [shape=box, fontname=Helvetica];"]
        for n in self.names:
            style = ' [style=filled, fillcolor="#ffd27f"]' if n in hl else ""
            lines.append(f'  "{n}"{style};')
        for u, v in sorted(self.g.edges):
            lines.append(f'  "{u}" -> "{v}";')
        lines.append("}")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class GraphOptions:
    root: Path | None = None  # the distribution's folder (None: found from the current one)
    affected_by: tuple[str, ...] = ()  # package names that changed
    changed_since: str | None = None  # git ref: recipes changed since it are changed too
    shards: int = 1  # github-matrix: how many runners
    runners: bool = False  # only the CI runner of each variant (distro.yaml's ci: section; no recipe is read)


@dataclass
class GraphResult:
    """`conda-distro graph`: the dependency order and the affected set of a change."""

    graph: RecipeGraph
    affected: list[str]
    changed: list[str] | None  # None: no change given (affected is then every package)
    excluded: Exclusions
    shards: int = 1
    notices: list[str] = field(default_factory=list)  # stderr: the recipes left out, and why

    @property
    def exit_code(self) -> int:
        return 1 if self.excluded.unreadable else 0

    def to_dict(self) -> dict:
        return {"ok": not self.excluded.unreadable, "order": self.graph.order(), "levels": self.graph.levels(),
                "edges": self.graph.edges(), "affected": self.affected, "changed": self.changed,
                **self.excluded.to_dict()}

    def text_lines(self) -> list[str]:
        lines = ["order (dependencies first):"]
        lines += [f"  level {i}: {', '.join(level)}" for i, level in enumerate(self.graph.levels())]
        if self.changed is not None:
            lines.append(f"changed: {', '.join(self.changed) or '(none)'}")
            lines.append(f"affected ({len(self.affected)}): {', '.join(self.affected) or '(none)'}")
        return lines

    def dot_lines(self) -> list[str]:
        return [self.graph.to_dot(highlight=self.affected if self.changed is not None else ()).rstrip("\n")]

    def github_matrix_lines(self) -> list[str]:
        return [json.dumps(github_matrix(self.graph.shards(self.affected, self.shards)))]


def graph_report(options: GraphOptions) -> GraphResult | RunnerPlan:
    """The graph of the distribution at ``options.root`` without its unreadable recipes and their
    dependents (reported as notices), and the affected set of the named and changed packages."""
    if options.runners:
        return RunnerPlan(runner_plan(open_distro(options.root).config))  # distro.yaml only: no recipe is read
    dist = load_distribution(options.root, strict=False)
    if options.affected_by:
        dist.require(options.affected_by)
    g = RecipeGraph.from_recipes(dist.readable().recipes)
    changed: list[str] | None = list(options.affected_by) if options.affected_by else None
    if options.changed_since:
        changed = sorted(set(changed or []) | set(changed_recipes(dist.root, options.changed_since)))
    affected = g.affected(changed) if changed is not None else g.order()
    return GraphResult(g, affected, changed, dist.exclusions(), options.shards, dist.notices())
