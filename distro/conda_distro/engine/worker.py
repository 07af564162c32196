"""The worker: the process that runs recipe code (rattler-build builds and `Package.run_tests`).

It runs inside the build sandbox (:mod:`.sandbox`), one process per package, started by the
orchestrator as ``python -I -B -m conda_distro.engine.worker JOB.json``. It reads a
:class:`WorkerJob`, builds into its private output folder, tests, and prints one :class:`WorkerResult`
as JSON on its original stdout. It writes nothing else outside its own folder: it cannot (the
repository, the results store and the ledger are not visible to it). The orchestrator checks what it
built, moves accepted artifacts into staging, hashes them and writes the results itself
(:mod:`.unit`, :mod:`.intake`); the worker's word is never taken for an artifact's name or sha256.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from conda_distro.engine.backends import BuildJob, TestJob, VariantSpec, make_builder
from conda_distro.render import RenderSettings
from conda_distro.results import Variant
from conda_distro.specs import admits, parse_spec


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TargetIn(_Model):
    pytorch: str
    variant: Variant
    url: str | None
    sha256: str | None
    cuda: str
    missing_reason: str | None = None
    gpu: bool = False  # a cuda target on a machine with a working GPU (its tests are not the no-GPU ones)


class VariantIn(_Model):
    spec: VariantSpec
    action: str  # "build" | "skip-existing"
    staged: str | None = None  # skip-existing: the staging file to test
    known: dict[str, list[str]] = Field(default_factory=dict)  # "release/variant" -> keys of stored passed/failed outcomes


class WorkerJob(_Model):
    name: str
    recipe: str
    variant_config: RenderSettings
    engine: str
    out_dir: str  # the private output folder
    log_dir: str
    channels: list[str]  # staging first, then upstream
    pytorch: str
    targets: list[TargetIn]
    blocked: list[str] = Field(default_factory=list)  # "release/variant" where a dependency failed
    deps_digest: str = ""
    dep_view: str | None = None  # file:// URL of the channel with this run's builds of the dependencies
    variants: list[VariantIn]


class TestOut(_Model):
    __test__ = False  # not a pytest class

    pytorch: str
    variant: str
    ok: bool
    message: str | None = None
    log: str | None = None  # file name in the log folder
    error: bool = False  # could not run (infrastructure), neither passed nor failed
    env: dict[str, str] = Field(default_factory=dict)  # the test environment: name -> "name-version-build"


class VariantOut(_Model):
    artifact: str
    built: bool | None = None  # None: not built (skip-existing)
    message: str | None = None
    log: str | None = None  # build log file name in the log folder
    produced: str | None = None  # the built file, relative to the output folder
    tests: list[TestOut] = Field(default_factory=list)


class WorkerResult(_Model):
    variants: list[VariantOut] = Field(default_factory=list)


def _sha256(path: Path) -> str:  # (not channels.local's: the worker keeps its imports small, it starts per package)
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def target_id(pytorch: str, variant: str) -> str:
    return f"{pytorch}/{variant}"


def test_key(artifact_sha256: str, target: TargetIn, deps_digest: str) -> str:
    """Everything a test outcome depends on: same key, same outcome (no need to re-run)."""
    tid = target_id(target.pytorch, target.variant) + ("/gpu" if target.gpu else "")  # a GPU run is another test
    return hashlib.sha256(f"{artifact_sha256}|{tid}|{target.sha256}|{deps_digest}".encode()).hexdigest()


def admitted_targets(depends: list[str], pytorch: str, targets: list[TargetIn]) -> list[TargetIn]:
    """The targets an artifact's own pytorch pin admits."""
    pins = [p for p in (parse_spec(d) for d in depends) if p.ok and p.name == pytorch]
    return [t for t in targets if all(admits(p.version, t.pytorch) for p in pins)]


def work(job: WorkerJob) -> WorkerResult:
    from rattler_build import Package

    builder = make_builder(job.engine)
    out_dir, logs = Path(job.out_dir), Path(job.log_dir)
    report = WorkerResult()
    blocked = set(job.blocked)
    for v in job.variants:
        spec = v.spec
        rep = VariantOut(artifact=spec.artifact)
        report.variants.append(rep)
        if v.action == "build":
            rep.log = f"{spec.build_string}.build.log"
            res = builder.build(BuildJob(Path(job.recipe), spec, job.variant_config, out_dir, tuple(job.channels),
                                         logs / rep.log))
            rep.built, rep.message = res.ok, res.message
            if not res.ok or res.path is None:
                rep.built = False
                continue
            path = Path(res.path)
            try:
                rep.produced = path.resolve().relative_to(out_dir.resolve()).as_posix()
            except ValueError:
                rep.built, rep.message = False, f"rattler-build reported {path}, outside the output folder"
                continue
        else:
            path = Path(v.staged or "")
        sha = _sha256(path)
        depends = list(Package.from_file(str(path)).depends)
        for t in admitted_targets(depends, job.pytorch, job.targets):
            tid = target_id(t.pytorch, t.variant)
            if tid in blocked or t.url is None or test_key(sha, t, job.deps_digest) in v.known.get(tid, ()):
                continue  # the orchestrator records these itself
            log = f"{spec.build_string}.{t.pytorch}-{t.variant}.test.log"
            channels = (t.url, *([job.dep_view] if job.dep_view else []), *job.channels)
            tres = builder.test(TestJob(path, channels, t.cuda, logs / log))
            rep.tests.append(TestOut(pytorch=t.pytorch, variant=t.variant, ok=tres.ok, message=tres.message, log=log,
                                     error=tres.error, env=tres.env))
    return report


def main(argv: list[str] | None = None) -> int:
    """Entry point inside the sandbox. Everything recipe code prints goes to stderr; the report is the
    only thing written to the original stdout."""
    args = sys.argv[1:] if argv is None else argv
    report_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    job = WorkerJob.model_validate_json(Path(args[0]).read_text(encoding="utf-8"))
    report = work(job)
    with os.fdopen(report_fd, "w", encoding="utf-8") as fh:
        fh.write(report.model_dump_json() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
