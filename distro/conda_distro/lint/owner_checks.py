"""Trust checks: what a recipe may publish and read. A recipe may declare only the package names it owns
(:mod:`conda_distro.state.owners`), and its ``source: path:`` stays inside the repository. Recipe code is
hostile, so neither can be opted out of with ``extra.skip-lints``.

``package_owners.yaml`` itself is checked once (:func:`owner_registry`): malformed is ``owners-invalid``
(fatal: lint exits 2, as build and promote would), an entry naming a recipe folder that does not exist
is ``owners-unknown-recipe``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from conda_distro.errors import ConfigError
from conda_distro.lint.base import FileCheck, Finding, LintCheck, Problem, Severity
from conda_distro.lint.context import LintContext
from conda_distro.recipe.model import Recipe
from conda_distro.state.owners import OWNERS_FILE, OwnerRegistry, load_reviewed, registry_of
from conda_distro.util.yamlio import LDict, LList

if TYPE_CHECKING:  # pragma: no cover
    from conda_distro.distribution import Distribution


class PackageOwner(LintCheck):
    """A recipe publishes only package names it owns (conda-forge's feedstock-outputs rule). The owner of a
    name is, first found: its entry in package_owners.yaml (reviewed); the recipe main's ledger
    (channel_state/NAME.json) recorded its newest promoted artifact as built from; the recipe folder named
    after the package; the one recipe declaring it. A recipe declaring a name another recipe owns, or two
    recipes declaring a name none of them owns, is an error (build refuses to start, promote holds the
    artifact). A name changes owner only through an entry in package_owners.yaml. Cannot be skipped."""

    id = "package-owner"
    skippable = False

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if ctx.owners is None:
            return
        for c in ctx.owners.conflicts_of(recipe.folder.name):
            output = next((o for o in recipe.outputs if o.name == c.name and o.index is not None), None)
            line = _output_line(recipe, output.index) if output is not None and output.index is not None else None
            yield Problem(c.message, line or recipe.line_of("package.name"), c.hint)


def _output_line(recipe: Recipe, index: int) -> int | None:
    """The line of ``package:`` in the recipe's ``outputs[index]`` (as far as the text tells)."""
    outputs = recipe.tree.get("outputs")
    if not isinstance(outputs, LList) or index >= len(outputs):
        return None
    item = outputs[index]
    return item.line_of("package") if isinstance(item, LDict) and "package" in item else outputs.line_of(index)


class SourcePathOutside(LintCheck):
    """A ``source: path:`` stays inside the repository: a recipe cannot make the build read /etc, a home
    folder or another checkout (symbolic links are followed). Cannot be skipped."""

    id = "source-path-outside"
    skippable = False
    hint = "keep the sources in the recipe's folder (e.g. path: src) or download them (url: with sha256:)"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        root = None
        for s in recipe.sources:
            if not s.path:
                continue
            root = root or ctx.distro.root.resolve()  # (only for a recipe with a path source: a warm lint's cost)
            try:
                where = (recipe.folder / s.path).resolve()
            except (OSError, ValueError, RuntimeError):  # a loop of links, an embedded NUL
                where = None
            if where is None or not where.is_relative_to(root):
                yield Problem(f"source path '{s.path}' leads outside the repository"
                              + (f" ({where})" if where is not None else ""), s.line)


class OwnersInvalid(FileCheck):
    """package_owners.yaml is valid YAML with only the known keys: ``owners:`` mapping package names to
    {recipe: the folder under recipes/, by: a GitHub handle, reason}. Lint exits 2, as build and promote do."""

    id = "owners-invalid"
    fatal = True
    hint = "see the comment at the top of package_owners.yaml"


class OwnersUnknownRecipe(FileCheck):
    """An entry of package_owners.yaml gives a name to a recipe folder that does not exist: the name is
    reserved for it and no other recipe may publish it. Remove the entry if that recipe is gone for good."""

    id = "owners-unknown-recipe"
    severity = Severity.WARNING


def owner_registry(dist: Distribution, ctx: LintContext, checks: Sequence[LintCheck]) -> tuple[OwnerRegistry | None, list[Finding]]:
    """The distribution's owner registry and the findings on package_owners.yaml. A malformed file is one
    ``owners-invalid`` finding (the registry is then unknown) when that check is selected; else it raises."""
    try:
        registry = registry_of(dist)
    except ConfigError as exc:
        if exc.path is None or Path(exc.path).name != OWNERS_FILE or not any(isinstance(c, OwnersInvalid) for c in checks):
            raise
        note = f" (field '{exc.field}')" if exc.field else ""
        return None, [Finding(recipe="package_owners", check=OwnersInvalid.id, severity="error",
                              message=exc.message + note, path=OWNERS_FILE, line=exc.line, hint=exc.hint)]
    findings = []
    if any(isinstance(c, OwnersUnknownRecipe) for c in checks):
        for owner in load_reviewed(dist.root).values():
            if not (dist.distro.recipes_dir / owner.recipe).is_dir():
                findings.append(Finding(recipe=owner.name, check=OwnersUnknownRecipe.id, severity="warning",
                                        message=f"'{owner.name}' is given to {owner.path}, which does not exist",
                                        path=OWNERS_FILE, line=owner.line,
                                        hint="remove the entry if that recipe is gone for good"))
    return registry, findings
