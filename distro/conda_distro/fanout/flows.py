"""The three jobs of a fanned-out run, for the two kinds of run: ``pr`` (check-pr's affected set, built
in check-pr's scope) and ``build`` (`build`'s: named packages, ``--changed-since``, ``--all``; the shared
staging that promote reads). Each job computes the same :class:`~.plan.ShardPlan` from its checkout.

* :func:`plan_run` — the plan job: the shards, as matrices (no recipe code runs; recipes are rendered).
* :func:`run_shard` — a shard job: the checked bundles of earlier stages into a fresh staging, then the
  single-machine build restricted to its packages (the others' outcomes seeded), then its bundle.
* :func:`merge_build` — the fan-in of a ``build`` run (promote, nightly): the checked bundles into the
  shared staging and results store, one report.
* :func:`pr_gate` — `check-pr`; with ``--from-shards``, the fan-in of a ``pr`` run: check-pr without its
  build, its build and test records taken from the checked bundles.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from conda_distro.checkpr.check import CheckPrOptions, check_pr, scope_shown
from conda_distro.checkpr.comment import error_report
from conda_distro.checkpr.run import PrGate, run_check_pr
from conda_distro.distribution import Distribution, load_distribution
from conda_distro.engine.executor import ExecutionResult
from conda_distro.engine.run import SCOPES, BuildOptions, BuildRun, build_paths, run_build
from conda_distro.errors import DistroError, ExitCode, UsageError
from conda_distro.fanout.bundle import Manifest, owned_by, write_bundle
from conda_distro.fanout.fanin import FanIn, checkout_of, merge_shards, shard_plan, take_earlier
from conda_distro.fanout.plan import ShardPlan, ShardSpec
from conda_distro.fanout.renders import take_renders, write_renders
from conda_distro.fanout.sweep import merge_sweep, plan_sweep_shards, sweep_shard
from conda_distro.graph import RecipeGraph
from conda_distro.state.results import ResultsStore
from conda_distro.sweep import SweepOptions
from conda_distro.sweep.model import SweepResult
from conda_distro.util.fsutil import clear_folder
from conda_distro.util.gitutil import changed_recipes, scope_name

Flow = Literal["pr", "build", "sweep"]


@dataclass(frozen=True)
class FanoutOptions:
    flow: Flow = "build"
    base: str = "origin/main"  # pr: the PR's base ref
    names: tuple[str, ...] = ()  # build: the changed packages
    all: bool = False  # build: every package
    changed_since: str | None = None  # build: recipes changed since this ref
    variants: tuple[str, ...] = ()
    pytorch: tuple[str, ...] = ()
    spec: ShardSpec = field(default_factory=ShardSpec)
    run: str = "local"  # the CI run's id (GitHub: run id and attempt): every bundle must name it
    shard: str | None = None  # a shard job: its id
    bundles: Path | None = None  # where the bundles were downloaded
    out: Path | None = None  # a shard job: where its bundle goes
    jobs: int = 1
    sandbox: bool = True
    root: Path | None = None
    commit: bool = False  # sweep's fan-in: `sweep --commit`
    author: str | None = None  # sweep's fan-in: the commits' author (None: the sweep's default)
    renders: Path | None = None  # shard and fan-in jobs: the plan job's renders (checked, then taken)
    renders_out: Path | None = None  # the plan job: where its renders go (with their manifest)


def _sweep_options(options: FanoutOptions) -> SweepOptions:
    """The sweep's options of a ``sweep`` run (its release: the one ``--pytorch``)."""
    if len(options.pytorch) != 1:
        raise UsageError("a fanned-out sweep sweeps one release", field="--pytorch", hint="pass --pytorch VERSION once")
    base = SweepOptions(release=options.pytorch[0])
    return replace(base, commit=options.commit, jobs=options.jobs, sandbox=options.sandbox, root=options.root,
                   author=options.author or base.author)


def _fanin(options: FanoutOptions) -> FanIn:
    return FanIn(options.bundles or Path("."), options.run, options.spec, options.pytorch)


@dataclass
class RunScope:
    """What every job of a run agrees on: the readable distribution, the affected set, the build's options."""

    dist: Distribution
    affected: list[str]
    build: BuildOptions
    scope: str | None  # check-pr's build scope (pr runs), None: the shared staging


def run_scope(options: FanoutOptions) -> RunScope:
    """The affected set and the single-machine build's options, as `check-pr` or `build` would have them."""
    if options.flow not in ("pr", "build"):
        raise UsageError(f"'{options.flow}' is not a flow", field="--flow",
                         hint="pr (check-pr's run), build (build's) or sweep (the release sweep's)")
    if options.flow == "pr":
        res = check_pr(CheckPrOptions(base=options.base, build=False, solve=False, root=options.root,
                                      pytorch=options.pytorch))
        dist = load_distribution(options.root, strict=False).readable()
        scope = scope_name(dist.root)
        return RunScope(dist, list(res.affected), BuildOptions(
            names=tuple(res.affected), jobs=options.jobs, sandbox=options.sandbox, scope=scope,
            pytorch=options.pytorch), scope)
    dist = load_distribution(options.root, strict=False)
    dist.require(list(options.names))
    dist = dist.readable()
    names = [*options.names, *(changed_recipes(dist.root, options.changed_since) if options.changed_since else [])]
    if not (names or options.all or options.changed_since):
        raise UsageError("nothing selected to build", field="NAME",
                         hint="name packages, or pass --all or --changed-since REF")
    graph = RecipeGraph.from_recipes(dist.recipes)
    affected = graph.order() if options.all else graph.affected([n for n in names if n in dist.recipes])
    return RunScope(dist, affected, BuildOptions(
        names=tuple(options.names), all=options.all, changed_since=options.changed_since, pytorch=options.pytorch,
        variants=options.variants, jobs=options.jobs, sandbox=options.sandbox), None)


@dataclass
class PlanResult:
    """`fanout plan`: the run's shards."""

    plan: ShardPlan
    stages: int
    exit_code: int = 0

    def to_dict(self) -> dict:
        return self.plan.to_dict()

    def text_lines(self) -> list[str]:
        return self.plan.text_lines()

    def github_lines(self) -> list[str]:
        return self.plan.github_lines(self.stages)


def plan_run(options: FanoutOptions) -> PlanResult:
    """The plan job: the run's shards (recipes are read and rendered; no recipe code runs). With
    ``renders_out``, its renders are written there for the other jobs (:mod:`.renders`)."""
    if options.flow == "sweep":
        result = PlanResult(plan_sweep_shards(_sweep_options(options), _fanin(options)), options.spec.stages)
    else:
        rs = run_scope(options)
        result = PlanResult(shard_plan(rs.dist, rs.affected, options.spec, options.pytorch)[1], options.spec.stages)
    if options.renders_out is not None:
        write_renders(options.renders_out, options.run, options.root or Path.cwd())
    return result


def _take_renders(options: FanoutOptions) -> None:
    """The plan job's renders, checked, into the render cache before any recipe is read (a shard or
    fan-in job then renders only what the plan job did not)."""
    if options.renders is not None:
        take_renders(options.renders, options.run, options.root or Path.cwd())


@dataclass
class ShardResult:
    """`fanout shard`: what the shard built and tested, and its bundle."""

    shard: str
    run: BuildRun
    manifest: Manifest
    exit_code: int = 0

    def to_dict(self) -> dict:
        return {"shard": self.shard, "packages": self.manifest.packages, "files": self.manifest.files,
                **self.run.to_dict()}

    def text_lines(self) -> list[str]:
        return [f"shard {self.shard}: {' '.join(self.manifest.packages)}", *self.run.text_lines()]


def run_shard(options: FanoutOptions) -> ShardResult:
    """A shard job: earlier stages' checked bundles (``options.bundles``) into a fresh staging, its
    packages built and tested as in one run, its bundle written to ``options.out``. Exit 1 when some of its
    packages failed (the run goes on: dependents are blocked as in one run), 2 on bad input or bad bundles."""
    if options.shard is None or options.out is None:
        raise UsageError("a shard job needs --shard ID and --out DIR", field="--shard")
    _take_renders(options)
    if options.flow == "sweep":
        sweep_run, manifest = sweep_shard(_sweep_options(options), _fanin(options), options.shard, options.out)
        return ShardResult(options.shard, sweep_run, manifest, sweep_run.exit_code)
    rs = run_scope(options)
    _, plan = shard_plan(rs.dist, rs.affected, options.spec, options.pytorch)
    shard = plan.shard(options.shard)
    if shard is None:
        raise UsageError(f"this run has no shard '{options.shard}'", field="--shard",
                         hint=f"its shards: {', '.join(s.id for s in plan.shards) or '(none)'}")
    paths = build_paths(rs.dist, rs.scope)
    if rs.scope is not None and (rs.dist.distro.build_dir / SCOPES / rs.scope).is_dir():
        clear_folder(rs.dist.distro.build_dir / SCOPES / rs.scope)  # the scope holds this run's bundles only
    prior = None
    if plan.earlier(shard.id):
        if options.bundles is None:
            raise UsageError(f"shard {shard.id} builds on earlier stages: pass --from DIR (their bundles)", field="--from")
        prior = take_earlier(rs.dist, plan, shard.id, FanIn(options.bundles, options.run, options.spec, options.pytorch),
                             paths.staging, paths.store)
    build = replace(rs.build, only=shard.packages, prior=ExecutionResult(prior.builds, prior.tests) if prior else None)
    run = run_build(rs.dist, build)
    report = run.report or ExecutionResult()
    checkout = checkout_of(rs.dist, options.run)
    owns = owned_by(shard, checkout)
    manifest = write_bundle(options.out, shard, checkout, paths.staging,
                            ResultsStore(paths.store), [b for b in report.builds if owns.build(b)],
                            [t for t in report.tests if owns.test(t, report.builds)])
    return ShardResult(shard.id, run, manifest, run.exit_code)


@dataclass
class MergeResult:
    """`fanout merge`: the run's records, merged from the checked bundles into the shared staging."""

    report: ExecutionResult
    artifacts: list[str]

    @property
    def exit_code(self) -> int:
        return int(ExitCode.OK if self.report.ok else ExitCode.FAILURES)

    def to_dict(self) -> dict:
        return {**self.report.to_dict(), "merged": self.artifacts}

    def text_lines(self) -> list[str]:
        from conda_distro.engine.summary import build_table

        return build_table(self.report)


def merge_build(options: FanoutOptions) -> MergeResult | SweepResult:
    """The fan-in of a ``build`` run (no recipe code, no build): every shard's bundle checked and taken
    into the shared staging channel and results store; exit 1 when some package failed, as `build`. Of a
    ``sweep`` run: the sweep, its build's records from the bundles (:func:`~.sweep.merge_sweep`)."""
    if options.bundles is None:
        raise UsageError("the fan-in needs --from DIR (where the shards' bundles were downloaded)", field="--from")
    _take_renders(options)
    if options.flow == "sweep":
        return merge_sweep(_sweep_options(options), _fanin(options))
    rs = run_scope(options)
    merged = merge_shards(rs.dist, rs.affected, FanIn(options.bundles, options.run, options.spec, options.pytorch),
                          rs.scope)
    return MergeResult(ExecutionResult(merged.builds, merged.tests), merged.artifacts)


def pr_gate(options: CheckPrOptions) -> PrGate:
    """`check-pr`: :func:`~conda_distro.prcomment.run_check_pr`, or with ``options.shards`` the PR gate's
    fan-in: check-pr (lint, proposals, affected set, solve) without its build; the shards' checked bundles
    go into check-pr's scope and their records into the result, in one run's order. Bad input or a bad
    bundle is the gate's error, with its PR comment (exit 2)."""
    if options.shards is None:
        return run_check_pr(options)
    shards = options.shards
    fanin = FanIn(shards.folder, shards.run, ShardSpec(shards.runners, shards.per_shard, shards.stages), options.pytorch)
    try:
        res = check_pr(replace(options, build=False))
        if res.affected:  # (check-pr stops before the affected set on bad input and ownership conflicts)
            dist = load_distribution(options.root, strict=False).readable()
            scope = scope_name(dist.root)
            merged = merge_shards(dist, res.affected, fanin, scope)
            res.builds, res.tests, res.built, res.scope = merged.builds, merged.tests, True, scope_shown(dist, scope)
        return PrGate(res, options.log_url)
    except DistroError as exc:
        return PrGate(None, error=exc, comment=error_report(exc, options.base, options.root).markdown())
