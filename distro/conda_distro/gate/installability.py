"""Installability never decreases: what main can install before a promotion, it can install after.

For each supported release × variant, every distribution package that a promotion could affect (the
candidates, and what in main depends on them) is solved with the release, from main (or main ∪
candidates) placed before the upstream channels — strict channel priority, as an end user installs.
A package installable before and not after is a decrease; the candidates in its dependency closure are
held (``uninstallable: NAME``). (Whether a new candidate itself installs is what its own tests show:
their environment is solved from the same channels.)

Solving is py-rattler's. The channels are written from repodata records only (no package files are
needed to solve), so main may be a local folder or anaconda.org. To keep hundreds of packages cheap,
the packages of one release × variant are solved together first; only when that fails is the set split
in halves (and so on down to single packages), so k failures cost about k·log(n) solves.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.channels.base import ChannelFile
from conda_distro.errors import ChannelError
from conda_distro.solve import RattlerSolver
from conda_distro.util.scratch import ScratchDir
from conda_distro.vocab import Target, Variant

Required = Callable[[ChannelFile], "Sequence[Target] | None"]


@dataclass(frozen=True)
class Decrease:
    name: str  # the package that can no longer be installed
    pytorch: str
    variant: str
    why: str  # the solver's first line
    culprits: tuple[str, ...]  # candidate artifacts in its dependency closure (itself included)


@dataclass
class InstallabilityResult:
    decreases: list[Decrease] = field(default_factory=list)
    solves: int = 0
    error: str | None = None  # could not be checked (a channel could not be read): the candidates wait


def write_channel(files: Iterable[ChannelFile], folder: Path) -> Path:
    """A channel whose repodata lists ``files`` (no package files: enough for the solver), with what the
    solver orders builds by (:mod:`conda_distro.channels.order`): timestamps and track_features."""
    return write_records(({"fn": f.filename, "name": f.name, "version": f.version, "build": f.build,
                           "build_number": f.build_number, "depends": list(f.depends), "subdir": f.subdir,
                           "sha256": f.sha256,
                           **({"timestamp": f.timestamp} if f.timestamp is not None else {}),
                           **({"track_features": " ".join(f.track_features)} if f.track_features else {})}
                          for f in files), folder)


def write_records(records: Iterable[dict], folder: Path) -> Path:
    """A channel of repodata entries (with their file name in ``fn``)."""
    subdirs: dict[str, dict] = defaultdict(lambda: {"packages": {}, "packages.conda": {}})
    for rec in records:
        rec = dict(rec)
        fn = rec.pop("fn")
        subdirs[rec["subdir"]]["packages.conda" if fn.endswith(".conda") else "packages"][fn] = rec
    for subdir in {"noarch", *subdirs}:
        (folder / subdir).mkdir(parents=True, exist_ok=True)
        (folder / subdir / "repodata.json").write_text(json.dumps(
            {"info": {"subdir": subdir}, **subdirs.get(subdir, {"packages": {}, "packages.conda": {}}),
             "repodata_version": 1}))
    return folder


class Installability:
    """Checks main ∪ candidates against main with a solver (``solve(channels, specs, cuda)`` raising
    rattler's SolverError when unsatisfiable)."""

    def __init__(self, upstream: Sequence[str], platforms: Sequence[str], pytorch: str, required: Required,
                 closure: Callable[[str], frozenset[str]]) -> None:
        self.upstream = list(upstream)
        self.platforms = list(platforms)
        self.pytorch = pytorch
        self.required = required
        self.closure = closure
        self.solves = 0
        self._before: dict[tuple[str, str, str], bool] = {}

    def check(self, main: Mapping[str, ChannelFile], candidates: Sequence[ChannelFile],
              pairs: Sequence[Target]) -> InstallabilityResult:
        report = InstallabilityResult()
        try:
            self._check(main, candidates, pairs, report)
        except ChannelError as exc:
            report.error = exc.message
        report.solves = self.solves
        return report

    def _check(self, main: Mapping[str, ChannelFile], candidates: Sequence[ChannelFile],
               pairs: Sequence[Target], report: InstallabilityResult) -> None:
        if not candidates:
            return
        cand_names = {c.name for c in candidates}
        after_files = [*main.values(), *candidates]
        by_name: dict[str, list[ChannelFile]] = defaultdict(list)
        for f in after_files:
            by_name[f.name].append(f)
        main_names = {f.name for f in main.values()}
        # what could change: the candidates, and main's packages that depend on one of them
        subjects = sorted(n for n in by_name if n in cand_names or self.closure(n) & cand_names)
        if not subjects:
            return
        with ScratchDir("conda-distro-installable-") as tmp:
            upstream = self._upstream_records(after_files)
            before = write_channel(main.values(), Path(tmp) / "main")
            after = write_channel(after_files, Path(tmp) / "after")
            # conda's strict channel priority: a name our channel has is never taken from upstream
            up_before = write_records([r for r in upstream if r["name"] not in main_names], Path(tmp) / "up-main")
            up_after = write_records([r for r in upstream if r["name"] not in by_name], Path(tmp) / "up-after")
            solve_after = RattlerSolver([after.as_uri(), up_after.as_uri()], self.platforms)
            solve_before = RattlerSolver([before.as_uri(), up_before.as_uri()], self.platforms)
            for r, v in pairs:
                cuda = Variant(v).cuda
                names = [n for n in subjects if any(self._admits(f, Target(r, v)) for f in by_name[n])]
                for name, why in self._failing(solve_after, names, r, cuda):
                    if name in main_names and self._installable(solve_before, name, r, cuda):
                        culprits = tuple(sorted(c.artifact for c in candidates
                                                if c.name == name or c.name in self.closure(name)))
                        report.decreases.append(Decrease(name, r, v, why, culprits))

    def _upstream_records(self, files: list[ChannelFile]) -> list[dict]:
        """The upstream records the solves can need (the dependencies of our files, recursively, and
        pytorch), as repodata entries. rattler's own "strict" priority still takes a name from a lower
        channel when the higher one has no matching version; conda's does not, so the shadowing is done
        here, by leaving those names out of upstream."""
        import asyncio

        from rattler import Gateway, Subdir

        ours = {f.name for f in files}
        names = {self.pytorch} | {d.split()[0] for f in files for d in f.depends} - ours
        names = {n for n in names if n and not n.startswith("__")}
        try:
            groups = asyncio.run(Gateway().query(self.upstream, [Subdir(p) for p in self.platforms], sorted(names), recursive=True))
        except Exception as exc:  # rattler raises several fetch errors
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ChannelError(f"cannot read the upstream channels {', '.join(self.upstream)}: {first}",
                               field="channels.upstream") from None
        out = []
        for group in groups:
            for r in group:
                rec = json.loads(r.to_json())
                for key in ("url", "channel"):
                    rec.pop(key, None)
                rec.setdefault("fn", str(r.file_name))
                out.append(rec)
        return out

    def _admits(self, f: ChannelFile, pair: Target) -> bool:
        req = self.required(f)
        return req is None or pair in req

    def _solve(self, solver: RattlerSolver, specs: list[str], cuda: bool) -> str | None:
        from rattler.exceptions import SolverError

        self.solves += 1
        try:
            solver.solve(specs, cuda)
        except SolverError as exc:
            text = str(exc).strip()
            return text.splitlines()[0][:300] if text else "unsatisfiable"
        return None

    def _failing(self, solver: RattlerSolver, names: list[str], release: str, cuda: bool) -> list[tuple[str, str]]:
        """The names that cannot be installed with the release: all at once, then halves on failure."""
        if not names:
            return []
        why = self._solve(solver, [f"{self.pytorch} =={release}", *names], cuda)
        if why is None:
            return []
        if len(names) == 1:
            return [(names[0], why)]
        mid = len(names) // 2
        return self._failing(solver, names[:mid], release, cuda) + self._failing(solver, names[mid:], release, cuda)

    def _installable(self, solver: RattlerSolver, name: str, release: str, cuda: bool) -> bool:
        key = (name, release, "cuda" if cuda else "cpu")
        if key not in self._before:
            self._before[key] = self._solve(solver, [f"{self.pytorch} =={release}", name], cuda) is None
        return self._before[key]
