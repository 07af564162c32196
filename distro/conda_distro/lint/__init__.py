"""Recipe lint: run every registered check over the distribution's recipes, optionally fix."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from pathlib import Path

from conda_distro.distribution import Distribution, load_distribution
from conda_distro.errors import DistroError, ExitCode
from conda_distro.lint import checks as _checks  # noqa: F401  (registers the checks)
from conda_distro.lint import proposal_checks as _proposal_checks  # noqa: F401  (registers proposal-* checks)
from conda_distro.lint.base import CHECKS, Finding, LintCheck, Severity, lint_recipe
from conda_distro.lint.cache import LintCache
from conda_distro.lint.context import LintContext
from conda_distro.lint.hint_checks import lint_hints  # (registers the hint-* checks)
from conda_distro.lint.owner_checks import owner_registry  # (registers package-owner, source-path-outside, owners-*)
from conda_distro.lint.proposals import lint_proposals
from conda_distro.recipe.edit import TreeEditor
from conda_distro.recipe.model import Recipe, parse_recipe
from conda_distro.util.dates import parse_as_of, utcnow
from conda_distro.util.fsutil import atomic_write_text, paused_gc

__all__ = ["CHECKS", "CheckList", "Finding", "LintCheck", "LintOptions", "LintResult", "Severity", "lint", "lint_distribution",
           "lint_recipe", "list_checks"]


@dataclass(frozen=True)
class LintOptions:
    names: tuple[str, ...] = ()  # recipe folder names; empty = all
    fix: bool = False
    only: tuple[str, ...] = ()  # run only these check ids
    include_warnings: bool = True
    proposals: bool = True  # also lint proposals/<name>.yaml (check-pr lints the changed ones itself)
    strict_names: bool = True  # a named recipe that cannot be read is bad input (exit 2); check-pr: a finding
    hints: bool = True  # also lint hints.yaml (expired hints, unknown packages; malformed: exit 2)
    today: dt.date | None = None  # the day hints expire against (lint --as-of); None: today, UTC
    root: Path | None = None  # the distribution's folder (None: found from the current one); for lint()
    as_of: str | None = None  # `--as-of YYYY-MM-DD`: lint() sets ``today`` from it
    list_checks: bool = False  # lint(): list the checks instead (no distribution is read)


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)  # paths rewritten by --fix
    malformed: bool = False  # a named input could not be read at all (exit 2; --fix then writes nothing)
    unreadable: int = 0  # recipes that cannot be read or rendered (reported as findings; exit 1)

    @property
    def errors(self) -> int:
        return sum(f.severity == Severity.ERROR.value for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f.severity == Severity.WARNING.value for f in self.findings)

    @property
    def exit_code(self) -> ExitCode:
        if self.malformed:
            return ExitCode.BAD_INPUT
        return ExitCode.FAILURES if self.errors else ExitCode.OK

    def to_dict(self) -> dict:
        return {
            "ok": self.exit_code == ExitCode.OK,
            "findings": [f.to_dict() for f in self.findings],
            "errors": self.errors,
            "warnings": self.warnings,
            "fixed": self.fixed,
        }

    def text_lines(self) -> list[str]:
        lines = []
        for f in self.findings:
            loc = f"{f.path}:{f.line}" if f.line else f.path
            lines.append(f"{loc}: {f.severity}: [{f.check}] {f.message}")
            if f.hint:
                lines.append(f"    hint: {f.hint}")
        lines += [f"fixed: {p}" for p in self.fixed]
        lines.append(f"{self.errors} error(s), {self.warnings} warning(s)")
        return lines

    def github_lines(self) -> list[str]:
        """GitHub Actions annotations, one per finding."""
        lines = []
        for f in self.findings:
            level = "error" if f.severity == "error" else "warning"
            msg = f"{f.message}" + (f" — {f.hint}" if f.hint else "")
            msg = msg.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
            line = f",line={f.line}" if f.line else ""
            lines.append(f"::{level} file={f.path}{line},title={f.check}::{msg}")
        return lines


@dataclass
class CheckList:
    """`lint --list-checks`: every check, its severity, whether it fixes, and what it enforces."""

    checks: list[dict]
    exit_code: int = 0

    def to_dict(self) -> dict:
        return {"checks": self.checks}

    def text_lines(self) -> list[str]:
        return [f"{r['id']} ({r['severity']}{', fixable' if r['fixable'] else ''})\n    {r['explanation']}"
                for r in self.checks]

    def github_lines(self) -> list[str]:
        return self.text_lines()  # (annotations are for findings)


def list_checks() -> CheckList:
    return CheckList([{"id": c.id, "severity": c.severity.value, "fixable": c.fix is not LintCheck.fix,
                       "explanation": c.explanation()} for c in (CHECKS[k] for k in sorted(CHECKS))])


def lint(options: LintOptions) -> LintResult | CheckList:
    """`conda-distro lint`: the distribution at ``options.root``, hints expiring as of ``options.as_of``; the
    named recipes must exist (readable or not)."""
    if options.list_checks:
        return list_checks()
    today = parse_as_of(options.as_of)  # hints.yaml: which hints have expired
    dist = load_distribution(options.root, strict=False)
    dist.check_names(options.names)
    return lint_distribution(dist, replace(options, today=today))


def _error_finding(exc: DistroError, ctx: LintContext, recipe: str) -> Finding:
    path = Path(exc.path) if exc.path else ctx.distro.recipes_dir / recipe
    return Finding(recipe=recipe, check="recipe-invalid", severity="error", message=exc.message,
                   path=ctx.relpath(path), line=exc.line, hint=exc.hint)


def selected_checks(only: tuple[str, ...] = ()) -> list[LintCheck]:
    unknown = [c for c in only if c not in CHECKS]
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], CHECKS, n=1)
        raise DistroError(f"unknown check id '{unknown[0]}'", field="--check",
                          hint=f"did you mean '{close[0]}'?" if close else "see `conda-distro lint --list-checks`")
    return [CHECKS[c]() for c in (only or sorted(CHECKS))]


def _fixed_text(recipe: Recipe, findings: list[Finding], ctx: LintContext) -> str | None:
    """The recipe text with the simple fixes applied, or None when nothing changes. Nothing is
    written here: lint writes the fixed files only once it knows it will not exit 2."""
    ids = {f.check for f in findings if f.fixable}
    if not ids:
        return None
    edit = TreeEditor(recipe.text, path=recipe.path)
    changed = False
    for cid in sorted(ids):
        changed |= CHECKS[cid]().fix(recipe, edit, ctx)
    text = edit.text() if changed else None
    return text if text is not None and text != recipe.text else None


@paused_gc()
def lint_distribution(dist: Distribution, options: LintOptions = LintOptions()) -> LintResult:
    checks = selected_checks(options.only)
    ctx = LintContext(dist.distro, names={r.name for r in dist.recipes.values()}, recipes=dist.recipes)
    ctx.owners, owner_findings = owner_registry(dist, ctx, checks)
    result = LintResult()
    # package_owners.yaml: malformed is fatal whatever is linted; its other findings when everything is
    result.findings.extend(f for f in owner_findings if not options.names or CHECKS[f.check].fatal)
    result.malformed |= any(CHECKS[f.check].fatal for f in owner_findings)
    names = list(options.names) or sorted(set(dist.recipes) | {_folder(e) for e in dist.errors})
    named = set(options.names) if options.strict_names else set()
    errors_by_folder = {_folder(e): e for e in dist.errors}
    cache = LintCache.open(dist.settings.cache_dir, dist.root, ctx, checks)  # (an unchanged recipe is not linted again)
    pending: dict[Path, str] = {}  # --fix: path -> fixed text, written at the end
    for name in names:
        if name in errors_by_folder:
            result.findings.append(_error_finding(errors_by_folder[name], ctx, name))
            result.unreadable += 1
            result.malformed |= name in named
            continue
        recipe = dist.get(name)
        findings = cache.findings(recipe)
        fixed = _fixed_text(recipe, findings, ctx) if options.fix else None
        if fixed is not None:
            try:
                recipe = parse_recipe(fixed, recipe.path, dist.settings)
            except DistroError as exc:  # a fix must never break a recipe: keep the file as it is
                result.findings.append(_error_finding(exc, ctx, name))
                result.malformed = True
                continue
            pending[recipe.path] = fixed
            findings = lint_recipe(recipe, ctx, checks)
        result.malformed |= name in named and any(CHECKS[f.check].fatal for f in findings)
        result.findings.extend(findings)
    cache.save()
    # --- proposals/<name>.yaml: the proposal-* checks, see conda_distro.lint.proposals ---
    proposal_findings = lint_proposals(dist, ctx, names=options.names, checks=checks) if options.proposals else []
    result.malformed |= any(CHECKS[f.check].fatal for f in proposal_findings)
    result.findings.extend(proposal_findings)
    # --- end proposals ---
    if options.hints:
        hint_findings = lint_hints(dist, ctx, today=options.today or utcnow().date(), names=options.names,
                                   checks=checks)
        result.malformed |= any(CHECKS[f.check].fatal for f in hint_findings)
        result.findings.extend(hint_findings)
    if not options.include_warnings:
        result.findings = [f for f in result.findings if f.severity == Severity.ERROR.value]
    result.findings.sort(key=lambda f: (f.path, f.line or 0, f.check))
    if pending and not result.malformed:
        for path, text in pending.items():
            atomic_write_text(path, text)
            result.fixed.append(ctx.relpath(path))
    return result


def _folder(exc: DistroError) -> str:
    return Path(exc.path).parent.name if exc.path else "?"
