"""`conda-distro lint`."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from conda_distro.cli.app import AsOfOpt, RootOpt, app, out, print_json

if TYPE_CHECKING:
    from conda_distro.lint import LintResult


class LintFormat(str, enum.Enum):
    text = "text"
    json = "json"
    github = "github"


def _github(result: LintResult) -> None:
    for f in result.findings:
        level = "error" if f.severity == "error" else "warning"
        msg = f"{f.message}" + (f" — {f.hint}" if f.hint else "")
        msg = msg.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        line = f",line={f.line}" if f.line else ""
        out(f"::{level} file={f.path}{line},title={f.check}::{msg}")


def _text(result: LintResult) -> None:
    for f in result.findings:
        loc = f"{f.path}:{f.line}" if f.line else f.path
        out(f"{loc}: {f.severity}: [{f.check}] {f.message}")
        if f.hint:
            out(f"    hint: {f.hint}")
    for p in result.fixed:
        out(f"fixed: {p}")
    out(f"{result.errors} error(s), {result.warnings} warning(s)")


@app.command()
def lint(
    names: Annotated[Optional[list[str]], typer.Argument(help="Recipe names (default: all).", show_default=False)] = None,
    root: RootOpt = None,
    format: Annotated[LintFormat, typer.Option("--format", help="text, json or github (Actions annotations).")] = LintFormat.text,
    fix: Annotated[bool, typer.Option("--fix", help="Apply the simple automatic fixes in place.")] = False,
    check: Annotated[Optional[list[str]], typer.Option("--check", help="Run only this check id (repeatable).")] = None,
    errors_only: Annotated[bool, typer.Option("--errors-only", help="Do not report warnings.")] = False,
    list_checks: Annotated[bool, typer.Option("--list-checks", help="List the checks and what they enforce.")] = False,
    as_of: AsOfOpt = None,
) -> int:
    """Check recipes against the distribution's conventions and policy."""
    from conda_distro.distribution import load_distribution
    from conda_distro.lint import CHECKS, Check, LintOptions, lint_distribution

    if list_checks:
        rows = [{"id": c.id, "severity": c.severity.value, "fixable": c.fix is not Check.fix,
                 "explanation": c.explanation()} for c in (CHECKS[k] for k in sorted(CHECKS))]
        if format is LintFormat.json:
            print_json({"checks": rows})
        else:
            for r in rows:
                out(f"{r['id']} ({r['severity']}{', fixable' if r['fixable'] else ''})\n    {r['explanation']}")
        return 0
    from conda_distro.reports.facts import parse_as_of

    today = parse_as_of(as_of)  # hints.yaml: which hints have expired
    dist = load_distribution(root, strict=False)
    if names:
        for n in names:
            if n not in dist.recipes and not any(e.path and n in e.path for e in dist.errors):
                dist.get(n)  # raises with a did-you-mean hint
    result = lint_distribution(dist, LintOptions(names=tuple(names or ()), fix=fix, only=tuple(check or ()),
                                                 include_warnings=not errors_only, today=today))
    {LintFormat.json: lambda r: print_json(r.to_dict()), LintFormat.github: _github, LintFormat.text: _text}[format](result)
    return int(result.exit_code)
