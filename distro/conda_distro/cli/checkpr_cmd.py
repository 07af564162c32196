"""`conda-distro check-pr`."""

from __future__ import annotations

import enum
from typing import Annotated, Optional

import typer

from conda_distro.cli.app import RootOpt, app, out, print_json, warn_no_sandbox


class PrFormat(str, enum.Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


@app.command("check-pr")
def check_pr_cmd(
    base: Annotated[str, typer.Option("--base", help="The PR's base ref, e.g. origin/main.")] = "origin/main",
    no_build: Annotated[bool, typer.Option("--no-build", help="Skip build and test (when sharded jobs do them).")] = False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="How many packages to build and test at once (one worker process each).")] = 1,
    no_sandbox: Annotated[bool, typer.Option("--no-sandbox", help="Run build and test scripts unsandboxed (no bubblewrap); never in CI.")] = False,
    log_url: Annotated[Optional[str], typer.Option(
        "--log-url", envvar="CONDA_DISTRO_LOG_URL", show_default=False,
        help="Where the logs can be read (the CI run's artifact URL); '{path}' in it is replaced by the log's "
             "path. Without it the comment shows the log paths.")] = None,
    root: RootOpt = None,
    format: Annotated[PrFormat, typer.Option("--format", help="text, json or markdown (a PR comment).")] = PrFormat.text,
) -> int:
    """The PR gate: lint + proposal checks + solve + build/test of the affected set.

    Exit 0 ready to merge, 1 changes needed, 2 bad input. With --format markdown, bad input (exit 2)
    still prints a comment saying what cannot be read and what to do."""
    from conda_distro.checkpr import CheckPrOptions, check_pr
    from conda_distro.errors import DistroError
    from conda_distro.prcomment import error_report, to_markdown, to_text
    from conda_distro.progress import make_reporter

    warn_no_sandbox(no_sandbox)
    try:
        res = check_pr(root, CheckPrOptions(base=base, build=not no_build, jobs=jobs, sandbox=not no_sandbox),
                       make_reporter())
    except DistroError as exc:
        if format is PrFormat.markdown:  # the PR still gets a comment; the error goes to stderr as usual
            out(error_report(exc, base, root).markdown().rstrip("\n"))
        raise
    if format is PrFormat.json:
        print_json(res.to_dict())
    elif format is PrFormat.markdown:
        out(to_markdown(res, log_url).rstrip("\n"))
    else:
        out(to_text(res, log_url).rstrip("\n"))
    return int(res.exit_code)
