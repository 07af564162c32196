"""One unit of work, orchestrator side: a package's variants built and each artifact tested.

Three steps, so the executor can run the middle one concurrently:

* :func:`prepare` (main thread): a fresh private work folder, the dependency view, the keys of the
  outcomes the results store already holds;
* :func:`launch` (a thread that only waits for processes): the build phase (one sandbox: every variant
  to build), sealed and staged at once, then one test sandbox per artifact × release × variant still to
  test (:mod:`.phases`); staging is written under one lock shared by all units;
* :func:`finish` (main thread): records the builds and every test (reused, fresh, or an ``error`` where
  no verdict came) in the results store, and removes the work folder. Only the orchestrator writes
  results, logs and staging.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, TypeVar

from conda_distro.channels.local import sha256_of
from conda_distro.config import Limits
from conda_distro.engine.backends import VariantSpec
from conda_distro.engine.confirm import confirm_failure, needs_confirmation, run_baseline, status_of
from conda_distro.engine.phases import (
    BuildOut,
    Isolation,
    PhaseContext,
    TargetIn,
    TestOut,
    claim_folder,
    remove_tree,
    run_build_phase,
    run_test_phase,
)
from conda_distro.engine.sources import RecipeInputs
from conda_distro.recipe.render import RenderSettings
from conda_distro.recipe.specs import admits, parse_spec
from conda_distro.state.provenance import Stamp
from conda_distro.state.results import (
    NO_TESTS,
    SCHEMA_VERSION,
    ArtifactResults,
    Attempt,
    BuildRecord,
    BuildStatus,
    ResultsStore,
    TestRecord,
    TestStatus,
    Variant,
    now,
)
from conda_distro.util.fsutil import link_or_copy
from conda_distro.util.rattler_env import index_channel
from conda_distro.vocab import Target

_T = TypeVar("_T")


class _TestBase(TypedDict):
    """What every test record of one (artifact, target) shares."""

    name: str
    artifact: str
    pytorch: str
    variant: Variant


class _Provenance(TypedDict):
    """The test-side provenance of a test record (the checkout that ran it)."""

    recipes: dict[str, str]
    commit: str | None


def target_id(pytorch: str, variant: str) -> str:
    return f"{pytorch}/{variant}"


def test_key(artifact_sha256: str, target: TargetIn, deps_digest: str) -> str:
    """Everything a test outcome depends on: same key, same outcome (no need to re-run)."""
    tid = target_id(target.pytorch, target.variant) + ("/gpu" if target.gpu else "")  # a GPU run is another test
    return hashlib.sha256(f"{artifact_sha256}|{tid}|{target.sha256}|{deps_digest}".encode()).hexdigest()


def admitted_targets(depends: list[str], pytorch: str, targets: list[TargetIn]) -> list[TargetIn]:
    """The targets an artifact's own run requirements admit: its pytorch pins (a compiled extension's
    run_export binds it to the minor it was built against), and ``__cuda`` (a cuda build cannot be
    installed without a GPU driver: it is tested on the cuda targets only)."""
    pins = [p for p in (parse_spec(d) for d in depends) if p.ok and p.name == pytorch]
    cuda_only = any(parse_spec(d).name == "__cuda" for d in depends)
    return [t for t in targets if all(admits(p.version, t.pytorch) for p in pins)
            and (not cuda_only or Variant(t.variant).cuda)]


@dataclass(frozen=True)
class TargetView:
    target: Target
    url: str | None
    sha256: str | None
    cuda: str
    missing_reason: str | None = None
    gpu: bool = False  # a cuda target, run on a machine with a working GPU

    def to_in(self) -> TargetIn:
        return TargetIn(pytorch=self.target.release, variant=self.target.variant, url=self.url, sha256=self.sha256,
                        cuda=self.cuda, missing_reason=self.missing_reason, gpu=self.gpu)


@dataclass(frozen=True)
class Unit:
    name: str
    recipe: Path
    variants: tuple[tuple[VariantSpec, str, str], ...]  # (spec, input_hash, action)
    variant_config: RenderSettings
    engine: str
    staging: Path
    channels: tuple[str, ...]  # staging first, then upstream
    store: Path
    logs: Path
    pytorch: str
    targets: tuple[TargetView, ...]  # admitted targets with their release views
    blocked: dict[Target, str] = field(default_factory=dict)  # target -> reason (a dependency failed there)
    deps_digest: str = ""
    block_build: str | None = None  # reason when the whole unit is blocked
    dep_artifacts: tuple[str, ...] = ()  # this run's artifacts of its distribution deps (staging-relative)
    dep_view: Path | None = None  # where to put the channel holding exactly those
    declared: frozenset[str] = frozenset()  # package names the recipe may produce
    stamp: Stamp = field(default_factory=Stamp)  # provenance written into the results store
    closure: frozenset[str] = frozenset()  # its distribution dependencies (what a test's `against` names)
    limits: Limits = field(default_factory=Limits)  # distro.yaml's, with the recipe's own applied
    inputs: RecipeInputs = field(default_factory=RecipeInputs)  # url sources to fetch, path sources to show
    root: Path = Path("/")  # the repository (a recipe folder is shown at its place in it)
    confirm_runs: int = 0  # more runs a failing test gets before it counts (policy.confirm_runs; .confirm)
    #: the baseline side's dependency view: (artifact, file) with main's builds of the dependencies in place
    #: of this run's; empty: no baseline (main has none of them, or no other build)
    baseline: tuple[tuple[str, Path], ...] = ()


@dataclass
class UnitOutcome:
    name: str
    builds: list[BuildRecord] = field(default_factory=list)
    tests: list[TestRecord] = field(default_factory=list)
    cached_tests: int = 0


@dataclass
class Prepared:
    unit: Unit
    ctx: PhaseContext  # what its sandboxed phases read, and where they write
    known: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # artifact -> target -> stored keys
    lock: int = -1  # the descriptor holding the private folder's lock (closed by finish)

    @property
    def work(self) -> Path:  # the unit's private folder (removed by finish)
        return self.ctx.work


@dataclass
class Launched:
    """What the unit's sandboxes came to (the build of each variant, each test run)."""

    prepared: Prepared
    builds: dict[str, BuildOut] = field(default_factory=dict)  # artifact -> its build (variants built now)
    tests: dict[tuple[str, str], TestOut] = field(default_factory=dict)  # (artifact, target id) -> outcome


def make_dep_view(unit: Unit) -> str | None:
    """A channel with exactly this run's builds of the unit's dependencies, placed before staging: with
    strict channel priority the test environment cannot fall back to an older build of a dependency
    that is still in staging (a dependent is tested against what this run built)."""
    if not unit.dep_artifacts or unit.dep_view is None:
        return None
    shutil.rmtree(unit.dep_view, ignore_errors=True)
    for art in unit.dep_artifacts:
        dst = unit.dep_view / art
        dst.parent.mkdir(parents=True, exist_ok=True)
        link_or_copy(unit.staging / art, dst)
    index_channel(unit.dep_view, subdirs=sorted({a.split("/")[0] for a in unit.dep_artifacts}))
    return unit.dep_view.as_uri()


def make_baseline_view(unit: Unit, n: int = 0) -> Path | None:
    """The dependency view of the baseline side (:mod:`.confirm`): main's builds of the dependencies (the
    caller removes it after its runs). ``n``: the test's number, so tests running side by side never
    share one."""
    if not unit.baseline or unit.dep_view is None:
        return None
    view = unit.dep_view.with_name(f"{unit.dep_view.name}.baseline{n or ''}")
    shutil.rmtree(view, ignore_errors=True)
    for art, src in unit.baseline:
        dst = view / art
        dst.parent.mkdir(parents=True, exist_ok=True)
        link_or_copy(src, dst)
    index_channel(view, subdirs=sorted({a.split("/")[0] for a, _ in unit.baseline}))
    return view


def is_cached(unit: Unit) -> bool:
    """True when running the unit would only reuse stored results (no build, no test): such units
    need no sandbox."""
    if unit.block_build:
        return True
    store = ResultsStore(unit.store)
    views = [tv.to_in() for tv in unit.targets]
    for spec, _, action in unit.variants:
        prev = store.get(spec.artifact)
        if action != "skip-existing" or prev is None:
            return False
        for t in admitted_targets(prev.depends, unit.pytorch, views):
            if Target(t.pytorch, t.variant) in unit.blocked or t.url is None:
                continue
            if _stored_run(prev, t, unit.deps_digest) is None:
                return False
    return True


def reusable(t: TestRecord) -> bool:
    """A stored outcome that may stand for a new run with the same key: passed or failed (never an
    infrastructure error), with its environment recorded (an older run without one runs again)."""
    return bool(t.key) and t.status in ("passed", "failed", "flaky") and t.against is not None and not t.baseline


def _stored_run(prev: ArtifactResults, t: TargetIn, deps_digest: str) -> TestRecord | None:
    """A kept outcome of exactly this test (same key): running it again would only repeat it."""
    key = test_key(prev.sha256, t, deps_digest)
    return next((r for r in reversed(prev.runs(t.pytorch, t.variant)) if r.key == key and reusable(r)), None)


def _known_keys(store: ResultsStore, spec: VariantSpec) -> dict[str, list[str]]:
    prev = store.get(spec.artifact)
    if prev is None:
        return {}
    out: dict[str, list[str]] = {}
    for t in prev.tests:
        if t.key and reusable(t):  # a test runs exactly when the orchestrator will not reuse its outcome
            out.setdefault(target_id(t.pytorch, t.variant), []).append(t.key)
    return out


def prepare(unit: Unit, iso: Isolation) -> Prepared:
    """The unit's fresh private folder, its dependency view and the keys of stored outcomes (main thread)."""
    store = ResultsStore(unit.store)
    work, lock = claim_folder(iso.work_root, f"{unit.name}-")
    ctx = PhaseContext(name=unit.name, recipe=unit.recipe, root=unit.root, inputs=unit.inputs,
                       variant_config=unit.variant_config, engine=unit.engine, channels=unit.channels,
                       staging=unit.staging, logs=unit.logs / unit.name, declared=unit.declared, limits=unit.limits,
                       isolation=iso, work=work, dep_view=make_dep_view(unit))
    return Prepared(unit, ctx, {spec.artifact: _known_keys(store, spec) for spec, _, _ in unit.variants}, lock)


_NO_GATE = threading.Lock()


@dataclass(frozen=True)
class Slots:
    """At most ``size`` sandboxes (a build or a test) at once, shared by every unit of a run: a unit's
    tests then run side by side when the run has cores to spare (a chain of dependents, where only one
    unit can run, no longer leaves the other cores idle). Each test keeps its own sandbox, its own fresh
    folder and its own environment: nothing writable is shared between tests."""

    size: int
    sem: threading.Semaphore

    @classmethod
    def of(cls, size: int) -> Slots:
        return cls(size, threading.BoundedSemaphore(size))


def _in_slot(slots: Slots | None, fn: Callable[[], _T]) -> _T:
    if slots is None:
        return fn()
    with slots.sem:
        return fn()


def launch(p: Prepared, gate: threading.Lock | None = None, slots: Slots | None = None) -> Launched:
    """Build (one sandbox), then test each staged artifact against each target still to test (a sandbox
    each; up to ``slots`` of them at once). ``gate``: held while writing staging (shared by the units
    running at the same time). Never raises for what recipe code does."""
    unit = p.unit
    done = Launched(p)
    to_build = [spec for spec, _, action in unit.variants if action == "build"]
    if to_build:
        done.builds = _in_slot(slots, lambda: run_build_phase(p.ctx, to_build, gate or _NO_GATE))
    views = [tv.to_in() for tv in unit.targets]
    todo: list[tuple[tuple[str, str], Callable[[], TestOut]]] = []
    for spec, _, action in unit.variants:
        staged = _staged_file(unit, spec, action, done.builds)
        if staged is None:
            continue
        path, sha = staged
        for t in admitted_targets(_depends(path), unit.pytorch, views):
            tid = target_id(t.pytorch, t.variant)
            if Target(t.pytorch, t.variant) in unit.blocked or t.url is None \
                    or test_key(sha, t, unit.deps_digest) in p.known.get(spec.artifact, {}).get(tid, ()):
                continue  # recorded by finish
            todo.append(((spec.artifact, tid), functools.partial(
                _confirmed_test, p, spec, path, t, len(todo) + 1, in_main=action != "build")))
    if slots is None or slots.size <= 1 or len(todo) <= 1:
        for key, test in todo:
            done.tests[key] = _in_slot(slots, test)
        return done
    with ThreadPoolExecutor(max_workers=min(slots.size, len(todo))) as pool:  # threads only wait for sandboxes
        futures = [(key, pool.submit(_in_slot, slots, test)) for key, test in todo]
        done.tests = {key: fut.result() for key, fut in futures}  # in the order of the targets
    return done


def _baseline_record(results: ArtifactResults, base: _TestBase, got: TestOut, closure: frozenset[str],
                     gpu: bool | None, provenance: _Provenance) -> TestRecord:
    """The baseline side's runs as a record; the outcomes already kept for the same artifact, release ×
    variant and distribution packages (its own test when it went to main, an earlier baseline) count with
    them: a pass then and a failure now is flaky too."""
    against = {n: i for n, i in got.env.items() if n in closure}
    old = next((r for r in reversed(results.runs(base["pytorch"], base["variant"]))
                if r.against == against and r.status in ("passed", "failed", "flaky")), None)
    prior: list[Attempt] = []
    if old is not None:
        prior = [*old.attempts] if old.attempts else ["passed" if old.status == "passed" else "failed"]
    tries = [*prior, *got.attempts]
    return TestRecord(**base, status=status_of(tries), log=got.log, reason=got.message, against=against, gpu=gpu,
                      attempts=tries, baseline=True, **provenance)


def _confirmed_test(p: Prepared, spec: VariantSpec, path: Path, t: TargetIn, n: int, *, in_main: bool) -> TestOut:
    """One test, a failure confirmed on the same inputs and, for a file kept from earlier (a dependent
    in main re-tested), on the baseline side (:mod:`.confirm`)."""
    unit = p.unit
    out = run_test_phase(p.ctx, spec, path, t, n)
    if unit.confirm_runs <= 0 or not needs_confirmation(out):
        return out
    sub = iter(range(1, 1_000))

    def again(i: int) -> TestOut:
        return run_test_phase(p.ctx, spec, path, t, n * 1000 + next(sub), attempt=f"run{i + 1}")

    conf = confirm_failure(out, again, unit.confirm_runs)
    out = dataclasses.replace(conf.first, attempts=conf.attempts)
    if conf.status != "failed" or not in_main or not unit.baseline:
        return out
    view = make_baseline_view(unit, n)
    if view is None:
        return out
    ctx = dataclasses.replace(p.ctx, dep_view=view.as_uri())

    def base(i: int) -> TestOut:
        return run_test_phase(ctx, spec, path, t, n * 1000 + next(sub), attempt=f"baseline{i}")

    try:
        got = run_baseline(base, 1 + unit.confirm_runs)
    finally:
        remove_tree(view)
    if got is None:
        return out
    return dataclasses.replace(out, baseline=dataclasses.replace(got.first, attempts=got.attempts))


def _staged_file(unit: Unit, spec: VariantSpec, action: str, builds: dict[str, BuildOut]) -> tuple[Path, str] | None:
    """The staging file of a variant and its sha256 (hashed here, by the orchestrator), if it has one."""
    if action == "build":
        b = builds.get(spec.artifact)
        return (b.path, b.sha256) if b is not None and b.status == "built" and b.path and b.sha256 else None
    path = unit.staging / spec.artifact
    return (path, sha256_of(path)) if path.is_file() else None


def _depends(path: Path) -> list[str]:
    from rattler_build import Package

    return list(Package.from_file(str(path)).depends)


def blocked_outcome(unit: Unit) -> UnitOutcome:
    out = UnitOutcome(unit.name)
    for spec, _, _ in unit.variants:
        out.builds.append(BuildRecord(name=unit.name, version=spec.version, artifact=spec.artifact, status="blocked",
                                      reason=unit.block_build, variant=spec.variant))
        for tv in unit.targets:
            out.tests.append(TestRecord(name=unit.name, artifact=spec.artifact, pytorch=tv.target.release,
                                        variant=tv.target.variant, status="blocked", reason=unit.block_build))
    return out


def finish(done: Launched) -> UnitOutcome:
    """Main thread: record the builds and every test (reused outcomes from the store, fresh ones from
    the runners' reports). Removes the unit's private folder."""
    try:
        return collect(done.prepared.unit, done)
    finally:
        remove_tree(done.prepared.work)
        if done.prepared.lock >= 0:
            os.close(done.prepared.lock)


def reuse(unit: Unit) -> UnitOutcome:
    """A unit whose every result is reused (:func:`is_cached`): recorded without a sandbox."""
    return collect(unit, None)


def collect(unit: Unit, done: Launched | None) -> UnitOutcome:
    """The unit's build and test records; the results store is written for every staged artifact."""
    builds = done.builds if done else {}
    logs = unit.logs / unit.name
    out = UnitOutcome(unit.name)
    tests = _TestRecorder(unit, ResultsStore(unit.store), done.tests if done else {}, out)
    for spec, input_hash, action in unit.variants:
        if action == "build":
            b = builds.get(spec.artifact) or BuildOut("failed", "the build produced nothing")
            if b.status != "built" or b.path is None or b.sha256 is None:
                status: BuildStatus = "error" if b.status == "error" else "failed"
                out.builds.append(BuildRecord(name=unit.name, version=spec.version, artifact=spec.artifact, status=status,
                                              log=b.log, reason=b.reason or "the build produced nothing",
                                              variant=spec.variant))
                for tv in unit.targets:
                    out.tests.append(TestRecord(name=unit.name, artifact=spec.artifact, pytorch=tv.target.release,
                                                variant=tv.target.variant, status="blocked", reason="the build failed"))
                continue
            path, sha, build_log = b.path, b.sha256, b.log
        else:
            path = unit.staging / spec.artifact
            sha = sha256_of(path)
            kept = logs / f"{spec.build_string}.build.log"  # the log of the build that made the file
            build_log = str(kept) if kept.is_file() else None
        out.builds.append(BuildRecord(name=unit.name, version=spec.version, artifact=spec.artifact, sha256=sha,
                                      status="built" if action == "build" else "skipped-existing",
                                      log=build_log, variant=spec.variant))
        tests.record(_Staged(spec, input_hash, path, sha, built=action == "build"))
    return out


@dataclass(frozen=True)
class _Staged:
    """One variant's package in staging as this run leaves it."""

    spec: VariantSpec
    input_hash: str
    path: Path
    sha256: str
    built: bool  # built by this run (False: kept from an earlier one)


@dataclass
class _TestRecorder:
    """Records a unit's test outcomes, per staged package, in the results store and the unit's outcome."""

    unit: Unit
    store: ResultsStore
    ran: dict[tuple[str, str], TestOut]  # (artifact, target id) -> what its test sandbox came to
    out: UnitOutcome

    def record(self, staged: _Staged) -> None:
        """The tests of ``staged``: blocked, reused from the store, or what its sandbox reported (an
        ``error`` where no verdict came); the store is written only when something changed."""
        from rattler_build import Package

        unit, out = self.unit, self.out
        spec, sha = staged.spec, staged.sha256
        depends = list(Package.from_file(str(staged.path)).depends)
        prev = self.store.get(spec.artifact)
        before = prev.model_dump_json() if prev is not None else None
        results = prev if prev is not None and prev.sha256 == sha else ArtifactResults(
            artifact=spec.artifact, name=spec.name, version=spec.version, sha256=sha, depends=depends)
        results.input_hash = staged.input_hash
        stamp = unit.stamp
        if stamp.recipe_hash and (staged.built or results.recipe_hash is None):
            # built now, or kept (skip-existing: its input hash is this checkout's) with no provenance yet
            results.recipe, results.recipe_hash = stamp.recipe, stamp.recipe_hash
            results.commit = stamp.commit
            results.schema_version = SCHEMA_VERSION
        provenance = _Provenance(recipes=dict(stamp.test_recipes), commit=stamp.test_commit)
        for t in admitted_targets(depends, unit.pytorch, [tv.to_in() for tv in unit.targets]):
            target = Target(t.pytorch, t.variant)
            base = _TestBase(name=unit.name, artifact=spec.artifact, pytorch=t.pytorch, variant=t.variant)
            if target in unit.blocked:
                out.tests.append(TestRecord(**base, status="blocked", reason=unit.blocked[target]))
                continue
            if t.url is None:
                out.tests.append(TestRecord(**base, status="blocked", reason=t.missing_reason))
                continue
            key = test_key(sha, t, unit.deps_digest)
            gpu = t.gpu if Variant(t.variant).cuda else None  # cuda: said, never hidden, whether a GPU was there
            old = _stored_run(results, t, unit.deps_digest)
            if old is not None:
                if old is not results.latest().get(Target(t.pytorch, t.variant)):  # back to an environment seen before
                    results.record(old.model_copy(update={"date": max(now(), old.date)}))
                out.tests.append(old.model_copy(update={"cached": True}))
                out.cached_tests += 1
                continue
            got = self.ran.get((spec.artifact, target_id(t.pytorch, t.variant)))
            if got is None:  # no sandbox ran it: infrastructure, not the package
                rec = TestRecord(**base, status="error", key=key, gpu=gpu, **provenance,
                                 reason="the test did not run (no outcome was reported for it)")
            else:
                against = {n: ident for n, ident in got.env.items() if n in unit.closure}
                status: TestStatus = "passed" if got.ok and not got.error else "error" if got.error else "failed"
                if got.attempts:
                    status = status_of(got.attempts)
                rec = TestRecord(**base, status=status, log=got.log, reason=NO_TESTS if got.no_tests else got.message, key=key,
                                 against=against, environment=dict(got.env) or None,
                                 environments=[dict(e) for e in got.envs] or None, gpu=gpu,
                                 attempts=list(got.attempts) or None, **provenance)
                if got.baseline is not None:  # the baseline side's runs: kept beside it, never reused for it
                    results.record(_baseline_record(results, base, got.baseline, unit.closure, gpu, provenance))
            results.record(rec)
            out.tests.append(rec)
        if results.model_dump_json() != before:  # a no-change rerun leaves the results store untouched
            self.store.put(results)
