"""Which supported releases a recipe's pytorch pins leave out, and whether it could take them now.

A recipe *lags* behind a supported release when one of its pytorch pins excludes that release through
its upper bound (widening the bound to the release's minor would admit it; a floor above the release is
a choice, not a lag). Per lagging release it is:

* ``ready`` — every distribution package it depends on admits the release: the sweep can widen its pins
  now (``conda-distro sweep --pytorch VER --package NAME``). This is what a package fixed after release
  day looks like: its pins still exclude the release it failed on, and nothing else holds it back;
* ``awaiting-parents`` — a distribution package it depends on (directly or not) excludes the release:
  that one is admitted first (``waits_for`` names the ones whose own pins exclude it);
* ``needs-new-version`` — a lockstep package (``extra.pytorch-lockstep``): a new minor needs the upstream
  release made for it, never a widened pin.

Used by the ``pytorch-pin-lags`` lint check (and so check-pr) and by the sweep's late admission and
``sweep report``. Pure: recipes in, :class:`Lag` records out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from conda_distro.graph import RecipeGraph
from conda_distro.pins import own_admitted, pytorch_pins
from conda_distro.recipe.model import Recipe
from conda_distro.recipe.specs import admits, widen_version

READY, AWAITING, NEW_VERSION = "ready", "awaiting-parents", "needs-new-version"


@dataclass(frozen=True)
class Lag:
    name: str  # the recipe's folder
    release: str
    status: str  # ready | awaiting-parents | needs-new-version
    pin: str  # the first pin that excludes the release, as written
    line: int | None
    waits_for: tuple[str, ...] = ()  # awaiting-parents: the dependencies whose own pins exclude the release

    def to_dict(self) -> dict:
        return {"name": self.name, "release": self.release, "status": self.status, "pin": self.pin,
                "line": self.line, "waits_for": list(self.waits_for)}


def excluded_by_bound(recipe: Recipe, pytorch: str, release: str) -> tuple[str, int | None] | None:
    """The first pytorch pin (as written, and its line) whose upper bound excludes ``release``: widening
    it to the release's minor would admit it. None when the pins admit the release, or exclude it
    otherwise (a floor above it, an exact pin the sweep cannot widen)."""
    for d in pytorch_pins(recipe, pytorch):
        if d.version is None or admits(d.version, release):
            continue
        try:
            widened = widen_version(d.version, release)
        except ValueError:
            return None
        return (d.raw, d.line) if admits(widened, release) else None
    return None


def lags(recipes: Mapping[str, Recipe], graph: RecipeGraph, pytorch: str, releases: list[str] | tuple[str, ...],
         names: list[str] | None = None) -> dict[str, list[Lag]]:
    """folder -> its lags, one per supported release its pins leave out (release order), for the recipes
    ``names`` (default: all); recipes that lag behind nothing are left out. ``graph`` may hold a cycle
    (lint reports that elsewhere)."""
    own: dict[str, set[str]] = {}  # (computed when asked: a lint of one recipe needs only its ancestors)

    def admitted(folder: str) -> set[str]:
        if folder not in own:
            own[folder] = own_admitted(recipes[folder], pytorch, list(releases))
        return own[folder]

    out: dict[str, list[Lag]] = {}
    for name in names if names is not None else sorted(recipes):
        recipe = recipes.get(name)
        if recipe is None or recipe.produces(pytorch):
            continue
        found = []
        for release in releases:
            hit = excluded_by_bound(recipe, pytorch, release)
            if hit is None:
                continue
            blockers = tuple(sorted(a for a in graph.ancestors(name) if a in recipes and release not in admitted(a)))
            status = NEW_VERSION if recipe.lockstep else AWAITING if blockers else READY
            found.append(Lag(name, release, status, hit[0], hit[1], blockers if status == AWAITING else ()))
        if found:
            out[name] = found
    return out
