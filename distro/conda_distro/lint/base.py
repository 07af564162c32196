"""Lint framework: one small class per check, registered by id; its docstring is the help text."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from conda_distro.recipe.edit import TreeEditor
from conda_distro.recipe.model import Recipe


class Severity(str, enum.Enum):  # noqa: UP042 -- StrEnum would change str()/format() of members (output bytes)
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    recipe: str
    check: str
    severity: str
    message: str
    path: str
    line: int | None
    hint: str | None = None
    fixable: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Problem:
    """What a check yields: the message, the line, and (optionally) a more specific hint."""

    message: str
    line: int | None = None
    hint: str | None = None


CHECKS: dict[str, type[LintCheck]] = {}


class LintCheck:
    """Base of all checks. Subclasses set ``id``, ``severity``, ``hint`` and implement ``run``."""

    id: ClassVar[str]
    severity: ClassVar[Severity] = Severity.ERROR
    hint: ClassVar[str] = ""
    fatal: ClassVar[bool] = False  # findings mean the input is malformed (exit 2), not merely non-compliant
    skippable: ClassVar[bool] = True  # False: ``extra.skip-lints`` cannot turn it off (the trust checks)
    #: "recipe": the findings depend only on the recipe, the lint configuration and which of the recipe's
    #: requirement names are distribution packages (kept per recipe by :mod:`conda_distro.lint.cache`);
    #: "distribution" (the default, always safe): anything else (other recipes, owners, files on disk)
    scope: ClassVar[str] = "distribution"

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if getattr(cls, "id", None):
            if cls.id in CHECKS:
                raise RuntimeError(f"duplicate lint check id {cls.id}")
            CHECKS[cls.id] = cls

    @classmethod
    def explanation(cls) -> str:
        return " ".join((cls.__doc__ or "").split())

    @property
    def fixable(self) -> bool:
        return type(self).fix is not LintCheck.fix

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:  # pragma: no cover - abstract
        raise NotImplementedError

    def applies(self, recipe: Recipe, ctx: LintContext) -> bool:
        """(A distribution-scope check.) False when the recipe alone, under the lint configuration, shows that
        the check finds nothing in it, whatever the rest of the distribution is: the answer is kept in the
        lint cache with the recipe-scope findings, and the check is not run for an unchanged recipe.
        It must read only what a recipe-scope check may read (see ``scope``). True (the default): run it."""
        return True

    def fix(self, recipe: Recipe, edit: TreeEditor, ctx: LintContext) -> bool:
        """Edit the recipe through ``edit`` (the one recipe editor, :mod:`conda_distro.recipe.edit`);
        return True when something changed."""
        return False

    def findings(self, recipe: Recipe, ctx: LintContext) -> Iterable[Finding]:
        problems = list(self.run(recipe, ctx))
        if not problems:
            return ()
        return [
            Finding(
                recipe=recipe.folder.name, check=self.id, severity=self.severity.value, message=p.message,
                path=ctx.relpath(recipe.path), line=p.line, hint=p.hint or self.hint or None, fixable=self.fixable,
            )
            for p in problems
        ]


def lint_recipe(recipe: Recipe, ctx: LintContext, checks: list[LintCheck]) -> list[Finding]:
    """The findings of ``checks`` for ``recipe`` (those its ``extra.skip-lints`` turns off left out)."""
    out: list[Finding] = []
    skip = set(recipe.skip_lints)
    for check in checks:
        if check.id not in skip or not check.skippable:
            out.extend(check.findings(recipe, ctx))
    return out


class FileCheck(LintCheck):
    """Base of checks on another file than a recipe (a proposal, hints.yaml): registered with the recipe
    checks (``--list-checks``, ``--check``), they yield nothing for recipes; their own runner calls them."""

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        return ()

    def findings(self, recipe: Recipe, ctx: LintContext) -> Iterable[Finding]:
        return ()


from conda_distro.lint.context import LintContext  # noqa: E402  (circular typing only)
