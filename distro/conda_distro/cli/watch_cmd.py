"""`conda-distro watch`."""

from __future__ import annotations

from typing import Annotated

import typer

from conda_distro.cli.app import Format, RootOpt, TextJsonMarkdown, app, emit


@app.command()
def watch(
    names: Annotated[list[str] | None, typer.Argument(help="Only these packages of main (default: all).",
                                                      metavar="[NAME]...", show_default=False)] = None,
    root: RootOpt = None,
    no_sandbox: Annotated[bool, typer.Option("--no-sandbox", help="Run the tests without the sandbox (never on "
                                                                 "untrusted recipes).")] = False,
    format: Annotated[TextJsonMarkdown, typer.Option("--format", help="text, json or markdown.")] = Format.text,
) -> int:
    """Re-test main's packages against today's upstream on every release × variant (reusing outcomes whose
    solved environment is unchanged); for a package that passed and fails now, name the upstream update
    that broke it (bisecting the changed files). Main may be local or remote (anaconda://). Exit 1
    when something broke or a target got no verdict (an error)."""
    from conda_distro.reports.watch import WatchOptions
    from conda_distro.reports.watch import watch as run_watch

    return emit(run_watch(WatchOptions(root=root, names=tuple(names or ()), sandbox=not no_sandbox)), format)
