"""`conda-distro report unmaintained` and `conda-distro status`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from conda_distro.cli.app import AsOfOpt, Format, FormatOpt, RootOpt, TextJsonMarkdown, app, emit

report_app = typer.Typer(name="report", help="Reports over channel_state/ and the repository.", no_args_is_help=True,
                         add_completion=False, rich_markup_mode=None)
app.add_typer(report_app, name="report")


@report_app.command("unmaintained")
def unmaintained(
    as_of: AsOfOpt = None,
    root: RootOpt = None,
    format: Annotated[TextJsonMarkdown, typer.Option("--format", help="Output format (markdown: a GitHub issue body).")] = Format.text,
) -> int:
    """Packages that lag behind the supported PyTorch releases past the grace period, or whose newest
    artifact fails; with maintainers to ping and the suggested action (ping | retire). Exit 1 when any."""
    from conda_distro.reports.unmaintained import UnmaintainedOptions, report_unmaintained

    return emit(report_unmaintained(UnmaintainedOptions(root=root, as_of=as_of)), format)


@app.command()
def status(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write index.html and style.css into.",
                                          file_okay=False, show_default=False)],
    as_of: AsOfOpt = None,
    repo_url: Annotated[str | None, typer.Option(
        "--repo-url", metavar="URL", show_default=False,
        help="Web address of the repository, for links to recipe files (default: the origin remote when it "
             "is on GitHub; links point at the checked-out commit).")] = None,
    root: RootOpt = None,
    format: FormatOpt = Format.text,
) -> int:
    """Write a static HTML status page: package × release × variant for main (channel_state/) and for the
    newest builds in staging (build/results/), failures with reason and log, per-release progress,
    the promotion gate's excuses (build/excuses.json), unmaintained flags, dependencies. Never reads a
    channel."""
    from conda_distro.reports.status import StatusOptions, write_status

    return emit(write_status(StatusOptions(out=out_dir, root=root, as_of=as_of, repo_url=repo_url)), format)
