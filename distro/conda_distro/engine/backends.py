"""Builders behind one small protocol: rattler-build (default, in-process Python API) and conda-build
(optional, subprocess; used only when `conda-build` is on PATH and `--engine conda-build` is given).

A backend turns plain data (:class:`BuildJob`, :class:`TestJob`) into plain data
(:class:`BuildOutcome`, :class:`TestOutcome`), so jobs can cross a process boundary.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from conda_distro.errors import EngineUnavailableError
from conda_distro.util.rattler_env import rattler_env, scratch_dir

if TYPE_CHECKING:
    from rattler_build import RenderedVariant

    from conda_distro.recipe.render import RenderSettings


@dataclass(frozen=True)
class VariantSpec:
    """One rendered variant of a recipe, known before building."""

    name: str
    version: str
    build_string: str
    build_number: int
    subdir: str
    variant: dict[str, str] = field(default_factory=dict)

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}-{self.build_string}.conda"

    @property
    def artifact(self) -> str:
        return f"{self.subdir}/{self.filename}"

    @property
    def build_cuda(self) -> str | None:
        """``CONDA_OVERRIDE_CUDA`` while building: the CUDA row's ``cuda_compiler_version`` (its host
        environment then resolves the cuda pytorch build, which depends on ``__cuda``, as conda-forge's CUDA
        builds do); None for every other variant (the environment's override, normally none, is kept)."""
        cuda = self.variant.get("cuda_compiler_version", "None")
        return cuda if cuda not in ("None", "") else None


#: where a backend sends its log, line by line, as it works (the runner streams it to the orchestrator)
LogSink = Callable[[str], None]


def file_sink(path: Path) -> LogSink:
    """A sink appending to the file ``path`` (for callers outside the sandboxed runner)."""
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(line: str) -> None:
        with open(path, "a", encoding="utf-8", errors="replace") as fh:
            fh.write(line.rstrip("\n") + "\n")

    return write


@dataclass(frozen=True)
class BuildJob:
    recipe: Path
    variant: VariantSpec
    variant_config: RenderSettings
    output_dir: Path
    channels: tuple[str, ...]
    sink: LogSink


@dataclass(frozen=True)
class BuildOutcome:
    ok: bool
    path: Path | None
    message: str | None = None


@dataclass(frozen=True)
class TestJob:
    artifact: Path
    channels: tuple[str, ...]
    cuda: str  # CONDA_OVERRIDE_CUDA value: "" for the cpu variant
    sink: LogSink


@dataclass(frozen=True)
class TestOutcome:
    ok: bool
    message: str | None = None
    #: the test could not run for a reason of the infrastructure (not the package's fault)
    error: bool = False
    #: the packages rattler-build installed into the test environment: name -> "name-version-build"
    env: dict[str, str] = field(default_factory=dict)
    #: every test environment rattler-build created, in order (one per test; more for a test with several
    #: environments), each as ``env`` (the package itself left out)
    envs: tuple[dict[str, str], ...] = ()
    #: the package has no tests (rattler-build ran nothing): passed, and `neutral` in the gate
    no_tests: bool = False
    #: a test environment could not be set up, and no test script had run (rattler-build's own words)
    env_failed: bool = False
    #: what rattler-build found no candidates for, when ``env_failed`` (specs, from its solver's report)
    missing: tuple[str, ...] = ()


class Builder(Protocol):
    name: str

    def render(self, recipe: Path, variant_config: RenderSettings) -> list[VariantSpec]: ...

    def declared_names(self, recipe: Path, variant_config: RenderSettings) -> frozenset[str]: ...

    def build(self, job: BuildJob) -> BuildOutcome: ...

    def test(self, job: TestJob) -> TestOutcome: ...


def _send(sink: LogSink, lines: list) -> None:
    for line in lines:
        sink(str(line).rstrip("\n"))


class _Stream:
    """rattler-build's progress callback: every log message goes to the sink as it happens (without a
    callback rattler-build keeps a build's or test's output in memory until it ends)."""

    def __init__(self, sink: LogSink) -> None:
        self.sink = sink

    def on_log(self, event: Any) -> None:
        self.sink(str(event.message))

    def on_build_step(self, event: Any) -> None:
        self.sink(f"== {event.step_name}: {event.message}")

    def on_download_start(self, event: Any) -> None:
        self.sink(f"downloading {event.url}")

    def on_download_progress(self, event: Any) -> None:
        return None

    def on_download_complete(self, event: Any) -> None:
        return None


#: a test script ended by SIGKILL (128 + 9): killed from outside the test, most often by the kernel's
#: out-of-memory killer when test environments filled the RAM disk; not a verdict on the package
KILLED = "Script failed with status 137"
KILLED_WHY = "the test process was killed (SIGKILL: out of memory, or killed from outside)"
#: a test that failed writing to a full disk (ENOSPC, errno 28): the machine's room, not the package
DISK_FULL = ("No space left on device", "[Errno 28]", "os error 28")
DISK_FULL_WHY = "disk full (ENOSPC)"
_KNOWN_FAILURES = ("Script failed with status", "failed to setup test environment", "Error:", "error:")


def _failure_line(output: list) -> str:
    """The one line of a test's output that says why it failed: for a failing script, its status and
    the script's last output line (e.g. ``Script failed with status 1: AssertionError: [0, 128, 256]``)."""
    lines = [ln.strip() for chunk in output for ln in str(chunk).splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("Script failed with status"):
            last = lines[i - 1] if i > 0 else ""
            return (f"{ln}: {last}" if last and not last.startswith("+ ") else ln)[:200]
    for needle in _KNOWN_FAILURES:
        hit = next((ln for ln in reversed(lines) if needle in ln), None)
        if hit:
            return hit.split("failed to run test: ")[-1][:200]
    return lines[-1][:200] if lines else "no output"


_ENV_DONE = "Successfully updated the test environment"
_ENV_FAILED = "failed to setup test environment"
_NO_CANDIDATES = re.compile(r"No candidates were found for ([^\s,]+(?: [^\s,]+)?)"
                            r"|([A-Za-z0-9_][A-Za-z0-9_.\-]*(?: [^\s,]+)?), for which no candidates were found")


def missing_specs(text: str) -> tuple[str, ...]:
    """The specs a solver report (rattler's or rattler-build's) says nothing can satisfy."""
    found = (m.group(1) or m.group(2) for m in _NO_CANDIDATES.finditer(text))
    return tuple(dict.fromkeys(s.rstrip(".:") for s in found if s))


def env_setup_failure(output: list) -> tuple[str, ...] | None:
    """When a failed test's environment could not be set up before any of its scripts ran, the specs
    rattler-build's solver found no candidates for (possibly none); None otherwise. Only then is every
    line rattler-build's own: a script that ran would have followed rattler-build's report that the
    environment was ready, which recipe code cannot take back."""
    lines = [ln.strip() for chunk in output for ln in str(chunk).splitlines() if ln.strip()]
    if any(_ENV_DONE in ln for ln in lines) or not any(_ENV_FAILED in ln for ln in lines):
        return None
    return missing_specs("\n".join(lines))


def environment_of(output: list) -> dict[str, str]:
    """The packages of a test environment, from the table rattler-build prints when it creates it
    (``│ name ┆ version ┆ build ┆ channel ┆ size │``), read only up to where it says the environment is
    ready: what the test script prints afterwards is not looked at."""
    env: dict[str, str] = {}
    for ln in (ln.strip() for chunk in output for ln in str(chunk).splitlines()):
        if _ENV_DONE in ln:
            break
        if not ln.startswith("│"):
            continue
        cells = [c.strip(" │") for c in ln.split("┆")]
        if len(cells) >= 3 and cells[0] and cells[0] != "Package":
            env.setdefault(cells[0], f"{cells[0]}-{cells[1]}-{cells[2]}")
    return env


#: at most so many test environments are recorded for one package (a package has a handful of tests)
MAX_ENVS = 50


def environments_of(output: list) -> list[dict[str, str]]:
    """Every test environment rattler-build created, in order: each of its tables (``│ name ┆ version ┆
    build ┆ …``) that it printed as one message (a multi-line chunk of ``output``, top border to bottom
    border). A test script's output reaches ``output`` a line at a time, so a table printed by a script
    (to pass off another environment as the one a later test ran in) is never one of them."""
    envs: list[dict[str, str]] = []
    for chunk in (str(c) for c in output):
        lines = [ln.strip() for ln in chunk.splitlines() if ln.strip()]
        if len(lines) < 3 or not lines[0].startswith("╭") or not lines[-1].startswith("╰"):
            continue
        env: dict[str, str] = {}
        for ln in lines[1:-1]:
            cells = [c.strip(" │") for c in ln.split("┆")]
            if ln.startswith("│") and len(cells) >= 3 and cells[0] and cells[0] != "Package":
                env.setdefault(cells[0], f"{cells[0]}-{cells[1]}-{cells[2]}")
        envs.append(env)
        if len(envs) >= MAX_ENVS:
            break
    return envs


def _explain_unsolvable(spec: str, job: TestJob) -> str | None:
    """The rattler solver's account of why ``spec`` has no test environment in ``job.channels`` (with
    ``__cuda`` exactly when the job is a cuda test); None when it does solve or cannot be asked."""
    import asyncio

    from rattler import Subdir, solve
    from rattler.exceptions import SolverError

    from conda_distro.engine.releases import SOLVE_TIMEOUT
    from conda_distro.vocab import virtual_packages

    try:
        asyncio.run(solve(list(job.channels), [spec], platforms=[Subdir.current(), Subdir("noarch")],
                          virtual_packages=virtual_packages(bool(job.cuda)), timeout=SOLVE_TIMEOUT))
    except SolverError as exc:
        return str(exc).strip()
    except Exception:  # noqa: BLE001 - an explanation is a nicety; the test failed either way
        return None
    return None


def blocking_requirement(explanation: str) -> str:
    """The line of a solver report naming the requirement that cannot be met, without the tree."""
    lines = [ln.strip(" │├└─").strip() for ln in explanation.splitlines() if ln.strip(" │├└─").strip()]
    hit = next((ln for ln in lines if ", which cannot be installed" in ln or ", for which no candidates" in ln), None)
    return (hit or (lines[0] if lines else "unsolvable")).rstrip(":")[:200]


class RattlerBuildBackend:
    """py-rattler-build: render, build (tests skipped at build time), then `Package.run_tests` per target."""

    name = "rattler-build"

    def _variants(self, recipe: Path, variant_config: RenderSettings) -> list[RenderedVariant]:
        from conda_distro.recipe.render import live_variants  # (not at import: a test runner never renders)

        return live_variants(recipe, variant_config)

    def render(self, recipe: Path, variant_config: RenderSettings) -> list[VariantSpec]:
        out: list[VariantSpec] = []
        for v in self._variants(recipe, variant_config):
            r = v.recipe
            noarch = r.build.noarch
            subdir = "noarch" if noarch else v.variant.get("target_platform", "linux-64")
            used = {str(k): str(val) for k, val in v.variant.items() if k != "target_platform"}
            spec = VariantSpec(r.package.name, str(r.package.version), r.build.string, int(r.build.number),
                               subdir, used)
            if all(o.artifact != spec.artifact for o in out):  # (unused variant keys repeat a variant)
                out.append(spec)
        return out

    def declared_names(self, recipe: Path, variant_config: RenderSettings) -> frozenset[str]:
        """The package names the recipe may produce: its folder's name, or for a multi-output recipe its
        outputs' names (rendered with the fixed environment)."""
        from rattler_build import MultiOutputRecipe, RattlerBuildError, Stage0Recipe

        try:
            multi = isinstance(Stage0Recipe.from_file(str(recipe)), MultiOutputRecipe)
        except RattlerBuildError:
            multi = False
        if not multi:
            return frozenset({recipe.parent.name})
        return frozenset(v.name for v in self.render(recipe, variant_config))

    def build(self, job: BuildJob) -> BuildOutcome:
        from rattler_build import RattlerBuildError, ToolConfiguration

        match = [v for v in self._variants(job.recipe, job.variant_config)
                 if v.recipe.build.string == job.variant.build_string and v.recipe.package.name == job.variant.name]
        if not match:
            return BuildOutcome(False, None, f"variant {job.variant.build_string} no longer renders from the recipe")
        with rattler_env(cuda=job.variant.build_cuda):
            try:
                res = match[0].run_build(
                    tool_config=ToolConfiguration(test_strategy="skip"),
                    output_dir=str(job.output_dir),
                    channels=list(job.channels),
                    progress_callback=_Stream(job.sink),
                )
            except RattlerBuildError as exc:
                job.sink(f"ERROR: {getattr(exc, 'message', exc)}")
                return BuildOutcome(False, None, str(getattr(exc, "message", exc)).strip().splitlines()[0])
        return BuildOutcome(True, Path(res.packages[0]))

    def test(self, job: TestJob) -> TestOutcome:
        from rattler_build import Package, RattlerBuildError

        pkg = Package.from_file(str(job.artifact))
        with rattler_env(cuda=job.cuda, tmpdir=scratch_dir()):
            try:
                results = pkg.run_tests(channel=list(job.channels), progress_callback=_Stream(job.sink))
            except RattlerBuildError as exc:  # the tests could not be run at all: infrastructure
                job.sink(f"ERROR: {exc}")
                return TestOutcome(False, str(exc).splitlines()[0], error=True)
        lines: list[str] = []
        failed = None
        env: dict[str, str] = {}
        # each result's output is the whole run's (every test's), so the environments are read once
        envs = tuple({n: i for n, i in e.items() if n != pkg.name} for e in environments_of(results[0].output)) \
            if results else ()
        setup: tuple[str, ...] | None = None
        full: str | None = None  # the failing test's first line that says the disk was full
        for r in results:
            lines.append(f"=== test {r.test_index}: {'passed' if r.success else 'FAILED'}")
            for name, ident in environment_of(r.output).items():
                env.setdefault(name, ident)
            if not r.success and failed is None:
                setup = env_setup_failure(r.output)
                failed = f"test {r.test_index} failed: {_failure_line(r.output)}"
                full = next((ln.strip() for chunk in r.output for ln in str(chunk).splitlines()
                             if any(w in ln for w in DISK_FULL)), None)
                if "failed to setup test environment" in failed:  # rattler-build gives no reason (gotcha 11)
                    why = _explain_unsolvable(f"{pkg.name} =={pkg.version} {pkg.build_string}", job)
                    if why:
                        lines += ["=== why the test environment cannot be solved (rattler solver):", why]
                        failed += f": {blocking_requirement(why)}"
                        if setup is not None:  # (this runner's own solve, in the sandbox's channels)
                            setup = tuple(dict.fromkeys((*setup, *missing_specs(why))))
                    # (an environment rattler-build cannot set up is the package's failure even when
                    # rattler's own solve finds one: their channel priorities differ)
        if not results:
            lines.append("(the package has no tests)")
        killed = False
        if failed is not None and KILLED in failed:  # the OOM killer or someone outside: not finished (debci's tmpfail)
            killed, failed = True, f"{failed} ({KILLED_WHY})"
            lines.append(f"=== {KILLED_WHY}: recorded as an infrastructure error; `build --retry-errors` runs it again")
        elif failed is not None and full:  # spurious: free space, run it again
            killed, failed = True, f"{DISK_FULL_WHY}: {full[:200]}; {failed}"
            lines.append(f"=== {DISK_FULL_WHY}: recorded as an infrastructure error; free space, then "
                         "`build --retry-errors` runs it again")
        _send(job.sink, lines)
        env.pop(pkg.name, None)
        return TestOutcome(failed is None, failed, error=killed, env=env, envs=envs, no_tests=not results,
                           env_failed=setup is not None, missing=setup or ())


class CondaBuildBackend:
    """conda-build through its CLI (`conda-build` and `conda-build --test`). Not exercised by the test
    suite here: conda-build cannot be installed on this machine."""

    name = "conda-build"

    def __init__(self) -> None:
        exe = shutil.which("conda-build")
        if not exe:
            raise EngineUnavailableError("conda-build is not on PATH", field="--engine",
                                         hint="install conda-build (conda install conda-build) or use the default --engine rattler-build")
        self.exe = exe

    def render(self, recipe: Path, variant_config: RenderSettings) -> list[VariantSpec]:
        return RattlerBuildBackend().render(recipe, variant_config)

    def declared_names(self, recipe: Path, variant_config: RenderSettings) -> frozenset[str]:
        return RattlerBuildBackend().declared_names(recipe, variant_config)

    def _run(self, args: list[str], sink: LogSink) -> subprocess.CompletedProcess:
        proc = subprocess.run([self.exe, *args], capture_output=True, text=True, check=False)
        _send(sink, [*proc.stdout.splitlines(), *proc.stderr.splitlines()])
        return proc

    def build(self, job: BuildJob) -> BuildOutcome:
        args = ["--no-test", "--output-folder", str(job.output_dir), "--override-channels"]
        for c in job.channels:
            args += ["-c", c]
        for key, _values in job.variant_config.variant_dict.items():
            if key in job.variant.variant:
                args += ["--variants", f"{{{key}: ['{job.variant.variant[key]}']}}"]
        proc = self._run([*args, str(job.recipe.parent)], job.sink)
        out = job.output_dir / job.variant.artifact
        return BuildOutcome(proc.returncode == 0 and out.exists(), out if out.exists() else None,
                            None if proc.returncode == 0 else f"conda-build exited with {proc.returncode}")

    def test(self, job: TestJob) -> TestOutcome:
        args = ["--test", str(job.artifact), "--override-channels"]
        for c in job.channels:
            args += ["-c", c]
        with rattler_env(cuda=job.cuda):
            proc = self._run(args, job.sink)
        return TestOutcome(proc.returncode == 0, None if proc.returncode == 0 else f"conda-build --test exited with {proc.returncode}")


ENGINES: dict[str, Callable[[], Builder]] = {"rattler-build": RattlerBuildBackend, "conda-build": CondaBuildBackend}


def make_builder(name: str) -> Builder:
    try:
        return ENGINES[name]()
    except KeyError:
        raise EngineUnavailableError(f"unknown engine '{name}'", field="--engine",
                                     hint=f"choose one of: {', '.join(ENGINES)}") from None
