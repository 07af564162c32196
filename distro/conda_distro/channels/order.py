"""Which build of a name the solver installs: rattler's candidate order, the one model the gate uses.

When several files of one name can be installed, rattler's solver (resolvo, ``conda_sorting``) tries
them best first, and a test environment gets the first one that fits. The order, best first:

1. a build without ``track_features`` before one with;
2. the higher version;
3. the higher build number;
4. among builds equal so far: for each dependency name they all have (alphabetical), the build whose
   dependency spec can reach the higher version of that dependency (what the channels offer) first;
5. the newer ``timestamp`` (when it was built);
6. (rattler keeps the channels' order here; this model takes the higher build string, so that it is
   deterministic — only builds made in the same millisecond can reach this step).

Step 4 is evaluated over the files handed in as the ``pool`` (the distribution's files): a dependency on
a name the pool does not hold (an upstream package) is taken as equal for both builds. Builds of one
version made from one recipe differ in their variant (pytorch or python pins), which the gate separates
before it orders (each release × variant admits one), so in practice the order is decided by steps 2, 3
and 5: two builds of one version and build number are told apart by their timestamp, never by their
build string (which is a hash).

The promotion gate (:mod:`conda_distro.gate.revdeps`) and the installability check take the same view:
``tests/test_install_order.py`` checks this order against ``rattler.solve`` on real channels.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence

from rattler import Version

from conda_distro.channels.base import ChannelFile
from conda_distro.channels.depends import parse_dep, satisfies


def _simple(a: ChannelFile, b: ChannelFile) -> int:
    """Steps 1-3: negative when ``a`` is better."""
    if bool(a.track_features) != bool(b.track_features):
        return 1 if a.track_features else -1
    va, vb = Version(a.version), Version(b.version)
    if va != vb:
        return -1 if va > vb else 1
    return b.build_number - a.build_number


class InstallOrder:
    """Orders files of one name as the solver tries them; ``pool``: every file the solver could see, by
    name (for step 4)."""

    def __init__(self, pool: Mapping[str, Sequence[ChannelFile]] | None = None) -> None:
        self.pool = pool or {}
        self._highest: dict[str, Version | None] = {}

    def _reach(self, spec: str) -> Version | None:
        """The highest version of the pool that the dependency ``spec`` matches (None: none matches)."""
        if spec not in self._highest:
            dep = parse_dep(spec)
            found = [Version(f.version) for f in self.pool.get(dep.name, ()) if satisfies(dep, f)] if dep else []
            self._highest[spec] = max(found) if found else None
        return self._highest[spec]

    def _deps(self, f: ChannelFile) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for text in f.depends:
            dep = parse_dep(text)
            if dep is not None and dep.name in self.pool:
                out.setdefault(dep.name, []).append(text)
        return out

    def _by_dependencies(self, a: ChannelFile, b: ChannelFile) -> int:
        """Step 4 for two builds."""
        da, db = self._deps(a), self._deps(b)
        for name in sorted(set(da) & set(db)):
            ra = [v for s in da[name] if (v := self._reach(s)) is not None]
            rb = [v for s in db[name] if (v := self._reach(s)) is not None]
            if bool(ra) != bool(rb):
                return -1 if ra else 1
            if ra and max(ra) != max(rb):
                return -1 if max(ra) > max(rb) else 1
        return 0

    def compare(self, a: ChannelFile, b: ChannelFile) -> int:
        """Negative when the solver tries ``a`` before ``b``."""
        c = _simple(a, b)
        if c:
            return c
        c = self._by_dependencies(a, b)
        if c:
            return c
        ta, tb = a.timestamp or 0, b.timestamp or 0
        if ta != tb:
            return -1 if ta > tb else 1
        return (a.build < b.build) - (a.build > b.build)

    def sort(self, files: Iterable[ChannelFile]) -> list[ChannelFile]:
        """``files`` best first."""
        return sorted(files, key=functools.cmp_to_key(self.compare))

    def best(self, files: Iterable[ChannelFile]) -> ChannelFile | None:
        """The file the solver installs when any of ``files`` fits (None for none)."""
        best: ChannelFile | None = None
        for f in files:
            if best is None or self.compare(f, best) < 0:
                best = f
        return best


def pool_of(files: Iterable[ChannelFile]) -> dict[str, list[ChannelFile]]:
    """Files by name: the pool :class:`InstallOrder` evaluates dependencies in."""
    out: dict[str, list[ChannelFile]] = {}
    for f in files:
        out.setdefault(f.name, []).append(f)
    return out


__all__ = ["InstallOrder", "pool_of"]
