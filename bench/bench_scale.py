"""Benchmark and cost model of the fan-out (docs/scale-out.md): how long the PR gate, promote and release
day take for N packages on K runners per stage.

    python bench/bench_scale.py [--keep DIR] [--table-only]

1. **Per-unit costs, measured on this machine** (the sandbox world, fresh clones): ``build`` (one noarch
   package's build) and ``target`` (one test target: creating its test environment and running its
   tests), from `build metrickit` with one and with six test targets; ``job`` (a process start); and on
   bench/gen_recipes.py's 300 recipes (:func:`measure_render`) ``render`` (per recipe: `fanout plan
   --all` with an empty render cache, as the plan job runs it) and ``read`` (the same with the plan job's
   renders taken, as every other job runs it), each less a process start.
2. **The model** (:func:`predict`, :func:`timeline`): a run is the plan job, then each stage's shards in
   parallel (a stage lasts as long as its slowest shard: GitHub starts a stage when every shard of the
   previous one is done), then the fan-in. The shards are the real ones
   (`conda_distro.fanout.plan.make_shards`, packed by its static estimates) over the run's dependency graph, a compiled package's builds
   being units of their own. A shard costs a job plus its units' steps (a noarch package's build and
   test targets, or one compiled build and its share of the targets; each package's own costs where a
   run's logs measured them, ``Costs.packages``, cpu and cuda apart) scheduled on the runner's cores
   (:func:`shard_work`; ``Runner.cores``, the shard's `--jobs "$(nproc)"`). On GitHub a job also costs the runner's
   start, checkout + setup-python + the venv restored from the cache, and its artifacts' transfer
   (:class:`Runner`, documented parameters, not measured here; download-artifact fetches 5 at a time):
   the plan job renders and uploads the renders; a shard downloads the renders and the bundles of its
   inputs (the earlier shards holding its dependencies), reads the recipes from the renders, and
   uploads its own bundle; the fan-in reads the renders too (a PR's check-pr renders itself).
3. **Validation** (:class:`Emulated`, :func:`validate`): the PR gate of the sandbox world (one release, one
   variant; every root recipe changed: all 11 packages over 3 levels) run job by job through
   tests/support/ghworkflow.py (pr.yml as GitHub runs it: plan matrices, needs order, a fresh clone per
   job, the artifacts the YAML names) at K = 1, 2, 4, after a warm-up run, ``--repeat`` runs per K
   interleaved. Jobs run one after another on this machine, each measured from its first step, so the
   measured wall time is the needs graph's critical path over the measured job times (a stage: its
   slowest shard). The model of that: the plan and fan-in jobs' times, a shard job's fixed cost and each
   package's own cost, fitted by least squares on the runs of the other K (leave one K out). Printed:
   predicted vs measured (median), the error, every run (the spread) and the load (target: within 25 %).
4. **The table**: N = 50, 300, 1,000 packages (bench/gen_recipes.py's dependency graph and a layered one,
   20 % compiled, on dependency levels 0 and 1 as conda-forge's compiled feedstocks are: :func:`place_compiled`;
   a compiled build on the runner's cores: :func:`compiled_build_time`),
   K = 1, 5, 20, 50 runners per stage, with GitHub runner overheads: the PR gate (a change to the package
   whose affected set is the 90th percentile), promote (the same change, plus upload and promote) and
   release day (release-sweep.yml to its verdicts: every package against the new release, two targets
   each, compiled packages built for the new minor × 2 variants; nothing uploaded), and release day with
   one build or test at a time per shard (as before the workflows passed `--jobs`). Target: release day
   for 300 packages under an hour at K <= 20. ``--real-costs FILE`` (``{"costs": {"build", "target",
   "target_cpu", "build_fixed", "compiled_build", "compiled_build_cuda"}}``): the table with the real
   world's generic costs instead of the stand-ins'.
5. The real world at K = 1: bench/bench_scale_real.py.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from conda_distro.fanout.plan import (  # noqa: E402
    COMPILED_WEIGHT,
    RUNNER_CORES,
    STATIC_COSTS,
    Shard,
    ShardPlan,
    ShardSpec,
    make_shards,
    unit_package,
    units_of,
)
from conda_distro.graph import RecipeGraph  # noqa: E402
from conda_distro.util.scratch import new_scratch  # noqa: E402

CD = Path(sys.executable).parent / "conda-distro"


@dataclass(frozen=True)
class Costs:
    """Per-unit costs in seconds."""

    render: float  # one recipe read and rendered (an empty render cache: the plan job)
    build: float  # one noarch package built
    target: float  # one test target: its test environment created, its tests run
    job: float  # a job's fixed cost besides rendering (here: fresh clone and process start)
    build_fixed: float = 0.0  # a shard's build command before its first package (plan, release views, sandbox)
    compiled_build: float = 300.0  # one compiled build (per minor x variant); PARAMETER: no compiler here
    solve: float = 2.0  # the fan-in's solve, per release x variant; PARAMETER (small next to the rest)
    read: float | None = None  # one recipe read with the plan job's renders taken (None: as ``render``)
    # a cpu test target, where it differs from a cuda one (None: as ``target``). Real PyTorch: a cpu torch
    # is ~0.2 GB, a cuda one with its nvidia runtime ~3 GB to install into a target's test environments
    target_cpu: float | None = None
    compiled_build_cuda: float | None = None  # one compiled cuda build (None: as ``compiled_build``)
    # a compiled build on a runner's cores (:func:`compiled_build_time`): of its one-core time, the share
    # that is compiles able to run side by side, and how many can (MEASURED on pytorch_scatter's and
    # torchsort's builds, docs/scale-out.md: their compiles run one at a time whatever the cores or
    # MAX_JOBS, so a 4-core runner builds them no faster than one core: width 1)
    compiled_parallel: float = 0.0
    compiled_width: int = 1
    # MEASURED, per package, where a run's logs give them (:func:`bench_scale_real.log_costs`): ``build``
    # (noarch), ``build_cpu`` / ``build_cuda`` (a compiled package's builds), ``cpu`` / ``cuda`` (one test
    # target: its test environments created, its tests run); a package or key without one takes the
    # generic costs above (the generated packages of the table always do)
    packages: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def read_cached(self) -> float:
        return self.render if self.read is None else self.read


@dataclass(frozen=True)
class Runner:
    """What a GitHub-hosted job costs besides the work (PARAMETERS, from GitHub's documentation and
    typical runs; not measured here): queueing and starting the VM, checkout + setup-python + pip install,
    and moving artifacts (per MB, both ways, plus a fixed cost per artifact)."""

    start: float = 20.0
    install: float = 45.0  # checkout + setup-python + a fresh `pip install -e .`
    per_artifact: float = 3.0
    mb_per_s: float = 50.0
    mb_per_package: float = 2.0  # a noarch package with its results and logs; compiled: x10
    # checkout + setup-python + the venv restored from actions/cache (keyed by pyproject.toml; ~150 MB)
    install_cached: float = 10.0
    # actions/download-artifact v4 fetches the artifacts a pattern matches 5 at a time (its
    # PARALLEL_DOWNLOADS): n bundles cost ceil(n / 5) x per_artifact plus their bytes
    parallel_downloads: int = 5
    # the runner's cores: a shard job runs `fanout shard --jobs "$(nproc)"`, so that many builds and test
    # targets at once (GitHub's standard Linux runner for public repositories: 4)
    cores: int = 4
    renders_mb: float = 2.0  # the plan job's renders (packed models of the distribution), per 1,000 recipes

    def download(self, n: int, mb: float) -> float:
        return self.per_artifact * -(-n // self.parallel_downloads) + mb / self.mb_per_s


LOCAL = Runner(start=0.0, install=0.0, per_artifact=0.0, mb_per_s=1e9, mb_per_package=0.0, install_cached=0.0,
               cores=1)

#: the workflows before they passed the runner's cores: a shard job ran one build or test at a time (for
#: the "1 core" column)
ONE_CORE = Runner(cores=1)


@dataclass
class Run:
    """One fanned-out run: its graph, affected packages, targets and builds per package."""

    graph: RecipeGraph
    affected: list[str]
    compiled: set[str]
    targets: int  # test targets per package
    compiled_builds: int  # builds of a compiled package (minors x variants)
    n_recipes: int  # recipes every job reads (the whole distribution)
    promote: bool = False
    per_artifact_promote: float = 1.0  # upload + promote, per artifact (PARAMETER)
    notes: list[str] = field(default_factory=list)
    cpu_targets: int = 0  # of ``targets``, how many are cpu (costing ``Costs.target_cpu`` each)
    # per package where it differs from ``targets`` / ``cpu_targets``: (cpu targets, cuda targets)
    target_split: dict[str, tuple[int, int]] = field(default_factory=dict)


def compiled_build_time(one_core: float, cores: int, parallel: float, width: int) -> float:
    """A compiled build's time on ``cores`` cores from its time with one compile at a time: a serial part
    (its environments, the build backend's own steps, linking, packaging; ``1 - parallel`` of it) plus its
    compiles (``parallel`` of it), at most ``min(cores, width)`` of them side by side. ``width`` is what the
    recipe's build backend allows: setuptools' own compiler calls (torch's BuildExtension with
    ``use_ninja=False``, as pytorch_scatter's setup.py sets) run one file at a time whatever MAX_JOBS says;
    with ninja, one extension's files run MAX_JOBS at a time, but extensions still one after another, so
    ``width`` is at most the files of one extension (torchsort: one file per extension)."""
    return one_core * (1 - parallel) + one_core * parallel / max(1, min(cores, width))


def unit_steps(unit: str, run: Run, c: Costs, cores: int = 1) -> tuple[float, list[float]]:
    """One unit of a shard as its steps: (its build, its test targets, each run after the build). A
    noarch package: its build and every target; one build of a compiled package (``NAME@build=i``: even
    ``i`` cpu, odd cuda, as rattler-build renders cpu/cuda pairs) its compiled build and its share of the
    package's targets. Each cost is the package's own where measured (``Costs.packages``), else the generic
    one. A target costs the same whatever number of test environments the recipe's ``tests:`` make: on
    the real world a target's later environments link from the package cache its first one filled
    (docs/scale-out.md)."""
    name = unit_package(unit)
    own = c.packages.get(name, {})
    cuda_t = own.get("cuda", c.target)
    cpu_t = own.get("cpu", c.target if c.target_cpu is None else c.target_cpu)
    if name in run.compiled:
        is_cuda = unit.rsplit("=", 1)[-1].isdigit() and int(unit.rsplit("=", 1)[-1]) % 2 == 1
        build = own.get("build_cuda", c.compiled_build if c.compiled_build_cuda is None else c.compiled_build_cuda) \
            if is_cuda else own.get("build_cpu", c.compiled_build)
        build = compiled_build_time(build, cores, c.compiled_parallel, c.compiled_width)
        return build, [cuda_t if is_cuda else cpu_t] * max(1, run.targets // max(1, run.compiled_builds))
    cpu, cuda = run.target_split.get(name, (min(run.cpu_targets, run.targets), run.targets - min(run.cpu_targets, run.targets)))
    return own.get("build", c.build), [cpu_t] * cpu + [cuda_t] * cuda


def unit_cost(unit: str, run: Run, c: Costs) -> float:
    """One unit's work on one core: its build and its test targets in series (:func:`unit_steps`)."""
    build, tests = unit_steps(unit, run, c)
    return build + sum(tests)


def shard_work(units: list[str], run: Run, c: Costs, cores: int = 1) -> float:
    """A shard's work on ``cores`` cores, as `build --jobs` schedules it: every build can start at once
    (a stage's units are of one level; the folded last stage's dependencies inside a shard are not
    modelled), a unit's test targets once its build is done, each step on the first free core, the
    longest ready step first. One core: the sum of the steps. Steps are taken to run as fast side by
    side as alone (a runner's cores are its own; measured on this shared machine they were not). A
    compiled build takes :func:`compiled_build_time` on the runner's cores and is counted on one core
    (with ``Costs.compiled_width`` > 1 that is optimistic when other steps run beside it)."""
    return schedule([unit_steps(u, run, c, cores) for u in units], cores)


def schedule(steps: list[tuple[float, list[float]]], cores: int, waits: list[set[int]] | None = None,
             rank: list[int] | None = None) -> float:
    """The wall time of units' steps (each unit: its build, then its test targets) on ``cores`` cores, as
    `build --jobs` runs them: each step on the first free core, a unit's test targets once its build is
    done; among the ready steps, the one of the highest ``rank`` first (the engine's longest chain of
    dependents), then the longest. ``waits``: per unit, the units whose every step must be done before
    its build starts (the executor starts a package once its dependencies are built and tested); None:
    every build ready at once. One core: the sum of the steps."""
    if cores <= 1:
        return sum(b + sum(t) for b, t in steps)
    waits = [set(w) for w in waits] if waits is not None else [set() for _ in steps]
    needs = [set(w) for w in waits]
    rank = rank or [0] * len(steps)
    free = [0.0] * cores
    left = [1 + len(t) for _, t in steps]  # steps of a unit not placed yet
    done = [0.0] * len(steps)
    ready = [(0.0, b, i, True) for i, (b, _) in enumerate(steps) if not waits[i]]  # (ready at, s, unit, build)
    end = 0.0
    while ready:
        core = min(range(cores), key=free.__getitem__)
        now = max(free[core], min(r for r, *_ in ready))
        pick = max((j for j, (r, *_) in enumerate(ready) if r <= now), key=lambda j: (rank[ready[j][2]], ready[j][1]))
        _, secs, who, build = ready.pop(pick)
        free[core] = now + secs
        end, done[who], left[who] = max(end, free[core]), max(done[who], free[core]), left[who] - 1
        if build:
            ready += [(free[core], t, who, False) for t in steps[who][1]]
        if left[who] == 0:  # the unit is done: its dependents whose every dependency is done can build
            for i, w in enumerate(waits):
                if who in w:
                    w.discard(who)
                    if not w:
                        ready.append((max(done[d] for d in needs[i]), steps[i][0], i, True))
    return end


def shards_of(run: Run, k: int, per_shard: int = 4, stages: int = 8, cores: int = RUNNER_CORES) -> ShardPlan:
    """The real shards (conda_distro.fanout.plan.make_shards) of ``run`` at ``k`` runners per stage: a
    compiled package with several builds is one unit per build, packed by the planner's static estimates
    (:func:`planner_costs`) onto shards of ``cores`` cores, as the workflows' plan job packs them (for
    the runner's 4 cores; ``cores`` 1: the "1 core" column's shards, as a planner packing for one core
    would cut them)."""
    weights = {n: COMPILED_WEIGHT for n in run.compiled}
    builds = {n: [f"build={i}" for i in range(run.compiled_builds)] for n in run.compiled} if run.compiled_builds > 1 else {}
    return make_shards(run.graph, run.affected, weights, ShardSpec(runners=k, per_shard=per_shard, stages=stages, cores=cores), builds,
                       planner_costs(run, builds))


def planner_costs(run: Run, builds: dict[str, list[str]]) -> dict[str, float]:
    """What the plan job's :func:`conda_distro.fanout.fanin.unit_costs` would estimate for ``run``'s units
    (``STATIC_COSTS``): a noarch package its build and its cpu and cuda targets; a compiled build
    (``build=i``: even ``i`` cpu, odd cuda) its build and its share of the package's targets."""
    out: dict[str, float] = {}
    for u in units_of(run.affected, builds):
        name = unit_package(u)
        if name in run.compiled:
            cuda = run.compiled_builds > 1 and int(u.rsplit("=", 1)[-1]) % 2 == 1
            share = max(1, run.targets // max(1, run.compiled_builds))
            out[u] = STATIC_COSTS.estimate(True, cuda, 0 if cuda else share, share if cuda else 0)
        else:
            cpu, cuda_t = run.target_split.get(name, (min(run.cpu_targets, run.targets),
                                                       run.targets - min(run.cpu_targets, run.targets)))
            out[u] = STATIC_COSTS.estimate(False, cpu_tests=cpu, cuda_tests=cuda_t)
    return out


def predict(run: Run, k: int, c: Costs, r: Runner, per_shard: int = 4, stages: int = 8,
            renders: bool = True) -> float:
    """Wall time of ``run`` with at most ``k`` shards per stage: the sum of :func:`timeline`."""
    return sum(t for _, t in timeline(run, k, c, r, per_shard, stages, renders))


def timeline(run: Run, k: int, c: Costs, r: Runner, per_shard: int = 4, stages: int = 8,
             renders: bool = True) -> list[tuple[str, float]]:
    """Wall time of ``run`` with at most ``k`` shards per stage (module docstring, point 2), as the
    workflows run it: the plan job installs (venv from the cache), renders every recipe and uploads the
    renders; every shard and fan-in job installs the same way, downloads the renders and its inputs'
    bundles (5 at a time) and reads the recipes from the renders it took (``renders=False``: it renders
    them itself, as before). A PR's fan-in (`check-pr --from-shards`) renders itself."""
    plan = shards_of(run, k, per_shard, stages, r.cores)
    base = r.start + r.install_cached + c.job
    renders_mb = r.renders_mb * run.n_recipes / 1000
    read = (c.read_cached if renders else c.render) * run.n_recipes + (r.download(1, renders_mb) if renders else 0.0)
    mb = {u: r.mb_per_package * (10 if unit_package(u) in run.compiled else 1) for s in plan.shards for u in s.packages}
    out = [("plan", base + c.render * run.n_recipes + (r.per_artifact + renders_mb / r.mb_per_s if renders else 0.0))]
    by_id = {s.id: s for s in plan.shards}

    def down(s: Shard) -> float:  # the bundles of its inputs (the shards holding its dependencies)
        ins = [by_id[i] for i in s.inputs]
        return r.download(len(ins), sum(mb[u] for x in ins for u in x.packages)) if ins else 0.0

    for i, stage in enumerate(plan.stages):
        shard_times = [base + read + down(s) + c.build_fixed + shard_work(s.packages, run, c, r.cores)
                       + r.per_artifact + sum(mb[u] for u in s.packages) / r.mb_per_s for s in stage]
        out.append((f"stage {i}", max(shard_times)))
    fanin_read = read if run.promote else c.render * run.n_recipes  # PR: check-pr renders itself
    fanin = base + fanin_read + (r.download(len(plan.shards), sum(mb.values())) if plan.shards else 0.0) \
        + c.solve * run.targets
    if run.promote:
        fanin += run.per_artifact_promote * sum(run.compiled_builds if n in run.compiled else 1 for n in run.affected)
    return [*out, ("fan-in", fanin)]


def predict_variant_pools(run: Run, k: int, c: Costs, r: Runner) -> float:
    """WHAT-IF, not what the workflows do: release day with each stage's cuda builds (a compiled
    package's second build) on shard jobs of their own, on a second pool of up to ``k`` runners (GPU
    runners, where their tests belong), next to the cpu shards of the same stage. A stage then lasts as
    long as the slower of its two pools."""
    cuda = {u for s in shards_of(run, k).shards for u in s.packages if u.endswith(":build=1")}
    plan = shards_of(run, k)
    base = r.start + r.install_cached + c.job + c.read_cached * run.n_recipes + r.download(1, r.renders_mb * run.n_recipes / 1000)
    total = r.start + r.install_cached + c.job + c.render * run.n_recipes + r.per_artifact
    for stage in plan.stages:
        units = [u for s in stage for u in s.packages]
        pools = [[u for u in units if u not in cuda], [u for u in units if u in cuda]]
        worst = 0.0
        for pool in pools:
            if not pool:
                continue
            bins: list[list[str]] = [[] for _ in range(min(k, len(pool)))]
            load = [0.0] * len(bins)
            for u in sorted(pool, key=lambda u: -unit_cost(u, run, c)):  # longest first onto the least loaded
                i = load.index(min(load))
                bins[i].append(u)
                load[i] += unit_cost(u, run, c)
            worst = max(worst, max(shard_work(b, run, c, r.cores) for b in bins))
        ins = max(len(s.inputs) for s in stage)
        total += base + r.download(ins, 0.0) + c.build_fixed + worst + r.per_artifact
    n_shards = len(plan.shards) + sum(1 for st in plan.stages if any(u in cuda for s in st for u in s.packages)) * k
    return total + base + r.download(n_shards, 0.0) + c.solve * run.targets


def stage_breakdown(run: Run, k: int, c: Costs, cores: int = 1) -> list[tuple[int, int, int, float, int]]:
    """Per stage: shards, units, the slowest shard's work (its units on ``cores``), and the most inputs a
    shard has."""
    plan = shards_of(run, k, cores=cores)
    return [(i, len(st), sum(len(s.packages) for s in st), max(shard_work(s.packages, run, c, cores) for s in st),
             max(len(s.inputs) for s in st)) for i, st in enumerate(plan.stages)]


@dataclass(frozen=True)
class Emulated:
    """The model of a run through the workflow emulator (tests/support/ghworkflow.py), whose jobs run one
    after another on this machine, each measured from its first step (its fresh clone is not counted:
    on GitHub, checkout is part of the runner's install); the wall time is the needs graph's critical
    path, a stage lasting as long as its slowest shard job. MEASURED on other runs: the plan job's and
    the fan-in's times, and a shard job's fixed cost ``fixed`` and cost per package that it builds or
    tests, ``per_package`` (least squares over their shard jobs; a package blocked by a failed
    dependency is planned and recorded but neither built nor tested: no work, as the runs' reports say)."""

    plan: float
    fanin: float
    fixed: float
    per_package: float
    blocked: frozenset[str] = frozenset()  # packages a failed dependency blocks in this world: no work
    cost: dict[str, float] = field(default_factory=dict)  # each package's own cost, where it was fitted
    per_input: float = 0.0  # a shard job's cost per input bundle it checks and takes
    fanin_per_shard: float = 0.0  # the fan-in's cost per bundle it checks and merges (``fanin``: the rest)

    def predict(self, run: Run, k: int) -> float:
        shards = shards_of(run, k, per_shard=1)
        return self.plan + sum(max(self.fixed + self.per_input * len(s.inputs)
                                   + sum(self.cost.get(p, self.per_package) for p in set(s.packages) - self.blocked)
                                   for s in stage) for stage in shards.stages) \
            + self.fanin + self.fanin_per_shard * len(shards.shards)


# --- measuring on this machine


def _sh(argv: list[str], cwd: Path, timeout: float = 3600) -> float:
    t = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return time.monotonic() - t


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def make_world(where: Path) -> Path:
    from conda_distro.sandbox.world import SandboxOptions, create_sandbox

    world = where / "world"
    if not (world / ".git").is_dir():
        create_sandbox(SandboxOptions(path=world, force=True))
    return world


def measure_costs(world: Path, work: Path) -> Costs:
    """Each cost from fresh clones, after a warm-up build (the package cache filled, as on a runner that
    restored its cache): start, `fanout plan --all` (render), `build hookprofiler --dry-run` (the build
    command's own planning), then hookprofiler built with one test target and with six."""
    from support.ghworkflow import clone

    n = len(list((world / "recipes").iterdir()))
    _sh([str(CD), "build", "metrickit", "--pytorch", "2.5.1", "--variant", "cpu"], clone(world, "main", work / "warm"))

    def timed(name: str, *argv: str) -> float:
        t0 = time.monotonic()
        ws = clone(world, "main", work / name)
        t_clone = time.monotonic() - t0
        return t_clone + _sh([str(CD), *argv], ws)

    t_start = timed("start", "--version")
    t_plan = timed("plan", "fanout", "plan", "--all")
    t_dry = timed("dry", "build", "hookprofiler", "--dry-run")
    t_one = timed("one", "build", "hookprofiler", "--pytorch", "2.5.1", "--variant", "cpu")
    t_six = timed("six", "build", "hookprofiler")
    target = max(0.1, (t_six - t_one) / 5)
    return Costs(render=max(0.0, t_plan - t_start) / n, build=max(0.1, t_one - t_dry - target), target=target,
                 job=t_start, build_fixed=max(0.0, t_dry - t_plan))


def measure_render(work: Path, n: int = 300) -> tuple[float, float]:
    """Per recipe, on bench/gen_recipes.py's ``n`` recipes (a git checkout): `fanout plan --all` with an
    empty render cache (the plan job: rendering every recipe, then writing the renders with
    ``--renders-out``), and with those renders taken into another empty cache (a shard or fan-in job),
    each less a process start (`--version`). Medians of three."""
    from gen_recipes import main as gen

    dist = work / f"gen{n}"
    if not (dist / ".git").is_dir():
        shutil.rmtree(dist, ignore_errors=True)
        gen([str(n), str(dist)])
        _git(dist, "init", "-q")
        _git(dist, "add", "-A")
        _git(dist, "commit", "-qm", "generated")

    def timed(cache: Path, *argv: str) -> float:
        shutil.rmtree(cache, ignore_errors=True)
        t = time.monotonic()
        subprocess.run([str(CD), *argv], cwd=dist, env={**os.environ, "CONDA_DISTRO_CACHE": str(cache)},
                       capture_output=True, check=True, timeout=900)
        return time.monotonic() - t

    cold, taken, start = [], [], []
    for _ in range(3):
        start.append(timed(work / "c-start", "--version"))
        cold.append(timed(work / "c-plan", "fanout", "plan", "--all", "--renders-out", str(work / "renders")))
        shutil.rmtree(work / "c-taken", ignore_errors=True)
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from conda_distro.fanout.renders "
                        "import take_renders; take_renders(Path(sys.argv[1]), 'local', Path('.'))", str(work / "renders")],
                       cwd=dist, env={**os.environ, "CONDA_DISTRO_CACHE": str(work / "c-taken")}, check=True, timeout=600)
        t = time.monotonic()
        subprocess.run([str(CD), "fanout", "plan", "--all"], cwd=dist, env={**os.environ, "CONDA_DISTRO_CACHE": str(work / "c-taken")},
                       capture_output=True, check=True, timeout=900)
        taken.append(time.monotonic() - t)
    s0 = statistics.median(start)
    return max(0.0, statistics.median(cold) - s0) / n, max(0.0, statistics.median(taken) - s0) / n


def cut_world(world: Path, work: Path) -> tuple[Path, str]:
    """The world at one release and one variant, and a branch changing every root recipe."""
    w = work / "cut"
    if w.exists():
        shutil.rmtree(w)
    from support.worlds import copy_world

    copy_world(world, w)
    text = (w / "distro.yaml").read_text()
    text = text.replace('releases: ["2.4.1", "2.5.1", "2.6.0"]', 'releases: ["2.5.1"]').replace("variants: [cpu, cuda]", "variants: [cpu]")
    (w / "distro.yaml").write_text(text)
    _git(w, "commit", "-qam", "one release, one variant")
    _git(w, "checkout", "-q", "-b", "change")
    graph = json.loads(subprocess.run([str(CD), "graph", "--format", "json"], cwd=w, capture_output=True, text=True,
                                      check=True).stdout)
    for name in graph["levels"][0]:
        with (w / "recipes" / name / "recipe.yaml").open("a") as f:
            f.write("# changed\n")
    _git(w, "commit", "-qam", "change every root")
    _git(w, "checkout", "-q", "main")
    return w, "change"


def measured_wall(wf_run) -> float:
    """The needs graph's critical path over the measured job times (a job: its slowest matrix run)."""
    from support.ghrunner import load_workflow

    doc = load_workflow(wf_run.workflow)
    took: dict[str, float] = {}
    for name, start, end in wf_run.timeline:
        job = name.rsplit("-", 1)[0]
        took[job] = max(took.get(job, 0.0), end - start)
    finish: dict[str, float] = {}
    for job_id in nx.topological_sort(nx.DiGraph([(n, j) for j, jd in doc["jobs"].items()
                                                  for n in ([jd["needs"]] if isinstance(jd.get("needs"), str)
                                                            else jd.get("needs") or [])] + [(j, j + "#") for j in doc["jobs"]])):
        if job_id.endswith("#") or job_id not in doc["jobs"]:
            continue
        jd = doc["jobs"][job_id]
        needs = [jd["needs"]] if isinstance(jd.get("needs"), str) else jd.get("needs") or []
        finish[job_id] = max((finish.get(n, 0.0) for n in needs), default=0.0) + took.get(job_id, 0.0)
    return max(finish.values())


def _raw_run(k: int, wf, wall: float, load: float) -> dict:
    """What one validation run measured, job run by job run (kept in ``measured.json`` to refit offline)."""
    jobs = []
    for job_id, res in wf.results.items():
        for i, (entry, _run, ws) in enumerate(res.runs):
            span = next(((s, e) for n, s, e in wf.timeline if n == f"{job_id}-{i}"), (0.0, 0.0))
            report = ws / "shard-report.json"
            builds = json.loads(report.read_text()).get("builds", []) if report.is_file() else []
            jobs.append({"job": job_id, "i": i, "packages": str(entry.get("packages", "")).split(),
                         "seconds": span[1] - span[0],
                         # packages neither built nor tested here (a dependency failed): planned, no work
                         "blocked": sorted({b["name"] for b in builds} - {b["name"] for b in builds
                                                                          if b["status"] != "blocked"})})
    return {"k": k, "wall": wall, "load_before": load, "load_after": os.getloadavg()[0], "jobs": jobs}


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares ``seconds = fixed + per_package * packages`` over shard jobs (packages, seconds)."""
    if len({n for n, _ in points}) < 2:
        n, t = points[0]
        return 0.0, t / max(1, n)
    slope, intercept = statistics.linear_regression([float(n) for n, _ in points], [t for _, t in points])
    return max(0.0, intercept), max(0.0, slope)


def validate(world: Path, work: Path, ks: tuple[int, ...], warmup: bool = True,
             measured: Path | None = None, repeat: int = 1, bundles: bool = False) -> tuple[list[tuple], Emulated]:
    """pr.yml through the emulator at each K (after a warm-up run, discarded: the package cache and the
    mirror filled, as on runners that restore their cache). Each run is predicted by the model fitted on
    runs of the *other* K (leave one K out: the plan and fan-in jobs' mean times, a shard job's fixed and
    per-package cost fitted over their shard jobs), so no prediction has seen the run it predicts. Rows:
    (K, predicted, measured: the median of its ``repeat`` runs, lowest load before / highest after, each
    run's (wall, load before, load after)); and the model fitted on every run.
    ``measured``: the runs of an earlier invocation (its measured.json), refitted without running."""
    from support.ghworkflow import WorkflowRun

    from conda_distro.distribution import load_distribution

    w, ref = cut_world(world, work)
    dist = load_distribution(w).readable()
    graph = RecipeGraph.from_recipes(dist.recipes)
    run = Run(graph, graph.order(), {n for n, rec in dist.recipes.items() if not rec.noarch}, targets=1,
              compiled_builds=1, n_recipes=len(dist.recipes))
    expressions = {"github.base_ref": "main", "github.event.pull_request.number": "7",
                   "github.event.pull_request.head.sha": "a" * 40, "github.server_url": "https://github.com",
                   "github.repository": "owner/repo", "github.run_id": "99", "github.run_attempt": "1"}
    if measured is not None:
        raw = json.loads(measured.read_text())
    else:
        raw = []
        for i, k in enumerate(([ks[0]] if warmup else []) + list(ks) * repeat):  # interleaved: load drift hits every K
            load = os.getloadavg()[0]
            wf = WorkflowRun(ROOT / ".github/workflows/pr.yml", w, ref, work / f"k{k}-{i}", expressions,
                             env={"FANOUT_RUNNERS": str(k), "FANOUT_PER_SHARD": "1"}).run()
            bad = [j for j, res in wf.results.items() if j.startswith("level-") and res.result == "failure"]
            if bad or wf.results["check-pr"].result == "skipped" or not wf.results["level-0"].runs:
                raise RuntimeError(f"K={k}: the run did not complete: {bad or wf.results}")
            raw.append({**_raw_run(k, wf, measured_wall(wf), load), "warmup": warmup and i == 0})
            (work / "measured.json").write_text(json.dumps(raw, indent=1))
            shutil.rmtree(work / f"k{k}-{i}", ignore_errors=True)
    runs = [r for r in raw if not r.get("warmup")]
    for r in runs:  # each shard job's input bundles, as the plan of its K gives them
        inputs = {frozenset(s.packages): len(s.inputs) for s in shards_of(run, r["k"], per_shard=1).shards}
        for j in r["jobs"]:
            j.setdefault("inputs", inputs.get(frozenset(j["packages"]), 0))
    rows = []
    for k in dict.fromkeys(r["k"] for r in runs):  # leave one K out: each K predicted by the model of the others
        mine = [r for r in runs if r["k"] == k]
        model = calibrate([r for r in runs if r["k"] != k] or mine, bundles=bundles)
        rows.append((k, model.predict(run, k), statistics.median(r["wall"] for r in mine),
                     min(r["load_before"] for r in mine), max(r["load_after"] for r in mine),
                     [(r["wall"], r["load_before"], r["load_after"]) for r in mine]))
    model = calibrate(runs, bundles=bundles)
    print(f"fitted on every run: plan job {model.plan:.1f} s, fan-in {model.fanin:.1f} s + {model.fanin_per_shard:.1f} s "
          f"per bundle, a shard job {model.fixed:.1f} s + {model.per_input:.1f} s per input bundle + each package's "
          f"cost (mean {model.per_package:.1f} s) ({len(runs)} runs)")
    return rows, model


def _solve(rows: list[list[float]], y: list[float], ridge: float = 1e-6) -> list[float]:
    """Least squares ``rows · x ≈ y`` by the normal equations (a few unknowns; a tiny ridge keeps a
    column no run separates solvable)."""
    n = len(rows[0])
    m = [[sum(a[i] * a[j] for a in rows) + (ridge if i == j else 0.0) for j in range(n)]
         + [sum(a[i] * t for a, t in zip(rows, y, strict=True))] for i in range(n)]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[piv] = m[piv], m[c]
        for r in range(n):
            if r != c and m[c][c]:
                f = m[r][c] / m[c][c]
                m[r] = [a - f * b for a, b in zip(m[r], m[c], strict=True)]
    return [m[i][n] / m[i][i] if m[i][i] else 0.0 for i in range(n)]


def calibrate(runs: list[dict], bundles: bool = False) -> Emulated:
    """The emulator's model from measured runs: the plan job's mean time; a shard job's fixed cost and
    **each package's own cost** (least squares over all shard jobs: a job's time = fixed + the costs of
    the packages it builds or tests; packages differ several-fold, and the shard holding the heavy ones
    sets its stage's time, which one mean cost per package cannot say), and that mean cost for packages
    no run measured. ``bundles``: also what the bundles cost, which grows with K: a shard job's cost per
    input bundle it checks and takes (a column of the same least squares) and the fan-in's cost per
    bundle it checks and merges (a line over the runs' fan-in times and shard counts); without it the
    fan-in is its mean time. On the 2026-11-27 runs (at most 6 bundles) both bundle costs fitted to 0 and
    the model without them predicted better, so it is the default; the validation prints both."""
    jobs = [j for r in runs for j in r["jobs"]]
    shard_jobs = [j for j in jobs if j["job"].startswith("level-")]
    work = [sorted(set(j["packages"]) - set(j.get("blocked", ()))) for j in shard_jobs]
    _fixed, per_package = fit([(len(w), j["seconds"]) for w, j in zip(work, shard_jobs, strict=True)])
    names = sorted({p for w in work for p in w})
    extra = [[float(j.get("inputs", 0))] if bundles else [] for j in shard_jobs]
    x = _solve([[1.0, *e, *(1.0 if n in w else 0.0 for n in names)] for w, e in zip(work, extra, strict=True)],
               [j["seconds"] for j in shard_jobs])
    fanin_points = [(sum(1 for j in r["jobs"] if j["job"].startswith("level-")), j["seconds"])
                    for r in runs for j in r["jobs"] if j["job"] == "check-pr"]
    fanin, per_bundle = fit(fanin_points) if bundles else (statistics.mean(t for _, t in fanin_points), 0.0)
    return Emulated(plan=statistics.mean(j["seconds"] for j in jobs if j["job"] == "plan"),
                    fanin=fanin, fanin_per_shard=per_bundle,
                    fixed=max(0.0, x[0]), per_package=per_package, per_input=max(0.0, x[1]) if bundles else 0.0,
                    blocked=frozenset(p for j in jobs for p in j.get("blocked", ())),
                    cost={n: max(0.0, c) for n, c in zip(names, x[1 + bool(bundles):], strict=True)})


# --- the table


def generated_graph(n: int, seed: int = 0) -> RecipeGraph:
    """bench/gen_recipes.py's dependency graph for ``n`` packages (its random numbers, in its order)."""
    from gen_recipes import recipe_text

    rng = random.Random(seed)
    names = [f"pkg-{i:05d}" for i in range(n)]
    g: nx.DiGraph[str] = nx.DiGraph()
    g.add_nodes_from(names)
    for i, name in enumerate(names):
        window = names[max(0, i - 50):i]
        deps_on = sorted(rng.sample(window, min(len(window), rng.randint(0, 3)))) if window else []
        recipe_text(i, name, deps_on, rng)  # keeps the random numbers in step with gen_recipes
        g.add_edges_from((d, name) for d in deps_on)
    return RecipeGraph(g)


def layered_graph(n: int, depth: int = 6, seed: int = 0) -> RecipeGraph:
    """A distribution shaped like an ecosystem: ``depth`` levels, each half the size of the one below
    (most packages depend on pytorch and libraries outside the distribution alone: this distribution's
    18 recipes sit 13 / 4 / 1 on levels 0 / 1 / 2), each package depending on 1-3 packages of the levels
    below it."""
    rng = random.Random(seed)
    sizes = [max(1, round(n * 2 ** -(i + 1))) for i in range(depth)]
    sizes[0] += n - sum(sizes)
    levels: list[list[str]] = []
    g: nx.DiGraph[str] = nx.DiGraph()
    count = 0
    for size in sizes:  # roots first: the largest level
        names = [f"pkg-{count + j:05d}" for j in range(size)]
        count += size
        g.add_nodes_from(names)
        below = [x for lv in levels for x in lv]
        for name in names:
            if below:
                g.add_edge(rng.choice(levels[-1]), name)  # one in the level just below: its level is i
                for d in rng.sample(below, min(len(below), rng.randint(0, 2))):
                    g.add_edge(d, name)
        levels.append(names)
    return RecipeGraph(g)


SHAPES = {"gen_recipes.py": generated_graph, "layered": layered_graph}

#: where the compiled packages of the PyTorch ecosystem sit, by dependency level (0: no run requirement
#: on another package of the distribution; pytorch comes from upstream), counted in conda-forge's
#: feedstock recipes (docs/scale-out.md): on level 0 torchvision, torchaudio, pytorch_scatter,
#: pytorch_cluster, xformers, flash-attn, bitsandbytes, torchsort, detectron2 (pytorch and libraries
#: outside the ecosystem); on level 1 pytorch_sparse (on pytorch_scatter) and pytorch3d (on torchvision)
COMPILED_LEVELS = {0: 9, 1: 2}


def place_compiled(graph: RecipeGraph, count: int, rng: random.Random,
                   levels: dict[int, int] | None = COMPILED_LEVELS) -> set[str]:
    """``count`` compiled packages of ``graph``: shared out over the dependency levels in the proportions of
    ``levels`` (a level taking no more than it holds; what does not fit goes to the lowest levels with
    room), each level's drawn at random. ``levels=None``: anywhere, every package alike (the model before
    the placement was checked)."""
    if levels is None:
        return set(rng.sample(graph.names, count))
    by_level = graph.levels()
    total = sum(levels.values())
    want = {lv: min(len(by_level[lv]), round(count * w / total)) for lv, w in levels.items() if lv < len(by_level)}
    for lv, names in enumerate(by_level):  # the rest (rounding, full levels): the lowest levels with room
        want[lv] = want.get(lv, 0) + min(len(names) - want.get(lv, 0), count - sum(want.values()))
    return {x for lv, k in want.items() for x in rng.sample(sorted(by_level[lv]), k)}


def runs_of(n: int, shape: str, levels: dict[int, int] | None = COMPILED_LEVELS) -> tuple[Run, Run, Run]:
    """The PR gate, promote and release day runs of ``n`` packages (module docstring, point 4); half the
    targets are cpu (``Costs.target_cpu``); 20 % of the packages compiled, placed by
    :func:`place_compiled` (``levels``)."""
    graph = SHAPES[shape](n)
    rng = random.Random(n)
    compiled = place_compiled(graph, n // 5, rng, levels)
    sizes = sorted((len(graph.descendants(x)) + 1, x) for x in graph.names)
    changed = sizes[int(0.9 * (len(sizes) - 1))][1]  # the 90th percentile affected set
    affected = graph.affected([changed])
    pr = Run(graph, affected, compiled & set(affected), targets=6, compiled_builds=6, n_recipes=n, cpu_targets=3)
    promote = Run(graph, affected, compiled & set(affected), targets=6, compiled_builds=6, n_recipes=n, promote=True,
                  cpu_targets=3)
    # release day is release-sweep.yml: its fan-in (the `sweep` job) reads the bundles into staging and
    # decides; it uploads and promotes nothing (its publish job then pushes a branch and opens a pull
    # request per package it changed: not counted here, see docs/scale-out.md)
    day = Run(graph, graph.order(), compiled, targets=2, compiled_builds=2, n_recipes=n, promote=False, cpu_targets=1)
    return pr, promote, day


def table(c: Costs, r: Runner, shape: str) -> list[str]:
    one = replace(r, cores=1)
    rows = ["| N | K | PR gate | promote | release day | release day, 1 core | levels | PR affected |",
            "|---|---|---|---|---|---|---|---|"]
    for n in (50, 300, 1000):
        pr, promote, day = runs_of(n, shape)
        for k in (1, 5, 20, 50):
            rows.append(f"| {n} | {k} | {_m(predict(pr, k, c, r))} | {_m(predict(promote, k, c, r))} | "
                        f"{_m(predict(day, k, c, r))} | {_m(predict(day, k, c, one))} | "
                        f"{len(pr.graph.levels())} | {len(pr.affected)} |")
    return rows


def _m(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 600 else f"{seconds / 60:.1f} min"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, help="work here (kept) instead of a temporary folder")
    ap.add_argument("--table-only", action="store_true", help="skip the validation runs (costs still measured)")
    ap.add_argument("--ks", default="1,2,4", help="validation runners per stage (default 1,2,4)")
    ap.add_argument("--costs", help="render,build,target,job,build_fixed[,read] in seconds: skip measuring them "
                    "(read: a recipe read with the plan job's renders taken; default: measured)")
    ap.add_argument("--no-warmup", action="store_true", help="no warm-up run before the validation runs")
    ap.add_argument("--repeat", type=int, default=3, help="runs per K, interleaved (default 3; the median counts)")
    ap.add_argument("--measured", type=Path, help="refit the validation runs of an earlier invocation (its "
                    "validate/measured.json) instead of running them")
    ap.add_argument("--compiled-build", type=float, default=Costs.__dataclass_fields__["compiled_build"].default,
                    help="seconds of one compiled build (a parameter: this machine has no real extension to build)")
    ap.add_argument("--compiled-build-cuda", type=float, help="seconds of one compiled cuda build (default: as "
                    "--compiled-build)")
    ap.add_argument("--compiled-parallel", type=float, default=0.0, help="of a compiled build's one-core time, the "
                    "share that is compiles able to run side by side (default 0; docs/scale-out.md)")
    ap.add_argument("--compiled-width", type=int, default=1, help="at most this many of a compiled build's compiles "
                    "side by side (default 1: the measured recipes compile one file at a time)")
    ap.add_argument("--cores", type=int, default=Runner.cores, help="a shard runner's cores, passed as `fanout shard "
                    "--jobs` (default 4: GitHub's standard Linux runner for public repositories)")
    ap.add_argument("--real-costs", type=Path, help="a costs.json of bench/bench_scale_real.py: the table with the real "
                    "world's noarch build and test-target costs (implies --table-only; --costs still gives the render "
                    "costs and the job's)")
    args = ap.parse_args(argv)
    args.table_only = args.table_only or args.real_costs is not None
    work = args.keep or new_scratch("conda-distro-bench-scale-")
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RATTLER_CACHE_DIR", str(work / "rattler-cache"))
    world = make_world(work) if not (args.costs and args.table_only) else work / "world"
    if args.costs:
        render, build, target, job, fixed, *read = (float(x) for x in args.costs.split(","))
        c = Costs(render=render, build=build, target=target, job=job, build_fixed=fixed, compiled_build=args.compiled_build,
                  read=read[0] if read else None, compiled_build_cuda=args.compiled_build_cuda)
    else:
        shutil.rmtree(work / "costs", ignore_errors=True)
        c = replace(measure_costs(world, work / "costs"), compiled_build=args.compiled_build,
                    compiled_build_cuda=args.compiled_build_cuda)
    if args.real_costs:
        real = json.loads(args.real_costs.read_text())["costs"]
        c = replace(c, build=real["build"], target=real["target"], target_cpu=real.get("target_cpu"),
                    build_fixed=real.get("build_fixed", 0.0), compiled_build=real.get("compiled_build", c.compiled_build),
                    compiled_build_cuda=real.get("compiled_build_cuda", c.compiled_build_cuda))
        print(f"real-world costs ({args.real_costs}): noarch build {c.build:.1f} s, a test target {c.target:.1f} s "
              f"(cuda) / {c.target_cpu or c.target:.1f} s (cpu)")
    c = replace(c, compiled_parallel=args.compiled_parallel, compiled_width=args.compiled_width)
    if c.read is None:
        print(f"rendering 300 generated recipes (load {os.getloadavg()[0]:.1f}) ...")
        render, read = measure_render(work / "render")
        c = replace(c, render=render, read=read)
    print(f"per-unit costs on this machine: render {c.render:.3f} s/recipe (read with the renders taken: "
          f"{c.read_cached:.3f} s), noarch build {c.build:.1f} s, "
          f"test target {c.target:.1f} s, job {c.job:.1f} s, a build command's planning {c.build_fixed:.1f} s; "
          f"compiled build {c.compiled_build:.0f} s cpu, {c.compiled_build_cuda or c.compiled_build:.0f} s cuda with one "
          f"compile at a time ({c.compiled_parallel:.0%} of it compiles, {c.compiled_width} side by side at most)")
    worst = 0.0
    if not args.table_only:
        print("\nvalidation: the sandbox PR gate (11 packages, 3 levels, 1 target each) through pr.yml, "
              f"{'after a warm-up run' if not args.no_warmup else 'no warm-up'}")
        print("| K | predicted | measured (median) | error | runs (spread) | load (1-min avg, before / after) |\n"
              "|---|---|---|---|---|---|")
        rows, model = validate(world, work / "validate", tuple(int(x) for x in args.ks.split(",")),
                               warmup=not args.no_warmup, measured=args.measured, repeat=args.repeat)
        for k, pred, meas, l0, l1, each in rows:  # every prediction out of sample (fitted on the other runs)
            err = (pred - meas) / meas
            worst = max(worst, abs(err))
            walls = sorted(w for w, _, _ in each)
            print(f"| {k} | {pred:.1f} s | {meas:.1f} s | {err:+.0%} | {', '.join(f'{w:.1f}' for w in walls)} s "
                  f"({(walls[-1] - walls[0]) / meas:.0%}) | {l0:.1f} / {l1:.1f} |")
        print("\nthe same runs, the model with bundle terms (a shard job: + a cost per input bundle; the fan-in: + a "
              "cost per bundle):\n| K | predicted | measured (median) | error |\n|---|---|---|---|")
        plain, _ = validate(world, work / "validate", (), measured=args.measured or work / "validate" / "measured.json",
                            bundles=True)
        for k, pred, meas, *_ in plain:
            print(f"| {k} | {pred:.1f} s | {meas:.1f} s | {(pred - meas) / meas:+.0%} |")
        # the GitHub table's shard job: the fitted fixed cost; a noarch package: the fitted per-package cost
        # (one build and one target, as shard jobs do them), split between build and target as the unit
        # measurements above split them
        share = c.target / max(1e-9, c.build + c.target)
        c = replace(c, build_fixed=model.fixed, build=model.per_package * (1 - share), target=model.per_package * share)
        print(f"\nfrom the fit: a shard job's fixed cost {c.build_fixed:.1f} s, a noarch build {c.build:.1f} s, "
              f"a test target {c.target:.1f} s")
    r = Runner(cores=args.cores)
    for shape in SHAPES:
        print(f"\nprediction on GitHub-hosted runners, {shape} dependency graph (start {r.start:.0f} s, install "
              f"from the cached venv {r.install_cached:.0f} s, {r.per_artifact:.0f} s + {r.mb_per_s:.0f} MB/s per "
              f"artifact, {r.parallel_downloads} downloads at once; PR and promote: 6 targets per package; release "
              f"day: 2; 20 % compiled; a shard runner's cores: {r.cores}; '1 core': a shard running one build or "
              "test at a time, as before the workflows passed --jobs)")
        for line in table(c, r, shape):
            print(line)
    day = runs_of(300, "layered")[2]
    print("\nrelease day, N = 300, K = 20, layered:\n| job | shards | units | slowest shard's work | most inputs | job time |"
          "\n|---|---|---|---|---|---|")
    times = dict(timeline(day, 20, c, r))
    print(f"| plan | 1 | | | | {times['plan']:.0f} s |")
    for i, n_shards, units, work_s, inputs in stage_breakdown(day, 20, c, r.cores):
        print(f"| stage {i} | {n_shards} | {units} | {work_s:.0f} s | {inputs} | {times[f'stage {i}']:.0f} s |")
    print(f"| fan-in | 1 | | | | {times['fan-in']:.0f} s |\n| total | | | | | {sum(times.values()) / 60:.1f} min |")
    print("\nwhat-if (NOT in the workflows): each stage's cuda builds on a second pool of K runners, release day "
          "(layered): " + ", ".join(f"N = {n}, K = {k}: {_m(predict_variant_pools(runs_of(n, 'layered')[2], k, c, r))}"
                                   for n in (300, 1000) for k in (5, 20)))
    print("compiled builds (cpu and cuda alike) would have to take " + ", ".join(
        f"{f:.2f} x their time (cuda {f * (c.compiled_build_cuda or c.compiled_build):.0f} s) at K = {k}"
        for k in (5, 20) if (f := hour_factor(day, k, c, r)) is not None)
        + " for release day (N = 300, layered) to take under an hour")
    placed = [sum(1 for x in lv if x in day.compiled) for lv in day.graph.levels()]
    print(f"compiled packages per dependency level (N = 300, layered): {placed} (conda-forge's feedstocks: "
          f"{[COMPILED_LEVELS.get(i, 0) for i in range(len(placed))]}); placed anywhere instead (every level "
          "alike, as the model had it), release day (layered): " + ", ".join(
              f"K = {k}: {_m(predict(runs_of(300, 'layered', None)[2], k, c, r))}" for k in (5, 20)))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if worst > 0.25 else 0


def hour_factor(day: Run, k: int, c: Costs, r: Runner) -> float | None:
    """The factor on both compiled build times at which ``day`` takes just under an hour at ``k`` (None: not
    even with builds of no time): every stage waits for its slowest compiled build."""
    def at(f: float) -> float:
        return predict(day, k, replace(c, compiled_build=c.compiled_build * f,
                                       compiled_build_cuda=(c.compiled_build_cuda or c.compiled_build) * f), r)
    if at(0.0) >= 3600:
        return None
    lo, hi = 0.0, 1.0
    while at(hi) < 3600:
        lo, hi = hi, hi * 2
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if at(mid) < 3600 else (lo, mid)
    return lo


if __name__ == "__main__":
    sys.exit(main())
