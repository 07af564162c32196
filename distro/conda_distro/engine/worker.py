"""One unit of work: build a package's variants, then test each artifact against its targets.

Runs in-process (``--jobs 1``) or in a spawn-started worker process; it takes and returns plain data
and writes the per-artifact results file itself (no two units share an artifact).
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.channels.local import link_or_copy, sha256_of
from conda_distro.render import RenderSettings
from conda_distro.engine.backends import BuildJob, TestJob, VariantSpec, make_builder
from conda_distro.engine.releases import Target
from conda_distro.rattler_env import index_channel
from conda_distro.results import ArtifactResults, BuildRecord, ResultsStore, TestRecord
from conda_distro.specs import admits, parse_spec


@dataclass(frozen=True)
class TargetView:
    target: Target
    url: str | None
    sha256: str | None
    cuda: str
    missing_reason: str | None = None


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


@dataclass
class UnitOutcome:
    name: str
    builds: list[BuildRecord] = field(default_factory=list)
    tests: list[TestRecord] = field(default_factory=list)
    cached_tests: int = 0


def _artifact_targets(depends: list[str], pytorch: str, targets: tuple[TargetView, ...]) -> list[TargetView]:
    pins = [p for p in (parse_spec(d) for d in depends) if p.ok and p.name == pytorch]
    return [tv for tv in targets if all(admits(p.version, tv.target.pytorch) for p in pins)]


def test_key(artifact_sha256: str, view: TargetView, deps_digest: str) -> str:
    """Everything a test outcome depends on: same key, same outcome (no need to re-run)."""
    return hashlib.sha256(f"{artifact_sha256}|{view.target}|{view.sha256}|{deps_digest}".encode()).hexdigest()


def is_cached(unit: Unit) -> bool:
    """True when running the unit would only reuse stored results (no build, no test): such units
    run in the scheduling process, with no worker process to start."""
    if unit.block_build:
        return True
    store = ResultsStore(unit.store)
    for spec, _, action in unit.variants:
        prev = store.get(spec.artifact)
        if action != "skip-existing" or prev is None:
            return False
        latest = prev.latest()
        for tv in _artifact_targets(prev.depends, unit.pytorch, unit.targets):
            if tv.target in unit.blocked or tv.url is None:
                continue
            old = latest.get((tv.target.pytorch, tv.target.variant))
            if old is None or old.key != test_key(prev.sha256, tv, unit.deps_digest):
                return False
    return True


def _blocked_unit(unit: Unit) -> UnitOutcome:
    out = UnitOutcome(unit.name)
    for spec, _, _ in unit.variants:
        out.builds.append(BuildRecord(name=unit.name, version=spec.version, artifact=spec.artifact, status="blocked",
                                      reason=unit.block_build, variant=spec.variant))
        for tv in unit.targets:
            out.tests.append(TestRecord(name=unit.name, artifact=spec.artifact, pytorch=tv.target.pytorch,
                                        variant=tv.target.variant, status="blocked", reason=unit.block_build))
    return out


def run_unit(unit: Unit) -> UnitOutcome:
    if unit.block_build:
        return _blocked_unit(unit)
    builder = make_builder(unit.engine)
    store = ResultsStore(unit.store)
    out = UnitOutcome(unit.name)
    logs = unit.logs / unit.name
    dep_view: list[str] | None = None  # made on the first test that has to run
    for spec, input_hash, action in unit.variants:
        path = unit.staging / spec.artifact
        build_log = logs / f"{spec.build_string}.build.log"
        if action == "build":
            res = builder.build(BuildJob(unit.recipe, spec, unit.variant_config, unit.staging, unit.channels, build_log))
            if not res.ok:
                out.builds.append(BuildRecord(name=unit.name, version=spec.version, artifact=spec.artifact, status="failed",
                                              log=str(build_log), reason=res.message, variant=spec.variant))
                for tv in unit.targets:
                    out.tests.append(TestRecord(name=unit.name, artifact=spec.artifact, pytorch=tv.target.pytorch,
                                                variant=tv.target.variant, status="blocked", reason="the build failed"))
                continue
            path = res.path or path
        sha = sha256_of(path)
        out.builds.append(BuildRecord(name=unit.name, version=spec.version, artifact=spec.artifact, sha256=sha,
                                      status="built" if action == "build" else "skipped-existing",
                                      log=str(build_log) if build_log.exists() else None, variant=spec.variant))
        from rattler_build import Package

        depends = list(Package.from_file(str(path)).depends)
        prev = store.get(spec.artifact)
        before = prev.model_dump_json() if prev is not None else None
        results = prev if prev is not None and prev.sha256 == sha else ArtifactResults(
            artifact=spec.artifact, name=spec.name, version=spec.version, sha256=sha, depends=depends)
        results.input_hash = input_hash
        latest = results.latest()
        for tv in _artifact_targets(depends, unit.pytorch, unit.targets):
            t = tv.target
            base = dict(name=unit.name, artifact=spec.artifact, pytorch=t.pytorch, variant=t.variant)
            if t in unit.blocked:
                out.tests.append(TestRecord(**base, status="blocked", reason=unit.blocked[t]))
                continue
            if tv.url is None:
                out.tests.append(TestRecord(**base, status="blocked", reason=tv.missing_reason))
                continue
            key = test_key(sha, tv, unit.deps_digest)
            old = latest.get((t.pytorch, t.variant))
            if old is not None and old.key == key and old.status in ("passed", "failed"):
                out.tests.append(old.model_copy(update={"cached": True}))
                out.cached_tests += 1
                continue
            log = logs / f"{spec.build_string}.{t.pytorch}-{t.variant}.test.log"
            if dep_view is None:
                dep_view = [u for u in (make_dep_view(unit),) if u]
            res = builder.test(TestJob(path, (tv.url, *dep_view, *unit.channels), tv.cuda, log))
            rec = TestRecord(**base, status="passed" if res.ok else "failed", log=str(log), reason=res.message, key=key)
            results.record(rec)
            out.tests.append(rec)
        if results.model_dump_json() != before:  # a no-change rerun leaves the results store untouched
            store.put(results)
    return out
