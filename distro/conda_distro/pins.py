"""Which supported PyTorch releases a recipe admits, from its own pins and its distribution deps'."""

from __future__ import annotations

from typing import Mapping

from conda_distro.graph import RecipeGraph
from conda_distro.recipe import Recipe
from conda_distro.specs import admits


def own_admitted(recipe: Recipe, pytorch: str, releases: list[str]) -> set[str]:
    """Releases admitted by every versioned pytorch requirement in host and run (pin functions
    follow the host spec, which is what they pin against)."""
    specs = [d.version for d in recipe.deps("host", "run") if d.name == pytorch and d.spec is not None and d.spec.ok and d.version]
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
