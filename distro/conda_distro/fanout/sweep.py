"""The release sweep fanned out: the sweep's own code decides what is built (its edits, the solve, the
packages it tests), and only how the edited distribution is built and tested changes.

Every job of a fanned-out sweep runs `sweep` itself (release day, or a late admission) with
:attr:`~conda_distro.sweep.model.SweepOptions.execute` set, so the three kinds of job agree on the edits,
the release and the packages to test without trusting each other, exactly as a single-machine sweep
computes them:

* **plan** (:func:`plan_sweep_shards`): at the point where the sweep would build, the shards of that build
  are computed and the sweep is stopped; its edits are put back (nothing is left written, no report).
* **shard** (:func:`sweep_shard`): at that point the edits are on disk; the earlier stages' checked
  bundles are taken into staging, the shard's units are built and tested as the single-machine build
  would (the others' outcomes seeded), its bundle is written; then the sweep is stopped and its edits
  are put back (a shard never commits and saves no report).
* **fan-in** (:func:`merge_sweep`): the sweep runs to its end (verdicts, reverts, ``--commit`` branches,
  PR bodies, tracking issue, report) with the build's records taken from the checked bundles instead of
  a build: no recipe code runs.

A shard's bundle is checked against this checkout's recipes *as the sweep edited them*, and each job
writes the same edits, so a shard cannot speak for a recipe the sweep did not write.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from conda_distro.errors import UsageError
from conda_distro.fanout.bundle import owned_by, write_bundle
from conda_distro.fanout.fanin import FanIn, checkout_of, merge_shards, shard_plan, take_earlier
from conda_distro.fanout.plan import ShardPlan
from conda_distro.graph import RecipeGraph
from conda_distro.state.results import ResultsStore
from conda_distro.sweep import SweepOptions
from conda_distro.sweep.model import SweepResult
from conda_distro.sweep.run import run_sweep

if TYPE_CHECKING:
    from pathlib import Path

    from conda_distro.distribution import Distribution
    from conda_distro.engine.run import BuildOptions, BuildRun
    from conda_distro.fanout.bundle import Manifest
    from conda_distro.util.progress import ProgressSink


class _Stop(Exception):  # noqa: N818 - not an error: the sweep is stopped where it would build (its edits put back)
    pass


@dataclass
class _Seen:
    plan: ShardPlan | None = None
    run: BuildRun | None = None
    manifest: Manifest | None = None


def _affected(dist: Distribution, build: BuildOptions) -> list[str]:
    """What the sweep's build builds: the packages it tests and their dependents (as `build NAME…`)."""
    return RecipeGraph.from_recipes(dist.recipes).affected(list(build.names))


def _stopped(options: SweepOptions) -> None:
    try:
        run_sweep(options)
    except _Stop:
        return
    raise UsageError(f"the sweep of pytorch {options.release} builds nothing: there is nothing to fan out",
                     field="--pytorch", hint=f"run `conda-distro sweep --pytorch {options.release}` on one machine, or see "
                                                f"`conda-distro sweep report --pytorch {options.release}`")


def plan_sweep_shards(options: SweepOptions, fanin: FanIn) -> ShardPlan:
    """The shards of the sweep's build (the plan job); the checkout is left as it was."""
    seen = _Seen()

    def execute(dist: Distribution, build: BuildOptions, reporter: ProgressSink | None = None) -> BuildRun:
        seen.plan = shard_plan(dist, _affected(dist, build), fanin.spec, build.pytorch)[1]
        raise _Stop

    _stopped(dataclasses.replace(options, commit=False, execute=execute))
    assert seen.plan is not None
    return seen.plan


def sweep_shard(options: SweepOptions, fanin: FanIn, shard_id: str, out: Path) -> tuple[BuildRun, Manifest]:
    """A shard job of the sweep: its units built and tested against the edited distribution, its bundle
    written to ``out``; the checkout is left as it was."""
    seen = _Seen()

    def execute(dist: Distribution, build: BuildOptions, reporter: ProgressSink | None = None) -> BuildRun:
        from conda_distro.engine.executor import ExecutionResult
        from conda_distro.engine.run import build_paths, run_build

        plan = shard_plan(dist, _affected(dist, build), fanin.spec, build.pytorch)[1]
        shard = plan.shard(shard_id)
        if shard is None:
            raise UsageError(f"this sweep has no shard '{shard_id}'", field="--shard",
                             hint=f"its shards: {', '.join(s.id for s in plan.shards) or '(none)'}")
        paths = build_paths(dist, None)
        prior = None
        if plan.earlier(shard.id):
            prior = take_earlier(dist, plan, shard.id, fanin, paths.staging, paths.store)
        run = run_build(dist, dataclasses.replace(
            build, only=shard.packages, prior=ExecutionResult(prior.builds, prior.tests) if prior else None), reporter)
        report = run.report or ExecutionResult()
        checkout = checkout_of(dist, fanin.run)
        owns = owned_by(shard, checkout)
        seen.run, seen.manifest = run, write_bundle(
            out, shard, checkout, paths.staging, ResultsStore(paths.store),
            [b for b in report.builds if owns.build(b)], [t for t in report.tests if owns.test(t, report.builds)])
        raise _Stop

    _stopped(dataclasses.replace(options, commit=False, execute=execute))
    assert seen.run is not None and seen.manifest is not None
    return seen.run, seen.manifest


def merge_sweep(options: SweepOptions, fanin: FanIn) -> SweepResult:
    """The sweep's fan-in: the sweep run to its end, its build's records taken from the checked bundles
    (into the shared staging and results store); a missing or bad bundle stops it before anything is
    committed (exit 2, its edits put back)."""

    def execute(dist: Distribution, build: BuildOptions, reporter: ProgressSink | None = None) -> BuildRun:
        from conda_distro.engine.executor import ExecutionResult
        from conda_distro.engine.releases import availability_if_readable
        from conda_distro.engine.run import BuildRun, plan_build

        plan, _ = plan_build(dist, build, availability_if_readable(dist.distro))  # what upstream cannot serve
        merged = merge_shards(dist, _affected(dist, build), fanin, None)
        return BuildRun(plan, ExecutionResult(merged.builds, merged.tests))

    return run_sweep(dataclasses.replace(options, execute=execute))
