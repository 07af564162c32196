"""Late admission: a release distro.yaml lists already, and the packages whose pins still leave it out.

A package fails the release-day sweep (its edit is put back), its maintainers fix it later (a new
version, a patched recipe), and its pins still leave the release out: nothing would ever admit it. A
later sweep of the same release does: it picks up exactly the packages whose pins leave the release out
through their upper bound while their distribution dependencies admit it (or are admitted in the same
run), widens their pins, raises their build numbers, builds and tests them against the release and, with
``--commit``, commits each on a branch of its own (``sweep/pytorch-VER-NAME``), like release day.

A package that failed against the release and whose recipe folder is unchanged since (the saved report
records its recipe input hash) is ``needs-fix``: ``sweep --pytorch VER`` leaves it out (it would fail the
same way); ``--package NAME`` tries it anyway. Pure planning: nothing is read but the distribution and the
saved report handed in.
"""

from __future__ import annotations

from conda_distro.distribution import Distribution
from conda_distro.errors import UsageError
from conda_distro.graph import RecipeGraph
from conda_distro.lagging import AWAITING, NEW_VERSION, READY, lags
from conda_distro.recipe.specs import minor_of
from conda_distro.state.provenance import recipe_digest
from conda_distro.sweep.git import package_branch
from conda_distro.sweep.model import Decision, SweepDocument, SweepPlan, Waiting, command
from conda_distro.sweep.plan import decide

NEEDS_FIX = "needs-fix"
AWAITING_MERGE = "awaiting-merge"


def waiting_packages(dist: Distribution, release: str, report: SweepDocument | None,
                     branches: list[str] | tuple[str, ...] = ()) -> list[Waiting]:
    """The readable recipes whose pins leave ``release`` out (through their upper bound), in dependency
    order, with what each waits for (see :class:`~conda_distro.sweep.model.Waiting`); ``awaiting-merge``:
    a sweep admitted it on its branch (``branches``: the sweep branches that exist), to be merged."""
    dist = dist.readable()
    graph = RecipeGraph.from_recipes(dist.recipes)
    pytorch = dist.config.pytorch.name
    found = lags(dist.recipes, graph, pytorch, [release])
    failed = {p.name: p for p in (report.packages if report else ()) if p.status == "failed" and p.recipe_hash}
    out = []
    for name in graph.order():
        if name not in found:
            continue
        lag, recipe = found[name][0], dist.recipes[name]
        maintainers = tuple(recipe.maintainers)
        if package_branch(release, name) in branches:
            out.append(Waiting(name, AWAITING_MERGE, f"admitted on branch {package_branch(release, name)}: merge its "
                                                     "pull request (delete the branch to sweep it again)", maintainers))
        elif lag.status == NEW_VERSION:
            ma, mi = minor_of(release)
            out.append(Waiting(name, NEW_VERSION, f"lockstep package: needs the upstream release made for pytorch "
                                                  f"{ma}.{mi}, not a widened pin ('{lag.pin}')", maintainers))
        elif lag.status == AWAITING:
            out.append(Waiting(name, AWAITING, f"waits for {', '.join(lag.waits_for)} (its pins leave pytorch "
                                               f"{release} out too)", maintainers, lag.waits_for,
                               command(release)))
        elif name in failed and failed[name].recipe_hash == recipe_digest(recipe.folder):
            out.append(Waiting(name, NEEDS_FIX, f"failed against pytorch {release} and its recipe is unchanged since"
                                                f" ({failed[name].reason or 'failed'})", maintainers, (),
                               command(release, "--package", name)))
        else:
            out.append(Waiting(name, READY, f"'{lag.pin}' leaves pytorch {release} out and every distribution "
                                            "package it depends on admits it", maintainers, (),
                               command(release, "--package", name)))
    return out


def plan_admission(dist: Distribution, release: str, package: str | None, report: SweepDocument | None,
                   branches: list[str] | tuple[str, ...] = ()) -> SweepPlan:
    """The plan of a sweep of ``release`` that distro.yaml lists: the ready packages (``package``: that one)
    and the ones waiting only for those, bumped like on release day. Exit 2 (nothing written) when nothing
    can be admitted, naming the read-only ``sweep report`` and what each package waits for."""
    waiting = waiting_packages(dist, release, report, branches)
    by_name = {w.name: w for w in waiting}
    if package is not None:
        chosen = _one(dist, release, package, by_name)
    else:
        chosen = []
        for w in waiting:  # dependency order: a package waiting only for chosen ones goes with them
            if w.status == READY or (w.status == AWAITING and set(w.waits_for) <= set(chosen)):
                chosen.append(w.name)
        if not chosen:
            counts: dict[str, list[str]] = {}
            for w in waiting:
                counts.setdefault(w.status, []).append(w.name)
            why = "; ".join(f"{st}: {', '.join(names)}" for st, names in counts.items()) or "every package admits it"
            raise UsageError(f"pytorch {release} is a supported release already and no package is ready to be admitted "
                             f"({why})", field="--pytorch",
                             hint=f"`{command(release, 'report')}` prints its report and what each package waits for "
                                  f"(it changes nothing); once a package is fixed, `{command(release)}` admits it "
                                  f"(`{command(release, '--package', 'NAME')}` tries one anyway)")
    readable = dist.readable()
    pytorch = dist.config.pytorch.name
    others = tuple(r for r in dist.config.pytorch.releases if minor_of(r) != minor_of(release))
    decisions: list[Decision] = []
    for name in chosen:
        recipe = readable.recipes[name]
        dec = decide(recipe, pytorch, release, others)
        if dec is None:  # (cannot happen for a lagging recipe: it has a pytorch pin)
            continue
        dec.recipe_hash = recipe_digest(recipe.folder)
        decisions.append(dec)
    return SweepPlan(release, decisions, mode="admission", waiting=[w for w in waiting if w.name not in chosen])


def _one(dist: Distribution, release: str, package: str, by_name: dict[str, Waiting]) -> list[str]:
    """``--package NAME``: NAME when its pins leave the release out and its dependencies admit it."""
    if package not in dist.recipes and package not in dist.broken:
        raise UsageError(f"no recipe named '{package}' (recipes/{package}/recipe.yaml)", field="--package",
                         hint="name a recipe folder of the distribution")
    if package in dist.broken:
        raise UsageError(f"recipes/{package}/recipe.yaml cannot be read", field="--package",
                         hint=f"fix it first (`conda-distro lint {package}` says what is wrong)")
    w = by_name.get(package)
    if w is None:
        raise UsageError(f"{package}'s pins admit pytorch {release} already (or leave it out through their floor): "
                         "nothing to admit", field="--package",
                         hint=f"`{command(release, 'report')}` prints the release's report (it changes nothing)")
    if w.status == AWAITING:
        raise UsageError(f"{package} waits for {', '.join(w.waits_for)}, whose pins leave pytorch {release} out",
                         field="--package", hint=f"admit {w.waits_for[0]} first: "
                                                 f"{command(release, '--package', w.waits_for[0])}")
    if w.status == NEW_VERSION:
        raise UsageError(f"{package} is a lockstep package: {w.reason}", field="--package",
                         hint="publish its new version (a recipe change), not a sweep")
    if w.status == AWAITING_MERGE:
        raise UsageError(f"{package} was {w.reason}", field="--package",
                         hint=f"`{command(release, 'report')}` prints the release's report (it changes nothing)")
    return [package]
