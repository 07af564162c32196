"""Compiled extensions' variants as rattler-build computes them: each construct of tests/data/compiled/
rendered by the tool and checked against py-rattler-build's own render of the same recipe (with the
variant config conda-forge gives it), and the plan `build --dry-run` makes of them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rattler_build import JinjaConfig, PlatformConfig, RenderConfig, Stage0Recipe, VariantConfig

from conda_distro.cli import main
from conda_distro.distribution import load_distribution
from conda_distro.engine.backends import RattlerBuildBackend
from conda_distro.pins import own_admitted
from conda_distro.recipe.model import load_recipe
from conda_distro.recipe.render import RenderSettings, render_text
from conda_distro.recipe.variants import read_variant_files, recipe_settings
from conda_distro.util.rattler_env import fixed_environment

HERE = Path(__file__).parent
REPO = HERE.parent
DATA = HERE / "data" / "compiled"
MINORS = ["2.13", "2.14", "2.15"]
RELEASES = ["2.13.0", "2.14.1", "2.15.0"]


def _settings(folder: Path, cache: Path | None = None) -> RenderSettings:
    variants, zips = read_variant_files([REPO / "variants.yaml"])
    settings = RenderSettings.make(variants, zips, "linux-64", cache).with_minors("pytorch", MINORS)
    return recipe_settings(settings, folder, keep=("pytorch",))


def ours(folder: Path) -> list[dict]:
    """The variants the tool plans for a recipe (the builder's render: what `build` builds)."""
    return [{"build": s.build_string, "version": s.version, **s.variant}
            for s in RattlerBuildBackend().render(folder / "recipe.yaml", _settings(folder))]


def cached(folder: Path, cache: Path) -> set[str]:
    """The build strings of the tool's reading of the recipe through the render cache (what lint, graph
    and the plan's admitted releases read)."""
    path = folder / "recipe.yaml"
    return {o["build_string"] for o in render_text(path.read_text(), path, _settings(folder, cache)).outputs}


def reference_config(*, cuda_rows: bool, own: Path | None = None) -> VariantConfig:
    """The variant config straight from rattler-build's loader: the repository's variants.yaml with the
    supported minors for pytorch and libtorch, the recipe's own conda_build_config.yaml merged over it,
    and, for a recipe that does not use CUDA, only the rows where cuda_compiler_version is "None" (what
    conda-forge gives a feedstock without the CUDA compiler)."""
    base = VariantConfig.from_file(str(REPO / "variants.yaml"))
    if own is not None:
        base = base.merge(VariantConfig.from_conda_build_config(
            str(own), JinjaConfig(platform=PlatformConfig(target_platform="linux-64"))))
    values = base.to_dict()
    values["pytorch"] = values["libtorch"] = MINORS
    if not cuda_rows:
        rows = [i for i, v in enumerate(values["cuda_compiler_version"]) if v == "None"]
        group = next(z for z in base.zip_keys if "cuda_compiler_version" in z)
        for key in group:
            values[key] = [values[key][i] for i in rows]
    return VariantConfig(values, zip_keys=base.zip_keys)


def rattler_builds(recipe: Path, config: VariantConfig) -> list[dict]:
    with fixed_environment():
        rendered = Stage0Recipe.from_file(str(recipe)).render(
            config, RenderConfig(platform=PlatformConfig(target_platform="linux-64")))
    return [{"build": v.recipe.build.string, "version": str(v.recipe.package.version),
             **{str(k): str(x) for k, x in v.variant.items() if k != "target_platform"}} for v in rendered]


def by_build(items: list[dict]) -> dict[str, dict]:
    return {i["build"]: i for i in items}


def test_host_pin_on_the_pytorch_key_gives_one_build_per_minor_and_python():
    """`pytorch ${{ pytorch }}.*` in host: 4 pythons × 3 minors, every build as rattler-build renders it."""
    mine = ours(DATA / "host-minor")
    assert by_build(mine) == by_build(rattler_builds(DATA / "host-minor" / "recipe.yaml", reference_config(cuda_rows=False)))
    assert len(mine) == 12 and {m["pytorch"] for m in mine} == set(MINORS)
    recipe = load_recipe(DATA / "host-minor" / "recipe.yaml", RenderSettings.make(
        *read_variant_files([REPO / "variants.yaml"])).with_minors("pytorch", MINORS))
    # each minor has its builds: every supported release is admitted (not only the first variant's)
    assert own_admitted(recipe, "pytorch", RELEASES) == set(RELEASES)


def test_libtorch_follows_pytorch():
    """The two keys are zipped and both take the supported minors: no build pairs libtorch of one minor
    with pytorch of another."""
    mine = ours(DATA / "libtorch-key")
    assert by_build(mine) == by_build(rattler_builds(DATA / "libtorch-key" / "recipe.yaml", reference_config(cuda_rows=False)))
    assert sorted((m["libtorch"], m["pytorch"]) for m in mine) == [(m, m) for m in MINORS]


def test_the_cuda_rows_apply_only_to_a_recipe_using_the_cuda_key():
    """compiler('cuda') (here in an if: on cuda_compiler_version) keeps the CUDA rows: a cpu and a cuda
    build per python × minor. A C++-only recipe renders without them: with them, rattler-build would
    give it a second CPU build per python × minor with the CUDA row's gcc 14 (12 duplicates)."""
    cuda = ours(DATA / "cuda-optional")
    assert by_build(cuda) == by_build(rattler_builds(DATA / "cuda-optional" / "recipe.yaml", reference_config(cuda_rows=True)))
    assert len(cuda) == 4 * 3 * 2 and {m["build"].split("_")[0] for m in cuda} == {"cpu", "cuda"}
    cxx = ours(DATA / "cxx-only")
    recipe = DATA / "cxx-only" / "recipe.yaml"
    assert by_build(cxx) == by_build(rattler_builds(recipe, reference_config(cuda_rows=False)))
    assert len(cxx) == 12 and {m["cxx_compiler_version"] for m in cxx} == {"15"}
    with_rows = rattler_builds(recipe, reference_config(cuda_rows=True))
    assert len(with_rows) == 24 and {m["cxx_compiler_version"] for m in with_rows} == {"14", "15"}


def test_a_template_inside_match_in_skip_is_evaluated_by_rattler_build():
    """`match(cuda_compiler_version, "<${{ min_cuda }}")`: the builds are those rattler-build keeps for
    the same recipe written with outputs: (whose skip its render honours), never none."""
    mine = ours(DATA / "skip-match")
    twin = rattler_builds(DATA / "skip-match-twin" / "recipe.yaml", reference_config(cuda_rows=True))
    assert mine and by_build(mine) == by_build(twin)
    assert {m["version"] for m in mine} == {"0.5.0"}


@pytest.mark.parametrize("value, kind", [("False", "final"), ("True", "rcbool"), ('"True"', "rc")])
def test_a_recipes_own_variant_file_is_read_as_rattler_build_reads_it(tmp_path, value, kind):
    """Unquoted True/False are booleans to rattler-build's loader, a quoted "True" a string: the
    recipe's comparisons come out as in rattler-build's own render, also through the render cache
    (a boolean and a string never share an entry)."""
    folder = tmp_path / "own-flags"
    shutil.copytree(DATA / "own-flags", folder)
    cache = tmp_path / "cache"
    for previous in ("False", "True", '"True"'):  # the cache holds the other spellings' renders first
        (folder / "conda_build_config.yaml").write_text(f"is_rc:\n  - {previous}\n")
        cached(folder, cache)
    (folder / "conda_build_config.yaml").write_text(f"is_rc:\n  - {value}\n")
    mine = ours(folder)
    reference = rattler_builds(folder / "recipe.yaml",
                               reference_config(cuda_rows=False, own=folder / "conda_build_config.yaml"))
    assert by_build(mine) == by_build(reference) and cached(folder, cache) == set(by_build(reference))
    assert {m["build"].split("_")[0] for m in mine} == {kind}


def test_keys_real_recipes_use_are_in_variants_yaml():
    """is_abi3 (zipped with python, false everywhere: a recipe opts in with its own file) and blas_impl."""
    variants, zips = read_variant_files([REPO / "variants.yaml"])
    assert {"is_abi3", "is_freethreading", "blas_impl", "libtorch", "pytorch"} <= set(variants)
    assert ["python", "is_python_min", "is_freethreading", "is_abi3"] in zips and ["pytorch", "libtorch"] in zips
    mine = ours(DATA / "abi3-blas")
    assert by_build(mine) == by_build(rattler_builds(DATA / "abi3-blas" / "recipe.yaml", reference_config(cuda_rows=False)))
    assert {m["blas_impl"] for m in mine} == {"openblas", "mkl", "blis"} and len(mine) == 3 * 4 * 3


# ---------------------------------------------------------------------------------------------
# the plan (the repros, through the command)


def _plan(root: Path, capsys) -> dict:
    code = main(["build", "--all", "--dry-run", "--format", "json", "--root", str(root)])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return {p["name"]: p for p in json.loads(out)["plan"]["packages"]}


def _world(make_distro, *names: str) -> Path:
    root = make_distro({}, {"pytorch": {"releases": RELEASES}}, variants=True)
    for name in names:
        shutil.copytree(DATA / name, root / "recipes" / name)
    return root


def test_plan_builds_every_minor_and_tests_every_release(make_distro, capsys):
    """Was: builds for the first pytorch variant only (4 of 12) and tests on one release."""
    plan = _plan(_world(make_distro, "host-minor", "libtorch-key", "cxx-only", "cuda-optional"), capsys)
    host = plan["host-minor"]
    assert len(host["variants"]) == 12 and {v["variant"]["pytorch"] for v in host["variants"]} == set(MINORS)
    assert {t["pytorch"] for t in host["tests"]} == set(RELEASES)
    # was: 24 builds pairing libtorch 2.12 with pytorch 2.13-2.15
    assert sorted((v["variant"]["libtorch"], v["variant"]["pytorch"]) for v in plan["libtorch-key"]["variants"]) == \
        [(m, m) for m in MINORS]
    # was: 12 duplicate builds from the CUDA compiler zip
    assert len(plan["cxx-only"]["variants"]) == 12 and len(plan["cuda-optional"]["variants"]) == 24
    dist = load_distribution(_world(make_distro, "skip-match"))
    assert dist.recipes["skip-match"].version == "0.5.0"  # was: version "0", 0 builds


def test_release_day_plan_tells_widening_from_new_builds(make_distro, clean_recipe):
    """A distribution with both: the noarch package's pin is widened; the compiled ones (a bare host
    pytorch, or a pin written with the variant key) have no pin to widen and get builds for the new
    minor; a bugfix release needs neither."""
    from conda_distro.sweep.plan import plan_sweep

    root = _world(make_distro, "host-minor", "cxx-only")
    noarch = clean_recipe("pure", pytorch="pytorch >=2.13,<2.16")
    (root / "recipes" / "pure").mkdir()
    (root / "recipes" / "pure" / "recipe.yaml").write_text(noarch)
    dist = load_distribution(root)
    plan = {d.name: d for d in plan_sweep(dist, "2.16.0").decisions}
    assert (plan["pure"].status, plan["pure"].action) == ("bumped", "widen the pins")
    assert plan["pure"].new_pin == "pytorch >=2.13,<2.17"
    for name in ("host-minor", "cxx-only"):  # (host-minor's `pytorch ${{ pytorch }}.*` is never edited)
        assert (plan[name].status, plan[name].action, plan[name].edits) == ("unchanged", "build for the new minor", ())
    bugfix = {d.name: d for d in plan_sweep(dist, "2.15.1").decisions}
    assert {(d.status, d.action) for d in bugfix.values()} == {("unchanged", "")}


def test_the_fanout_planner_weighs_each_build_by_its_kind(make_distro, clean_recipe):
    """The plan job's estimates of each unit's work (for packing shards only): a cuda build weighs more
    than a cpu one of the same recipe, a compiled build more than a noarch package; a build is tested on
    its own minor's targets of its own variant."""
    from conda_distro.fanout.fanin import builds, unit_costs
    from conda_distro.fanout.plan import STATIC_COSTS
    from conda_distro.graph import RecipeGraph

    root = _world(make_distro, "cuda-optional")
    (root / "recipes" / "pure").mkdir()
    (root / "recipes" / "pure" / "recipe.yaml").write_text(clean_recipe("pure", pytorch="pytorch >=2.13,<2.16"))
    dist = load_distribution(root)
    names = ["cuda-optional", "pure"]
    split = builds(dist, RecipeGraph.from_recipes(dist.recipes), names)
    costs = unit_costs(dist, names, split)
    targets = len(RELEASES)  # per variant
    assert costs["pure"] == STATIC_COSTS.estimate(False, cpu_tests=targets, cuda_tests=targets)
    units = [u for u in costs if u != "pure"]
    assert len(units) == len(split["cuda-optional"]) == 24  # 4 pythons x 3 minors x cpu/cuda
    cuda = [u for u in units if "cuda_compiler_version=None" not in u]
    assert len(cuda) == 12
    for u in units:
        assert costs[u] == STATIC_COSTS.estimate(True, u in cuda, 0 if u in cuda else 1, 1 if u in cuda else 0), u
    assert min(costs[u] for u in cuda) > 2 * max(costs[u] for u in units if u not in cuda) > costs["pure"]
