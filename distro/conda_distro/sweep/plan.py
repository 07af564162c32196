"""What the sweep does to each package (pure: no file is read or written here).

Which packages are built and tested: the bumped ones and, when the release opens a new minor, the
pytorch-dependent ones whose pins already admit it (their existing builds were never tested with
it), plus every dependent of those (the affected set). A bugfix release of an already supported
minor needs no new downstream build (spec §1), so it builds nothing.
"""

from __future__ import annotations

from conda_distro.config import RELEASE_RE  # (one definition of a release: MAJOR.MINOR.PATCH, bounded)
from conda_distro.distribution import Distribution
from conda_distro.errors import UsageError
from conda_distro.graph import RecipeGraph
from conda_distro.pins import depends_on, pytorch_pins
from conda_distro.recipe.model import Recipe
from conda_distro.recipe.specs import SpecEditError, admits, minor_of, next_minor_bound, widen_spec, widen_version
from conda_distro.sweep.model import BLOCKING, Decision, PinEdit, SweepPlan


def check_release(release: str) -> None:
    """A sweep's release is a full MAJOR.MINOR.PATCH version (exit 2 otherwise)."""
    if not release:
        raise UsageError("missing option --pytorch", field="--pytorch",
                         hint="name the release, e.g. conda-distro sweep --pytorch 2.7.0 (or sweep report --pytorch 2.7.0)")
    if not RELEASE_RE.match(release):
        raise UsageError(f"'{release[:40]}' is not a release version like 2.7.0", field="--pytorch",
                         hint="pass the full MAJOR.MINOR.PATCH version that was published")


def widen(version: str, release: str) -> str:
    """The version part widened to the next minor after ``release`` (see :func:`specs.widen_version`)."""
    return widen_version(version, release)


def decide(recipe: Recipe, pytorch: str, release: str, supported: tuple[str, ...] = ()) -> Decision | None:
    """What the sweep does to one recipe. ``supported``: the releases supported before the sweep; a
    bugfix release of a minor the recipe did not admit before either changes nothing for it."""
    versioned = pytorch_pins(recipe, pytorch)
    if not versioned and not depends_on(recipe, pytorch):
        return None
    run_pin = next((d for d in versioned if d.section == "run"), versioned[0] if versioned else None)
    dec = Decision(recipe.folder.name, "unchanged", list(recipe.maintainers),
                   old_pin=run_pin.raw if run_pin else None, new_pin=run_pin.raw if run_pin else None,
                   old_build=recipe.build_number, new_build=recipe.build_number)
    if all(admits(d.version, release) for d in versioned):
        return dec
    same_minor = [r for r in supported if minor_of(r) == minor_of(release)]
    if same_minor and not any(all(admits(d.version, r) for d in versioned) for r in same_minor):
        ma, mi = minor_of(release)
        dec.reason = f"does not admit pytorch {ma}.{mi} (nor {', '.join(same_minor)}): a bugfix release changes nothing"
        return dec
    if recipe.lockstep:
        dec.status = "needs-new-version"
        ma, mi = minor_of(release)
        dec.reason = (f"lockstep package: needs the upstream release made for pytorch {ma}.{mi} "
                      f"(a new version with its pin set to '{pytorch} >={ma}.{mi},<{next_minor_bound(release)}')")
        return dec
    dec.status = "bumped"
    for d in versioned:
        if not admits(d.version, release):
            try:
                dec.edits.append(PinEdit(d.raw, widen_spec(d.raw, release, supported=supported), d.line))
            except SpecEditError as exc:  # the edit fails with this reason (that package alone fails)
                dec.edits.append(PinEdit(d.raw, d.raw, d.line, error=str(exc)))
    if run_pin is not None:
        dec.new_pin = next((e.new for e in dec.edits if e.line == run_pin.line), run_pin.raw)
    dec.new_build = (recipe.build_number or 0) + 1
    return dec


def plan_sweep(dist: Distribution, release: str) -> SweepPlan:
    check_release(release)
    if release in dist.config.pytorch.releases:
        return SweepPlan(release, [], noop=True)
    # a recipe that cannot be read is reported (and its dependents wait); the others are swept
    decisions: list[Decision] = [Decision(folder, "unreadable", [], reason=str(err))
                                 for folder, err in sorted(dist.broken.items())]
    for name, by in sorted(dist.blocked_by_broken().items()):
        decisions.append(Decision(name, "awaiting-parents", list(dist.recipes[name].maintainers),
                                  reason=f"depends on unreadable recipe {by}"))
    dist = dist.readable()
    pytorch = dist.config.pytorch.name
    graph = RecipeGraph.from_recipes(dist.recipes)
    seen: set[str] = set()
    for name in graph.order():
        dec = decide(dist.recipes[name], pytorch, release, tuple(dist.config.pytorch.releases))
        if dec is None and any(p in seen for p in graph.dependencies(name)):
            recipe = dist.recipes[name]  # depends on pytorch only through distribution packages
            dec = Decision(name, "unchanged", list(recipe.maintainers), old_build=recipe.build_number,
                           new_build=recipe.build_number, depends_on_pytorch=False)
        if dec is not None:
            decisions.append(dec)
            seen.add(name)
    return SweepPlan(release, decisions)


def is_new_minor(dist: Distribution, release: str) -> bool:
    return minor_of(release) not in {minor_of(r) for r in dist.config.pytorch.releases}


def mark_awaiting(plan: SweepPlan, graph: RecipeGraph) -> None:
    """Dependents of a package that cannot take the release (failed, not solvable, waiting for a new
    version, or itself waiting) wait for their parents. Decisions are in dependency order."""
    status = {d.name: d.status for d in plan.decisions}
    for dec in plan.decisions:
        if dec.status not in ("bumped", "unchanged", "awaiting-parents") or dec.name not in graph.g:
            continue
        parents = sorted(a for a in graph.ancestors(dec.name) if status.get(a) in BLOCKING)
        if parents:
            dec.status, dec.reason = "awaiting-parents", f"waits for {', '.join(parents)}"
            status[dec.name] = dec.status


def to_test(plan: SweepPlan, graph: RecipeGraph, new_minor: bool) -> list[str]:
    """The packages to build and test against the release: the bumped ones, on a new minor also the
    direct dependents that already admit it, and every live dependent of those."""
    seeds = [d.name for d in plan.decisions
             if d.status == "bumped" or (new_minor and d.status == "unchanged" and d.depends_on_pytorch)]
    live = {d.name for d in plan.decisions if d.status in ("bumped", "unchanged")}
    return [n for n in graph.affected(seeds) if n in live]
