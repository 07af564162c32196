"""`conda-distro check-pr`."""

from __future__ import annotations

from typing import Annotated

import typer

from conda_distro.cli.app import Format, RootOpt, TextJsonMarkdown, app, emit, warn_no_sandbox


@app.command("check-pr")
def check_pr_cmd(
    base: Annotated[str, typer.Option("--base", help="The PR's base ref, e.g. origin/main.")] = "origin/main",
    no_build: Annotated[bool, typer.Option("--no-build", help="Skip build and test (when sharded jobs do them).")] = False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, max=256,
            help="How many packages to build and test at once (one worker process each).")] = 1,
    no_sandbox: Annotated[bool, typer.Option("--no-sandbox",
            help="Run build and test scripts unsandboxed (no bubblewrap); never in CI.")] = False,
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
    root: RootOpt = None,
    format: Annotated[TextJsonMarkdown, typer.Option("--format", help="text, json or markdown (a PR comment).")] = Format.text,
) -> int:
    """The PR gate: lint + proposal checks + solve + build/test of the affected set.

    Exit 0 ready to merge, 1 changes needed, 2 bad input. With --format markdown, bad input (exit 2)
    still prints a comment saying what cannot be read and what to do."""
    from conda_distro.checkpr.check import CheckPrOptions
    from conda_distro.checkpr.run import run_check_pr

    warn_no_sandbox(no_sandbox)
    return emit(run_check_pr(CheckPrOptions(base=base, build=not no_build, jobs=jobs, sandbox=not no_sandbox, root=root,
                                            log_url=log_url, only=only, pytorch=tuple(pytorch or ()))), format)
