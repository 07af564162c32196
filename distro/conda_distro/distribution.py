"""A distribution repository, loaded: distro.yaml + every recipe (spec §1)."""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.config import Distro, find_root, load_config
from conda_distro.errors import DistroError, RecipeError
from conda_distro.recipe import Recipe, load_recipe, recipe_paths


@dataclass
class Distribution:
    distro: Distro
    recipes: dict[str, Recipe]  # by folder name
    errors: list[DistroError] = field(default_factory=list)  # recipes that could not be loaded

    @property
    def root(self) -> Path:
        return self.distro.root

    @property
    def config(self):
        return self.distro.config

    @property
    def names(self) -> set[str]:
        return set(self.recipes)

    def raise_errors(self) -> None:
        """Commands other than lint refuse to work on a distribution with unreadable recipes."""
        if self.errors:
            first = self.errors[0]
            if len(self.errors) > 1:
                first.hint = (first.hint + "; " if first.hint else "") + f"{len(self.errors) - 1} more recipe error(s): run `conda-distro lint`"
            raise first

    def get(self, name: str) -> Recipe:
        try:
            return self.recipes[name]
        except KeyError:
            import difflib

            close = difflib.get_close_matches(name, sorted(self.recipes), n=1)
            raise RecipeError(f"no recipe named '{name}' in {self.distro.recipes_dir}",
                              hint=f"did you mean '{close[0]}'?" if close else "see `conda-distro graph` for the names") from None


class paused_gc(contextlib.ContextDecorator):
    """Pause Python's cyclic garbage collector during bulk work (loading or linting thousands of
    recipes). The objects made then are long-lived and free of reference cycles, and each automatic
    collection would walk all of them: with 5,000 recipes that was about half of the run time.
    Reference counting still frees everything as usual; collection resumes on exit.

    On exit, what survived is moved straight to the oldest generation (``gc.freeze()`` followed by
    ``gc.unfreeze()``: two list splices), so that the young-generation collections that follow do
    not each walk a million objects again; they stay collectable by full collections as usual."""

    _was_enabled = False

    def _recreate_cm(self) -> "paused_gc":
        return type(self)()  # a fresh one per decorated call: nesting and recursion restore correctly

    def __enter__(self) -> "paused_gc":
        self._was_enabled = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._was_enabled:
            if not gc.get_freeze_count():  # (nobody else uses the permanent generation)
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def open_distro(root: Path | None) -> Distro:
    return load_config(root.resolve() if root else find_root(Path.cwd()))


@paused_gc()
def load_distribution(root: Path | None = None, *, strict: bool = True, distro: Distro | None = None) -> Distribution:
    """Load distro.yaml and every recipe. ``strict`` raises the first recipe error; otherwise errors are
    collected so that lint can still report on the rest."""
    distro = distro or open_distro(root)
    platform = distro.config.platforms[0]
    recipes: dict[str, Recipe] = {}
    errors: list[DistroError] = []
    for path in recipe_paths(distro.recipes_dir):
        try:
            recipes[path.parent.name] = load_recipe(path, platform)
        except DistroError as exc:
            errors.append(exc)
    dist = Distribution(distro, recipes, errors)
    if strict:
        dist.raise_errors()
    return dist
