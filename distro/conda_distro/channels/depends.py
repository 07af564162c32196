"""What channel files depend on: their ``depends`` entries read as match specs, whether a file satisfies
one, and the dependency closures promote and verify-channel walk (over every file of each name).

The closures are a plain walk over a name -> names mapping, not networkx: this module is imported by every
promote, excuses and verify-channel run (a CI or a lifecycle runs them hundreds of times), and importing
networkx alone took 0.15-0.4 s of each of those start-ups, for a reachability walk of a few dozen names.

One reading for all of them: an entry's name is rattler's (:class:`rattler.MatchSpec`), so
``torchvision>=0.20`` and ``torchvision >=0.20`` name the same package.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

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


def dependency_graph(files: Iterable[Depending]) -> dict[str, set[str]]:
    """name -> each name its files depend on (one entry per name, whatever its files' versions)."""
    graph: dict[str, set[str]] = {}
    for f in files:
        graph.setdefault(f.name, set()).update(d for d in depends_names(f) if d != f.name)
    return graph


def descendants(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every name reachable from ``start`` in ``graph``, never ``start`` itself (as networkx's
    ``descendants``, also through a cycle)."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph.get(name, ()))
    seen.discard(start)
    return seen


def distribution_closure(files: Sequence[Depending]) -> Callable[[str], frozenset[str]]:
    """name -> the names of ``files`` it depends on, transitively (through those names only: other
    names are not files here, so nothing of theirs is known)."""
    graph = dependency_graph(files)
    names = {f.name for f in files}
    memo: dict[str, frozenset[str]] = {}

    def closure(name: str) -> frozenset[str]:
        if name not in memo:
            memo[name] = frozenset(descendants(graph, name) & names)
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
            reached |= descendants(graph, n)
        return frozenset(reached & lockstep)

    return lockstep_of


__all__ = ["ChannelDep", "Depending", "dependency_graph", "depends_names", "descendants", "distribution_closure",
           "lockstep_of_files", "parse_dep", "satisfies", "subdir_compatible"]
