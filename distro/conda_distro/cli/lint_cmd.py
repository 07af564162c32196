"""`conda-distro lint`."""

from __future__ import annotations

from typing import Annotated

import typer

from conda_distro.cli.app import AsOfOpt, Format, LintFormat, RootOpt, app, emit


@app.command()
def lint(
    names: Annotated[list[str] | None, typer.Argument(help="Recipe names (default: all).", show_default=False)] = None,
    root: RootOpt = None,
    format: Annotated[LintFormat, typer.Option("--format", help="text, json or github (Actions annotations).")] = Format.text,
    fix: Annotated[bool, typer.Option("--fix", help="Apply the simple automatic fixes in place.")] = False,
    check: Annotated[list[str] | None, typer.Option("--check", help="Run only this check id (repeatable).")] = None,
    errors_only: Annotated[bool, typer.Option("--errors-only", help="Do not report warnings.")] = False,
    list_checks: Annotated[bool, typer.Option("--list-checks", help="List the checks and what they enforce.")] = False,
    as_of: AsOfOpt = None,
) -> int:
    """Check recipes against the distribution's conventions and policy."""
    from conda_distro.lint import LintOptions
    from conda_distro.lint import lint as run_lint

    return emit(run_lint(LintOptions(names=tuple(names or ()), fix=fix, only=tuple(check or ()),
                                     include_warnings=not errors_only, root=root, as_of=as_of,
                                     list_checks=list_checks)), format)
