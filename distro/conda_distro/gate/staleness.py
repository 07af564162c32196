"""Staging builds that can never be promoted from this checkout (*stale*), and why: one reading for
promote's gate, the excuses, the status page and `prune`.

A build in staging that is not in main is stale when, in this order:

* **retired**: main's ledger retired that very file;
* **superseded**: a newer build of its name (higher version, or the same version with a higher build
  number) is in main, or is in staging built from this checkout's recipe (e.g. a version bump, or a
  build number bump after a sha256 clash);
* **reverted**: it was built from a recipe this checkout does not have (its recipe input hash is not
  this checkout's), of the version this checkout's recipe makes but with a higher build number: a try
  whose recipe edit was put back (a release-day sweep bumps the build number with the pin and reverts
  both when the package fails);
* **not-from-this-checkout**: any other build whose recipe input hash is not this checkout's (a PR
  branch built locally, an edit undone, a recipe removed, results made before provenance was recorded);
  a file with no results at all is stale when a recipe of this checkout makes its name in another
  version or build number (no recipe at all: it is left to `build`, the recipe may only be unreadable now).

A build whose own recipe is this checkout's, but whose tests saw other recipes of its dependencies, is
not stale: `build` re-tests it (``tested-with-other-recipes``). Pure functions of data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from rattler import Version

from conda_distro.channels.base import ChannelFile
from conda_distro.gate.holds import HoldReason
from conda_distro.state.results import ArtifactResults


@dataclass(frozen=True)
class RecipeOutput:
    """What this checkout's recipe makes of one package name."""

    folder: str  # recipes/<name>
    version: str
    build_number: int


@dataclass(frozen=True)
class Stale:
    artifact: str
    reason: HoldReason  # superseded | reverted | not-from-this-checkout | retired
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"artifact": self.artifact, "reason": self.reason.value, "detail": self.detail}


@dataclass(frozen=True)
class StalenessInputs:
    staging: Mapping[str, ChannelFile]
    main: Mapping[str, ChannelFile]
    results: Mapping[str, ArtifactResults]
    #: this checkout's recipe input hash of each recipe folder the results name (None: no such folder)
    recipes: Mapping[str, str | None]
    #: package name -> what this checkout's recipe makes of it
    outputs: Mapping[str, RecipeOutput] = field(default_factory=dict)
    retired: Set[str] = frozenset()  # artifacts the ledger retired


def _short(h: str | None) -> str:
    return f"{h[:12]}…" if h else "none"


def of_this_checkout(res: ArtifactResults | None, recipes: Mapping[str, str | None]) -> bool:
    """Was the artifact built from this checkout's recipe (its recorded recipe input hash is this checkout's)?"""
    return bool(res is not None and res.recipe and res.recipe_hash and recipes.get(res.recipe) == res.recipe_hash)


def in_main(f: ChannelFile, main: Mapping[str, ChannelFile]) -> bool:
    """The very file (same name, same sha256) is in main. A file of main's name with other bytes is not:
    it can never be promoted either (a file name never means two contents), and is judged like any other."""
    there = main.get(f.artifact)
    return there is not None and there.sha256 == f.sha256


def _rank(f: ChannelFile) -> tuple[Version, int]:
    return Version(f.version), f.build_number


def stale_builds(inputs: StalenessInputs) -> dict[str, Stale]:
    """artifact -> why it is stale, for every stale build in staging that is not in main (a staging file
    with the name of one in main but other bytes included: once superseded, it is stale)."""
    ours: dict[str, list[ChannelFile]] = {}  # name -> builds of this checkout (staging) and main's files
    for art, f in inputs.staging.items():
        if not in_main(f, inputs.main) and of_this_checkout(inputs.results.get(art), inputs.recipes):
            ours.setdefault(f.name, []).append(f)
    for f in inputs.main.values():
        ours.setdefault(f.name, []).append(f)
    out: dict[str, Stale] = {}
    for art, f in sorted(inputs.staging.items()):
        if in_main(f, inputs.main):
            continue
        why = _why(f, inputs, ours.get(f.name, ()))
        if why is not None:
            out[art] = Stale(art, *why)
    return out


def _superseded(g: ChannelFile, inputs: StalenessInputs) -> str:
    where = "main" if g.artifact in inputs.main else "staging, built from this checkout"
    return f"{g.filename} ({g.version}, build number {g.build_number}) is newer and in {where}"


def _why(f: ChannelFile, inputs: StalenessInputs, ours: Any) -> tuple[HoldReason, str] | None:
    if f.artifact in inputs.retired:
        return HoldReason.RETIRED, "main's ledger retired this file"
    newer = [g for g in ours if ("noarch" in (f.subdir, g.subdir) or g.subdir == f.subdir) and _rank(g) > _rank(f)]
    if f.artifact in inputs.main:  # main has this name with other bytes: only a newer build makes it stale
        return (HoldReason.SUPERSEDED, _superseded(max(newer, key=_rank), inputs)) if newer else None
    if newer:
        return HoldReason.SUPERSEDED, _superseded(max(newer, key=_rank), inputs)
    res = inputs.results.get(f.artifact)
    out = inputs.outputs.get(f.name)
    if res is None:
        if out is None or (out.version, out.build_number) == (f.version, f.build_number):
            return None  # untested: `build` tests it if a recipe of this checkout (perhaps unreadable now) makes it
        return HoldReason.NOT_FROM_THIS_CHECKOUT, (f"it has no test results and {out.folder} makes {f.name} "
                                                   f"{out.version} build number {out.build_number}")
    if of_this_checkout(res, inputs.recipes):
        return None
    at = f" at commit {res.commit[:12]}" if res.commit else ""
    if not res.recipe or not res.recipe_hash:
        return HoldReason.NOT_FROM_THIS_CHECKOUT, "its results record no recipe input hash (made before provenance " \
                                                  "was recorded)"
    here = inputs.recipes.get(res.recipe)
    if here is None:
        return HoldReason.NOT_FROM_THIS_CHECKOUT, f"built from {res.recipe}{at}, which this checkout does not have"
    if out is not None and out.version == f.version and f.build_number > out.build_number:
        return HoldReason.REVERTED, (f"built from an edit of {res.recipe}{at} that this checkout no longer has (build "
                                     f"number {f.build_number}; the recipe's is {out.build_number}): a try that was "
                                     "put back")
    return HoldReason.NOT_FROM_THIS_CHECKOUT, (f"built from another version of {res.recipe}{at} (recipe input hash "
                                               f"{_short(res.recipe_hash)}, this checkout's is {_short(here)})")


def recipe_outputs(recipes: Iterable[Any]) -> dict[str, RecipeOutput]:
    """package name -> what the recipe (:class:`conda_distro.recipe.model.Recipe`) that makes it makes of it."""
    out: dict[str, RecipeOutput] = {}
    for r in recipes:
        folder = f"recipes/{r.folder.name}"
        for o in r.outputs or ():
            out[o.name] = RecipeOutput(folder, o.version, o.build_number)
        if not r.outputs:
            out[r.name] = RecipeOutput(folder, r.version, r.build_number or 0)
    return out


__all__ = ["RecipeOutput", "Stale", "StalenessInputs", "in_main", "of_this_checkout", "recipe_outputs", "stale_builds"]
