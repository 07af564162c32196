"""`conda-distro check-pr`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from conda_distro.cli.app import Format, JobsOpt, NoSandboxOpt, RootOpt, TextJsonMarkdown, app, emit, warn_no_sandbox


@app.command("check-pr")
def check_pr_cmd(
    base: Annotated[str, typer.Option("--base", help="The PR's base ref, e.g. origin/main.")] = "origin/main",
    no_build: Annotated[bool, typer.Option("--no-build", help="Skip build and test (when sharded jobs do them).")] = False,
    jobs: JobsOpt = None,
    no_sandbox: NoSandboxOpt = False,
    log_url: Annotated[str | None, typer.Option(
        "--log-url", envvar="CONDA_DISTRO_LOG_URL", show_default=False,
        help="Where the logs can be read (the CI run's artifact URL); '{path}' in it is replaced by the log's "
             "path. Without it the comment shows the log paths.")] = None,
    only: Annotated[str | None, typer.Option("--only", metavar="NAME", show_default=False,
            help="Reproduce NAME's failure: build NAME and the packages it depends on that the PR changes in a "
                 "private scope (build/pr/REF--only-NAME/, emptied first) and test NAME, as CI did. The shared "
                 "staging is only read.")] = None,
    pytorch: Annotated[list[str] | None, typer.Option("--pytorch", metavar="VER",
            help="Test (and solve) only against this release (repeatable).")] = None,
    from_shards: Annotated[Path | None, typer.Option("--from-shards", file_okay=False, show_default=False,
            help="The fan-in: take the build and test records from the shards' bundles downloaded here (each "
                 "checked: this run, this checkout's recipes, its own packages); build nothing.")] = None,
    run: Annotated[str, typer.Option("--run", envvar="CONDA_DISTRO_RUN", help="With --from-shards: this CI run's id.")] = "local",
    runners: Annotated[int, typer.Option("--runners", min=1, max=256, help="With --from-shards: as the plan job's.")] = 20,
    per_shard: Annotated[int, typer.Option("--per-shard", min=1, max=10000, help="With --from-shards: as the plan job's.")] = 4,
    stages: Annotated[int, typer.Option("--stages", min=1, max=64, help="With --from-shards: as the plan job's.")] = 8,
    root: RootOpt = None,
    format: Annotated[TextJsonMarkdown, typer.Option("--format", help="text, json or markdown (a PR comment).")] = Format.text,
) -> int:
    """The PR gate: lint + proposal checks + solve + build/test of the affected set.

    Exit 0 ready to merge, 1 changes needed, 2 bad input. A failing test that main already fails the same
    way (same release and variant, same failure signature) is listed apart and does not fail the PR. With
    --format markdown, bad input (exit 2) still prints a comment saying what cannot be read and what to do."""
    from conda_distro.checkpr.check import CheckPrOptions, ShardInputs
    from conda_distro.cli.progress import progress_sink
    from conda_distro.fanout.flows import pr_gate

    warn_no_sandbox(no_sandbox)
    shards = ShardInputs(from_shards, run, runners, per_shard, stages) if from_shards is not None else None
    return emit(pr_gate(CheckPrOptions(base=base, build=not no_build, jobs=jobs, sandbox=not no_sandbox, root=root,
                                       log_url=log_url, only=only, pytorch=tuple(pytorch or ()), shards=shards,
                                       progress=progress_sink())), format)
