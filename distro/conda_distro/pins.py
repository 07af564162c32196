"""A recipe's pins of pytorch: which ones the sweep edits, and which supported releases they admit.

A pin here is a versioned ``pytorch`` requirement in ``build``, ``host``, ``run`` or ``run_constraints``,
at the top level or in ``outputs:``, in every ``if/then/else`` branch (a release must satisfy the CUDA
branch's pin as well as the CPU one). Requirements on the recipe's own outputs (``pin_subpackage``,
``libtorch ==${{ version }}`` between the outputs of one feedstock) are never pins of pytorch: a recipe
that produces ``pytorch`` itself has none.
"""

from __future__ import annotations

from collections.abc import Mapping

from conda_distro.graph import RecipeGraph
from conda_distro.recipe.model import SECTIONS, Dep, Recipe, written_items
from conda_distro.recipe.specs import admits, parse_spec

PIN_SECTIONS = ("build", "host", "run", "run_constraints")


def own_names(recipe: Recipe) -> set[str]:
    """The package names the recipe produces: its name and every output's name."""
    return {recipe.name, *recipe.output_names}


def _written_pins(recipe: Recipe, pytorch: str) -> list[Dep]:
    """Literal pytorch requirements written in the recipe, whichever branch of a condition they are in."""
    data = recipe.tree  # (the YAML tree: parsed again for a recipe read from the model cache)
    bodies = [data] + [o for o in (data.get("outputs") or []) if isinstance(o, dict)] \
        if isinstance(data.get("outputs"), list) else [data]
    found: list[Dep] = []
    for body in bodies:
        req = body.get("requirements")
        if not isinstance(req, dict):
            continue
        for section in PIN_SECTIONS:
            for text, line in written_items(req.get(section), req.line_of(section) if hasattr(req, "line_of") else 1):
                text = text.strip()
                if "${{" in text or not text:
                    continue
                spec = parse_spec(text)
                if spec.ok and spec.name == pytorch:
                    found.append(Dep(section, text, line, spec))
    return found


def pytorch_pins(recipe: Recipe, pytorch: str, *, all_branches: bool = True) -> list[Dep]:
    """Versioned pins of ``pytorch`` (see the module doc), one per line, in line order. Empty for a
    recipe that produces ``pytorch`` itself. ``all_branches=False``: only the requirements that apply
    to the recipe's platform (what a build of it gets)."""
    if recipe.produces(pytorch):
        return []
    by_line: dict[int, Dep] = {}
    for d in recipe.deps(*[s for s in PIN_SECTIONS if s in SECTIONS]):
        if d.name == pytorch and d.spec is not None and d.spec.ok and d.version:
            by_line.setdefault(d.line, d)
    for d in _written_pins(recipe, pytorch) if all_branches else ():
        if d.version:
            by_line.setdefault(d.line, d)
    return [by_line[k] for k in sorted(by_line)]


def depends_on(recipe: Recipe, pytorch: str) -> bool:
    """Does the recipe require ``pytorch`` at all (bare, pinned or through a pin function)?"""
    if recipe.produces(pytorch):
        return False
    return any(d.name == pytorch for d in recipe.deps(*[s for s in PIN_SECTIONS if s in SECTIONS])) or \
        bool(_written_pins(recipe, pytorch))


def own_admitted(recipe: Recipe, pytorch: str, releases: list[str]) -> set[str]:
    """Releases admitted by every pytorch pin (pin functions follow the host spec, which is what they
    pin against)."""
    specs = [d.version for d in pytorch_pins(recipe, pytorch, all_branches=False)]
    return {r for r in releases if all(admits(s, r) for s in specs)}


def admitted_releases(recipes: Mapping[str, Recipe], graph: RecipeGraph, pytorch: str, releases: list[str]) -> dict[str, set[str]]:
    """folder name -> releases admitted by the recipe and all its distribution dependencies."""
    out: dict[str, set[str]] = {}
    for name in graph.order():
        allowed = own_admitted(recipes[name], pytorch, releases)
        for dep in graph.dependencies(name):
            allowed &= out[dep]
        out[name] = allowed
    return out


def uses_pytorch_variant(recipe: Recipe, pytorch: str) -> bool:
    """A bare pytorch in host makes pytorch a variant key: one build per supported minor."""
    return any(d.name == pytorch and d.is_bare for d in recipe.deps("host"))
