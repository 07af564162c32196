"""`conda-distro check-pr`."""

from __future__ import annotations

import enum
from typing import Annotated

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
    root: RootOpt = None,
    format: Annotated[PrFormat, typer.Option("--format", help="text, json or markdown (a PR comment).")] = PrFormat.text,
) -> int:
    """The PR gate: lint + proposal checks + solve + build/test of the affected set."""
    from conda_distro.checkpr import CheckPrOptions, check_pr, to_markdown
    from conda_distro.progress import make_reporter

    warn_no_sandbox(no_sandbox)
    res = check_pr(root, CheckPrOptions(base=base, build=not no_build, jobs=jobs, sandbox=not no_sandbox), make_reporter())
    if format is PrFormat.json:
        print_json(res.to_dict())
    else:
        out(to_markdown(res).rstrip("\n"))
    return int(res.exit_code)
