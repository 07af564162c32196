"""A recipe's pins of pytorch: which ones the sweep edits, and which supported releases they admit.

A pin here is a versioned ``pytorch`` requirement in ``build``, ``host``, ``run`` or ``run_constraints``,
at the top level or in ``outputs:``, in every ``if/then/else`` branch (a release must satisfy the CUDA
branch's pin as well as the CPU one). Requirements on the recipe's own outputs (``pin_subpackage``,
``libtorch ==${{ version }}`` between the outputs of one feedstock) are never pins of pytorch: a recipe
that produces ``pytorch`` itself has none.
"""

from __future__ import annotations

from typing import Any, Mapping

from conda_distro.graph import RecipeGraph
from conda_distro.recipe import SECTIONS, Dep, Recipe
from conda_distro.specs import admits, parse_spec

PIN_SECTIONS = ("build", "host", "run", "run_constraints")


def own_names(recipe: Recipe) -> set[str]:
    """The package names the recipe produces: its name and every output's name."""
    names = getattr(recipe, "output_names", None)
    if names:
        return {str(n) for n in names} | {recipe.name}
    out = {recipe.name}
    data = getattr(recipe, "data", None)
    data = data if isinstance(data, dict) else {}
    outputs = data.get("outputs")
    if not isinstance(outputs, list):
        return out
    renderer = None
    for o in outputs:
        pkg = o.get("package") if isinstance(o, dict) else None
        raw = pkg.get("name") if isinstance(pkg, dict) else None
        if raw is None:
            continue
        raw = str(raw)
        if "${{" in raw:
            try:
                if renderer is None:
                    from conda_distro.recipe import Renderer

                    renderer = Renderer(recipe.platform, recipe.path)
                    renderer.add_context(data.get("context"))
                    renderer.ns.setdefault("name", recipe.name)
                    renderer.ns.setdefault("version", recipe.version)
                raw = renderer.render(raw)
            except Exception:  # noqa: BLE001 - an unrenderable output name is simply not known here
                continue
        out.add(raw.strip())
    return out


def _branch_items(value: Any, line: int, out: list[tuple[str, int]]) -> None:
    """(text, line) of every string item of a requirement list, in all if/then/else branches."""
    if value is None:
        return
    if isinstance(value, list):
        lines = getattr(value, "item_lines", ())
        for i, item in enumerate(value):
            _branch_items(item, lines[i] if i < len(lines) else getattr(value, "line", line), out)
    elif isinstance(value, dict):
        if "if" in value:
            for key in ("then", "else"):
                if key in value:
                    ln = value.line_of(key) if hasattr(value, "line_of") else line
                    _branch_items(value[key], ln, out)
    elif isinstance(value, str):
        out.append((value, line))


def _written_pins(recipe: Recipe, pytorch: str) -> list[Dep]:
    """Literal pytorch requirements written in the recipe, whichever branch of a condition they are in."""
    data = getattr(recipe, "data", None)
    data = data if isinstance(data, dict) else {}
    bodies = [data] + [o for o in (data.get("outputs") or []) if isinstance(o, dict)] \
        if isinstance(data.get("outputs"), list) else [data]
    found: list[Dep] = []
    for body in bodies:
        req = body.get("requirements")
        if not isinstance(req, dict):
            continue
        for section in PIN_SECTIONS:
            items: list[tuple[str, int]] = []
            _branch_items(req.get(section), req.line_of(section) if hasattr(req, "line_of") else 1, items)
            for text, line in items:
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
    if pytorch in own_names(recipe):
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
    if pytorch in own_names(recipe):
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
