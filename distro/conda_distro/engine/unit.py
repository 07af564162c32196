"""One unit of work, orchestrator side: a package's variants built and each artifact tested.

Three steps, so the executor can run the middle one concurrently:

* :func:`prepare` (orchestrator): a fresh private work folder, the dependency view, the worker's job;
* :func:`launch`: runs the worker (:mod:`.worker`) as a separate process, inside the build sandbox
  unless ``--no-sandbox`` (:mod:`.sandbox`); returns its report (or why it has none);
* :func:`finish` (orchestrator): checks what was built and moves it into staging (:mod:`.intake`),
  hashes it, and writes the results store. Only the orchestrator writes results.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from pydantic import ValidationError

from conda_distro.channels.local import sha256_of
from conda_distro.engine import intake
from conda_distro.engine.backends import VariantSpec
from conda_distro.engine.releases import Target
from conda_distro.engine.sandbox import SandboxSpec, worker_env, wrap
from conda_distro.engine.worker import TargetIn, VariantIn, VariantOut, WorkerJob, WorkerResult, admitted_targets, target_id, test_key
from conda_distro.fsutil import link_or_copy
from conda_distro.provenance import Stamp
from conda_distro.rattler_env import SCRATCH_VAR, index_channel, ram_has_room, scratch_dir
from conda_distro.render import RenderSettings
from conda_distro.results import SCHEMA_VERSION, ArtifactResults, BuildRecord, ResultsStore, TestRecord, TestStatus, Variant, now


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


LOG_LIMIT = 64 << 20  # a worker's log file larger than this is cut (a log is evidence, not storage)
STDERR_TAIL = 20


@dataclass(frozen=True)
class TargetView:
    target: Target
    url: str | None
    sha256: str | None
    cuda: str
    missing_reason: str | None = None
    gpu: bool = False  # a cuda target, run on a machine with a working GPU

    def to_in(self) -> TargetIn:
        return TargetIn(pytorch=self.target.pytorch, variant=self.target.variant, url=self.url, sha256=self.sha256,
                        cuda=self.cuda, missing_reason=self.missing_reason, gpu=self.gpu)


@dataclass(frozen=True)
class Isolation:
    """How workers run: ``bwrap`` is the sandbox's executable, None for ``--no-sandbox``; ``hidden`` are
    the folders a sandbox covers (the repository, the build folder, the ledger); ``read_only`` what it
    puts back for every unit (local upstream channels, the Python runtime)."""

    bwrap: str | None
    work_root: Path
    hidden: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    devices: tuple[Path, ...] = ()  # device nodes the sandbox puts back (the GPU's, when there is one)


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


@dataclass
class UnitOutcome:
    name: str
    builds: list[BuildRecord] = field(default_factory=list)
    tests: list[TestRecord] = field(default_factory=list)
    cached_tests: int = 0


@dataclass
class Prepared:
    unit: Unit
    job: WorkerJob
    work: Path
    job_file: Path
    argv: list[str]
    env: dict[str, str]
    scratch: Path | None = None  # private folder for test environments outside the work folder


@dataclass
class Launched:
    prepared: Prepared
    report: WorkerResult | None
    error: str | None = None  # why there is no report


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


def is_cached(unit: Unit) -> bool:
    """True when running the unit would only reuse stored results (no build, no test): such units
    need no worker."""
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


def _reusable(t: TestRecord) -> bool:
    """A stored outcome that may stand for a new run with the same key: passed or failed (never an
    infrastructure error), with its environment recorded (an older run without one runs again)."""
    return bool(t.key) and t.status in ("passed", "failed") and t.against is not None


def _stored_run(prev: ArtifactResults, t: TargetIn, deps_digest: str) -> TestRecord | None:
    """A kept outcome of exactly this test (same key): running it again would only repeat it."""
    key = test_key(prev.sha256, t, deps_digest)
    return next((r for r in reversed(prev.runs(t.pytorch, t.variant)) if r.key == key and _reusable(r)), None)


def _known_keys(store: ResultsStore, spec: VariantSpec) -> dict[str, list[str]]:
    prev = store.get(spec.artifact)
    if prev is None:
        return {}
    out: dict[str, list[str]] = {}
    for t in prev.tests:
        if t.key and _reusable(t):  # the worker skips exactly what the orchestrator reuses
            out.setdefault(target_id(t.pytorch, t.variant), []).append(t.key)
    return out


def prepare(unit: Unit, iso: Isolation) -> Prepared:
    """The unit's fresh work folder and the worker's job (orchestrator side; writes only there and the
    dependency view)."""
    store = ResultsStore(unit.store)
    iso.work_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{unit.name}-", dir=iso.work_root))
    for sub in ("out", "logs", "home", "cache", "tmp"):
        (work / sub).mkdir()
    dep_view = make_dep_view(unit)
    job = WorkerJob(
        name=unit.name, recipe=str(unit.recipe), variant_config=unit.variant_config, engine=unit.engine,
        out_dir=str(work / "out"), log_dir=str(work / "logs"), channels=list(unit.channels), pytorch=unit.pytorch,
        targets=[tv.to_in() for tv in unit.targets], blocked=sorted(target_id(t.pytorch, t.variant) for t in unit.blocked),
        deps_digest=unit.deps_digest, dep_view=dep_view,
        variants=[VariantIn(spec=spec, action=action, known=_known_keys(store, spec),
                            staged=str(unit.staging / spec.artifact) if action != "build" else None)
                  for spec, _, action in unit.variants],
    )
    job_file = work / "job.json"
    job_file.write_text(job.model_dump_json(), encoding="utf-8")
    # test environments: the sandbox's own /tmp (a tmpfs: memory) while memory has room, or a private
    # folder of the chosen place; else the unit's work folder on disk
    chosen = os.environ.get(SCRATCH_VAR) or (None if iso.bwrap else scratch_dir())
    scratch = Path(tempfile.mkdtemp(prefix=f"{unit.name}-", dir=chosen)) if chosen else None
    in_ram = iso.bwrap is not None and ram_has_room()
    tmpdir = str(scratch) if scratch else ("/tmp" if in_ram else str(work / "tmp"))
    argv = [sys.executable, "-I", "-B", "-m", "conda_distro.engine.worker", str(job_file)]
    spec = _sandbox_spec(unit, iso, work, scratch, unit.dep_view if dep_view else None) if iso.bwrap else None
    return Prepared(unit, job, work, job_file, wrap(argv, spec, iso.bwrap), worker_env(work, tmpdir), scratch)


def _sandbox_spec(unit: Unit, iso: Isolation, work: Path, scratch: Path | None, dep_view: Path | None) -> SandboxSpec:
    """What the unit's sandbox puts back read-only: its recipe folder, staging, its release views and
    dependency view (plus the run-wide local upstream channels and Python runtime)."""
    views = {_file_path(tv.url) for tv in unit.targets if tv.url}
    read_only = {unit.recipe.parent, unit.staging, *iso.read_only, *views, dep_view} - {None}
    return SandboxSpec(work=work, hidden=iso.hidden, read_only=tuple(sorted(read_only)),  # type: ignore[arg-type]
                       writable=(scratch,) if scratch else (), devices=iso.devices)


def _file_path(url: str | None) -> Path | None:
    if not url or not url.startswith("file://"):
        return None
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(url).path))


def launch(p: Prepared) -> Launched:
    """Run the worker and read its report (its stdout); never raises for what recipe code does."""
    errfile = p.work / "worker.stderr"
    try:
        with open(errfile, "wb") as err:
            proc = subprocess.run(p.argv, env=p.env, cwd=p.work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=err, text=True, errors="replace", check=False)
    except OSError as exc:
        return Launched(p, None, f"the build worker could not start: {exc}")
    if proc.returncode != 0:
        with open(errfile, "rb") as fh:
            fh.seek(max(0, errfile.stat().st_size - (64 << 10)))
            text = fh.read().decode("utf-8", "replace")
        tail = [ln for ln in text.strip().splitlines() if ln.strip()][-STDERR_TAIL:]
        return Launched(p, None, f"the build worker exited with status {proc.returncode}: "
                                 + (tail[-1][:300] if tail else "no output"))
    try:
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        return Launched(p, WorkerResult.model_validate_json(lines[-1] if lines else ""))
    except (ValidationError, ValueError) as exc:
        return Launched(p, None, f"the build worker's report is unreadable: {str(exc).splitlines()[0][:200]}")


def _keep_log(work: Path | None, name: str | None, dest_dir: Path) -> str | None:
    """Copy a worker's log (a regular file of its log folder) to the build's log folder."""
    if work is None or not name or "/" in name or name.startswith("."):
        return None
    src = work / "logs" / name
    try:
        if not src.is_file() or src.is_symlink():
            return None
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest = dest_dir / name
        with open(src, "rb") as fin, open(dest, "wb") as fout:
            shutil.copyfileobj(fin, fout)
            if fout.tell() > LOG_LIMIT:
                fout.truncate(LOG_LIMIT)
        return str(dest)
    except OSError:
        return None


def blocked_outcome(unit: Unit) -> UnitOutcome:
    out = UnitOutcome(unit.name)
    for spec, _, _ in unit.variants:
        out.builds.append(BuildRecord(name=unit.name, version=spec.version, artifact=spec.artifact, status="blocked",
                                      reason=unit.block_build, variant=spec.variant))
        for tv in unit.targets:
            out.tests.append(TestRecord(name=unit.name, artifact=spec.artifact, pytorch=tv.target.pytorch,
                                        variant=tv.target.variant, status="blocked", reason=unit.block_build))
    return out


def finish(done: Launched) -> UnitOutcome:
    """Orchestrator side: accept the built artifacts into staging, then record every test (reused
    outcomes from the store, fresh ones from the worker's report). Cleans the work folder."""
    try:
        return collect(done.prepared.unit, done.report, done.error, done.prepared.work)
    finally:
        shutil.rmtree(done.prepared.work, ignore_errors=True)
        if done.prepared.scratch is not None:
            shutil.rmtree(done.prepared.scratch, ignore_errors=True)


def reuse(unit: Unit) -> UnitOutcome:
    """A unit whose every result is reused (:func:`is_cached`): recorded without a worker."""
    return collect(unit, WorkerResult(), None, None)


def collect(unit: Unit, report: WorkerResult | None, error: str | None, work: Path | None) -> UnitOutcome:
    reports = {v.artifact: v for v in (report.variants if report else [])}
    logs = unit.logs / unit.name
    to_build = [spec for spec, _, action in unit.variants if action == "build"]
    built_ok = {s.artifact for s in to_build if (r := reports.get(s.artifact)) and r.built}
    taken = intake.IntakeResult()
    if to_build and work is not None:
        taken = intake.accept(work / "out", built_ok, unit.declared, unit.staging,
                              f"recipes/{unit.recipe.parent.name}")
        if taken.accepted:
            index_channel(unit.staging, subdirs=sorted({a.split("/")[0] for a in taken.accepted} - {"noarch"}),
                          force=False)
    out = UnitOutcome(unit.name)
    tests = _TestRecorder(unit, ResultsStore(unit.store), work, error, out)
    for spec, input_hash, action in unit.variants:
        rep = reports.get(spec.artifact)
        build_log = _keep_log(work, rep.log if rep else None, logs)
        if action == "build":
            why = (error if rep is None else rep.message if not rep.built else taken.rejected)
            if spec.artifact not in taken.accepted:
                out.builds.append(BuildRecord(name=unit.name, version=spec.version, artifact=spec.artifact, status="failed",
                                              log=build_log, reason=why or "the build produced nothing",
                                              variant=spec.variant))
                for tv in unit.targets:
                    out.tests.append(TestRecord(name=unit.name, artifact=spec.artifact, pytorch=tv.target.pytorch,
                                                variant=tv.target.variant, status="blocked", reason="the build failed"))
                continue
            path, sha = taken.accepted[spec.artifact], taken.sha256[spec.artifact]
        else:
            path = unit.staging / spec.artifact
            sha = sha256_of(path)
            kept = logs / f"{spec.build_string}.build.log"  # the log of the build that made the file
            build_log = str(kept) if kept.is_file() else None
        out.builds.append(BuildRecord(name=unit.name, version=spec.version, artifact=spec.artifact, sha256=sha,
                                      status="built" if action == "build" else "skipped-existing",
                                      log=build_log, variant=spec.variant))
        tests.record(_Staged(spec, input_hash, path, sha, rep, built=action == "build"))
    return out


@dataclass(frozen=True)
class _Staged:
    """One variant's package in staging as this run leaves it."""

    spec: VariantSpec
    input_hash: str
    path: Path
    sha256: str
    report: VariantOut | None  # what the worker said of it (None: no report)
    built: bool  # built by this run (False: kept from an earlier one)


@dataclass
class _TestRecorder:
    """Records a unit's test outcomes, per staged package, in the results store and the unit's outcome."""

    unit: Unit
    store: ResultsStore
    work: Path | None  # the worker's folder (its logs are kept from there)
    error: str | None  # why the worker gave no report, if it did not
    out: UnitOutcome

    def record(self, staged: _Staged) -> None:
        """The tests of ``staged``: blocked, reused from the store, or what the worker reported (an
        ``error`` where it reported nothing); the store is written only when something changed."""
        from rattler_build import Package

        unit, out, work = self.unit, self.out, self.work
        spec, sha, rep = staged.spec, staged.sha256, staged.report
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
        ran = {target_id(t.pytorch, t.variant): t for t in (rep.tests if rep else [])}
        logs = unit.logs / unit.name
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
            gpu = t.gpu if t.variant == "cuda" else None  # cuda: said, never hidden, whether a GPU was there
            old = _stored_run(results, t, unit.deps_digest)
            if old is not None:
                if old is not results.latest().get((t.pytorch, t.variant)):  # back to an environment seen before
                    results.record(old.model_copy(update={"date": max(now(), old.date)}))
                out.tests.append(old.model_copy(update={"cached": True}))
                out.cached_tests += 1
                continue
            got = ran.get(target_id(t.pytorch, t.variant))
            if got is None:  # the worker crashed, was killed or timed out: infrastructure, not the package
                rec = TestRecord(**base, status="error", key=key, gpu=gpu, **provenance,
                                 reason=self.error or "the build worker reported no outcome for this test")
            else:
                against = {n: ident for n, ident in got.env.items() if n in unit.closure}
                status: TestStatus = "passed" if got.ok else "error" if got.error else "failed"
                rec = TestRecord(**base, status=status, log=_keep_log(work, got.log, logs),
                                 reason=got.message, key=key, against=against, gpu=gpu, **provenance)
            results.record(rec)
            out.tests.append(rec)
        if results.model_dump_json() != before:  # a no-change rerun leaves the results store untouched
            self.store.put(results)
