"""The build plan: pure data saying what will be built, skipped and tested, in which order."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from conda_distro.channels.base import ChannelFile, newest_by_name
from conda_distro.channels.local import LocalChannel
from conda_distro.distribution import Distribution
from conda_distro.engine.backends import Builder, VariantSpec
from conda_distro.engine.releases import Availability, select_releases
from conda_distro.errors import UsageError
from conda_distro.graph import RecipeGraph
from conda_distro.pins import admitted_releases
from conda_distro.recipe.render import RenderSettings
from conda_distro.state.provenance import recipe_digest
from conda_distro.state.results import ArtifactResults, ResultsStore
from conda_distro.vocab import Release, Target, Variant

PLAN_VERSION = "1"  # bump to invalidate every input hash


@dataclass(frozen=True)
class VariantPlan:
    spec: VariantSpec
    input_hash: str
    action: str  # "build" | "skip-existing" | "from-main" | "refuse"
    reason: str | None = None  # refuse: why (a file of that name, with other content, is in main)


@dataclass(frozen=True)
class PackagePlan:
    name: str
    recipe: Path
    version: str
    deps: tuple[str, ...]  # direct distribution dependencies
    closure: tuple[str, ...]  # all distribution dependencies (transitive)
    variants: tuple[VariantPlan, ...]
    targets: tuple[Target, ...]  # what its pins admit (before looking at built artifacts)
    variant_config: RenderSettings = field(default_factory=RenderSettings)
    declared: frozenset[str] = frozenset()  # the package names the recipe may produce (fixed-env render)
    # provenance: recipe folder (relative to the root) -> recipe input hash, for this package's recipe
    # (first) and its distribution dependencies' recipes
    recipes: tuple[tuple[str, str], ...] = ()
    # the package names its distribution dependencies' recipes produce (what a test records as `against`)
    closure_outputs: tuple[str, ...] = ()
    # targets its pins admit that upstream cannot serve (no pytorch or lockstep build): not tested, and why
    unavailable: tuple[tuple[Target, str], ...] = ()
    # rendered builds not made because upstream cannot serve their host environment, and why
    # (:func:`_unservable`: a cpu build of a minor that upstream has no cpu pytorch build of)
    not_built: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "deps": list(self.deps),
            "variants": [{"artifact": v.spec.artifact, "action": v.action, "variant": v.spec.variant} for v in self.variants],
            "tests": [{"pytorch": t.release, "variant": t.variant} for t in self.targets],
            **({"not_tested": [{"pytorch": t.release, "variant": t.variant, "why": why} for t, why in self.unavailable]}
               if self.unavailable else {}),
            **({"not_built": [{"artifact": a, "why": why} for a, why in self.not_built]} if self.not_built else {}),
        }


@dataclass(frozen=True)
class BuildPlan:
    packages: tuple[PackagePlan, ...]  # dependency order
    levels: tuple[tuple[str, ...], ...]
    targets: tuple[Target, ...]
    engine: str

    def get(self, name: str) -> PackagePlan:
        return next(p for p in self.packages if p.name == name)

    def to_dict(self) -> dict:
        return {
            "engine": self.engine,
            "order": [p.name for p in self.packages],
            "levels": [list(level) for level in self.levels],
            "targets": [{"pytorch": t.release, "variant": t.variant} for t in self.targets],
            "packages": [p.to_dict() for p in self.packages],
        }


@dataclass(frozen=True)
class PlanOptions:
    names: tuple[str, ...] = ()  # the changed set (affected = these ∪ reverse deps); empty + all=False = nothing
    all: bool = False
    pytorch: tuple[str, ...] = ()  # restrict to these releases
    engine: str = "rattler-build"
    main: Path | None = None  # the local main channel: a file name in main is never built again
    variants: tuple[str, ...] = ()  # test only these variants (`build --variant`); empty: every variant
    available: Availability | None = None  # what upstream can serve (None: unknown, every target is tried)


def select_variants(dist: Distribution, wanted: tuple[str, ...]) -> list[Variant]:
    """The variants to test (distro.yaml order): ``wanted`` (``--variant``, repeatable), or all of them.
    A value that is not a variant of the distribution is bad input (exit 2)."""
    variants = list(dist.config.pytorch.variants)
    for v in wanted:
        if v not in variants:
            raise UsageError(f"'{v}' is not a variant of this distribution", field="--variant",
                             hint=f"choose from: {', '.join(variants)} (distro.yaml pytorch.variants)")
    return [v for v in variants if not wanted or v in wanted]


def make_plan(dist: Distribution, graph: RecipeGraph, builder: Builder, store: ResultsStore,
              staging: Path, options: PlanOptions) -> BuildPlan:
    releases = select_releases(dist, options.pytorch)
    variants = select_variants(dist, options.variants)
    pytorch = dist.config.pytorch.name
    names = graph.order() if options.all else graph.affected(options.names)
    admitted = admitted_releases(dist.recipes, graph, pytorch, releases)
    minors = [m for _, m in sorted({(r.major_minor, r.minor) for r in releases})]
    input_hashes: dict[str, list[str]] = {}
    recipe_hashes: dict[str, tuple[str, str]] = {}  # name -> (recipe folder, recipe input hash)
    packages = []
    tool = f"{PLAN_VERSION}:{builder.name}:{_tool_version()}"
    needed = set(names).union(*(graph.ancestors(n) for n in names))  # deps' hashes feed dependents' hashes
    main_files = _newest_by_name(options.main)
    for name in graph.order(needed):
        recipe = dist.recipes[name]
        # the distribution's variant config, with the supported minors (of the selected releases) as
        # the pytorch key: a bare pytorch in host gives one build per minor, as conda-forge's pinning does
        vc = (recipe.settings or dist.settings).with_minors(pytorch, minors)
        specs = builder.render(recipe.path, vc)
        # keep only variants whose pytorch minor is admitted
        specs = [s for s in specs if pytorch not in s.variant
                 or any(Release(r).minor == s.variant.get(pytorch) for r in admitted[name])]
        not_built = _unservable(specs, pytorch, releases, options.available)
        specs = [s for s in specs if s.artifact not in dict(not_built)]
        host_deps = sorted({d for d in graph.dependencies(name) if d in recipe.dep_names("host")})
        base = recipe_digest(recipe.folder)
        recipe_hashes[name] = (_relative(recipe.folder, dist.root), base)
        vplans = []
        for spec in specs:
            h = hashlib.sha256(json.dumps([tool, base, spec.variant, [input_hashes.get(d) for d in host_deps]]).encode()).hexdigest()
            prev = store.get(spec.artifact)
            up_to_date = (staging / spec.artifact).is_file() and prev is not None and prev.input_hash == h
            vplans.append(VariantPlan(spec, h, "skip-existing") if up_to_date else
                          _taken(spec, h, prev, options.main, recipe.path, dist.root) or VariantPlan(spec, h, "build"))
        input_hashes[name] = sorted(v.input_hash for v in vplans)
        if name not in names:
            continue
        if name not in options.names:  # a dependent: what main serves of it is re-tested too
            vplans += _main_newest(main_files, recipe.output_names, {v.spec.artifact for v in vplans})
        targets = tuple(Target(r, v) for r in releases if r in admitted[name] for v in variants)
        unavailable: tuple[tuple[Target, str], ...] = ()
        if options.available is not None:
            needs = lockstep_needs(dist, graph, name)
            why = {t: options.available.why_not(t, needs) for t in targets}
            unavailable = tuple((t, w) for t, w in why.items() if w)
            targets = tuple(t for t in targets if not why[t])
        packages.append(PackagePlan(
            name=name, recipe=recipe.path, version=recipe.version,
            deps=tuple(sorted(graph.dependencies(name))), closure=tuple(sorted(graph.ancestors(name))),
            variants=tuple(vplans), targets=targets, variant_config=vc,
            declared=builder.declared_names(recipe.path, vc),
            recipes=(recipe_hashes[name], *sorted(recipe_hashes[d] for d in graph.ancestors(name))),
            closure_outputs=tuple(sorted({o for d in graph.ancestors(name) for o in dist.recipes[d].output_names})),
            unavailable=unavailable, not_built=tuple(not_built),
        ))
    chosen = [p.name for p in packages]
    return BuildPlan(
        packages=tuple(packages),
        levels=tuple(tuple(level) for level in graph.levels(chosen)),
        targets=tuple(Target(r, v) for r in releases for v in variants),
        engine=builder.name,
    )


def _unservable(specs: list[VariantSpec], pytorch: str, releases: list[Release],
                available: Availability | None) -> list[tuple[str, str]]:
    """The builds upstream cannot serve, as (artifact, why): a CPU-row build (one following the pytorch key
    whose ``cuda_compiler_version`` is absent or "None") of a minor for which upstream has no cpu pytorch build
    of any selected release. Its host needs that build (a CUDA row's host takes the cuda build), so it
    could only fail; it is not built, and the cuda builds of that minor serve the cuda targets. Nothing is
    left out while upstream is unknown (``available`` None)."""
    if available is None:
        return []
    out = []
    for s in specs:
        minor = s.variant.get(pytorch)
        if minor is None or s.variant.get("cuda_compiler_version", "None") not in ("None", ""):
            continue
        mine = [r for r in releases if r.minor == minor]
        if mine and all(Target(r, Variant("cpu")) in available.missing for r in mine):
            out.append((s.artifact, f"no cpu build of {pytorch} {minor} in the upstream channels"))
    return out


#: separates a package from one of its builds in a fan-out unit (conda_distro.fanout.plan): ``NAME@I:K=V,K=V``
#: is NAME's build whose variant has those values (the keys that tell its builds apart: the PyTorch minor,
#: cuda, …), ``I`` its index among the package's builds (0: it also re-tests what has no such keys)
UNIT_SEP = "@"


def parse_unit(unit: str) -> tuple[str, int | None, dict[str, str]]:
    """``NAME`` -> (NAME, None, {}); ``NAME@I:K=V,…`` -> (NAME, I, {K: V, …})."""
    if UNIT_SEP not in unit:
        return unit, None, {}
    name, rest = unit.split(UNIT_SEP, 1)
    index, _, keys = rest.partition(":")
    return name, int(index), dict(kv.split("=", 1) for kv in keys.split(",") if "=" in kv)


def restrict(plan: BuildPlan, units: tuple[str, ...]) -> BuildPlan:
    """The same plan run in part (a fan-out shard): the packages named by ``units``, whole (``NAME``), or
    only the builds of their units (``NAME@I:K=V,…``: the variants with those values, ``K=`` a key the
    variant does not have; unit 0 also the
    variants without those keys, files re-tested from main). Every unit keeps the package's targets: an
    artifact is tested on the targets its own requirements admit."""
    whole = {u for u in units if UNIT_SEP not in u}
    part: dict[str, list[tuple[int, dict[str, str]]]] = {}
    for u in units:
        name, index, keys = parse_unit(u)
        if index is not None:
            part.setdefault(name, []).append((index, keys))
    out = []
    for p in plan.packages:
        if p.name in whole:
            out.append(p)
        elif p.name in part:
            mine = part[p.name]
            told = {k for _, kv in mine for k in kv}  # the keys that tell its builds apart
            out.append(replace(p, variants=tuple(
                v for v in p.variants
                if any(all(str(v.spec.variant.get(k) or "") == x for k, x in kv.items()) for _, kv in mine)
                or (any(i == 0 for i, _ in mine) and not told & set(v.spec.variant)))))
    return replace(plan, packages=tuple(out))


def lockstep_needs(dist: Distribution, graph: RecipeGraph, name: str) -> frozenset[str]:
    """The lockstep packages (distro.yaml ``pytorch.lockstep``) a package's tests install: named in its run
    or test requirements, or in the run requirements of its distribution dependencies."""
    lockstep = set(dist.config.pytorch.lockstep)
    if not lockstep:
        return frozenset()
    found: set[str] = set()
    for n in (name, *graph.ancestors(name)):
        recipe = dist.recipes[n]
        found |= recipe.dep_names("run") & lockstep
        if n == name:
            found |= {dep.split()[0] for dep in recipe.test_requirements()} & lockstep
    return frozenset(found)


def _newest_by_name(main: Path | None) -> dict[str, list]:
    """The files of the newest version of each name in the local main channel."""
    if main is None or not (main / "noarch" / "repodata.json").is_file():
        return {}
    return newest_by_name(LocalChannel(main).list_files().values())


def _main_newest(main_files: dict[str, list[ChannelFile]], outputs: list[str], planned: set[str]) -> list[VariantPlan]:
    """A dependent whose recipe has moved past what main serves: main's newest artifacts are re-tested
    as they are (``from-main``), since they are what users get with the changed parent."""
    extra = []
    for out in outputs:
        for f in main_files.get(out, ()):
            if f.artifact not in planned:
                spec = VariantSpec(f.name, f.version, f.build, f.build_number, f.subdir, {})
                extra.append(VariantPlan(spec, f"main:{f.sha256}", "from-main"))
    return extra


def _taken(spec: VariantSpec, input_hash: str, prev: ArtifactResults | None, main: Path | None, recipe: Path,
           root: Path) -> VariantPlan | None:
    """A file name means one content: when main already has the file this variant would build, main's
    file is re-tested (``from-main``), unless the results show it was built from other inputs (the
    recipe or a host dependency changed since): then the build is refused until the recipe's build number
    is bumped. (With no results to compare, main's file is re-tested; `check-pr` catches a changed recipe
    whose version and build number main already has from the ledger: `build-number-bump`.)"""
    if main is None or not (main / spec.artifact).is_file():
        return None
    if prev is None or prev.input_hash == input_hash:
        return VariantPlan(spec, input_hash, "from-main")
    return VariantPlan(spec, input_hash, "refuse", reason=(
        f"main already has {spec.filename}, built from other inputs; building it again would give that file "
        f"name a second content: bump build.number in {_relative(recipe, root)} (now {spec.build_number})"))


def _relative(folder: Path, root: Path) -> str:
    try:
        return folder.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return folder.as_posix()


def _tool_version() -> str:
    try:
        from rattler_build import rattler_build_version

        return str(rattler_build_version())
    except Exception:  # noqa: BLE001 - version is informational
        return "?"
