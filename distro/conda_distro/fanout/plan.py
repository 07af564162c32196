"""The shards of a fanned-out run: pure data, computed from the checkout alone (no recipe code runs).

A run builds an affected set (check-pr's, `build --changed-since`'s or every package). Its dependency
levels become **stages**: stage ``i`` holds level ``i``; a workflow has a fixed number of stage jobs
(``stages``), so every level from ``stages - 1`` on is folded into the last stage, whose shards then
hold whole connected pieces of those levels and build them in dependency order. Each stage's packages
are split over at most ``runners`` shards (how many: a compiled package weighs :data:`COMPILED_WEIGHT`
noarch ones, and a shard holds at most ``per_shard`` weight when more runners can take it: one slow
package gets a shard of its own and does not hold up its level's other shards). The units are then
packed by what their work costs (:class:`UnitCosts`: a static estimate by kind, a cuda build weighing
more than twice a cpu one): longest first, each onto the shard where it ends soonest, a shard running
its units on its runner's ``cores`` side by side (as ``build --jobs`` does), so no shard takes a second
heavy unit onto a core while another shard has a free one. Every package is in exactly one shard; the
same inputs give the same shards, so the shard jobs and the fan-in agree on them without trusting each
other.

**The unit of fan-out is one build.** A noarch package is one unit (its build and every test target). A
compiled package with several builds in the run (one per PyTorch minor × variant, as rattler-build renders
it) is one unit per build, ``NAME@I:K=V,…`` (the variant values that tell its builds apart; the build and
its tests on the targets it admits), and its units go to different shards of its level when runners are
free: the slowest shard of a level is one build, not all of a package's builds in series. (Only the
last, folded stage keeps a connected piece, and so a package's builds, together: they are built in
dependency order there.)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import networkx as nx

from conda_distro.engine.plan import UNIT_SEP
from conda_distro.graph import RecipeGraph

#: how many noarch packages one compiled package (a recipe that is not noarch) weighs when shards are cut
COMPILED_WEIGHT = 5
#: the cores of a shard job's runner (GitHub's standard Linux runner for public repositories): its job runs
#: ``fanout shard --jobs "$(nproc)"``; a fixed number, not this machine's, so every job cuts the same shards
RUNNER_CORES = 4
#: stage jobs a workflow defines (``level-0`` … ``level-7``); deeper levels fold into the last one
DEFAULT_STAGES = 8




def unit_package(unit: str) -> str:
    """The package (recipe folder name) of a unit: ``NAME`` or ``NAME@I:K=V,…``."""
    return unit.split(UNIT_SEP, 1)[0]


def units_of(names: list[str], builds: dict[str, list[str]]) -> list[str]:
    """The units of ``names`` (dependency order): ``NAME@I:KEY`` for each build of a package with several
    (``builds``: package -> the ``K=V,…`` of each of its builds, in order), else ``NAME``."""
    return [u for n in names for u in ([f"{n}{UNIT_SEP}{i}:{k}" for i, k in enumerate(builds[n])]
                                       if len(builds.get(n, ())) > 1 else [n])]


@dataclass(frozen=True)
class ShardSpec:
    """How to cut: at most ``runners`` shards per stage, about ``per_shard`` weight each."""

    runners: int = 20
    per_shard: int = 4
    stages: int = DEFAULT_STAGES
    cores: int = RUNNER_CORES  # a shard runner's cores: how many units it runs side by side


@dataclass(frozen=True)
class UnitCosts:
    """Static estimates of a unit's work in seconds, by kind, used ONLY to balance shards (never for a
    verdict, a timeout or a report). From the measured costs in docs/scale-out.md ("Predicted (2026-11-27):
    real costs, 4 cores per shard runner"): the medians of a `build --all` of the real world's recipes (a noarch build 21 s, a test
    target 53 s cpu and 96 s cuda) and pytorch_scatter's compiled builds on this machine (750 s cpu,
    1,800 s cuda, one compile at a time: as long on a 4-core runner as on one core)."""

    noarch_build: float = 21.0
    cpu_build: float = 750.0
    cuda_build: float = 1800.0
    cpu_test: float = 53.0
    cuda_test: float = 96.0

    def estimate(self, compiled: bool, cuda: bool = False, cpu_tests: int = 1, cuda_tests: int = 0) -> float:
        """One unit's work on one core: its build (noarch; compiled, cpu or cuda) and its test targets."""
        build = (self.cuda_build if cuda else self.cpu_build) if compiled else self.noarch_build
        return build + cpu_tests * self.cpu_test + cuda_tests * self.cuda_test


#: the estimates the planner uses (see :class:`UnitCosts`)
STATIC_COSTS = UnitCosts()


@dataclass(frozen=True)
class Shard:
    id: str  # "s<stage>-<index>": also the name of its bundle (artifact ``shard-<id>``)
    stage: int
    packages: tuple[str, ...]  # its units (``NAME`` or ``NAME@I:K=V,…``), dependency order

    @property
    def names(self) -> tuple[str, ...]:
        """The packages it builds (some maybe in part: some of their builds)."""
        return tuple(dict.fromkeys(unit_package(u) for u in self.packages))

    inputs: tuple[str, ...] = ()  # the earlier shards holding its packages' dependencies (transitively)

    @property
    def download(self) -> str:
        """The artifact pattern of its inputs' bundles (``shard-<id>``, ``shard-{<id>,<id>}``: a glob with
        brace alternatives, as ``actions/download-artifact`` matches it), or "" when it has none."""
        if len(self.inputs) <= 1:
            return "".join(f"shard-{i}" for i in self.inputs)
        return "shard-{" + ",".join(self.inputs) + "}"

    def to_dict(self) -> dict:
        return {"shard": self.id, "stage": self.stage, "packages": " ".join(self.packages),
                "inputs": self.download}


@dataclass
class ShardPlan:
    """The shards of one run, stage by stage; ``affected`` in dependency order."""

    affected: list[str]
    stages: list[list[Shard]] = field(default_factory=list)
    exit_code: int = 0

    @property
    def shards(self) -> list[Shard]:
        return [s for stage in self.stages for s in stage]

    def shard(self, shard_id: str) -> Shard | None:
        return next((s for s in self.shards if s.id == shard_id), None)

    def owner(self) -> dict[str, str]:
        """unit (``NAME`` or ``NAME@I:K=V,…``) -> the id of the shard that builds it."""
        return {p: s.id for s in self.shards for p in s.packages}

    def earlier(self, shard_id: str) -> list[Shard]:
        """The shards of earlier stages that hold a dependency (direct or not) of ``shard_id``'s packages:
        exactly what its job downloads and takes (its build and tests need nothing else)."""
        own = self.shard(shard_id)
        return [] if own is None else [s for s in self.shards if s.id in own.inputs]

    def matrix(self, stage: int) -> dict:
        """Stage ``stage``'s GitHub Actions matrix (``include``: shard, stage, packages)."""
        shards = self.stages[stage] if stage < len(self.stages) else []
        return {"include": [s.to_dict() for s in shards]}

    def to_dict(self) -> dict:
        return {"affected": self.affected, "shards": len(self.shards),
                "stages": [[s.to_dict() for s in stage] for stage in self.stages]}

    def github_lines(self, stages: int) -> list[str]:
        """``key=value`` lines for ``$GITHUB_OUTPUT``: ``stage-<i>`` (a matrix) and ``count-<i>`` for each of
        the workflow's ``stages`` stage jobs, and ``shards`` (how many in all)."""
        lines = []
        for i in range(stages):
            m = self.matrix(i)
            lines += [f"stage-{i}={json.dumps(m, separators=(',', ':'))}", f"count-{i}={len(m['include'])}"]
        return [*lines, f"shards={len(self.shards)}"]

    def text_lines(self) -> list[str]:
        out = [f"{len(self.affected)} package(s) in {len(self.shards)} shard(s)"]
        for i, stage in enumerate(self.stages):
            out += [f"  stage {i}: " + "; ".join(f"{s.id}: {' '.join(s.packages)}" for s in stage)]
        return out


def _placed(cores: list[float], costs: list[float]) -> list[float]:
    """``cores``' loads after ``costs`` are run on them, longest first, each on the least loaded core."""
    out = list(cores)
    for c in sorted(costs, reverse=True):
        i = min(range(len(out)), key=lambda j: (out[j], j))
        out[i] += c
    return out


def _split(items: list[tuple[list[str], list[float]]], count: int, cores: int) -> list[list[list[str]]]:
    """Longest first (LPT) onto ``count`` shards of ``cores`` cores each: an item (a group of units that
    stays together, with each unit's cost) goes to the shard where it ends soonest, its units each on
    that shard's least loaded core (ties: the least total work, then the lowest index). A heavy unit so
    takes a free core of any shard before it doubles up on a busy one. Deterministic: the order and the
    ties depend only on the costs and the units' names."""
    bins: list[list[list[str]]] = [[] for _ in range(count)]
    loads = [[0.0] * max(1, cores) for _ in range(count)]
    for group, costs in sorted(items, key=lambda it: (-sum(it[1]), it[0])):
        trials = [_placed(loads[j], costs) for j in range(count)]
        i = min(range(count), key=lambda j: (max(trials[j]), sum(trials[j]), j))
        bins[i].append(group)
        loads[i] = trials[i]
    return [b for b in bins if b]


def make_shards(graph: RecipeGraph, affected: list[str], weights: dict[str, int], spec: ShardSpec,
                builds: dict[str, list[str]] | None = None, costs: dict[str, float] | None = None) -> ShardPlan:
    """Cut ``affected`` (a subset of ``graph``) into shards by stage (see the module docstring); ``builds``:
    the builds (``K=V,…``) of each package with several (its units; a unit weighs the package's weight,
    ``weights``, default 1, which sets how many shards a stage gets); ``costs``: each unit's (or, for
    all its units, each package's) estimated seconds of work (:class:`UnitCosts`), by which the units
    are packed (None: by ``weights``)."""
    builds = builds or {}

    def cost(u: str) -> float:
        if costs is None:
            return float(weights.get(unit_package(u), 1))
        return costs.get(u, costs.get(unit_package(u), STATIC_COSTS.estimate(False)))

    stages_n = max(1, spec.stages)
    levels = graph.levels(affected)
    order = {n: i for i, n in enumerate(graph.order(affected))}
    plan = ShardPlan(affected=sorted(affected, key=order.__getitem__))
    grouped: list[list[str]] = [lv for lv in levels[: stages_n - 1]]
    tail = [n for lv in levels[stages_n - 1:] for n in lv]
    if tail:
        grouped.append(tail)
    for stage, names in enumerate(grouped):
        if stage == stages_n - 1 and len(levels) > stages_n:  # folded levels: whole connected pieces
            sub = graph.g.subgraph(names)
            groups = [units_of(sorted(c, key=order.__getitem__), builds) for c in nx.weakly_connected_components(sub)]
        else:
            groups = [[u] for u in units_of(names, builds)]
        total = sum(weights.get(unit_package(u), 1) for g in groups for u in g)
        count = max(1, min(spec.runners, len(groups), math.ceil(total / max(1, spec.per_shard))))
        bins = _split([(g, [cost(u) for u in g]) for g in groups], count, spec.cores)
        rank = {u: i for i, u in enumerate(units_of(plan.affected, builds))}
        shards = [sorted((u for g in b for u in g), key=rank.__getitem__) for b in bins]
        shards.sort(key=lambda s: rank[s[0]])
        plan.stages.append([Shard(f"s{stage}-{i}", stage, tuple(s)) for i, s in enumerate(shards)])
    return _with_inputs(plan, graph)


def _with_inputs(plan: ShardPlan, graph: RecipeGraph) -> ShardPlan:
    """Each shard's inputs: the shards of earlier stages owning a unit of one of its packages' ancestors
    (dependencies, direct or not: a test environment installs them all, a failure of any blocks it)."""
    owners: dict[str, list[Shard]] = {}
    for s in plan.shards:
        for n in s.names:
            owners.setdefault(n, []).append(s)
    for stage in plan.stages:
        for i, s in enumerate(stage):
            deps = {a for n in s.names for a in graph.ancestors(n)}
            ids = sorted({o.id for d in deps for o in owners.get(d, ()) if o.stage < s.stage},
                         key=lambda x: tuple(int(v) for v in x[1:].split("-")))
            stage[i] = Shard(s.id, s.stage, s.packages, tuple(ids))
    return plan
