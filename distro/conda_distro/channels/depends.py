"""What channel files depend on: their ``depends`` entries read as match specs, whether a file satisfies
one, and the dependency closures promote and verify-channel walk (over every file of each name).

One reading for all of them: an entry's name is rattler's (:class:`rattler.MatchSpec`), so
``torchvision>=0.20`` and ``torchvision >=0.20`` name the same package.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import networkx as nx
from rattler import MatchSpec
from rattler.exceptions import InvalidMatchSpecError, InvalidVersionError, InvalidVersionSpecError

from conda_distro.channels.base import ChannelFile
from conda_distro.recipe.specs import admits


@dataclass(frozen=True)
class ChannelDep:
    text: str
    name: str
    version: str | None
    build: str | None


@lru_cache(maxsize=65536)
def parse_dep(text: str) -> ChannelDep | None:
    """A ``depends`` entry of repodata as name/version/build; None if rattler cannot parse it."""
    try:
        m = MatchSpec(text)
    except (InvalidMatchSpecError, InvalidVersionSpecError, InvalidVersionError, ValueError):
        return None
    return ChannelDep(text, m.name.normalized, m.version, m.build)


@lru_cache(maxsize=65536)
def _version_matches(spec: str, version: str) -> bool:
    return admits(spec, version)


def satisfies(dep: ChannelDep, f: ChannelFile) -> bool:
    if f.name != dep.name:
        return False
    if dep.version and not _version_matches(dep.version, f.version):
        return False
    return not dep.build or fnmatch.fnmatchcase(f.build, dep.build)


def subdir_compatible(dependent: ChannelFile, provider: ChannelFile) -> bool:
    return "noarch" in (dependent.subdir, provider.subdir) or dependent.subdir == provider.subdir


class Depending(Protocol):
    """A channel file as the closures read it."""

    @property
    def name(self) -> str: ...

    @property
    def depends(self) -> Sequence[str]: ...


def depends_names(f: Depending) -> frozenset[str]:
    """The names ``f`` depends on (entries rattler cannot parse are left out)."""
    return frozenset(d.name for d in map(parse_dep, f.depends) if d is not None)


def dependency_graph(files: Iterable[Depending]) -> nx.DiGraph[str]:
    """name -> each name its files depend on (one node per name, whatever its files' versions)."""
    graph: nx.DiGraph[str] = nx.DiGraph()
    for f in files:
        graph.add_node(f.name)
        graph.add_edges_from((f.name, d) for d in depends_names(f) if d != f.name)
    return graph


def distribution_closure(files: Sequence[Depending]) -> Callable[[str], frozenset[str]]:
    """name -> the names of ``files`` it depends on, transitively (through those names only: other
    names are not files here, so nothing of theirs is known)."""
    graph = dependency_graph(files)
    names = {f.name for f in files}
    memo: dict[str, frozenset[str]] = {}

    def closure(name: str) -> frozenset[str]:
        if name not in memo:
            memo[name] = frozenset(nx.descendants(graph, name) & names) if name in graph else frozenset()
        return memo[name]

    return closure


def lockstep_of_files(files: Iterable[Depending], lockstep: Iterable[str]) -> Callable[[Depending], frozenset[str]]:
    """For channel files: file -> the lockstep packages it depends on, itself or through the other files'
    names it depends on (transitively, over every file of a name)."""
    lockstep = frozenset(lockstep)
    if not lockstep:
        return lambda f: frozenset()
    files = list(files)
    graph = dependency_graph(files)
    names = {f.name for f in files}

    def lockstep_of(f: Depending) -> frozenset[str]:
        own = depends_names(f)
        reached = set(own)
        for n in own & names - {f.name}:
            reached |= nx.descendants(graph, n)
        return frozenset(reached & lockstep)

    return lockstep_of


__all__ = ["ChannelDep", "Depending", "dependency_graph", "depends_names", "distribution_closure",
           "lockstep_of_files", "parse_dep", "satisfies", "subdir_compatible"]
