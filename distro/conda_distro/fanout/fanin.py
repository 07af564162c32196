"""The fan-in: the shards' bundles, checked, merged into one staging channel and results store, and one
report, as a single-machine build would have left them. It runs no recipe code and builds nothing:
check-pr's verdict and comment, promote's gate and the nightly's reports are then computed from what
it merged, exactly as after a build on one machine.

The fan-in recomputes the run's :class:`~.plan.ShardPlan` from its own checkout (the same inputs give
the same shards), so it trusts neither the plan job's output nor the shards' word on who built what:
:func:`~.bundle.read_bundles` checks each bundle against that plan and this checkout's recipes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.distribution import Distribution
from conda_distro.engine.plan import parse_unit
from conda_distro.engine.run import SCOPES, build_paths
from conda_distro.fanout.bundle import Checkout, Merged, read_bundles, take_bundles
from conda_distro.fanout.plan import COMPILED_WEIGHT, STATIC_COSTS, ShardPlan, ShardSpec, make_shards, units_of
from conda_distro.graph import RecipeGraph
from conda_distro.pins import admitted_releases
from conda_distro.recipe.render import CPU_CUDA, CUDA_KEY
from conda_distro.state.locks import DEFAULT_LOCK_TIMEOUT, Deadline, staging_lock
from conda_distro.state.results import ResultsStore
from conda_distro.util.fsutil import clear_folder
from conda_distro.util.gitutil import find_repo, head_sha
from conda_distro.util.rattler_env import index_channel
from conda_distro.vocab import Release


@dataclass(frozen=True)
class FanIn:
    """Where the bundles were downloaded (one folder per shard, or one bundle), this run's id, and how the
    run was cut (the plan job's options)."""

    bundles: Path
    run: str
    spec: ShardSpec = field(default_factory=ShardSpec)
    pytorch: tuple[str, ...] = ()  # the run's releases (``--pytorch``; empty: distro.yaml's)


def weights(dist: Distribution) -> dict[str, int]:
    """A package's weight when shards are cut: :data:`~.plan.COMPILED_WEIGHT` for a recipe that is not noarch."""
    return {n: (1 if r.noarch else COMPILED_WEIGHT) for n, r in dist.recipes.items()}


def _natural(text: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"(\d+)", text))


def builds(dist: Distribution, graph: RecipeGraph, affected: list[str], pytorch: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """package -> its builds in this run (``K=V,…``: the variant values that tell them apart), for each
    affected compiled package with several: rattler-build's rendered variants of the recipe (one per
    PyTorch minor × variant), those of a minor outside the run's releases (``pytorch``; empty: distro.yaml's)
    or not admitted by its pins and its dependencies' left out."""
    name = dist.config.pytorch.name
    releases = [r for r in dist.config.pytorch.releases if not pytorch or r in pytorch]
    compiled = [n for n in affected if not dist.recipes[n].noarch]
    if not compiled:
        return {}
    admitted = admitted_releases(dist.recipes, graph, name, releases)
    out: dict[str, list[str]] = {}
    for n in compiled:
        minors = {Release(r).minor for r in admitted[n]}
        variants = {tuple(sorted(v.variant.items())) for v in dist.recipes[n].variants
                    if name not in v.variant or v.variant[name] in minors}
        keys = sorted({k for v in variants for k, _ in v if len({dict(w).get(k) for w in variants}) > 1})
        found = sorted({",".join(f"{k}={dict(v).get(k, '')}" for k in keys) for v in variants}, key=_natural)
        if len(found) > 1:
            out[n] = found
    return out


def _is_cuda(value: str | None) -> bool:
    return value not in (None, "", CPU_CUDA)


def unit_costs(dist: Distribution, affected: list[str], builds: dict[str, list[str]],
               pytorch: tuple[str, ...] = ()) -> dict[str, float]:
    """Each unit's estimated work (:data:`~.plan.STATIC_COSTS`, for balancing shards only), from what the
    checkout says: a noarch package (its build and a test per target of the run: its releases ×
    distro.yaml's variants); a compiled package (a recipe that is not noarch) whose builds are one unit
    (a cuda build when a rendered variant has a ``cuda_compiler_version`` other than "None"; every
    target); each build of a split one (cuda or cpu by its own variant values, tested on the targets of
    its variant, of its PyTorch minor when its values name one)."""
    name = dist.config.pytorch.name
    releases = [r for r in dist.config.pytorch.releases if not pytorch or r in pytorch]
    cpu_t = len(releases) * sum(not v.cuda for v in dist.config.pytorch.variants)
    cuda_t = len(releases) * sum(v.cuda for v in dist.config.pytorch.variants)
    out: dict[str, float] = {}
    for n in affected:
        recipe = dist.recipes[n]
        if recipe.noarch:
            out[n] = STATIC_COSTS.estimate(False, cpu_tests=cpu_t, cuda_tests=cuda_t)
            continue
        any_cuda = any(_is_cuda(v.variant.get(CUDA_KEY)) for v in recipe.variants)
        if n not in builds:
            out[n] = STATIC_COSTS.estimate(True, any_cuda, cpu_t, cuda_t)
            continue
        for unit in units_of([n], builds):
            values = parse_unit(unit)[2]
            cuda = _is_cuda(values[CUDA_KEY]) if CUDA_KEY in values else any_cuda
            minor = values.get(name)
            mine = [r for r in releases if not minor or Release(r).minor == minor]
            variants = [v for v in dist.config.pytorch.variants if v.cuda == cuda]
            tests = len(mine) * len(variants)
            out[unit] = STATIC_COSTS.estimate(True, cuda, 0 if cuda else tests, tests if cuda else 0)
    return out


def shard_plan(dist: Distribution, affected: list[str], spec: ShardSpec,
               pytorch: tuple[str, ...] = ()) -> tuple[RecipeGraph, ShardPlan]:
    """The shards of a run of ``affected`` (against the releases ``pytorch``, empty: all) over the (readable)
    distribution ``dist``: each build of a compiled package with several is a unit of its own."""
    graph = RecipeGraph.from_recipes(dist.recipes)
    split = builds(dist, graph, affected, pytorch)
    return graph, make_shards(graph, affected, weights(dist), spec, split, unit_costs(dist, affected, split, pytorch))


def checkout_of(dist: Distribution, run: str) -> Checkout:
    """This checkout as bundles are compared with it."""
    repo = find_repo(dist.root, with_commit=True)
    return Checkout(run=run, head=head_sha(repo) if repo is not None else None, root=dist.root,
                    outputs={n: frozenset(r.output_names) for n, r in dist.recipes.items()},
                    build_dir=dist.distro.build_dir)


def sort_records(merged: Merged, dist: Distribution, order: list[str]) -> Merged:
    """The records in a single run's order: dependency order, artifact, then release × variant as in
    distro.yaml."""
    rank = {n: i for i, n in enumerate(order)}
    releases = {r: i for i, r in enumerate(dist.config.pytorch.releases)}
    variants = {v: i for i, v in enumerate(dist.config.pytorch.variants)}
    merged.builds.sort(key=lambda b: (rank.get(b.name, len(rank)), b.artifact or ""))
    merged.tests.sort(key=lambda t: (rank.get(t.name, len(rank)), t.artifact, releases.get(t.pytorch, len(releases)),
                                     variants.get(t.variant, len(variants))))
    return merged


def merge_shards(dist: Distribution, affected: list[str], fanin: FanIn, scope: str | None) -> Merged:
    """Check every bundle of the run of ``affected`` and take them into the staging channel and results
    store of ``scope`` (check-pr's, emptied first) or the shared ones (None), under the staging lock.
    A missing, foreign or altered bundle raises :class:`~conda_distro.errors.ShardError` before anything
    is written."""
    _, plan = shard_plan(dist, affected, fanin.spec, fanin.pytorch)
    checkout = checkout_of(dist, fanin.run)
    bundles = read_bundles(fanin.bundles, plan, plan.shards, checkout)
    paths = build_paths(dist, scope)
    if scope is not None and (dist.distro.build_dir / SCOPES / scope).is_dir():
        clear_folder(dist.distro.build_dir / SCOPES / scope)
    paths.staging.mkdir(parents=True, exist_ok=True)
    with staging_lock(paths.staging, Deadline(DEFAULT_LOCK_TIMEOUT)):
        merged = take_bundles(bundles, paths.staging, ResultsStore(paths.store), checkout)
        index_channel(paths.staging, subdirs=[s for s in dist.distro.subdirs if s != "noarch"])
    return sort_records(merged, dist, plan.affected)


def take_earlier(dist: Distribution, plan: ShardPlan, shard_id: str, fanin: FanIn, staging: Path,
                 store: Path) -> Merged:
    """A shard job's inputs: the checked bundles of the shards of earlier stages, taken into its staging
    channel and results store (its own, fresh)."""
    checkout = checkout_of(dist, fanin.run)
    bundles = read_bundles(fanin.bundles, plan, plan.earlier(shard_id), checkout)
    staging.mkdir(parents=True, exist_ok=True)
    merged = take_bundles(bundles, staging, ResultsStore(store), checkout)
    index_channel(staging, subdirs=[s for s in dist.distro.subdirs if s != "noarch"])
    return merged
