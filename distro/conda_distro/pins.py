"""A recipe's pins of pytorch: which ones the sweep edits, and which supported releases they admit.

A pin here is a versioned ``pytorch`` requirement in ``build``, ``host``, ``run`` or ``run_constraints``,
at the top level or in ``outputs:``, in every ``if/then/else`` branch (a release must satisfy the CUDA
branch's pin as well as the CPU one), and in the requirements of a test (``tests[].requirements.run`` and
``build``, written literally): a test that installs ``pytorch >=2.13,<2.15`` can only be run on the releases
it admits, so the sweep widens it like any other pin, and a recipe whose only pytorch requirement is in its
tests depends on pytorch for the sweep (its tests are what a release must pass). Requirements on the recipe's
own outputs (``pin_subpackage``, ``libtorch ==${{ version }}`` between the outputs of one feedstock) are
never pins of pytorch: a recipe that produces ``pytorch`` itself has none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from conda_distro.recipe.model import SECTIONS, TEST_SECTIONS, Dep, Recipe
from conda_distro.recipe.specs import admits, parse_spec

if TYPE_CHECKING:  # (an annotation only: promote and excuses import this module, never networkx for it)
    from conda_distro.graph import RecipeGraph

PIN_SECTIONS = ("build", "host", "run", "run_constraints")


def own_names(recipe: Recipe) -> set[str]:
    """The package names the recipe produces: its name and every output's name."""
    return {recipe.name, *recipe.output_names}


def _written_pins(recipe: Recipe, pytorch: str) -> list[Dep]:
    """Literal pytorch requirements written in the recipe, whichever branch of a condition they are in
    (found once per recipe: the recipe's text never changes, an edit makes a new recipe)."""
    key = ("written_pins", pytorch)
    if key not in recipe.derived:
        recipe.derived[key] = _find_written_pins(recipe, pytorch)
    return list(recipe.derived[key])


def _find_written_pins(recipe: Recipe, pytorch: str) -> list[Dep]:
    """A test's requirement written with an expression is read as rattler-build renders it, when it renders
    to one text (:attr:`~conda_distro.recipe.model.Recipe.test_rendered`) and is not written with the
    PyTorch variant key (:func:`_templated_lines`); any other is not a literal pin."""
    found: list[Dep] = []
    rendered = dict(recipe.test_rendered)
    templated = _templated_lines(recipe, pytorch) if rendered else set()
    for section, text, line in recipe.written_requirements():  # (kept in the model cache: no YAML parse)
        text = text.strip()
        if "${{" in text:
            text = rendered.get(line, "") if section in TEST_SECTIONS and line not in templated else ""
        if not text:
            continue
        spec = parse_spec(text)
        if spec.ok and spec.name == pytorch:
            found.append(Dep(section, text, line, spec))
    return found


def test_pins(recipe: Recipe, pytorch: str) -> list[Dep]:
    """Versioned pytorch pins written literally in the requirements of the recipe's tests (sections
    :data:`~conda_distro.recipe.model.TEST_SECTIONS`). Empty for a recipe that produces ``pytorch``."""
    if recipe.produces(pytorch):
        return []
    return [d for d in _written_pins(recipe, pytorch) if d.section in TEST_SECTIONS and d.version]


def _templated_lines(recipe: Recipe, pytorch: str) -> set[int]:
    """Lines of requirements written with the PyTorch variant key (``pytorch ${{ pytorch }}.*``, or a key
    zipped with it): what they render to follows the variant, one minor per build, so they are no pin a
    sweep widens (nor one that decides for the whole recipe which releases it admits: :func:`own_admitted`
    reads them per variant)."""
    keys = {pytorch}
    if recipe.settings is not None:
        keys |= {k for z in recipe.settings.zip_keys if pytorch in z for k in z}
    word = re.compile(r"\$\{\{[^}]*(?<![\w.'\"])(" + "|".join(map(re.escape, sorted(keys))) + r")(?![\w'\"])")
    return {line for _, text, line in recipe.written_requirements() if "${{" in text and word.search(text)}


def pytorch_pins(recipe: Recipe, pytorch: str, *, all_branches: bool = True) -> list[Dep]:
    """Versioned pins of ``pytorch`` (see the module doc), one per line, in line order. Empty for a
    recipe that produces ``pytorch`` itself. ``all_branches=False``: only the requirements that apply
    to the recipe's platform (what a build of it gets; its tests' pins left out: see :func:`test_pins`)."""
    key = ("pytorch_pins", pytorch, all_branches)  # (asked by three lint checks and the sweep: found once)
    if key not in recipe.derived:
        recipe.derived[key] = _pytorch_pins(recipe, pytorch, all_branches)
    return list(recipe.derived[key])


def _pytorch_pins(recipe: Recipe, pytorch: str, all_branches: bool) -> list[Dep]:
    if recipe.produces(pytorch):
        return []
    templated = _templated_lines(recipe, pytorch)
    by_line: dict[int, Dep] = {}
    for d in recipe.deps(*[s for s in PIN_SECTIONS if s in SECTIONS]):
        if d.name == pytorch and d.spec is not None and d.spec.ok and d.version and d.line not in templated:
            by_line.setdefault(d.line, d)
    for d in _written_pins(recipe, pytorch) if all_branches else ():
        if d.version:
            by_line.setdefault(d.line, d)
    return [by_line[k] for k in sorted(by_line)]


def depends_on(recipe: Recipe, pytorch: str) -> bool:
    """Does the recipe require ``pytorch`` at all (bare, pinned or through a pin function), in its
    requirements or its tests' requirements (a package whose tests install pytorch is tested with it)?"""
    if recipe.produces(pytorch):
        return False
    return any(d.name == pytorch for d in recipe.deps(*[s for s in PIN_SECTIONS if s in SECTIONS])) or \
        bool(_written_pins(recipe, pytorch))


def own_admitted(recipe: Recipe, pytorch: str, releases: Sequence[str]) -> set[str]:
    """Releases admitted by the recipe's pytorch pins (pin functions follow the host spec, which is what
    they pin against), read per rendered variant as rattler-build renders it: a release is admitted by an
    output when one of its variants' pins all admit it (``pytorch ${{ pytorch }}.*`` in host renders
    ``pytorch 2.13.*`` in one variant and ``pytorch 2.14.*`` in the next: each minor has its build), and
    by the recipe when every output admits it. Its tests' pins (:func:`test_pins`) count too: a release
    they leave out is one the recipe cannot be tested on (its test environment would not solve)."""
    if recipe.produces(pytorch):
        return set(releases)
    tested = {r for r in releases if all(admits(d.version, r) for d in test_pins(recipe, pytorch))}
    if not recipe.variants:
        specs = [d.version for d in pytorch_pins(recipe, pytorch, all_branches=False)]
        return {r for r in tested if all(admits(s, r) for s in specs)}
    per_output: dict[str, set[str]] = {}
    for v in recipe.variants:
        specs = [p.version for section in PIN_SECTIONS for p in map(parse_spec, v.requirements.get(section, ()))
                 if p.ok and p.name == pytorch and p.version]
        per_output.setdefault(v.output, set()).update(r for r in releases if all(admits(s, r) for s in specs))
    out = tested
    for admitted in per_output.values():
        out &= admitted
    return out


def admitted_releases(recipes: Mapping[str, Recipe], graph: RecipeGraph, pytorch: str, releases: Sequence[str]) -> dict[str, set[str]]:
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


def builds_per_minor(recipe: Recipe, pytorch: str) -> bool:
    """Do the recipe's builds follow the PyTorch variant key (a compiled extension: one build per supported
    minor)? rattler-build says so: its rendered variants carry the key (or a key zipped with it, libtorch)."""
    keys = {pytorch}
    if recipe.settings is not None:
        keys |= {k for z in recipe.settings.zip_keys if pytorch in z for k in z}
    return any(keys & set(v.variant) for v in recipe.variants)
