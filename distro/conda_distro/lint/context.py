"""What checks need besides the recipe: policy, releases, distribution names, run_exports."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from conda_distro.config import DistroRepo, UpperBounds
from conda_distro.errors import ChannelError
from conda_distro.recipe.model import Dep, Recipe
from conda_distro.recipe.specs import parse_spec, pin_granularity, upper_granularity
from conda_distro.state.owners import OwnerRegistry
from conda_distro.util.fsutil import read_bounded_text
from conda_distro.util.jsonio import MAX_BYTES

if TYPE_CHECKING:
    from conda_distro.graph import RecipeGraph
    from conda_distro.lagging import Lag


@dataclass
class PinView:
    """How a run requirement on one package is bounded, whatever form the recipe used."""

    dep: Dep
    version: str | None  # a version spec when there is one (explicit or derived)
    granularity: int | None  # upper-bound granularity: 1 major, 2 minor, 3+ finer; None unbounded
    via: str  # "spec" | "pin_compatible" | "run_exports"


class RecipeIndex:
    """A recipe's requirements grouped by section and name, made once per recipe per lint run (many
    checks ask "which entries name X"), and the pin views computed from them."""

    __slots__ = ("recipe", "by_name", "views")

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe
        self.by_name: dict[str, dict[str, list[Dep]]] = {}
        for section, deps in recipe.requirements.items():
            grouped: dict[str, list[Dep]] = {}
            for d in deps:
                grouped.setdefault(d.name, []).append(d)
            self.by_name[section] = grouped
        self.views: dict[str, list[PinView]] = {}

    def named(self, section: str, name: str) -> list[Dep]:
        return self.by_name.get(section, {}).get(name, [])

    def names(self, *sections: str) -> set[str]:
        out: set[str] = set()
        for section in sections:
            out.update(n for n in self.by_name.get(section, ()) if n)
        return out


@dataclass
class LintContext:
    distro: DistroRepo
    names: set[str] = field(default_factory=set)  # package names in the distribution
    owners: OwnerRegistry | None = None  # who owns which package name (None: not known, not checked)
    recipes: Mapping[str, Recipe] | None = None  # the distribution's readable recipes (None: checks see one recipe)
    _indexes: dict[int, RecipeIndex] = field(default_factory=dict, repr=False)  # by id(recipe)
    _needs_bound: dict[str, bool] = field(default_factory=dict, repr=False)

    def index(self, recipe: Recipe) -> RecipeIndex:
        idx = self._indexes.get(id(recipe))
        if idx is None or idx.recipe is not recipe:
            idx = self._indexes[id(recipe)] = RecipeIndex(recipe)
        return idx

    @property
    def config(self):
        return self.distro.config

    @property
    def pytorch(self) -> str:
        return self.config.pytorch.name

    @property
    def releases(self) -> list[str]:
        return self.config.pytorch.releases

    @cached_property
    def graph(self) -> RecipeGraph | None:
        """The dependency graph of :attr:`recipes` (a cycle is allowed here: lint reports it elsewhere)."""
        from conda_distro.graph import RecipeGraph

        return RecipeGraph.from_recipes(self.recipes, check_cycles=False) if self.recipes is not None else None

    def lags_of(self, recipe: Recipe) -> list[Lag]:
        """The supported releases ``recipe``'s pytorch pins leave out, and why (:mod:`conda_distro.lagging`);
        empty when the distribution is not known."""
        from conda_distro.lagging import lags

        folder = recipe.folder.name
        if self.recipes is None or self.recipes.get(folder) is not recipe or self.graph is None:
            return []
        return lags(self.recipes, self.graph, self.pytorch, self.releases, names=[folder]).get(folder, [])

    def relpath(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.distro.root).as_posix()
        except ValueError:
            return str(path)

    def needs_upper_bound(self, name: str) -> bool:
        known = self._needs_bound.get(name)
        if known is None:
            mode = self.config.policy.upper_bounds
            if mode is UpperBounds.OFF or name in self.config.policy.unbounded_allowed or name.startswith("__"):
                known = False
            else:
                known = mode is UpperBounds.REQUIRED or name == self.pytorch
            self._needs_bound[name] = known
        return known

    @cached_property
    def upstream_run_exports(self) -> dict[str, dict[str, int]]:
        """name -> {bucket: granularity of the upper bound it exports} from run_exports.json in local
        upstream channels (as conda-forge publishes it). Buckets as rattler-build applies them: a
        package built for a platform gets ``weak`` and ``strong`` host exports; a noarch package only
        the ``noarch`` bucket."""
        out: dict[str, dict[str, int]] = {}
        for ref in self.config.channels.upstream:
            if not self.distro.is_local_ref(ref):
                continue
            base = self.distro.resolve_local(ref)
            for subdir in self.distro.subdirs:
                f = base / subdir / "run_exports.json"
                try:  # not a regular file, or too large: an error (exit 2); not valid JSON: not readable
                    text = read_bounded_text(f, MAX_BYTES["repodata"], error=ChannelError)
                    data = json.loads(text)
                except (FileNotFoundError, ValueError, RecursionError):
                    continue
                if not isinstance(data, dict):
                    continue
                for key in ("packages", "packages.conda"):
                    entries = data.get(key)
                    for entry in (entries.values() if isinstance(entries, dict) else ()):
                        rex = entry.get("run_exports") if isinstance(entry, dict) else None
                        if not isinstance(rex, dict):
                            continue
                        for bucket in ("weak", "strong", "noarch"):
                            for spec in rex.get(bucket) or []:
                                p = parse_spec(str(spec))
                                g = upper_granularity(p.version) if p.ok else None
                                if g is not None:
                                    have = out.setdefault(p.name, {})
                                    have[bucket] = max(have.get(bucket, 0), g)
        return out

    def run_exports_granularity(self, name: str, noarch: bool = False) -> int | None:
        """The upper bound a bare host requirement on ``name`` gives the package, as rattler-build
        applies run_exports: noarch packages take only the ``noarch`` bucket; others ``weak``/``strong``.
        policy.run_exports stands in (as a weak export) when the upstream channel's metadata cannot be read."""
        known = self.upstream_run_exports.get(name)
        if known is not None:
            buckets = ("noarch",) if noarch else ("weak", "strong")
            found = [known[b] for b in buckets if b in known]
            return max(found) if found else None
        if noarch:
            return None
        pin = self.config.policy.run_exports.get(name)
        return pin_granularity(pin) if pin else None

    def run_pins(self, recipe: Recipe, name: str) -> list[PinView]:
        """Every way the recipe's run requirements constrain ``name``. (Several checks ask this for
        every run requirement; the requirements are grouped by name once per recipe.)"""
        idx = self.index(recipe)
        views = idx.views.get(name)
        if recipe.produces(name):
            return []  # the recipe's own outputs pin each other (pytorch ==${{ version }}): not a downstream pin
        if views is None:
            views = idx.views[name] = self._run_pins(recipe, idx.named("host", name), idx.named("run", name), name)
        return views

    def _run_pins(self, recipe: Recipe, host: list[Dep] | tuple, run: list[Dep] | tuple, name: str) -> list[PinView]:
        views: list[PinView] = []
        g: int | None
        for d in run:
            if d.func in ("pin_compatible", "pin_subpackage"):
                if d.kw("exact", "False").lower() == "true":
                    g = 99
                else:
                    ub = d.kw("upper_bound", d.kw("max_pin", "'x'")).strip("'\"")
                    g = None if ub in ("", "None") else pin_granularity(ub)
                host_version = next((h.version for h in host if h.spec and h.spec.ok), None)
                views.append(PinView(d, host_version, g, "pin_compatible"))
            elif d.spec is not None and d.spec.ok:
                views.append(PinView(d, d.version, upper_granularity(d.version), "spec"))
        bare_host = next((h for h in host if h.spec is not None and h.spec.ok), None)
        if bare_host is not None:
            g = self.run_exports_granularity(name, bool(recipe.noarch_of(bare_host.output)))
            if g is not None:
                views.append(PinView(bare_host, bare_host.version, g, "run_exports"))
        return views

    def is_bounded(self, recipe: Recipe, name: str) -> bool:
        return any(v.granularity is not None for v in self.run_pins(recipe, name))
