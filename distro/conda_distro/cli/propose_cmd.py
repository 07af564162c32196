"""`conda-distro propose`."""

from __future__ import annotations

from typing import Annotated

import typer

from conda_distro.cli.app import Format, FormatOpt, RootOpt, app, emit


@app.command()
def propose(
    name: Annotated[str, typer.Argument(help="The conda package name to propose (lowercase).", show_default=False)],
    maintainer: Annotated[list[str] | None, typer.Option(
        "--maintainer", help="GitHub handle of a maintainer (repeatable; at least one).", show_default=False)] = None,
    version: Annotated[str | None, typer.Option(
        "--version", help="The upstream version to package (default: a 0.0.0 placeholder that lint flags).",
        show_default=False)] = None,
    summary: Annotated[str, typer.Option("--summary", help="One line: what the package does.")] = "",
    homepage: Annotated[str, typer.Option("--homepage", help="The project's homepage (http(s) URL).")] = "",
    repository: Annotated[str, typer.Option("--repository", help="The upstream source repository (http(s) URL).")] = "",
    license: Annotated[str, typer.Option("--license", help="SPDX identifier of the upstream license.")] = "",
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing proposal or recipe.")] = False,
    root: RootOpt = None,
    format: FormatOpt = Format.text,
) -> int:
    """Write proposals/NAME.yaml (the RFC-0006 intake questions) and a recipe skeleton recipes/NAME/recipe.yaml."""
    from conda_distro.proposal import ProposeOptions
    from conda_distro.proposal import propose as write_proposal

    return emit(write_proposal(ProposeOptions(
        name=name, maintainers=tuple(maintainer or ()), version=version, summary=summary, homepage=homepage,
        repository=repository, license=license, force=force, root=root)), format)
