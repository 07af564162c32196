"""What a unit's environments need from the channels, decided by the engines themselves, outside any
sandbox (the orchestrator has the network; it runs no recipe code here).

* **Build and host environments**: rattler-build's own renderer and solver
  (``build_recipes(render_only=True, with_solve=True)``, run in a child process of its own because
  rattler-build holds the GIL and prints its answer on stdout). It renders the recipe exactly as the
  build will (the fixed environment, the distribution's variant configuration, no ``variants.yaml``
  next to the recipe), solves the build environment, adds its strong run_exports and the compilers to
  the host requirements, solves the host environment, and answers with every resolved record (URL,
  sha256, the channel it came from): the records the build sandbox will install, nothing guessed.
* **Test environments**: the environments rattler-build's ``run_tests`` creates for the built package,
  made with rattler's solver on the same channels, in the same order, with strict priority and the
  virtual packages of the target (``__cuda`` for a cuda test): per test, the package pinned to its
  exact build plus what that test type adds (a ``python`` test: ``python=V`` per ``python_version``
  and ``pip`` for ``pip_check``; a ``script`` test: its run requirements, and its build requirements in
  an environment of their own; ``perl``/``r``/``ruby``: the interpreter; ``downstream``: the dependent).

The records that come from a remote upstream channel are then mirrored (:mod:`.mirror`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from conda_distro.util.exitguard import guard_exit
from conda_distro.util.scratch import ScratchDir

if TYPE_CHECKING:
    from conda_distro.engine.backends import VariantSpec
    from conda_distro.recipe.render import RenderSettings

NEEDS_TIMEOUT = 900  # seconds for rattler-build's render-and-solve of one recipe (repodata downloads included)


class NeededRecord(BaseModel):
    """One package record an environment installs, as the channel serves it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    url: str
    file_name: str
    subdir: str
    channel: str = ""  # the base URL of the channel it came from
    sha256: str | None = None
    md5: str | None = None
    size: int | None = None
    depends: tuple[str, ...] = ()  # as the channel serves them (repodata patches applied)
    constrains: tuple[str, ...] = ()

    @classmethod
    def of_json(cls, rec: dict[str, Any]) -> NeededRecord:
        """A record as rattler-build prints it (``fn``, ``url``, ``channel``, ``sha256``, ...)."""
        return cls(url=rec["url"], file_name=rec.get("fn") or rec["url"].rsplit("/", 1)[-1],
                   subdir=rec.get("subdir") or rec["url"].rsplit("/", 2)[-2], channel=rec.get("channel") or "",
                   sha256=rec.get("sha256"), md5=rec.get("md5"), size=rec.get("size"),
                   depends=tuple(rec.get("depends") or ()), constrains=tuple(rec.get("constrains") or ()))

    @classmethod
    def of_record(cls, rec: Any) -> NeededRecord:
        """A py-rattler ``RepoDataRecord``."""
        return cls(url=str(rec.url), file_name=rec.file_name, subdir=rec.subdir, channel=str(rec.channel or ""),
                   sha256=rec.sha256.hex() if rec.sha256 else None, md5=rec.md5.hex() if rec.md5 else None,
                   size=rec.size, depends=tuple(rec.depends), constrains=tuple(rec.constrains))


@dataclass
class Needs:
    """What one sandbox's environments need: records, and the environments no solve could make (their
    solver report: the sandbox will fail on them too, and that is the package's failure)."""

    records: list[NeededRecord] = field(default_factory=list)
    unsolvable: list[str] = field(default_factory=list)
    problem: str | None = None  # the question could not be answered (an infrastructure error)
    #: the remembered specs (MirrorStore.wanted) this sandbox was prepared with: what it asked for beyond
    #: the package's own solves (a test running beside it may remember more meanwhile)
    asked: tuple[str, ...] = ()
    #: each test environment's files (``name-version-build``, by name), in the order of the package's tests
    #: (:func:`test_needs`; an environment that does not solve is left out)
    envs: list[dict[str, str]] = field(default_factory=list)

    def add(self, recs: Iterable[NeededRecord]) -> None:
        seen = {r.url for r in self.records}
        for r in recs:
            if r.url not in seen:
                seen.add(r.url)
                self.records.append(r)


# ------------------------------------------------------------------------------------ build and host


class SolveJob(BaseModel):
    """The child process's question: render ``recipe`` with ``variant_config`` and solve its build and
    host environments in ``channels``."""

    model_config = ConfigDict(extra="forbid")

    recipe: str
    variant_config: dict[str, Any]  # RenderSettings as data (jobs.BuildPhaseJob.settings_data)
    channels: list[str]
    overrides: dict[str, list[str]] = Field(default_factory=dict)  # narrow to one variant
    auth_file: str | None = None


def _variant_file(data: dict[str, Any], folder: Path) -> Path:
    """The variant configuration as a file rattler-build reads (its YAML is JSON-compatible)."""
    doc: dict[str, Any] = {k: list(v) for k, v in data["variants"]}
    if data.get("zip_keys"):
        doc["zip_keys"] = [list(z) for z in data["zip_keys"]]
    path = folder / "variants.yaml"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def solve_main(job_file: str) -> int:
    """Child process: print rattler-build's rendered-and-solved recipe (JSON) on stdout."""
    import warnings

    from rattler_build import build_recipes

    job = SolveJob.model_validate_json(Path(job_file).read_text(encoding="utf-8"))
    with ScratchDir("conda-distro-needs-") as tmp:
        variants = _variant_file(job.variant_config, Path(tmp))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                build_recipes([job.recipe], channel=job.channels, variant_config=[str(variants)],
                              variant_overrides=job.overrides or None, ignore_recipe_variants=True,
                              target_platform=job.variant_config.get("target_platform"), render_only=True,
                              with_solve=True, output_dir=str(Path(tmp) / "out"), auth_file=job.auth_file)
            except Exception as exc:  # noqa: BLE001 - the solver's report is in the error's log, not its message
                for line in getattr(exc, "log", None) or ():
                    print(line, file=sys.stderr)
                print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
                return 1
    return 0


def _solve_child(job: SolveJob, work: Path) -> tuple[list[dict[str, Any]] | None, str]:
    """(rattler-build's rendered outputs, or None when it failed; its error output)."""
    from conda_distro.util.rattler_env import RENDER_ENV

    job_file = work / "needs-job.json"
    job_file.write_text(job.model_dump_json(), encoding="utf-8")
    env = {**RENDER_ENV, "RATTLER_CACHE_DIR": os.environ.get("RATTLER_CACHE_DIR")
           or str(Path.home() / ".cache" / "rattler" / "cache")}
    try:
        proc = subprocess.run([sys.executable, "-I", "-B", "-m", "conda_distro.engine.needs", str(job_file)],
                              capture_output=True, text=True, env=env, timeout=NEEDS_TIMEOUT, check=False,
                              cwd=str(work))
    except subprocess.TimeoutExpired:
        return None, f"rattler-build's solve did not end within {NEEDS_TIMEOUT} s"
    finally:
        job_file.unlink(missing_ok=True)
    err = "\n".join(ln for ln in proc.stderr.splitlines() if ln.strip())
    if proc.returncode != 0:
        return None, err
    start = proc.stdout.find("[")
    try:
        outputs = json.loads(proc.stdout[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        return None, "rattler-build's answer was not JSON"
    return (outputs if isinstance(outputs, list) else None), err


def _records_of(output: dict[str, Any]) -> list[NeededRecord]:
    deps = output.get("finalized_dependencies") or {}
    return [NeededRecord.of_json(r) for env in ("build", "host") for r in ((deps.get(env) or {}).get("resolved") or ())]


#: the words of a solver's report that name what is missing (preferred over the exception's last line,
#: which only says that the solve failed)
SOLVER_REPORT_WORDS = ("No candidates were found", "cannot be installed", "Cannot solve the request", "nothing provides")


def _last_line(text: str) -> str:
    """The line of a failed solve that says why: the solver's report when it names what is missing,
    else the last line said."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for words in SOLVER_REPORT_WORDS:
        hit = next((ln for ln in lines if words in ln), None)
        if hit is not None:
            return hit[:300]
    return lines[-1][:300] if lines else "no output"


def build_needs(recipe: Path, settings: RenderSettings, channels: Sequence[str], variants: Sequence[VariantSpec],
                work: Path) -> dict[str, Needs]:
    """artifact -> what the build and host environments of that variant install (rattler-build's own
    solve, in ``channels``). A variant whose environments cannot be solved gets its solver's report in
    ``unsolvable`` (its build fails the same way in the sandbox: the package's failure)."""
    from conda_distro.engine.jobs import BuildPhaseJob

    data = BuildPhaseJob.settings_data(settings)
    auth = os.environ.get("RATTLER_AUTH_FILE")
    job = SolveJob(recipe=str(recipe), variant_config=data, channels=list(channels), auth_file=auth)
    outputs, err = _solve_child(job, work)
    out: dict[str, Needs] = {}
    if outputs is not None:
        by_key = {((o.get("recipe") or {}).get("package", {}).get("name"),
                   (o.get("recipe") or {}).get("build", {}).get("string")): o for o in outputs}
        for spec in variants:
            hit = by_key.get((spec.name, spec.build_string))
            out[spec.artifact] = Needs(records=_records_of(hit)) if hit is not None else Needs(
                problem=f"rattler-build's solve outside the sandbox did not render variant {spec.build_string}")
        return out
    for spec in variants:  # one variant may be unsolvable: ask for each on its own
        one = job.model_copy(update={"overrides": {k: [v] for k, v in spec.variant.items()}})
        got, why = _solve_child(one, work) if len(variants) > 1 else (None, err)
        hit = next((o for o in got or () if (o.get("recipe") or {}).get("build", {}).get("string")
                    == spec.build_string), None)
        out[spec.artifact] = Needs(records=_records_of(hit)) if hit is not None else Needs(unsolvable=[_last_line(why)])
    return out


# ------------------------------------------------------------------------------------ tests


def pin_of(name: str, version: str, build: str) -> str:
    return f"{name} =={version} {build}"


def test_spec_sets(pkg: Any) -> list[tuple[list[str], bool]]:
    """The environments rattler-build's ``run_tests`` creates for the package ``pkg`` (a rattler_build
    ``Package``): (specs, must solve) per environment; a ``downstream`` test whose environment cannot be
    solved is skipped by rattler-build, so it need not solve."""
    pin = pin_of(pkg.name, str(pkg.version), pkg.build_string)
    sets: list[tuple[list[str], bool]] = []
    for test in pkg.tests:
        kind = type(test).__name__
        if kind == "PythonTest":
            extra = ["pip"] if test.pip_check else []
            pv = test.python_version
            versions: list[str | None] = [None] if pv is None or pv.is_none() else \
                ([pv.as_single()] if pv.as_single() else list(pv.as_multiple() or [])) or [None]
            for v in versions:
                sets.append(([pin, *([f"python={v}"] if v else []), *extra], True))
        elif kind == "CommandsTest":
            build = [str(s) for s in (test.requirements_build or [])]
            if build:
                sets.append((build, True))
            sets.append(([*(str(s) for s in (test.requirements_run or [])), pin], True))
        elif kind in ("PerlTest", "RTest", "RubyTest"):
            sets.append(([pin, {"PerlTest": "perl", "RTest": "r-base", "RubyTest": "ruby"}[kind]], True))
        elif kind == "DownstreamTest":
            sets.append(([str(test.downstream), pin], False))
    return sets


@functools.lru_cache(maxsize=256)
def package_test_specs(path: str, identity: tuple[int, int, int, int]) -> tuple[str, tuple[tuple[tuple[str, ...], bool], ...]]:
    """The package file's pin and :func:`test_spec_sets`, read once per file (``identity``: its device,
    inode, mtime and size, so a file replaced at the same path is read again). Reading a package's tests
    (rattler-build's ``Package.tests``) costs about 0.3 s; a watch solves each file on every target."""
    from rattler_build import Package

    pkg = Package.from_file(path)
    return (pin_of(pkg.name, str(pkg.version), pkg.build_string),
            tuple((tuple(specs), required) for specs, required in test_spec_sets(pkg)))


def test_needs(artifact: Path, channels: Sequence[str], cuda: bool, extra: Sequence[str] = (),
               gateway: Any = None) -> Needs:
    """What the test environments of the package file ``artifact`` install from ``channels`` (strict
    priority, this machine's virtual packages, ``__cuda`` exactly when ``cuda``); ``extra``: specs an
    earlier sandbox of the package needed beyond these, each solved with the package too. ``gateway``: a
    rattler ``Gateway`` shared by many solves (its repodata is read once; default: one of its own)."""
    from rattler import Gateway, Subdir, solve
    from rattler.exceptions import SolverError

    from conda_distro.engine.releases import SOLVE_TIMEOUT
    from conda_distro.vocab import virtual_packages

    st = artifact.stat()
    pin, sets = package_test_specs(str(artifact), (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size))
    gw = gateway if gateway is not None else Gateway()
    needs = Needs()
    vps = virtual_packages(cuda)
    for i, (specs, required) in enumerate([*((list(s), r) for s, r in sets), *(([pin, x], True) for x in extra)]):
        try:
            recs = asyncio.run(solve(list(channels), specs, gateway=gw, platforms=[Subdir.current(), Subdir("noarch")],
                                     virtual_packages=vps, timeout=SOLVE_TIMEOUT))
        except SolverError as exc:
            if required:
                needs.unsolvable.append(str(exc).strip())
            continue
        except Exception as exc:  # noqa: BLE001 - rattler raises several fetch errors: infrastructure
            needs.problem = f"cannot read the channels to solve the test environment: {str(exc).splitlines()[0]}"
            return needs
        needs.add(NeededRecord.of_record(r) for r in recs)
        if i < len(sets):  # (the package's own environments, not the remembered extras)
            needs.envs.append({r.name.normalized: r.file_name.removesuffix(".conda").removesuffix(".tar.bz2") for r in recs})
    return needs


def main(argv: list[str] | None = None) -> int:
    guard_exit()  # its exit waits for py-rattler's native threads to leave Python
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m conda_distro.engine.needs JOB.json", file=sys.stderr)
        return 2
    return solve_main(args[0])


if __name__ == "__main__":
    sys.exit(main())
