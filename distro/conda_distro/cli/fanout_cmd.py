"""`conda-distro fanout plan|shard|merge`: a build fanned out over CI runners by dependency level."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from conda_distro.cli.app import Format, FormatOpt, RootOpt, app, emit, warn_no_sandbox

fanout_app = typer.Typer(help="Fan a build out over CI runners by dependency level, and fan it in.", no_args_is_help=True)
app.add_typer(fanout_app, name="fanout")

FlowOpt = Annotated[str, typer.Option("--flow", help="pr (check-pr's affected set and scope), build (build's) or "
                    "sweep (the release sweep of the one --pytorch release: its edits and the packages it tests).")]
BaseOpt = Annotated[str, typer.Option("--base", help="pr: the PR's base ref.")]
NamesArg = Annotated[list[str] | None, typer.Argument(help="build: packages that changed.", show_default=False)]
AllOpt = Annotated[bool, typer.Option("--all", help="build: every package.")]
SinceOpt = Annotated[str | None, typer.Option("--changed-since", help="build: recipes changed since this git ref.")]
VariantOpt = Annotated[list[str] | None, typer.Option("--variant", help="Test only this variant (repeatable).")]
PytorchOpt = Annotated[list[str] | None, typer.Option("--pytorch", help="Test only against this release (repeatable).")]
RunnersOpt = Annotated[int, typer.Option("--runners", min=1, max=256, help="At most this many shards per stage.")]
PerShardOpt = Annotated[int, typer.Option("--per-shard", min=1, max=10000,
                        help="About this much work per shard (a noarch package 1, a compiled one 5).")]
StagesOpt = Annotated[int, typer.Option("--stages", min=1, max=64,
                      help="Stage jobs the workflow has; deeper levels fold into the last.")]
RunOpt = Annotated[str, typer.Option("--run", envvar="CONDA_DISTRO_RUN",
                   help="This CI run's id (GitHub: run id-attempt); every bundle must name it.")]
FromOpt = Annotated[Path | None, typer.Option("--from", help="Where the shards' bundles were downloaded.",
                    file_okay=False, show_default=False)]
RendersOpt = Annotated[Path | None, typer.Option("--renders", help="The plan job's renders (its `--renders-out`, "
                       "downloaded): checked (this run, this checkout), then taken into the render cache.",
                       file_okay=False, show_default=False)]
PlanFormat = Literal[Format.text, Format.json, Format.github]


@fanout_app.command("plan")
def plan_cmd(names: NamesArg = None, flow: FlowOpt = "build", base: BaseOpt = "origin/main", all_: AllOpt = False,
             changed_since: SinceOpt = None, variant: VariantOpt = None, pytorch: PytorchOpt = None,
             runners: RunnersOpt = 20, per_shard: PerShardOpt = 4, stages: StagesOpt = 8, root: RootOpt = None,
             run: RunOpt = "local",
             renders_out: Annotated[Path | None, typer.Option("--renders-out", help="Write the renders here (with a "
                                    "manifest naming this run and HEAD) for the other jobs' --renders.",
                                    file_okay=False, show_default=False)] = None,
             format: Annotated[PlanFormat, typer.Option("--format", help="text, json, or github (lines for "
                                                        "$GITHUB_OUTPUT: stage-N matrices, count-N).")] = Format.text) -> int:
    """The plan job: the run's shards by dependency level (no recipe code runs)."""
    from conda_distro.fanout.flows import FanoutOptions, plan_run
    from conda_distro.fanout.plan import ShardSpec

    return emit(plan_run(FanoutOptions(
        flow=flow, base=base, names=tuple(names or ()), all=all_, changed_since=changed_since,  # type: ignore[arg-type]
        variants=tuple(variant or ()), pytorch=tuple(pytorch or ()), root=root, run=run, renders_out=renders_out,
        spec=ShardSpec(runners=runners, per_shard=per_shard, stages=stages))), format)


@fanout_app.command("shard")
def shard_cmd(shard: Annotated[str, typer.Option("--shard", help="This job's shard id (from the plan's matrix).")],
              out_dir: Annotated[Path, typer.Option("--out", help="Where its bundle goes (emptied first).", file_okay=False)],
              names: NamesArg = None, flow: FlowOpt = "build", base: BaseOpt = "origin/main", all_: AllOpt = False,
              changed_since: SinceOpt = None, variant: VariantOpt = None, pytorch: PytorchOpt = None,
              runners: RunnersOpt = 20, per_shard: PerShardOpt = 4, stages: StagesOpt = 8, run: RunOpt = "local",
              from_: FromOpt = None, renders: RendersOpt = None,
              jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, max=256, help="Packages at once.")] = 1,
              no_sandbox: Annotated[bool, typer.Option("--no-sandbox", help="Unsandboxed; never in CI.")] = False,
              root: RootOpt = None, format: FormatOpt = Format.text) -> int:
    """A shard job: earlier stages' bundles (checked) in, its packages built and tested, its bundle out."""
    from conda_distro.fanout.flows import FanoutOptions, run_shard
    from conda_distro.fanout.plan import ShardSpec

    warn_no_sandbox(no_sandbox)
    return emit(run_shard(FanoutOptions(
        flow=flow, base=base, names=tuple(names or ()), all=all_, changed_since=changed_since,  # type: ignore[arg-type]
        variants=tuple(variant or ()), pytorch=tuple(pytorch or ()), root=root, run=run, shard=shard, bundles=from_,
        out=out_dir, jobs=jobs, sandbox=not no_sandbox, renders=renders,
        spec=ShardSpec(runners=runners, per_shard=per_shard, stages=stages))), format)


@fanout_app.command("merge")
def merge_cmd(names: NamesArg = None, flow: Annotated[str, typer.Option(
                  "--flow", help="build (promote, nightly) or sweep (the release sweep's fan-in).")] = "build",
              all_: AllOpt = False, changed_since: SinceOpt = None, variant: VariantOpt = None,
              pytorch: PytorchOpt = None, runners: RunnersOpt = 20, per_shard: PerShardOpt = 4, stages: StagesOpt = 8,
              run: RunOpt = "local", from_: FromOpt = None, renders: RendersOpt = None,
              commit: Annotated[bool, typer.Option("--commit", help="sweep: as `sweep --commit` (its branches).")] = False,
              author: Annotated[str | None, typer.Option("--author", help="sweep: the commits' author 'Name <email>'.",
                                                         show_default=False)] = None,
              root: RootOpt = None, format: FormatOpt = Format.text) -> int:
    """The fan-in of a build run (promote, nightly): the shards' bundles, checked, into staging and results.
    With --flow sweep, the release sweep (verdicts, branches, PR bodies, tracking issue) from the bundles.
    No recipe code, no build. (A PR's fan-in is `check-pr --from-shards`.)"""
    from conda_distro.fanout.flows import FanoutOptions, merge_build
    from conda_distro.fanout.plan import ShardSpec

    return emit(merge_build(FanoutOptions(
        flow=flow, names=tuple(names or ()), all=all_, changed_since=changed_since,  # type: ignore[arg-type]
        variants=tuple(variant or ()), pytorch=tuple(pytorch or ()), root=root, run=run, bundles=from_,
        commit=commit, author=author, renders=renders,
        spec=ShardSpec(runners=runners, per_shard=per_shard, stages=stages))), format)
