"""The dependency closures promote and verify-channel walk (channels/depends.py) reach exactly what
networkx's ``descendants`` reaches, cycles and self-dependencies included."""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from conda_distro.channels.depends import dependency_graph, descendants, distribution_closure, lockstep_of_files

NAMES = st.sampled_from(["a", "b", "c", "d", "e", "f", "pytorch", "torchvision"])


@dataclass(frozen=True)
class File:
    name: str
    depends: tuple[str, ...]


FILES = st.lists(st.builds(File, NAMES, st.lists(NAMES.map(lambda n: f"{n} >=1"), max_size=4).map(tuple)),
                 max_size=12)


def _nx(files: list[File]) -> nx.DiGraph:
    g: nx.DiGraph = nx.DiGraph()
    for f in files:
        g.add_node(f.name)
        g.add_edges_from((f.name, d.split()[0]) for d in f.depends if d.split()[0] != f.name)
    return g


@settings(max_examples=200, deadline=None)
@given(FILES)
def test_walk_reaches_what_networkx_reaches(files: list[File]) -> None:
    graph, g = dependency_graph(files), _nx(files)
    names = {f.name for f in files}
    closure = distribution_closure(files)
    lockstep = lockstep_of_files(files, ["pytorch", "torchvision"])
    for n in g.nodes:
        assert descendants(graph, n) == nx.descendants(g, n)
        assert closure(n) == frozenset(nx.descendants(g, n) & names)
    for f in files:
        own = {d.split()[0] for d in f.depends}
        want = set(own)
        for n in own & names - {f.name}:
            want |= nx.descendants(g, n)
        assert lockstep(f) == frozenset(want & {"pytorch", "torchvision"})


def test_cycle_never_contains_the_start() -> None:
    files = [File("a", ("b",)), File("b", ("a",)), File("c", ("c",))]
    graph = dependency_graph(files)
    assert descendants(graph, "a") == {"b"}
    assert descendants(graph, "c") == set()
    assert descendants(graph, "missing") == set()
