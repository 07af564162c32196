"""`build`: plan the affected set, then execute it. The one entry point the CLI and other flows call."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.channels import crash_point, open_anaconda_channel
from conda_distro.config import Limits
from conda_distro.distribution import Distribution, Exclusions, load_distribution
from conda_distro.engine.backends import make_builder
from conda_distro.engine.executor import ExecContext, ExecutionResult, Executor, machine_jobs
from conda_distro.engine.gpu import GpuProbe, gpu_devices, probe_gpu
from conda_distro.engine.limits import recipe_limits
from conda_distro.engine.mirror import mirroring
from conda_distro.engine.phases import Isolation
from conda_distro.engine.plan import BuildPlan, PlanOptions, make_plan, restrict
from conda_distro.engine.releases import Availability, availability_if_readable, build_release_views
from conda_distro.engine.sandbox import require_bwrap
from conda_distro.engine.sources import RecipeInputs, recipe_inputs, sources_cache
from conda_distro.engine.summary import build_table, plan_lines, untested_lines
from conda_distro.errors import UsageError
from conda_distro.graph import RecipeGraph
from conda_distro.state.locks import DEFAULT_LOCK_TIMEOUT, Deadline, repository_lock, staging_folder, staging_lock
from conda_distro.state.owners import require_owned
from conda_distro.state.provenance import build_provenance
from conda_distro.state.results import ResultsStore
from conda_distro.util.gitutil import changed_recipes
from conda_distro.util.progress import ProgressSink


@dataclass(frozen=True)
class BuildOptions:
    names: tuple[str, ...] = ()
    all: bool = False
    changed_since: str | None = None
    pytorch: tuple[str, ...] = ()
    jobs: int | None = 1  # packages at once; None: what the machine holds (engine.executor.machine_jobs)
    engine: str = "rattler-build"
    dry_run: bool = False
    sandbox: bool = True  # False: --no-sandbox (recipe code runs unsandboxed; the CLI warns)
    lock_timeout: float | Deadline = DEFAULT_LOCK_TIMEOUT  # seconds to wait for the repository's and staging's locks
    progress: ProgressSink | None = None  # where `build` reports its progress (the CLI's sink; None: nowhere)
    holds_repository_lock: bool = False  # the caller (the sweep) holds the repository's lock already
    scope: str | None = None  # None: the shared staging and results; NAME: check-pr's own build/pr/NAME/
    retry_errors: bool = False  # add the packages whose latest test of a staging artifact is an `error`
    variants: tuple[str, ...] = ()  # `--variant`: test only these variants (CI runs each on its own runner)
    root: Path | None = None  # the distribution's folder (None: found from the current one); for build()
    # fan-out (conda_distro.fanout): run only these units of the plan (a shard: NAME, or NAME@I:K=V,… for one
    # build of a compiled package and its tests; engine.plan.restrict), the others' outcomes
    # being ``prior`` (earlier shards' records: their failures block dependents as in one run)
    only: tuple[str, ...] = ()
    prior: ExecutionResult | None = None
    # a scope: a file re-tested from main takes the outcomes the shared results store holds for that same
    # file and test key (engine.executor.Executor._seed_from_shared); False: every test runs again
    # (check-pr --only, which reproduces a failure)
    reuse_shared: bool = True


@dataclass
class BuildRun:
    plan: BuildPlan
    report: ExecutionResult | None  # None for a dry run
    excluded: Exclusions = field(default_factory=Exclusions)  # unreadable recipes and their dependents
    gpu: GpuProbe | None = None  # whether cuda tests ran on a GPU (None: no cuda test was planned)
    notices: list[str] = field(default_factory=list)  # stderr: the recipes left out, and why

    @property
    def exit_code(self) -> int:
        own = 0 if self.report is None else int(self.report.exit_code)
        return max(own, 1 if self.excluded.unreadable else 0)

    def to_dict(self) -> dict:
        extra = {"ok": self.exit_code == 0, **(self.excluded.to_dict() if self.excluded else {}),
                 **({"gpu": self.gpu.to_dict()} if self.gpu else {})}
        if self.report is None:
            return {"dry_run": True, "plan": self.plan.to_dict(), "builds": [], "tests": [], **extra}
        return {**self.report.to_dict(), "plan": {"order": [p.name for p in self.plan.packages]}, **extra}

    def text_lines(self) -> list[str]:
        if self.report is None:
            return plan_lines(self.plan)
        return build_table(self.report) + untested_lines(self.plan)


@dataclass(frozen=True)
class UploadOptions:
    root: Path | None = None


@dataclass
class UploadResult:
    uploaded: list[str]
    exit_code: int = 0

    def to_dict(self) -> dict:
        return {"uploaded": self.uploaded}

    def text_lines(self) -> list[str]:
        return [f"on staging: {a}" for a in self.uploaded]


@dataclass(frozen=True)
class Paths:
    staging: Path  # where packages are built: the staging channel, or its local mirror for anaconda.org
    store: Path
    logs: Path
    views: Path
    remote_staging: str | None = None  # anaconda://OWNER[/LABEL] that `upload` puts the local builds on
    fallback: tuple[Path, ...] = ()  # read-only channels after staging (a scope: the shared staging)
    # a scope: the shared results store, read only for the outcomes of files re-tested from main (None: none)
    fallback_store: Path | None = None


SCOPES = "pr"  # under build/: check-pr's scopes, one folder per PR ref


def build_paths(dist: Distribution, scope: str | None = None) -> Paths:
    """Where a build writes. A ``scope`` (check-pr) has a staging channel, results store, logs and
    release views of its own under ``build/pr/<scope>/``, and reads the shared staging (what main
    built) after its own staging for the dependencies it does not build; it never writes there."""
    if scope is not None:
        if not scope or scope in (".", "..") or "/" in scope or ":" in scope:
            raise UsageError(f"bad build scope name {scope!r}", hint="a git branch name or commit, without '/' or ':'")
        base = dist.distro.build_dir / SCOPES / scope
        shared = build_paths(dist)
        return Paths(staging=base / "channels" / "staging", store=base / "results", logs=base / "logs",
                     views=base / "release-views", fallback=(shared.staging,), fallback_store=shared.store)
    staging_ref = dist.config.channels.staging
    b = dist.distro.build_dir
    remote = staging_ref if dist.distro.is_anaconda(staging_ref) else None
    staging = staging_folder(dist.distro)
    if ":" in str(staging):
        raise UsageError("the staging path must not contain ':' (PATH-like lists split on it)", path=dist.distro.path,
                         field="channels.staging")
    return Paths(staging=staging, store=b / "results", logs=b / "logs", views=b / "release-views", remote_staging=remote)


def upload_staging(dist: Distribution) -> list[str]:
    """Put the local builds on the anaconda.org staging label (`conda-distro upload`; files already there
    with the same sha256 are skipped, a different one is an error). Returns the artifacts on the label."""
    paths = build_paths(dist)
    if paths.remote_staging is None:
        raise UsageError("channels.staging is a local folder: builds are already in it", path=dist.distro.path,
                         field="channels.staging", hint="upload is for an anaconda://OWNER[/LABEL] staging channel")
    files = sorted(p for p in paths.staging.glob("*/*.conda") if p.parent.name in dist.distro.subdirs)
    if not files:
        raise UsageError(f"no built packages in {paths.staging}", field="channels.staging",
                         hint="run `conda-distro build --all` (or `conda-distro build NAME`) first")
    return sorted(f.artifact for f in open_anaconda_channel(dist.distro, paths.remote_staging).upload(files))


def upload(options: UploadOptions) -> UploadResult:
    """`conda-distro upload`: :func:`upload_staging` of the distribution at ``options.root``."""
    return UploadResult(upload_staging(load_distribution(options.root)))


def main_channel(dist: Distribution) -> Path | None:
    """The main channel's folder when it is local (files re-tested from main are copied from there)."""
    ref = dist.config.channels.main
    return None if dist.distro.is_anaconda(ref) else dist.distro.resolve_local(ref)


def errored_recipes(store: ResultsStore) -> list[str]:
    """The recipes (folder names) of artifacts whose latest test on some release × variant is an
    infrastructure error: what `build --retry-errors` runs again (errors are never reused as results)."""
    return sorted({Path(r.recipe).name if r.recipe else r.name for r in store.all()
                   if any(t.status == "error" for t in r.latest().values())})


def plan_build(dist: Distribution, options: BuildOptions, available: Availability | None) -> tuple[BuildPlan, Paths]:
    """Plan on the readable recipes (unreadable ones and their dependents are left out and reported by
    the caller); a named recipe that cannot be read is an error. ``available``: what upstream can serve
    (None: unknown, every target is tried)."""
    names = list(dict.fromkeys(dist.folder_of_package(n) for n in options.names))  # (a package name: its recipe)
    dist.require(names)
    if options.changed_since:
        names += changed_recipes(dist.root, options.changed_since)
    dist = dist.readable()
    require_owned(dist)  # a recipe declaring a name another recipe owns: exit 2 before anything runs
    paths = build_paths(dist, options.scope)
    if options.retry_errors:
        names += errored_recipes(ResultsStore(paths.store))
    names = [n for n in names if n in dist.recipes]
    graph = RecipeGraph.from_recipes(dist.recipes)
    if not (names or options.all or options.changed_since or options.retry_errors):
        raise UsageError("nothing selected to build", field="NAME",
                         hint="name packages, or pass --all, --changed-since REF or --retry-errors")
    builder = make_builder(options.engine)
    main = main_channel(dist)
    plan = make_plan(dist, graph, builder, ResultsStore(paths.store), paths.staging,
                     PlanOptions(names=tuple(names), all=options.all, pytorch=options.pytorch, engine=options.engine,
                                 main=main, variants=options.variants, available=available))
    if options.only:  # a shard: the same plan, its own units only (whole packages, or one minor's builds)
        plan = restrict(plan, options.only)
    return plan, paths


def probe_for(plan: BuildPlan) -> GpuProbe | None:
    """Probe the GPU when the plan tests a cuda variant: its tests run on the GPU, or say they had none."""
    return probe_gpu() if any(t.variant.cuda for p in plan.packages for t in p.targets) else None


def isolation(dist: Distribution, paths: Paths, sandbox: bool, gpu: bool = False) -> Isolation:
    """How this run's runners are isolated: each sandbox shows only what its phase reads (the sandbox
    module's docstring says what). Fails closed (exit 2) when the sandbox cannot run, unless ``sandbox``
    is False (--no-sandbox), and when a remote upstream channel, which each sandbox reads through a
    local mirror (:mod:`.mirror`), cannot be reached."""
    d = dist.distro
    work_root = d.build_dir / "work"
    if not sandbox:
        return Isolation(bwrap=None, work_root=work_root, sources=sources_cache())
    bwrap = require_bwrap()
    devices = gpu_devices() if gpu else ()
    return Isolation(bwrap=bwrap, work_root=work_root, sources=sources_cache(), devices=devices, mirror=mirroring(d))


def unit_settings(dist: Distribution, plan: BuildPlan) -> tuple[dict[str, Limits], dict[str, RecipeInputs]]:
    """Each planned package's limits (distro.yaml's, with its recipe's ``extra: limits:``) and, for one
    that builds, its sources (url sources to fetch, path sources to show). Bad values, a path source
    outside the repository and a url source without sha256 are errors (exit 2) naming the recipe and
    line, before anything runs."""
    by_path = {r.path.resolve(): r for r in dist.recipes.values()}
    defaults = dist.config.limits
    limits: dict[str, Limits] = {}
    inputs: dict[str, RecipeInputs] = {}
    for p in plan.packages:
        recipe = by_path.get(p.recipe.resolve())
        if recipe is None:
            continue
        limits[p.name] = recipe_limits(recipe.path, recipe.text, defaults)
        if any(v.action == "build" for v in p.variants):
            inputs[p.name] = recipe_inputs(recipe, dist.root)
    return limits, inputs


@contextmanager
def build_locks(dist: Distribution, paths: Paths, options: BuildOptions) -> Iterator[None]:
    """The locks a build holds (:mod:`conda_distro.state.locks`): the repository's, shared (no sweep edits the
    recipes meanwhile; not taken again when the caller, the sweep, holds it), then the staging folder's,
    exclusive (two builds into one staging never interleave their writes of packages, repodata and
    results; promote waits to read them). One ``--lock-timeout`` for both."""
    budget = options.lock_timeout if isinstance(options.lock_timeout, Deadline) else Deadline(options.lock_timeout)
    with ExitStack() as stack:
        if not options.holds_repository_lock:
            stack.enter_context(repository_lock(dist.distro.build_dir, dist.root, budget, shared=True))
        stack.enter_context(staging_lock(paths.staging, budget))
        yield


def _staging_state(paths: Paths) -> tuple:
    """What the plan read from staging and the results store, as stat data: when it changes, another
    build wrote there."""
    def stat(p: Path) -> tuple | None:
        try:
            st = p.stat()
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    subdirs = sorted(p for p in paths.staging.iterdir() if p.is_dir()) if paths.staging.is_dir() else []
    return (stat(paths.store), *((p.name, stat(p / "repodata.json"), stat(p)) for p in subdirs))


def build(options: BuildOptions) -> BuildRun:
    """`conda-distro build`: load the distribution at ``options.root`` (its unreadable recipes are left out
    and reported as notices) and :func:`run_build` it, with progress unless it is a dry run."""
    dist = load_distribution(options.root, strict=False)
    run = run_build(dist, options, options.progress if not options.dry_run else None)
    run.notices = dist.notices()
    return run


def run_build(dist: Distribution, options: BuildOptions, progress: ProgressSink | None = None) -> BuildRun:
    """Plan, then build under the repository's and the staging channel's locks (:func:`build_locks`).
    The plan is made first, so that bad input exits 2 having written nothing (not even a lock file); when
    a sweep wrote the recipes or distro.yaml, or another build wrote staging or the results, while this
    one waited for the locks, the distribution is read again and the plan made again under them."""
    available = availability_if_readable(dist.distro)  # upstream read once: for the plan and the release views
    plan, paths = plan_build(dist, options, available)
    limits, inputs = unit_settings(dist, plan)
    excluded = dist.exclusions()
    if options.dry_run:
        return BuildRun(plan, None, excluded)
    if not plan.packages:
        return BuildRun(plan, ExecutionResult(), excluded)
    gpu = probe_for(plan)
    iso = isolation(dist, paths, options.sandbox, gpu is not None and gpu.available)  # before anything is written
    seen = _staging_state(paths)
    with build_locks(dist, paths, options):
        crash_point("build-locked")
        reread = not options.holds_repository_lock and dist.changed_on_disk()
        if reread:  # a sweep wrote the recipes or distro.yaml meanwhile: never plan from its edits
            dist = load_distribution(dist.root, strict=False)
            excluded = dist.exclusions()
        if reread or _staging_state(paths) != seen:
            plan, paths = plan_build(dist, options, available)
            if not plan.packages:
                return BuildRun(plan, ExecutionResult(), excluded, gpu)
            limits, inputs = unit_settings(dist, plan)
        views = build_release_views(dist.distro, paths.views, available)
        fallback = tuple(f for f in paths.fallback if (f / "noarch" / "repodata.json").is_file())
        ctx = ExecContext(staging=paths.staging, main=main_channel(dist),
                          upstream=(*(f.as_uri() for f in fallback), *dist.distro.upstream_urls),
                          views=views, store=paths.store, logs=paths.logs, pytorch=dist.config.pytorch.name,
                          isolation=iso, jobs=options.jobs or machine_jobs(), fallback=fallback,
                          fallback_store=paths.fallback_store if options.reuse_shared else None,
                          provenance=build_provenance(dist.root, dist.distro.recipes_dir),
                          gpu=gpu is not None and gpu.available, root=dist.root, limits=limits,
                          default_limits=dist.config.limits, inputs=inputs, prior=options.prior,
                          confirm_runs=dist.config.policy.confirm_runs)
        return BuildRun(plan, Executor(plan, ctx, progress).run(), excluded, gpu)
