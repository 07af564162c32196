"""Run a :class:`BuildPlan`: units in dependency order, concurrently where independent, blocking
dependents of failures. Each unit's recipe code runs in runner processes of its own (rattler-build
holds the GIL; a runner is started with exec, never forked from this process), each inside a build or
test sandbox; this process only prepares units, waits for runners (in threads; staging is written by
one of them at a time) and finishes them one at a time (the results store has a single writer)."""

from __future__ import annotations

import hashlib
import shutil
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.channels.base import ChannelFile
from conda_distro.channels.local import LocalChannel, sha256_of
from conda_distro.config import Limits
from conda_distro.engine import intake
from conda_distro.engine.confirm import baseline_artifacts
from conda_distro.engine.phases import Isolation, clear_stale_folders
from conda_distro.engine.plan import BuildPlan, PackagePlan
from conda_distro.engine.progress import BuildEvents
from conda_distro.engine.releases import ReleaseView
from conda_distro.engine.sources import RecipeInputs
from conda_distro.engine.unit import (
    Slots,
    TargetView,
    Unit,
    UnitOutcome,
    blocked_outcome,
    finish,
    is_cached,
    launch,
    prepare,
    reusable,
    reuse,
)
from conda_distro.errors import ChannelError, ExitCode
from conda_distro.state.provenance import BuildProvenance, Stamp
from conda_distro.state.results import BuildRecord, ResultsStore, TestRecord
from conda_distro.util.fsutil import link_or_copy
from conda_distro.util.progress import ProgressSink
from conda_distro.util.rattler_env import index_channel
from conda_distro.vocab import Target

#: what one package's build and test workers need at most, on a typical recipe (solver, rattler-build, the
#: test environment): ``--jobs`` by default starts no more packages at once than the memory holds
MEMORY_PER_JOB = 2 * 1024**3


def machine_jobs() -> int:
    """How many packages to build and test at once when ``--jobs`` is not given: one per core this process
    may run on, and no more than the available memory holds (:data:`MEMORY_PER_JOB` each); at least 1."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    available = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    by_memory = cores if available is None else available // MEMORY_PER_JOB
    return max(1, min(cores, by_memory))


@dataclass(frozen=True)
class ExecContext:
    staging: Path
    upstream: tuple[str, ...]  # upstream channel URLs
    views: dict[Target, ReleaseView]
    store: Path
    logs: Path
    pytorch: str
    isolation: Isolation
    jobs: int = 1
    provenance: BuildProvenance = field(default_factory=BuildProvenance)  # the checkout's HEAD and dirty recipes
    fallback: tuple[Path, ...] = ()  # local channels read after staging (check-pr: the shared staging)
    # check-pr: the shared results store (read only): a file re-tested from main takes its outcomes there
    fallback_store: Path | None = None
    main: Path | None = None  # the local main channel (``from-main`` variants are copied from it)
    gpu: bool = False  # this machine has a working GPU: cuda targets run on it (and say so)
    root: Path = Path("/")  # the repository
    limits: dict[str, Limits] = field(default_factory=dict)  # package -> its limits (default: distro.yaml's)
    default_limits: Limits = field(default_factory=Limits)
    inputs: dict[str, RecipeInputs] = field(default_factory=dict)  # package -> its url and path sources
    prior: ExecutionResult | None = None  # a shard: the earlier shards' outcomes (as if run here first)
    confirm_runs: int = 0  # more runs a failing test gets before it counts (policy.confirm_runs; .confirm)


@dataclass
class ExecutionResult:
    builds: list[BuildRecord] = field(default_factory=list)
    tests: list[TestRecord] = field(default_factory=list)
    cached_tests: int = 0

    @property
    def ok(self) -> bool:
        return all(b.status in ("built", "skipped-existing") for b in self.builds) and all(t.status in ("passed", "flaky")
                                                                                          for t in self.tests)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.ok else ExitCode.FAILURES

    def to_dict(self) -> dict:
        return {"ok": self.ok, "builds": [b.to_dict() for b in self.builds], "tests": [t.to_dict() for t in self.tests]}


@dataclass
class _Status:
    """How a finished package did, for deciding about its dependents."""

    build_failed: str | None = None  # reason, when the build failed or was blocked
    failed_targets: dict[Target, str] = field(default_factory=dict)
    passed_any: bool = False


def _summarise(outcome: UnitOutcome) -> _Status:
    st = _Status()
    bad = [b for b in outcome.builds if b.status in ("failed", "error", "blocked")]
    if bad and len(bad) == len(outcome.builds):
        st.build_failed = f"{outcome.name} {'is blocked' if bad[0].status == 'blocked' else 'failed to build'}"
    for t in outcome.tests:
        target = Target(t.pytorch, t.variant)
        if t.status in ("passed", "flaky"):  # a flaky test never blocks (not even its dependents)
            st.passed_any = True
        else:
            st.failed_targets[target] = f"{outcome.name} {t.status} on pytorch {t.pytorch} ({t.variant})"
    if not st.build_failed and outcome.tests and not st.passed_any:
        st.build_failed = f"{outcome.name} passed no test"
    return st


def _staging_digest(staging: Path, names: tuple[str, ...], pinned: dict[str, str],
                    recipes: tuple[tuple[str, str], ...] = (), fallback: tuple[Path, ...] = ()) -> str:
    """What a test environment can see of the distribution dependencies ``names``: this run's
    artifacts (``pinned``: artifact -> sha256) for packages built in this run, otherwise every
    staging (and fallback channel) entry of the name; and the recipes they come from (``recipes``:
    folder -> recipe input hash). A change there means re-testing."""
    wanted = set(names)
    rows = [f"{a}={sha}" for a, sha in pinned.items()] + [f"recipe {r}={h}" for r, h in recipes]
    for i, channel in enumerate((staging, *fallback)):
        if i and not (channel / "noarch" / "repodata.json").is_file():
            continue
        rows += [f"{i}:{f.filename}={f.sha256}" if i else f"{f.filename}={f.sha256}"
                 for f in LocalChannel(channel).list_files().values() if f.name in wanted]
    return hashlib.sha256("\n".join(sorted(rows)).encode()).hexdigest()


def critical_path(plan: BuildPlan) -> dict[str, int]:
    """Per package of the plan, the length of the longest chain of planned packages that wait for it (itself
    included): among the packages ready to run, the one heading the longest chain starts first, so the
    chain (which runs one package after another) is not queued behind packages nothing waits for."""
    waiting: dict[str, list[str]] = {p.name: [] for p in plan.packages}
    for p in plan.packages:
        for d in p.closure:
            if d in waiting:
                waiting[d].append(p.name)
    depth: dict[str, int] = {}

    def of(name: str) -> int:  # the closures come from a DAG: no cycle
        if name not in depth:
            depth[name] = 1 + max((of(w) for w in waiting[name]), default=0)
        return depth[name]

    return {name: of(name) for name in waiting}


class Executor:
    def __init__(self, plan: BuildPlan, ctx: ExecContext, progress: ProgressSink | None = None) -> None:
        self.plan = plan
        self.ctx = ctx
        self.reporter = BuildEvents(progress)  # (the build's events on the progress protocol)
        self.status: dict[str, _Status] = {}
        self.artifacts: dict[str, dict[str, str]] = {}  # package -> {artifact: sha256} made or kept by this run
        self.gate = threading.Lock()  # held by the unit writing staging
        self.slots = Slots.of(max(1, ctx.jobs))  # sandboxes at once, across the units running
        self.priority = critical_path(plan)
        self._main_files: dict[str, ChannelFile] | None = None  # main's files (read once, for baselines)
        if ctx.prior is not None:
            self._seed(ctx.prior)

    def _seed(self, prior: ExecutionResult) -> None:
        """Take earlier shards' outcomes as if their packages had run in this process: their failures
        block dependents, their artifacts are what dependents' tests install."""
        names = {b.name for b in prior.builds} | {t.name for t in prior.tests}
        for name in sorted(names):
            outcome = UnitOutcome(name, [b for b in prior.builds if b.name == name],
                                  [t for t in prior.tests if t.name == name])
            self.status[name] = _summarise(outcome)
            self.artifacts[name] = {b.artifact: b.sha256 for b in outcome.builds if b.sha256 and b.artifact}

    def _unit(self, pkg: PackagePlan) -> Unit:
        block_build = next((self.status[d].build_failed and f"dependency {self.status[d].build_failed}"
                            for d in pkg.deps if d in self.status and self.status[d].build_failed), None)
        blocked: dict[Target, str] = {}
        for d in pkg.closure:
            for target, reason in self.status.get(d, _Status()).failed_targets.items():
                blocked.setdefault(target, f"dependency {reason}")
        in_run = {d for d in pkg.closure if d in self.artifacts}
        pinned = {a: sha for d in sorted(in_run) for a, sha in self.artifacts[d].items()}
        views = tuple(
            TargetView(t, self.ctx.views[t].url, self.ctx.views[t].sha256, self.ctx.views[t].cuda_override, self.ctx.views[t].reason,
                       gpu=self.ctx.gpu and t.variant.cuda)
            for t in pkg.targets
        )
        return Unit(
            name=pkg.name, recipe=pkg.recipe,
            variants=tuple((v.spec, v.input_hash, "skip-existing" if v.action == "from-main" else v.action)
                           for v in pkg.variants if v.action != "refuse"),
            variant_config=pkg.variant_config, engine=self.plan.engine, staging=self.ctx.staging,
            channels=(self.ctx.staging.as_uri(), *self.ctx.upstream), store=self.ctx.store, logs=self.ctx.logs,
            pytorch=self.ctx.pytorch, targets=views, blocked=blocked,
            deps_digest=_staging_digest(self.ctx.staging, tuple(d for d in pkg.closure if d not in in_run), pinned,
                                        pkg.recipes, self.ctx.fallback),
            block_build=block_build, dep_artifacts=tuple(sorted(pinned)),
            dep_view=self.ctx.store.parent / "dep-views" / pkg.name, declared=pkg.declared,
            stamp=Stamp.of(pkg.recipes, self.ctx.provenance), closure=frozenset(pkg.closure_outputs),
            limits=self.ctx.limits.get(pkg.name, self.ctx.default_limits),
            inputs=self.ctx.inputs.get(pkg.name, RecipeInputs()), root=self.ctx.root,
            confirm_runs=self.ctx.confirm_runs, baseline=self._baseline(pinned),
        )

    def _baseline(self, pinned: dict[str, str]) -> tuple[tuple[str, Path], ...]:
        """The baseline side's dependency view (:mod:`.confirm`): main's builds in place of this run's."""
        if not pinned or self.ctx.main is None or self.ctx.confirm_runs <= 0:
            return ()
        if self._main_files is None:
            main = self.ctx.main
            self._main_files = LocalChannel(main).list_files() if (main / "noarch" / "repodata.json").is_file() else {}
        return tuple(sorted(baseline_artifacts(pinned, self.ctx.staging, self.ctx.main, self._main_files).items()))

    def _run_here(self, unit: Unit) -> UnitOutcome:
        """Run one unit in this thread: blocked, every result reused from the store, or through its worker."""
        if unit.block_build:
            return blocked_outcome(unit)
        return reuse(unit) if is_cached(unit) else finish(launch(prepare(unit, self.ctx.isolation), self.gate, self.slots))

    def _prepare_staging(self) -> None:
        """Rebuilding an existing filename: remove the stale file first (engine notes, gotcha 3)."""
        subdirs = sorted({v.spec.subdir for p in self.plan.packages for v in p.variants} - {"noarch"})
        for sub in ("noarch", *subdirs):
            (self.ctx.staging / sub).mkdir(parents=True, exist_ok=True)
        builds = [v.spec.artifact for p in self.plan.packages for v in p.variants if v.action == "build"]
        stale = [self.ctx.staging / a for a in builds if (self.ctx.staging / a).exists()]
        for f in stale:
            f.unlink()
        # an index entry of a file this run builds again (its file gone: removed just now, or lost) is dropped
        # before the build: the index after an intake adds new names only and would keep the old sha256
        indexed = self._staging_index()
        dropped = indexed is None or any(a in indexed for a in builds)
        # a dependent already in main is re-tested from main's file, never rebuilt under the same name
        taken = [v.spec.artifact for p in self.plan.packages for v in p.variants if v.action == "from-main"]
        for art in taken:
            if self.ctx.main is not None:
                (self.ctx.staging / art).unlink(missing_ok=True)
                link_or_copy(self.ctx.main / art, self.ctx.staging / art)
        unindexed = any(not (self.ctx.staging / sub / "repodata.json").exists() for sub in ("noarch", *subdirs))
        if stale or dropped or taken or unindexed:  # (an index deleted to be rebuilt, as a damaged one's hint says)
            index_channel(self.ctx.staging, subdirs=subdirs)
        self._seed_from_shared(taken)
        for junk in ("bld", "test", ".tmp", "src_cache"):  # rattler-build scratch from earlier runs
            shutil.rmtree(self.ctx.staging / junk, ignore_errors=True)
        clear_stale_folders(self.ctx.isolation.work_root)  # left by a build killed with -9
        intake.clear_temps(self.ctx.staging)  # ... and its intake's copies (we hold staging's lock)
        if self.ctx.isolation.mirror is not None:  # mirrored files unused for long (a cache never grows for ever)
            self.ctx.isolation.mirror.store.prune()

    def _staging_index(self) -> set[str] | None:
        """The artifacts staging's index names; None when an index cannot be read (it is made again)."""
        try:
            return set(LocalChannel(self.ctx.staging).list_files())
        except ChannelError:
            return None

    def _seed_from_shared(self, taken: list[str]) -> None:
        """A scope (check-pr) re-testing main's files: the outcomes the shared results store holds for the
        same file (same sha256) are copied into the scope's store, so a test whose key (artifact, release
        view, dependencies seen) is one main already ran is reused by the ordinary rule instead of run
        again; a test with another key still runs. Only when the scope's store has no record of the file
        (its own outcomes always win); the shared store is never written."""
        if self.ctx.fallback_store is None or not taken:
            return
        shared, own = ResultsStore(self.ctx.fallback_store), ResultsStore(self.ctx.store)
        for art in taken:
            path = self.ctx.staging / art
            theirs = shared.get(art)
            if theirs is None or not path.is_file() or own.get(art) is not None or theirs.sha256 != sha256_of(path):
                continue
            own.put(theirs.model_copy(update={"tests": [t for t in theirs.tests if reusable(t)]}))

    def run(self) -> ExecutionResult:
        self._prepare_staging()
        report = ExecutionResult()
        pending = {p.name: p for p in self.plan.packages}
        self.reporter.started(len(pending))
        if self.ctx.jobs <= 1:
            for pkg in self.plan.packages:
                self.reporter.unit_started(pkg.name)
                self._collect(self._run_here(self._unit(pkg)), report)
        else:
            self._run_parallel(pending, report)
        self.reporter.finished()
        order = {p.name: i for i, p in enumerate(self.plan.packages)}
        report.builds.sort(key=lambda b: (order[b.name], b.artifact or ""))
        rank = {t: i for i, t in enumerate(self.plan.targets)}  # distro.yaml's order: 2.9 before 2.10
        report.tests.sort(key=lambda t: (order[t.name], t.artifact, rank.get(Target(t.pytorch, t.variant), len(rank))))
        return report

    def _collect(self, outcome: UnitOutcome, report: ExecutionResult) -> None:
        pkg = self.plan.get(outcome.name)
        outcome.builds += [BuildRecord(name=pkg.name, version=v.spec.version, artifact=v.spec.artifact, status="failed",
                                       reason=v.reason, variant=v.spec.variant)
                           for v in pkg.variants if v.action == "refuse"]
        self.status[outcome.name] = _summarise(outcome)
        self.artifacts[outcome.name] = {b.artifact: b.sha256 for b in outcome.builds if b.sha256 and b.artifact}
        report.builds.extend(outcome.builds)
        report.tests.extend(outcome.tests)
        report.cached_tests += outcome.cached_tests
        self.reporter.unit_done(outcome)

    def _run_parallel(self, pending: dict[str, PackagePlan], report: ExecutionResult) -> None:
        in_plan = set(pending)
        running: dict[Future, str] = {}
        pool = ThreadPoolExecutor(max_workers=self.ctx.jobs)  # threads only wait for runner processes
        try:
            while pending or running:
                ready = sorted((p for p in pending.values() if all(d not in in_plan or d in self.status for d in p.closure)),
                               key=lambda p: -self.priority[p.name])  # the longest chain of dependents first
                for pkg in ready:
                    unit = self._unit(pkg)
                    if is_cached(unit):
                        del pending[pkg.name]
                        self.reporter.unit_started(pkg.name)
                        self._collect(self._run_here(unit), report)
                    elif len(running) < self.ctx.jobs:
                        del pending[pkg.name]
                        self.reporter.unit_started(pkg.name)
                        running[pool.submit(launch, prepare(unit, self.ctx.isolation), self.gate, self.slots)] = pkg.name
                if not running:
                    if pending and not any(all(d not in in_plan or d in self.status for d in p.closure) for p in pending.values()):
                        raise RuntimeError("build scheduler stalled")  # pragma: no cover - a DAG always has a ready node
                    continue
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    running.pop(fut)
                    self._collect(finish(fut.result()), report)
        finally:
            pool.shutdown(cancel_futures=True)
