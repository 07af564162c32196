"""`solve`: is the whole distribution co-installable with each release × variant?

By default the distribution is solved from its *recipes* (before anything is built): each recipe becomes
a repodata record with its rendered run requirements in a throwaway channel placed before upstream,
exactly as our channel overlays conda-forge. ``source="staging"``/``"main"`` solves the built artifacts
instead. On conflict, the rattler solver's explanation is reported together with a minimal set of
distribution packages that cannot be installed together with that release.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from conda_distro.channels.local import LocalChannel
from conda_distro.distribution import Distribution, load_distribution
from conda_distro.engine.releases import SOLVE_TIMEOUT, is_cuda_record, select_releases
from conda_distro.errors import ChannelError, EngineUnavailableError, UsageError
from conda_distro.pins import admitted_releases, builds_per_minor, uses_pytorch_variant
from conda_distro.recipe.model import Recipe
from conda_distro.recipe.specs import next_minor_bound, parse_spec
from conda_distro.util.scratch import ScratchDir
from conda_distro.vocab import Release, Target, virtual_packages

if TYPE_CHECKING:
    from rattler import RepoDataRecord


@dataclass(frozen=True)
class SolveOptions:
    pytorch: tuple[str, ...] = ()
    source: str = "recipes"  # recipes | staging | main
    solver: str = "rattler"
    explain: bool = True  # compute a minimal conflicting set on failure
    root: Path | None = None  # the distribution's folder (None: found from the current one); for solve()


@dataclass
class TargetSolve:
    pytorch: str
    variant: str
    ok: bool
    packages: list[str] = field(default_factory=list)  # "name version build" of the solution
    requested: list[str] = field(default_factory=list)
    conflict: str | None = None
    conflicting: list[str] = field(default_factory=list)  # a minimal set of distribution packages that clash

    def to_dict(self) -> dict:
        return {"pytorch": self.pytorch, "variant": self.variant, "ok": self.ok, "packages": self.packages,
                "requested": self.requested, "conflict": self.conflict, "conflicting": self.conflicting}


@dataclass
class SolveResult:
    results: list[TargetSolve]
    notices: list[str] = field(default_factory=list)  # stderr: the recipes left out (unreadable), and why
    unreadable: int = 0  # how many recipes could not be read (they make the exit code 1)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok and not self.unreadable else 1

    def to_dict(self) -> dict:
        return {"ok": self.ok, "results": [r.to_dict() for r in self.results]}

    def text_lines(self) -> list[str]:
        lines = []
        for r in self.results:
            n = len(r.requested) - 1
            lines.append(f"pytorch {r.pytorch} ({r.variant}): {'ok' if r.ok else 'CONFLICT'} — {n} distribution package(s)")
            lines += [f"    {line}" for line in (r.conflict or "").splitlines()]
        return lines


# ---------------------------------------------------------------------------------------------
# recipes -> a throwaway channel


def _run_depends(recipe: Recipe, pytorch: str, minor: str | None, run: tuple[str, ...] | None = None) -> list[str]:
    """The run requirements of a record standing for the recipe's build (for ``minor``). ``run``: one
    rendered variant's own run specs (a compiled recipe's cpu and cuda builds differ: ``__cuda``)."""
    deps: list[str] = [x for x in run if parse_spec(x).ok] if run is not None else []
    host_versions = {d.name: d.version for d in recipe.deps("host") if d.spec is not None and d.spec.ok}
    for d in recipe.deps("run"):
        if d.func in ("compiler", "stdlib", "cdt"):
            continue
        if d.spec is not None:
            if d.spec.ok and run is None:
                deps.append(d.raw)
            continue
        if d.func in ("pin_compatible", "pin_subpackage"):
            if d.name == pytorch and minor:
                deps.append(f"{pytorch} >={minor},<{next_minor_bound(minor + '.0')}")
            elif host_versions.get(d.name):
                deps.append(f"{d.name} {host_versions[d.name]}")
            else:
                deps.append(d.name)
    if minor and not any(x.split()[0] == pytorch for x in deps):
        deps.append(f"{pytorch} >={minor},<{next_minor_bound(minor + '.0')}")  # the host pytorch's run_export
    return deps


def _builds(recipe: Recipe, pytorch: str, minors: list[str]) -> list[tuple[str | None, list[str]]]:
    """(minor, run requirements) of each build the recipe makes for ``minors``: a compiled recipe (its
    builds follow the pytorch variant key) one per rendered variant of its package with its own run
    requirements (a cuda build needs ``__cuda``, its cpu build does not); a bare host pytorch one per minor;
    anything else one build."""
    if builds_per_minor(recipe, pytorch):
        keys = {pytorch} | {k for z in (recipe.settings.zip_keys if recipe.settings else ()) if pytorch in z for k in z}
        out: list[tuple[str | None, list[str]]] = []
        for v in recipe.variants:
            minor = next((v.variant[k] for k in sorted(keys) if k in v.variant), None)
            if v.output != recipe.name or minor not in minors:
                continue
            item = (minor, _run_depends(recipe, pytorch, minor, v.requirements.get("run", ())))
            if item not in out:
                out.append(item)
        out += [(m, _run_depends(recipe, pytorch, m)) for m in minors if all(o[0] != m for o in out)]
        return out
    return [(m, _run_depends(recipe, pytorch, m)) for m in (minors if uses_pytorch_variant(recipe, pytorch) else [None])]


def write_recipe_channel(dist: Distribution, releases: Sequence[str], folder: Path) -> Path:
    """A channel whose repodata describes what the recipes would build (no package files needed)."""
    pytorch = dist.config.pytorch.name
    platform = dist.config.platforms[0]
    minors = [m for _, m in sorted({(Release(r).major_minor, Release(r).minor) for r in releases})]
    subdirs: dict[str, dict] = {s: {} for s in ("noarch", platform)}
    for recipe in dist.recipes.values():
        subdir = "noarch" if recipe.noarch else platform
        for i, (minor, depends) in enumerate(_builds(recipe, pytorch, minors)):
            tag = f"pt{minor.replace('.', '')}_{i}_" if minor else "h0_"
            build = f"{tag}{recipe.build_number or 0}"
            fn = f"{recipe.name}-{recipe.version}-{build}.conda"
            rec = {"name": recipe.name, "version": recipe.version, "build": build,
                   "build_number": recipe.build_number or 0, "depends": depends,
                   "subdir": subdir, "timestamp": 0}
            if recipe.noarch:
                rec["noarch"] = recipe.noarch
            rec["sha256"] = hashlib.sha256(json.dumps(rec, sort_keys=True).encode()).hexdigest()
            subdirs[subdir][fn] = rec
    for subdir, pkgs in subdirs.items():
        (folder / subdir).mkdir(parents=True, exist_ok=True)
        (folder / subdir / "repodata.json").write_text(json.dumps(
            {"info": {"subdir": subdir}, "packages": {}, "packages.conda": pkgs, "repodata_version": 1}))
    return folder


# ---------------------------------------------------------------------------------------------
# solving


class RattlerSolver:
    name = "rattler"

    def __init__(self, channels: list[str], platforms: list[str]) -> None:
        from rattler import Gateway, Subdir

        self.channels = channels
        self.platforms = [Subdir(p) for p in platforms]
        self.gateway = Gateway()

    def solve(self, specs: list[str], cuda: bool) -> list[RepoDataRecord]:
        """Records of a solution; raises SolverError when there is none, ChannelError when a channel
        cannot be read (offline, missing folder)."""
        from rattler import solve
        from rattler.exceptions import FetchRepoDataError, GatewayError, InvalidChannelError

        try:
            return asyncio.run(solve(self.channels, specs, gateway=self.gateway, platforms=self.platforms,
                                     virtual_packages=virtual_packages(cuda), timeout=SOLVE_TIMEOUT))
        except (GatewayError, FetchRepoDataError, InvalidChannelError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ChannelError(f"cannot read the channels {', '.join(self.channels)}: {first}", field="channels.upstream",
                               hint="check channels.upstream in distro.yaml: local channels must exist, remote "
                                    "ones (conda-forge) must be reachable from this machine") from None


def make_solver(name: str, channels: list[str], platforms: list[str]) -> RattlerSolver:
    if name == "rattler":
        return RattlerSolver(channels, platforms)
    if name == "libmamba":
        try:
            import libmambapy  # noqa: F401
        except ImportError:
            raise EngineUnavailableError("libmambapy is not installed", field="--solver",
                                         hint="install libmambapy (conda install libmambapy) or use the default --solver rattler") from None
        raise EngineUnavailableError("the libmamba solver backend is not available in this build", field="--solver",
                                     hint="use the default --solver rattler")
    raise UsageError(f"unknown solver '{name}'", field="--solver", hint="choose rattler or libmamba")


def _try(solver: RattlerSolver, specs: list[str], cuda: bool) -> tuple[list | None, str | None]:
    from rattler.exceptions import SolverError

    try:
        return solver.solve(specs, cuda), None
    except SolverError as exc:
        return None, str(exc).strip()


def minimal_conflict(solver: RattlerSolver, fixed: list[str], candidates: list[str], cuda: bool) -> list[str]:
    """Deletion filter: the smallest set of ``candidates`` that is still unsatisfiable with ``fixed``."""
    core = list(candidates)
    for name in reversed(candidates):
        trial = [c for c in core if c != name]
        if _try(solver, fixed + trial, cuda)[0] is None:
            core = trial
    return core


def solve(options: SolveOptions) -> SolveResult:
    """`conda-distro solve`: the distribution at ``options.root``; its unreadable recipes are reported as
    notices and the others are solved."""
    dist = load_distribution(options.root, strict=False)
    report = solve_distribution(dist, options)
    report.notices, report.unreadable = dist.notices(), len(dist.errors)
    return report


def solve_distribution(dist: Distribution, options: SolveOptions = SolveOptions()) -> SolveResult:
    dist = dist.readable()  # unreadable recipes (and their dependents) are reported by the caller
    from conda_distro.graph import RecipeGraph  # (networkx: imported by `solve` only, not by promote/excuses,
                                                 # which import this module for its solver)

    releases = select_releases(dist, options.pytorch)
    graph = RecipeGraph.from_recipes(dist.recipes)
    pytorch = dist.config.pytorch.name
    admitted = admitted_releases(dist.recipes, graph, pytorch, releases)
    by_name = {folder: r.name for folder, r in dist.recipes.items()}
    with ScratchDir("conda-distro-solve-") as tmp:
        if options.source == "recipes":
            channel = write_recipe_channel(dist, releases, Path(tmp))
            available = None
        elif options.source in ("staging", "main"):
            ref = getattr(dist.config.channels, options.source)
            if dist.distro.is_anaconda(ref):
                raise UsageError(f"solving the {options.source} channel needs it to be local", field="--from")
            channel = dist.distro.resolve_local(ref)
            if not channel.is_dir():
                raise ChannelError(f"the {options.source} channel {channel} does not exist yet", field=f"channels.{options.source}",
                                   hint="run `conda-distro build --all` first (or solve --from recipes)")
            available = {f.name for f in LocalChannel(channel).list_files().values()}
        else:
            raise UsageError(f"unknown source '{options.source}'", field="--from", hint="recipes, staging or main")
        solver = make_solver(options.solver, [channel.as_uri(), *dist.distro.upstream_urls], dist.distro.subdirs)
        results = []
        for target in (Target(r, v) for r in releases for v in dist.config.pytorch.variants):
            # dependents last: the deletion filter then drops dependents first and names the root cause
            names = [by_name[f] for f in graph.order() if target.release in admitted[f]
                     and (available is None or by_name[f] in available)]
            results.append(_solve_target(solver, pytorch, target, names, options.explain))
    return SolveResult(results)


def _solve_target(solver: RattlerSolver, pytorch: str, target: Target, names: list[str], explain: bool) -> TargetSolve:
    cuda = target.variant.cuda
    fixed = [f"{pytorch} =={target.release}"]
    records, error = _try(solver, fixed + names, cuda)
    res = TargetSolve(target.release, target.variant, records is not None, requested=fixed + names)
    if records is None:
        res.conflict = error
        if explain and _try(solver, fixed, cuda)[0] is not None:
            res.conflicting = minimal_conflict(solver, fixed, names, cuda)
            res.conflict = f"{pytorch} {target.release} ({target.variant}) cannot be installed together with " \
                           f"{', '.join(res.conflicting)}\n{error}"
        return res
    res.packages = sorted(f"{r.name.normalized} {r.version} {r.build}" for r in records)
    torch = next((r for r in records if r.name.normalized == pytorch), None)
    if torch is not None and is_cuda_record(list(torch.depends)) != cuda:
        res.ok = False
        res.conflict = (f"the solver chose the {'cuda' if not cuda else 'cpu'} build {torch.build} of {pytorch}"
                        f" for the {target.variant} variant")
    return res
