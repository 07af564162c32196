"""The two sandboxed phases of a unit, orchestrator side: one **build** sandbox per package (its variants,
no tests), then one **test** sandbox per artifact × release × variant.

Each phase makes a fresh private folder, writes the runner's job, shows the sandbox exactly what the
phase reads (:class:`~conda_distro.engine.sandbox.Layout`: the recipe folder or its copy with fetched
sources, the channels, the job file; for a test, the artifact from staging, read-only), runs the runner
under :func:`~conda_distro.engine.supervise.supervise` (limits, streamed log) and removes the folder.
When an upstream channel is remote, a phase first asks the engines what its environments install
(:mod:`.needs`) and shows the sandbox mirror views of those records in that channel's place
(:mod:`.mirror`); a sandbox that still lacks something is judged here (an infrastructure ``error`` when
the upstream channels can serve it, the package's failure when they cannot).

Sealing: the moment the build sandbox has exited (and with it every process it started), the
orchestrator hashes every package file it left (:func:`~conda_distro.engine.intake.seal`); intake
copies accepted files into staging and refuses one whose bytes are not the ones hashed. Tests never
see a build's output folder: they read the artifact from staging, which every sandbox sees read-only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from conda_distro.engine import intake
from conda_distro.engine.backends import blocking_requirement
from conda_distro.engine.jobs import BuildPhaseJob, BuiltMsg, TestedMsg, TestPhaseJob
from conda_distro.engine.limits import describe
from conda_distro.engine.mirror import MirrorError, Mirroring, shown_url
from conda_distro.engine.needs import Needs, build_needs, test_needs
from conda_distro.engine.sandbox import Layout, file_url_path, worker_env
from conda_distro.engine.sources import SourceFetchError, fetch_source, recipe_copy
from conda_distro.engine.supervise import Launch, supervise
from conda_distro.state.results import Attempt
from conda_distro.util.fsutil import remove_tree
from conda_distro.util.rattler_env import SCRATCH_VAR, index_channel, ram_has_room, scratch_dir
from conda_distro.util.scratch import new_scratch
from conda_distro.vocab import Variant

if TYPE_CHECKING:
    from conda_distro.config import Limits
    from conda_distro.engine.backends import VariantSpec
    from conda_distro.engine.sources import RecipeInputs
    from conda_distro.recipe.render import RenderSettings


@dataclass(frozen=True)
class Isolation:
    """How runners run: ``bwrap`` is the sandbox's executable, None for ``--no-sandbox``; ``work_root``
    holds each unit's private folder while it runs; ``sources`` is the cache url sources are fetched
    into. A sandbox shows only what a phase names."""

    bwrap: str | None
    work_root: Path
    sources: Path
    devices: tuple[Path, ...] = ()  # device nodes a GPU test's sandbox puts back (the GPU's, when there is one)
    mirror: Mirroring | None = None  # remote upstream channels, mirrored for each sandbox (None: all local)


@dataclass(frozen=True)
class PhaseContext:
    """What the phases of one unit read: the package's recipe and settings, where it writes."""

    name: str
    recipe: Path  # recipe.yaml
    root: Path  # the repository (the recipe folder is shown at its place in it)
    inputs: RecipeInputs  # url sources to fetch, path sources to show
    variant_config: RenderSettings
    engine: str
    channels: tuple[str, ...]  # staging first, then upstream
    staging: Path
    logs: Path  # the package's log folder
    declared: frozenset[str]  # package names the recipe may produce
    limits: Limits
    isolation: Isolation
    work: Path  # the unit's private folder
    dep_view: str | None = None  # file:// URL of the channel with this run's builds of the dependencies


class TargetIn(BaseModel):
    """A release × variant a unit's artifacts are tested against, with its release view."""

    model_config = ConfigDict(extra="forbid")

    pytorch: str
    variant: Variant
    url: str | None
    sha256: str | None
    cuda: str
    missing_reason: str | None = None
    gpu: bool = False  # a cuda target on a machine with a working GPU (its tests are not the no-GPU ones)


@dataclass
class BuildOut:
    """One variant's build, as the orchestrator saw it."""

    status: str  # "built" | "failed" | "error"
    reason: str | None = None
    log: str | None = None
    path: Path | None = None  # in staging
    sha256: str | None = None


@dataclass
class TestOut:
    """One test's outcome, as the runner reported it (or why there is none)."""

    __test__ = False

    ok: bool
    error: bool = False
    message: str | None = None
    log: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    envs: tuple[dict[str, str], ...] = ()  # every test environment, in order (rattler-build's tables)
    no_tests: bool = False
    env_failed: bool = False  # its environment could not be set up before any script ran
    missing: tuple[str, ...] = ()  # what rattler-build's solver found no candidates for, then
    attempts: tuple[Attempt, ...] = ()  # every run on these inputs when a failure was confirmed (.confirm)
    baseline: TestOut | None = None  # the baseline side's runs (main's packages), when they were made


IN_USE = ".in-use"  # in a unit's private folder: flock-ed by the process using it


def claim_folder(root: Path, prefix: str) -> tuple[Path, int]:
    """A fresh private folder under ``root`` and the descriptor of its lock, held while this process
    uses it (a process killed with -9 lets go of it: :func:`clear_stale_folders` then removes it)."""
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    fd = os.open(work / IN_USE, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return work, fd


STALE_UNLOCKED = 600.0  # seconds: a folder without its lock file this old was left before the lock was made


def clear_stale_folders(root: Path) -> list[Path]:
    """Remove the private folders under ``root`` that no running process holds (left by a killed build)."""
    removed: list[Path] = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if not d.is_dir() or d.is_symlink():
            continue
        try:
            fd = os.open(d / IN_USE, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            with contextlib.suppress(OSError):
                if time.time() - d.stat().st_mtime > STALE_UNLOCKED:
                    remove_tree(d)
                    removed.append(d)
            continue
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # in use
        finally:
            os.close(fd)  # (also lets go of the lock just taken)
        remove_tree(d)
        removed.append(d)
    return removed


def _fresh(folder: Path, *subs: str) -> Path:
    rw = folder / "rw"
    for sub in subs:
        (rw / sub).mkdir(parents=True)
    return rw


def _tmpdir(lay: Layout, work_in: Path) -> tuple[str, Path | None]:
    """TMPDIR for test environments: a private folder of ``$CONDA_DISTRO_TEST_TMPDIR``; else the sandbox's
    own /tmp (memory) while memory has room (unsandboxed: /dev/shm when roomy); else the work folder."""
    sandboxed = lay.sandboxed
    chosen = os.environ.get(SCRATCH_VAR) or (None if sandboxed else scratch_dir())
    if chosen:
        scratch = new_scratch("conda-distro-testenv-", chosen)  # (a kill -9 leaves it: the next one sweeps it)
        return str(lay.show(scratch, "scratch", writable=True)), scratch
    if sandboxed and ram_has_room():
        return "/tmp", None
    return str(work_in / "tmp"), None


def _show_recipe(unit: PhaseContext, lay: Layout, folder: Path) -> Path:
    """The recipe.yaml the runner builds, as it sees it: the recipe folder (or a copy whose url sources
    point at the fetched files) at its place in the repository under /job/repo, with the path sources
    it names. Raises :class:`SourceFetchError`."""
    recipe_dir = unit.recipe.parent
    try:
        rel = recipe_dir.resolve().relative_to(unit.root.resolve()).as_posix()
    except ValueError:
        rel = f"recipes/{recipe_dir.name}"
    urls: dict[int, str] = {}
    for src in unit.inputs.urls:
        cached = fetch_source(src, unit.isolation.sources)
        urls[src.line] = lay.show(cached, f"sources/{src.sha256}/{cached.name}").as_uri()
    if urls:
        recipe_dir = recipe_copy(recipe_dir, folder / "recipe" / rel, urls).parent
    for path in unit.inputs.paths:
        if path.is_relative_to(unit.recipe.parent.resolve()) or not path.exists():
            continue  # (shown with the recipe folder; a missing one is rattler-build's to report)
        lay.show(path, f"repo/{path.relative_to(unit.root.resolve()).as_posix()}")
    return lay.show(recipe_dir, f"repo/{rel}") / "recipe.yaml"


def run_build_phase(unit: PhaseContext, to_build: list[VariantSpec], gate: threading.Lock) -> dict[str, BuildOut]:
    """Build ``to_build`` in one sandbox; seal, check and stage what it produced (under ``gate``: one
    writer of staging at a time). Returns each variant's outcome by artifact."""
    iso = unit.isolation
    folder = unit.work / "build"
    rw = _fresh(folder, "out", "home", "cache", "tmp")
    lay = Layout(iso.bwrap is not None)
    logs = tuple(unit.logs / f"{s.build_string}.build.log" for s in to_build)
    try:
        work_in = lay.show(rw, "work", writable=True)
        try:
            recipe_in = _show_recipe(unit, lay, folder)
        except SourceFetchError as exc:
            return {s.artifact: BuildOut("failed", f"the source could not be fetched: {exc}") for s in to_build}
        mirrored, mirror_errors = _mirror_build(unit, to_build, folder)
        if mirror_errors:  # (those are not built: the others keep their logs' order)
            to_build = [s for s in to_build if s.artifact not in mirror_errors]
            logs = tuple(unit.logs / f"{s.build_string}.build.log" for s in to_build)
            if not to_build:
                return mirror_errors
        channels = [lay.channel(mirrored.views.get(url, url)) for url in unit.channels]
        job = BuildPhaseJob(recipe=str(recipe_in), variant_config=BuildPhaseJob.settings_data(unit.variant_config),
                            engine=unit.engine,
                            out_dir=str(work_in / "out"), channels=channels, variants=to_build)
        job_file = folder / "job.json"
        job_file.write_text(job.model_dump_json(), encoding="utf-8")
        tmpdir = "/tmp" if lay.sandboxed else str(rw / "tmp")
        ran = supervise(Launch("build", str(lay.show(job_file, "job.json")), worker_env(str(work_in), tmpdir), rw,
                               unit.limits.build_timeout, unit.limits.log_limit, logs,
                               lay.spec() if lay.sandboxed else None, iso.bwrap))
        sealed = intake.seal(rw / "out")  # the sandbox has exited: hash what it left, now
        said = {m.artifact: m for m in ran.messages if isinstance(m, BuiltMsg)}
        ok = {a for a, m in said.items() if m.ok}
        taken = intake.IntakeResult()
        if ok:
            with gate:
                taken = intake.accept(rw / "out", ok, unit.declared, unit.staging,
                                      f"recipes/{unit.recipe.parent.name}", sealed)
                if taken.accepted:
                    index_channel(unit.staging, subdirs=sorted({a.split("/")[0] for a in taken.accepted} - {"noarch"}),
                                  force=False)
        out: dict[str, BuildOut] = {}
        for i, spec in enumerate(to_build):
            log = str(logs[i]) if logs[i].is_file() else None
            msg = said.get(spec.artifact)
            if spec.artifact in taken.accepted:
                out[spec.artifact] = BuildOut("built", None, log, taken.accepted[spec.artifact],
                                              taken.sha256[spec.artifact])
            elif msg is not None:
                out[spec.artifact] = BuildOut("failed", (msg.message if not msg.ok else taken.rejected)
                                              or "the build produced nothing", log)
            elif ran.killed:
                why = ran.why(describe(unit.limits)) if i == ran.part else \
                    f"{ran.killed}: not built (the build sandbox was killed while building another variant)"
                out[spec.artifact] = BuildOut("error", why, log)
            else:
                out[spec.artifact] = BuildOut("failed", ran.why(describe(unit.limits)), log)
            out[spec.artifact] = mirrored.judge(unit, spec.artifact, out[spec.artifact])
        return {**out, **mirror_errors}
    finally:
        remove_tree(folder)


def run_test_phase(unit: PhaseContext, spec: VariantSpec, staged: Path, target: TargetIn, n: int,
                   attempt: str = "") -> TestOut:
    """Run the tests of the staged package ``staged`` against ``target``, in a sandbox of their own.
    ``attempt`` names a confirmation run (``run2``, ``baseline1``, ...): its log is a file of its own."""
    iso = unit.isolation
    folder = unit.work / f"test-{n}"
    rw = _fresh(folder, "home", "cache", "tmp")
    lay = Layout(iso.bwrap is not None)
    log = unit.logs / f"{spec.build_string}.{target.pytorch}-{target.variant}{'.' + attempt if attempt else ''}.test.log"
    scratch = None
    try:
        work_in = lay.show(rw, "work", writable=True)
        assert target.url is not None  # (a target without a release view is never run)
        outside = [target.url, *([unit.dep_view] if unit.dep_view else []), *unit.channels]
        mirrored = _mirror_test(unit, staged, outside, bool(target.cuda), folder)
        if isinstance(mirrored, TestOut):
            return mirrored
        views, needs = mirrored
        channels = [lay.channel(views.get(url, url)) for url in outside]
        staging_in = file_url_path(lay.channel(unit.staging.as_uri()))
        assert staging_in is not None
        job = TestPhaseJob(engine=unit.engine, artifact=str(staging_in / staged.relative_to(unit.staging)),
                           channels=channels, cuda=target.cuda)
        job_file = folder / "job.json"
        job_file.write_text(job.model_dump_json(), encoding="utf-8")
        tmpdir, scratch = _tmpdir(lay, work_in)
        devices = iso.devices if target.gpu else ()
        ran = supervise(Launch("test", str(lay.show(job_file, "job.json")), worker_env(str(work_in), tmpdir), rw,
                               unit.limits.test_timeout, unit.limits.log_limit, (log,),
                               lay.spec(devices) if lay.sandboxed else None, iso.bwrap))
        said = next((m for m in ran.messages if isinstance(m, TestedMsg)), None)
        kept = str(log) if log.is_file() else None
        if said is None or ran.killed:  # no verdict: killed, crashed, timed out
            return TestOut(False, error=True, message=ran.why(describe(unit.limits)), log=kept)
        got = TestOut(said.ok, said.error, said.message, kept, said.env, tuple(said.envs), said.no_tests,
                      said.env_failed, tuple(said.missing))
        return _judge_mirrored(unit, got, needs) if views else got
    finally:
        remove_tree(folder)
        if scratch is not None:
            remove_tree(scratch)


# ------------------------------------------------------------------------------------ remote upstream channels

#: the beginnings of rattler-build's own messages for a build whose environments could not be set up
#: (said before any build script runs: a script's failure is "Script failed to execute")
ENV_SETUP_MESSAGES = ("Failed to resolve dependencies", "Failed to install", "Failed to fetch", "Failed to download",
                      "Could not solve", "Cannot solve")


def _said(exc: Exception) -> str:
    if isinstance(exc, MirrorError):
        return str(exc)
    return shown_url(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")


def env_setup_message(reason: str | None) -> bool:
    """Whether a build's reason is rattler-build's own word for environments it could not set up (with or
    without the exception's class name before it, as rattler-build's Python binding sometimes says it)."""
    text = str(reason or "").removeprefix("PyRattlerBuildError: ")
    return any(text.startswith(m) for m in ENV_SETUP_MESSAGES)


def mirror_gap(unit: PhaseContext, what: str, why: str | None) -> str:
    """The reason recorded when a sandbox could not set up an environment the remote channels can serve."""
    names = ", ".join(f"'{shown_url(ch.ref)}'" for ch in unit.isolation.mirror.remotes) if unit.isolation.mirror else ""
    return (f"mirror: the {what} environment could not be set up from the local mirror of upstream channel {names}, "
            f"although rattler's solve against the channel found one ({why or 'no reason given'}); an infrastructure "
            "error, not the package's: the next attempt (`build --retry-errors`) solves and mirrors again, with "
            "what rattler-build found missing")


def _solver_report(log: str | None) -> str | None:
    """What a build's log says of the environment that could not be solved: the solver's line naming
    what is missing when there is one, else the specs rattler-build asked for (its exception says only
    "Failed to resolve dependencies")."""
    from conda_distro.engine.needs import SOLVER_REPORT_WORDS

    if not log or not Path(log).is_file():
        return None
    with open(log, "rb") as fh:  # the first 1 MiB: an environment is set up before any script speaks
        text = fh.read(1 << 20).decode("utf-8", "replace")
    lines = [ln.strip(" │×╰─▶\t") for ln in text.splitlines()]
    for words in SOLVER_REPORT_WORDS:
        hit = next((ln for ln in lines if words in ln), None)
        if hit:
            return hit[:300]
    specs: list[str] = []
    for i, ln in enumerate(lines):
        if ln == "Specs:":
            specs = []
            for item in lines[i + 1:]:
                if not item.startswith("- "):
                    break
                specs.append(item[2:])
    return f"no solution for the specs {', '.join(specs)}"[:300] if specs else None


@dataclass
class _BuildMirror:
    """The build sandbox's mirror views (remote channel URL -> view URL; empty: no mirroring) and what
    rattler-build's solve outside said of each variant's environments (artifact -> needs)."""

    views: dict[str, str] = field(default_factory=dict)
    needs: dict[str, Needs] = field(default_factory=dict)

    def judge(self, unit: PhaseContext, artifact: str, out: BuildOut) -> BuildOut:
        """A build that failed setting up its environments in the sandbox: the package's failure when the
        upstream channels cannot serve them either (with their solver's report), an infrastructure error
        when rattler-build's own solve against them succeeded."""
        if not self.views or out.status != "failed" or not env_setup_message(out.reason):
            return out
        n = self.needs.get(artifact)
        if n is not None and n.unsolvable:
            why = _solver_report(out.log) or n.unsolvable[0]
            return BuildOut("failed", f"the build environments cannot be solved from the upstream channels: {why}",
                            out.log)
        return BuildOut("error", mirror_gap(unit, "build", out.reason), out.log)


def _mirror_build(unit: PhaseContext, to_build: list[VariantSpec], folder: Path) -> tuple[_BuildMirror, dict[str, BuildOut]]:
    """The build sandbox's mirror views, and the variants that cannot be built for want of a mirror.
    Nothing to do when every upstream channel is local or recipe code runs unsandboxed."""
    m = unit.isolation.mirror
    if m is None or unit.isolation.bwrap is None:
        return _BuildMirror(), {}
    needs = build_needs(unit.recipe, unit.variant_config, unit.channels, to_build, folder)
    errors = {a: BuildOut("error", f"mirror: {n.problem}") for a, n in needs.items() if n.problem}
    try:
        views = m.store.views(folder / "mirror", m.remotes, (r for n in needs.values() for r in n.records))
    except Exception as exc:  # noqa: BLE001 - a download, a link or the indexer: infrastructure, never a traceback
        return _BuildMirror(), {s.artifact: BuildOut("error", f"mirror: {_said(exc)}") for s in to_build}
    return _BuildMirror({url: view.as_uri() for url, view in views.items()}, needs), errors


def _mirror_test(unit: PhaseContext, staged: Path, outside: list[str], cuda: bool,
                 folder: Path) -> tuple[dict[str, str], Needs | None] | TestOut:
    """The mirror views a test sandbox reads in place of the remote channels (and what they were made
    from), or the test's ``error`` when they cannot be made."""
    m = unit.isolation.mirror
    if m is None or unit.isolation.bwrap is None:
        return {}, None
    asked = tuple(m.store.wanted(unit.name))
    needs = replace(test_needs(staged, outside, cuda, extra=asked), asked=asked)
    if needs.problem:
        return TestOut(False, error=True, message=f"mirror: {needs.problem}")
    try:
        views = m.store.views(folder / "mirror", m.remotes, needs.records)
    except Exception as exc:  # noqa: BLE001 - a download, a link or the indexer: infrastructure, never a traceback
        return TestOut(False, error=True, message=f"mirror: {_said(exc)}")
    return {url: view.as_uri() for url, view in views.items()}, needs


def _judge_mirrored(unit: PhaseContext, got: TestOut, needs: Needs | None) -> TestOut:
    """A test whose environment could not be set up from the mirror views:

    * the remote channels cannot serve it either (our solve against them failed): the package's failure,
      said with their solver's report;
    * the sandbox's channels had no candidates for something our solves had not asked for (the runner's
      own solve says what): an infrastructure ``error``; it is remembered, and the next sandbox of the
      package solves it too (with the package: if the channels cannot serve that, it is the package's
      failure then);
    * otherwise (nothing new to fetch): rattler-build's verdict stands, a failure, as without a mirror.
    """
    if got.ok or got.error or not got.env_failed or needs is None or unit.isolation.mirror is None:
        return got
    if needs.unsolvable:
        why = blocking_requirement(needs.unsolvable[0])
        return replace(got, message=f"the test environment cannot be solved from the upstream channels: {why}")
    if not [m for m in got.missing if m not in needs.asked]:  # (what this sandbox asked for, not what a
        return got                                                # test beside it has remembered since)
    unit.isolation.mirror.store.want(unit.name, got.missing)
    return replace(got, error=True, message=mirror_gap(unit, "test", got.message))

