"""Recipes as rattler-build renders them (conda_distro.recipe.render + conda_distro.recipe.model): real conda-forge
constructs, the distribution's variant config, the render cache, a fixed environment, isolation of
unreadable recipes in every command, multi-output graphs and run_exports as rattler-build applies them."""

from __future__ import annotations

import json
import os
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe

from conda_distro.cli import main
from conda_distro.distribution import load_distribution
from conda_distro.errors import RecipeError
from conda_distro.graph import RecipeGraph
from conda_distro.lint import lint_distribution
from conda_distro.recipe.model import Recipe, parse_recipe
from conda_distro.recipe.render import RenderSettings, render_text
from conda_distro.recipe.variants import read_variant_files
from conda_distro.util.rattler_env import fixed_environment

HERE = Path(__file__).parent
REPO = HERE.parent
CF_DIR = HERE / "data" / "recipes_cf"
CF_RECIPES = sorted(CF_DIR.glob("*.yaml"))
REAL_WORLD = sorted((HERE / "data" / "recipes_real_world").glob("*.yaml"))
REPO_RECIPES = sorted(REPO.glob("recipes/*/recipe.yaml"))
ALL = CF_RECIPES + REAL_WORLD + REPO_RECIPES


def cf_settings(cache_dir: Path | None = None) -> RenderSettings:
    variants, zips = read_variant_files([REPO / "variants.yaml"])
    return RenderSettings.make(variants, zips, "linux-64", cache_dir).with_minors("pytorch", ["2.7", "2.8", "2.9"])


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _folder(path: Path) -> str:
    return path.parent.name if path.name == "recipe.yaml" else path.stem


# ---------------------------------------------------------------------------------------------
# the property: our reading is rattler-build's render


def _rattler_reading(text: str, settings: RenderSettings) -> tuple[set, dict]:
    """Output (name, version) pairs and requirement strings per section, straight from rattler-build,
    with the variant config conda-forge gives the recipe: the CUDA rows only when rattler-build's render
    says the recipe uses the CUDA key (a rendered variant lists ``cuda_compiler_version``)."""
    with fixed_environment(), tempfile.TemporaryDirectory(prefix="test-render-") as tmp:  # (no rattler_build_* folder left)
        config = RenderConfig(platform=PlatformConfig(target_platform=settings.target_platform))
        variants = Stage0Recipe.from_yaml(text, recipe_dir=tmp).render(settings.to_config(), config)
        if not any("cuda_compiler_version" in v.variant for v in variants):
            variants = Stage0Recipe.from_yaml(text, recipe_dir=tmp).render(settings.without_cuda_rows().to_config(), config)
    outputs, deps = set(), {}
    for v in variants:
        d = v.recipe.to_dict()
        outputs.add((d["package"]["name"], str(d["package"]["version"])))
        for section in ("build", "host", "run", "run_constraints"):
            for item in (d.get("requirements") or {}).get(section) or []:
                key = next(iter(item.values()))["name"] if isinstance(item, dict) else item
                deps.setdefault(section, set()).add(key)
    return outputs, deps


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_our_reading_equals_rattler_builds_render(path):
    text = path.read_text()
    settings = cf_settings()
    recipe = parse_recipe(text, Path(f"/r/{_folder(path)}/recipe.yaml"), settings)
    outputs, deps = _rattler_reading(text, settings)
    ours = {(o.name, o.version) for o in recipe.outputs}
    mine = {}
    for d in recipe.deps():
        mine.setdefault(d.section, set()).add(d.pin_name if d.func in ("pin_subpackage", "pin_compatible") else d.spec.text)
    skips = "skip" in text and not recipe.multi_output
    if skips:  # py-rattler-build 0.73 ignores a single-output recipe's build.skip; we apply it (a subset)
        assert ours <= outputs and all(mine.get(s, set()) <= deps.get(s, set()) for s in mine)
    else:
        assert ours == outputs
        assert mine == {s: v for s, v in deps.items() if v}
    assert all(d.line >= 1 for d in recipe.deps())


def test_constructs_of_the_test_recipes():
    """What each conda-forge construct renders to, with conda-forge's variant values."""
    s = cf_settings()
    noarch = parse_recipe((CF_DIR / "torchcf-noarch.yaml").read_text(), Path("/r/torchcf-noarch/recipe.yaml"), s)
    assert [d.raw for d in noarch.deps("host")][0] == "python 3.10.*"  # python_min pair
    assert "python >=3.10" in [d.raw for d in noarch.deps("run")]
    assert not any("pywin32" in d.raw for d in noarch.deps())  # an item that renders empty is dropped

    ext = parse_recipe((CF_DIR / "torchcf-ext.yaml").read_text(), Path("/r/torchcf-ext/recipe.yaml"), s)
    raw = {d.section: sorted({x.spec.text for x in ext.deps(d.section)}) for d in ext.deps()}
    assert "sysroot_linux-64 2.17.*" in raw["build"] and "cuda-nvcc_linux-64 12.9.*" in raw["build"]
    assert {"pytorch * cpu*", "pytorch * cuda*"} <= set(raw["run"])  # `is startingwith` ternary, bracket spec
    assert "cuda-version ==12.9" in raw["host"] and "__cuda >=12" in raw["run"]  # split filter + slice
    assert ext.sources[0].file_name == "torchcf-ext-1.3.tar.gz"  # split | slice | join
    assert ext.outputs[0].variants == 4 * 3 * 2  # python x pytorch x cuda_compiler_version (incl. "None")
    compilers = {d.line for d in ext.deps("build") if d.func == "compiler"}
    assert compilers == {33, 34, 37}

    split = parse_recipe((CF_DIR / "torchcf-split.yaml").read_text(), Path("/r/torchcf/recipe.yaml"), s)
    assert split.name == "torchcf" and split.output_names == ["libtorchcf", "torchcf", "torchcf-tests"]
    assert split.build_number == 1 and split.lines["build.number"] == 16  # from context, in outputs too
    assert {d.output for d in split.deps("run")} == {1, 2}
    pins = {(d.func, d.pin_name, d.kw("exact")) for d in split.deps("run") if d.func}
    assert ("pin_subpackage", "libtorchcf", "True") in pins and ("pin_compatible", "numpy", None) in pins
    assert len(split.tests) == 3  # per-output tests count


# ---------------------------------------------------------------------------------------------
# the cache and the fixed environment


def test_the_cache_key_is_the_text_and_variant_config_and_no_file_is_written_per_recipe(tmp_path):
    """A render is cached only in the packed model cache of a distribution (:func:`parse_recipes`), keyed
    by the text and the variant configuration; a single render writes no file (before, one JSON file per
    recipe text ever rendered, never pruned)."""
    from conda_distro.recipe.model import model_key

    text = (CF_DIR / "torchcf-noarch.yaml").read_text()
    path = Path("/r/torchcf-noarch/recipe.yaml")
    first = render_text(text, path, cf_settings(tmp_path))
    assert render_text(text, path, cf_settings(tmp_path)) == first
    assert list(tmp_path.rglob("*")) == []
    other = cf_settings(tmp_path).with_minors("pytorch", ["2.8"])
    assert len(render_text(text, path, other).outputs) == 1
    key = model_key(text, cf_settings(tmp_path))
    assert key == model_key(text, cf_settings(tmp_path))
    assert len({key, model_key(text, other), model_key(text + "\n", cf_settings(tmp_path))}) == 3


@pytest.mark.parametrize("name, renders", [
    ("torchcf-ext.yaml", 2),  # uses compiler('cuda'): every row, once, + its skip probe (before: 3, without the CUDA rows first)
    ("torchcf-noarch.yaml", 1),  # names no CUDA: without the CUDA rows, once
    ("cuda-in-a-comment", 2),  # names the key where rattler-build does not read it: the guess costs a render
])
def test_a_recipe_renders_once_with_the_rows_it_uses(name, renders, monkeypatch):
    """rattler-build renders each recipe once with the rows it uses: the CUDA rows only for a recipe that
    uses the CUDA key, and a recipe whose text names the key or the CUDA compiler is rendered with them
    first. The answer is the same as rendering without them first (the test's own reading, above)."""
    from rattler_build.stage0 import Stage0Recipe as Base

    if name == "cuda-in-a-comment":
        text = (CF_DIR / "torchcf-noarch.yaml").read_text() + "# no compiler('cuda') here, no cuda_compiler_version\n"
    else:
        text = (CF_DIR / name).read_text()
    from conda_distro.recipe import render

    monkeypatch.setattr(render, "_probe_memo", {})  # (an earlier test's equal skip probe would answer it)
    calls = []
    real = Base.render
    monkeypatch.setattr(Base, "render", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    settings = cf_settings()
    recipe = parse_recipe(text, Path(f"/r/{Path(name).stem}/recipe.yaml"), settings)
    assert len(calls) == renders
    monkeypatch.setattr(Base, "render", real)
    assert {(o.name, o.version) for o in recipe.outputs} == _rattler_reading(text, settings)[0]
    cuda_rows = {v.variant.get("cuda_compiler_version") for v in recipe.variants}
    assert ("12.9" in cuda_rows) == (name == "torchcf-ext.yaml"), cuda_rows


def test_render_errors_are_the_same_every_time_and_write_nothing(tmp_path):
    text = "package: {name: a, version: '1'}\nrequirements:\n  run:\n    - ${{ python_min }}\n"
    for _ in range(2):
        with pytest.raises(RecipeError, match="undefined value") as info:
            parse_recipe(text, Path("/r/a/recipe.yaml"), RenderSettings.make(cache_dir=tmp_path))
        assert info.value.line == 4
    assert list(tmp_path.rglob("*")) == []


def test_recipes_render_in_a_fixed_environment(monkeypatch):
    """env.get/env.exists see none of the caller's variables: a recipe cannot render another name on CI."""
    text = textwrap.dedent("""\
        package:
          name: ${{ "tensorutils" if env.exists("CI") else "probepkg" }}
          version: ${{ env.get("PROBE_VERSION", default="0.1.0") }}
        build: {number: 0, noarch: generic}
        """)
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("PROBE_VERSION", "6.6.6")
    r = parse_recipe(text, Path("/r/probepkg/recipe.yaml"), RenderSettings())
    assert (r.name, r.version) == ("probepkg", "0.1.0")
    assert os.environ["CI"] == "true"  # the caller's environment is back


# ---------------------------------------------------------------------------------------------
# the distribution's variant config


def test_variants_yaml_is_named_from_distro_yaml(make_distro, capsys):
    text = (CF_DIR / "torchcf-noarch.yaml").read_text()
    root = make_distro({"torchcf-noarch": text})
    code, out, err = run_cli(capsys, "lint", "--root", str(root), "--format", "json")
    assert code == 1 and "python_min" in json.dumps(json.loads(out)["findings"])  # no variants: undefined
    root = make_distro({"torchcf-noarch": text}, {"pytorch": {"releases": ["2.7.1", "2.8.0", "2.9.1"]}},
                       name="with", variants=True)
    code, out, err = run_cli(capsys, "lint", "--root", str(root), "--format", "json")
    assert code == 0, out
    (root / "variants.yaml").unlink()
    code, out, err = run_cli(capsys, "lint", "--root", str(root))
    assert code == 2 and "variant_config" in err and "variants.yaml" in err


def test_repository_variants_carry_conda_forge_keys():
    variants, zips = read_variant_files([REPO / "variants.yaml"])
    for key in ("python", "python_min", "c_stdlib", "c_stdlib_version", "c_compiler", "cxx_compiler",
                "cuda_compiler", "cuda_compiler_version"):
        assert key in variants, key
    assert "None" in variants["cuda_compiler_version"]
    assert any("cuda_compiler_version" in z for z in zips)


# ---------------------------------------------------------------------------------------------
# policy findings on conda-forge style recipes


def _cf_recipe(name: str, run_pytorch: str | None, host_pytorch: bool = False, noarch: bool = True) -> str:
    text = (CF_DIR / "torchcf-noarch.yaml").read_text().replace("torchcf-noarch", name).replace("torchcf_noarch", name.replace("-", "_"))
    text = text.replace("    - pytorch >=2.7,<2.10\n", f"    - {run_pytorch}\n" if run_pytorch else "")
    if not host_pytorch:
        text = text.replace("    - setuptools >=64\n    - pytorch\n", "    - setuptools >=64\n")
    if not noarch:
        text = text.replace("  noarch: python\n", "")
    return text


def test_findings_that_matter_on_conda_forge_style_recipes(make_distro):
    recipes = {
        "floor-only": _cf_recipe("floor-only", "pytorch >=2.4", host_pytorch=True),  # noarch: no run_export
        "major-bound": _cf_recipe("major-bound", "pytorch >=2.4,<3"),
        "pinned-210": _cf_recipe("pinned-210", "pytorch 2.10.*"),
        "no-pytorch": _cf_recipe("no-pytorch", None),
        "good": _cf_recipe("good", "pytorch >=2.7,<2.10"),
        "compiled": _cf_recipe("compiled", None, host_pytorch=True, noarch=False),  # bounded by run_exports
    }
    root = make_distro(recipes, {"pytorch": {"releases": ["2.7.1", "2.8.0", "2.9.1"]}}, variants=True)
    found = {(f.recipe, f.check) for f in lint_distribution(load_distribution(root)).findings if f.severity == "error"
             or f.check == "pytorch-missing"}
    assert ("floor-only", "run-dep-unbounded") in found
    assert ("major-bound", "pytorch-bound-granularity") in found
    assert ("pinned-210", "pytorch-pin-no-release") in found
    assert ("no-pytorch", "pytorch-missing") in found
    assert not {c for r, c in found if r in ("good", "compiled")}
    assert not {c for _, c in found} & {"recipe-invalid"}


def test_run_exports_follow_the_target_platform(make_distro):
    """rattler-build applies only the `noarch` bucket of host run_exports to a noarch package: a bare
    host pytorch bounds a compiled package, never a noarch one (whatever the channel exports as weak)."""
    noarch = _cf_recipe("nopin", None, host_pytorch=True)
    noarch = noarch.replace("    - numpy >=1.24,<3\n", "    - numpy >=1.24,<3\n    - pytorch\n")
    arch = noarch.replace("nopin", "archpin").replace("  noarch: python\n", "")
    root = make_distro({"nopin": noarch, "archpin": arch}, variants=True)
    found = {(f.recipe, f.check) for f in lint_distribution(load_distribution(root)).findings}
    assert ("nopin", "run-dep-unbounded") in found and ("archpin", "run-dep-unbounded") not in found
    # the upstream channel's run_exports.json decides when it can be read: a `noarch` bucket bounds noarch
    ch = root / "upstream" / "noarch"
    ch.mkdir(parents=True)
    (ch / "run_exports.json").write_text(json.dumps({"info": {"subdir": "noarch"}, "packages.conda": {
        "pytorch-2.9.1-h0_0.conda": {"run_exports": {"noarch": ["pytorch >=2.9,<2.10"]}}}}))
    cfg = yaml.safe_load((root / "distro.yaml").read_text())
    cfg["channels"]["upstream"] = ["./upstream"]
    (root / "distro.yaml").write_text(yaml.safe_dump(cfg))
    found = {(f.recipe, f.check) for f in lint_distribution(load_distribution(root)).findings}
    assert ("nopin", "run-dep-unbounded") not in found
    # ... and a channel that exports only weak (as conda-forge's pytorch does) bounds only the compiled one
    (ch / "run_exports.json").write_text(json.dumps({"info": {"subdir": "noarch"}, "packages.conda": {
        "pytorch-2.9.1-h0_0.conda": {"run_exports": {"weak": ["pytorch >=2.9,<2.10"]}}}}))
    found = {(f.recipe, f.check) for f in lint_distribution(load_distribution(root)).findings}
    assert ("nopin", "run-dep-unbounded") in found and ("archpin", "run-dep-unbounded") not in found


def test_extra_license_download_needs_no_version(make_distro):
    text = _cf_recipe("lic", "pytorch >=2.7,<2.10")
    text = text.replace("source:\n  url:", "source:\n  - url:").replace("\n  sha256:", "\n    sha256:")
    text = text.replace("\nbuild:\n", "\n  - url: https://example.org/LICENSE.txt\n"
                        "    sha256: 1111111111111111111111111111111111111111111111111111111111111111\n"
                        "    file_name: LICENSE.txt\n\nbuild:\n", 1)
    root = make_distro({"lic": text}, variants=True)
    found = {f.check for f in lint_distribution(load_distribution(root)).findings}
    assert "source-url-without-version" not in found and "recipe-invalid" not in found
    root = make_distro({"lic": text.replace("${{ version }}.tar.gz", "latest.tar.gz")}, name="nover", variants=True)
    assert "source-url-without-version" in {f.check for f in lint_distribution(load_distribution(root)).findings}


# ---------------------------------------------------------------------------------------------
# multi-output recipes in the graph


def test_outputs_map_to_their_recipe_in_the_graph(make_distro, capsys):
    split = (CF_DIR / "torchcf-split.yaml").read_text()
    user = _cf_recipe("torchcf-user", "pytorch >=2.7,<2.10").replace(
        "    - numpy >=1.24,<3\n", "    - numpy >=1.24,<3\n    - libtorchcf >=2,<3\n")
    root = make_distro({"torchcf": split, "torchcf-user": user}, variants=True)
    dist = load_distribution(root)
    g = RecipeGraph.from_recipes(dist.recipes)
    assert g.order() == ["torchcf", "torchcf-user"]
    assert g.edges() == [{"from": "torchcf", "to": "torchcf-user", "via": ["libtorchcf"]}]
    code, out, _ = run_cli(capsys, "graph", "--root", str(root), "--format", "json")
    assert code == 0 and json.loads(out)["edges"] == g.edges()
    found = {(f.recipe, f.check) for f in lint_distribution(dist).findings}
    assert ("torchcf", "tests-missing") not in found and ("torchcf", "build-number-missing") not in found
    assert ("torchcf", "folder-name-mismatch") not in found  # the folder is one of its outputs


# ---------------------------------------------------------------------------------------------
# one bad recipe never stops the others


def _broken_world(sandbox_world: Path) -> Path:
    rel = sandbox_world / "recipes" / "tensorutils" / "recipe.yaml"
    rel.write_text(rel.read_text().replace("  number:", "  scriptt: x\n  number:", 1))
    return rel


@pytest.mark.slow
def test_every_command_reports_an_unreadable_recipe_and_carries_on(sandbox_world: Path, capsys):
    rel = _broken_world(sandbox_world)
    root = str(sandbox_world)
    code, out, err = run_cli(capsys, "graph", "--root", root, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["unreadable"][0]["recipe"] == "tensorutils" and "scriptt" in doc["unreadable"][0]["message"]
    blocked = {b["name"] for b in doc["blocked"]}
    assert blocked and "tensorutils" not in doc["order"] and not blocked & set(doc["order"])

    code, out, err = run_cli(capsys, "build", "--all", "--dry-run", "--root", root, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False
    planned = set(doc["plan"]["order"])
    assert planned and "tensorutils" not in planned and not planned & blocked
    assert {b["name"] for b in doc["blocked"]} == blocked

    code, out, err = run_cli(capsys, "build", "--all", "--dry-run", "--root", root)
    assert code == 1 and f"{rel}:" in err and "blocked:" in err and "plan (dry run" in out

    code, out, err = run_cli(capsys, "lint", "--root", root, "--format", "json")
    assert code == 1 and any(f["check"] == "recipe-invalid" and f["line"] for f in json.loads(out)["findings"])
    assert run_cli(capsys, "lint", "tensorutils", "--root", root)[0] == 2
    assert run_cli(capsys, "build", "tensorutils", "--dry-run", "--root", root)[0] == 2
    assert not (sandbox_world / "build").exists()


@pytest.mark.slow
def test_sweep_dry_run_carries_on_with_an_unreadable_recipe(sandbox_world: Path, capsys):
    _broken_world(sandbox_world)
    cfg = sandbox_world / "distro.yaml"  # 2.6.0 is published upstream: the dry run sweeps it as if it were new
    cfg.write_text(cfg.read_text().replace('releases: ["2.4.1", "2.5.1", "2.6.0"]', 'releases: ["2.4.1", "2.5.1"]'))
    code, out, err = run_cli(capsys, "sweep", "--pytorch", "2.6.0", "--dry-run", "--no-build",
                             "--root", str(sandbox_world), "--format", "json")
    assert code in (0, 1), err
    doc = json.loads(out)
    status = {p["name"]: p["status"] for p in doc["packages"]}
    assert status["tensorutils"] == "unreadable"
    waiting = [n for n, s in status.items() if s == "awaiting-parents"]
    assert waiting and doc["ok"] is False


@pytest.mark.slow
def test_check_pr_no_build_treats_real_recipes_as_rattler_build_does(sandbox_world: Path, capsys):
    """A conda-forge style recipe added in a PR: no false render errors, the real findings only."""
    import git

    repo = git.Repo(sandbox_world)
    folder = sandbox_world / "recipes" / "torchcf-noarch"
    folder.mkdir()
    (folder / "recipe.yaml").write_text(_cf_recipe("torchcf-noarch", "pytorch >=2.4"))
    (sandbox_world / "variants.yaml").write_text((REPO / "variants.yaml").read_text())
    cfg = yaml.safe_load((sandbox_world / "distro.yaml").read_text())
    cfg["variant_config"] = ["variants.yaml"]
    (sandbox_world / "distro.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    repo.git.checkout("-b", "pr")
    repo.git.add(A=True)
    repo.index.commit("add torchcf-noarch")
    code, out, err = run_cli(capsys, "check-pr", "--base", "main", "--no-build", "--root", str(sandbox_world),
                             "--format", "json")
    doc = json.loads(out)
    checks = {f["check"] for f in doc["lint"] if f["recipe"] == "torchcf-noarch"}
    assert "recipe-invalid" not in checks and "run-dep-unbounded" in checks, doc["lint"]
    assert code == 1


# ---------------------------------------------------------------------------------------------
# smaller things


def test_v0_meta_yaml_is_named(make_distro, clean_recipe, capsys):
    root = make_distro({"good": clean_recipe("good")})
    only = root / "recipes" / "oldpkg"
    only.mkdir()
    (only / "meta.yaml").write_text("{% set version = '1.0' %}\npackage:\n  name: oldpkg\n")
    beside = root / "recipes" / "good" / "meta.yaml"
    beside.write_text("package:\n  name: good\n")
    code, out, err = run_cli(capsys, "lint", "--root", str(root), "--format", "json")
    doc = json.loads(out)
    invalid = {f["recipe"]: f for f in doc["findings"] if f["check"] == "recipe-invalid"}
    assert code == 1 and set(invalid) == {"oldpkg", "good"}
    assert invalid["oldpkg"]["path"].endswith("oldpkg/meta.yaml") and "v0 meta.yaml" in invalid["oldpkg"]["message"]
    assert invalid["good"]["path"].endswith("good/meta.yaml") and "beside recipe.yaml" in invalid["good"]["message"]


def test_lint_fix_writes_nothing_when_it_exits_2(make_distro, clean_recipe, capsys):
    fixable = clean_recipe("fixme").replace("  number: 0\n", "")
    broken = clean_recipe("broken").replace("  number: 0\n", "  number: zero\n")
    root = make_distro({"fixme": fixable, "broken": broken})
    before = {p: p.read_text() for p in root.rglob("recipe.yaml")}
    code, out, err = run_cli(capsys, "lint", "fixme", "broken", "--fix", "--root", str(root))
    assert code == 2
    assert {p: p.read_text() for p in root.rglob("recipe.yaml")} == before
    code, out, err = run_cli(capsys, "lint", "--fix", "--root", str(root))  # not named: broken is a finding
    assert code == 1 and "fixed: recipes/fixme/recipe.yaml" in out
    assert (root / "recipes/broken/recipe.yaml").read_text() == broken


def test_duplicate_keys_in_a_recipe_name_both_lines(make_distro, clean_recipe, capsys):
    text = clean_recipe("dup").replace("build:\n", "build:\n  number: 1\n", 1)
    root = make_distro({"dup": text})
    code, out, err = run_cli(capsys, "lint", "--root", str(root), "--format", "json")
    msg = next(f["message"] for f in json.loads(out)["findings"] if f["check"] == "recipe-invalid")
    lines = [i + 1 for i, ln in enumerate(text.splitlines()) if ln.strip().startswith("number:")]
    assert code == 1 and "number" in msg and all(str(n) in msg for n in lines), msg


# ---------------------------------------------------------------------------------------------
# a recipe's own variant file, and a recipe that builds pytorch itself


LOCAL = HERE / "data" / "recipes_cf_local" / "pytorchlike"


def test_a_recipes_own_conda_build_config_is_read_and_self_pins_are_not_downstream_pins(make_distro, capsys):
    """A feedstock's recipe/ copied unchanged (recipe.yaml + conda_build_config.yaml with selectors): it
    renders with the recipe's own keys over the distribution's, and the pins between its own outputs
    (`pytorch ==${{ version }}`) are neither policy findings nor edited by the sweep's plan."""
    import shutil

    root = make_distro({}, {"pytorch": {"releases": ["2.10.0", "2.11.0", "2.12.0"]}}, variants=True)
    shutil.copytree(LOCAL, root / "recipes" / "pytorch")
    dist = load_distribution(root)
    recipe = dist.recipes["pytorch"]
    assert recipe.output_names == ["libtorch", "pytorch", "pytorch-tests"]
    strings = {d.raw for d in recipe.deps("run") if d.name == "pytorch"}
    assert any("cpu_mkl" in s for s in strings) and any("cpu_generic" in s for s in strings)  # [x86_64] and [unix]
    assert any("cuda129_generic" in s for s in strings)
    found = {(f.check, f.message) for f in lint_distribution(dist).findings if f.severity == "error"}
    assert not [f for f in found if f[0] in ("recipe-invalid", "pytorch-bound-granularity", "pytorch-pin-no-release")], found
    # without the recipe's own variant file the keys are undefined: rattler-build says so
    (root / "recipes" / "pytorch" / "conda_build_config.yaml").unlink()
    code, out, err = run_cli(capsys, "lint", "--root", str(root), "--format", "json")
    assert code == 1 and any("undefined" in f["message"] for f in json.loads(out)["findings"])


def test_a_recipe_read_from_the_model_cache_still_knows_every_branch(tmp_path):
    """The sweep edits pins in every if/then branch (the text's tree), not only the rendered ones: a
    recipe read back from the model cache parses its tree again when asked, and gives the same pins."""
    from conda_distro.pins import pytorch_pins

    text = _cf_recipe("branchy", "pytorch >=2.7,<2.10").replace(
        "    - numpy >=1.24,<3\n", "    - numpy >=1.24,<3\n    - if: win\n      then: pytorch >=2.7,<2.9\n")
    from conda_distro.recipe.model import parse_recipes

    path = Path("/r/branchy/recipe.yaml")
    (first,) = parse_recipes([(text, path, cf_settings(tmp_path))], owner="branchy")
    (cached,) = parse_recipes([(text, path, cf_settings(tmp_path))], owner="branchy")
    assert isinstance(first, Recipe) and isinstance(cached, Recipe)
    assert first.data is not None and cached.data is None  # the second came from the packed model cache
    lines = [d.line for d in pytorch_pins(first, "pytorch")]
    assert len(lines) == 2 and [d.line for d in pytorch_pins(cached, "pytorch")] == lines


# ---------------------------------------------------------------------------------------------
# the packed model cache (one file for a warm load)


def _pack_load(root: Path, monkeypatch, *, parsed: list | None = None):
    """load_distribution of ``root``; ``parsed`` collects the folders of the recipes it had to parse."""
    from conda_distro.recipe import model

    real = getattr(model._parse_many, "__wrapped__", model._parse_many)

    def spy(items, jobs):
        if parsed is not None:
            parsed.extend(p.parent.name for _, p, _ in items)
        return real(items, jobs)

    spy.__wrapped__ = real  # type: ignore[attr-defined]
    monkeypatch.setattr(model, "_parse_many", spy)
    return load_distribution(root, strict=False)


def _pack_world(make_distro, clean_recipe, tmp_path, monkeypatch) -> tuple[Path, Path]:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CONDA_DISTRO_CACHE", str(cache))
    root = make_distro({n: clean_recipe(n) for n in ("a", "b", "c")}, variants=True)
    return root, cache / "render"


def test_a_warm_load_reads_the_models_from_one_packed_file(make_distro, clean_recipe, tmp_path, monkeypatch):
    from conda_distro.recipe.model import pack_file

    root, folder = _pack_world(make_distro, clean_recipe, tmp_path, monkeypatch)
    parsed: list[str] = []
    cold = _pack_load(root, monkeypatch, parsed=parsed)
    assert sorted(parsed) == ["a", "b", "c"] and pack_file(folder, str(root.resolve())).is_file()
    assert len(list(folder.rglob("*.pack"))) == 1
    parsed.clear()
    warm = _pack_load(root, monkeypatch, parsed=parsed)
    assert parsed == [] and not warm.errors
    for name, recipe in cold.recipes.items():
        again = warm.recipes[name]
        assert again.data is None and again.path == recipe.path and again.text == recipe.text
        assert (again.name, again.version, again.requirements, again.outputs, again.variants, again.lines) == \
            (recipe.name, recipe.version, recipe.requirements, recipe.outputs, recipe.variants, recipe.lines)
        assert again.written_requirements() == recipe.written_requirements()
    assert lint_distribution(warm).to_dict()["findings"] == lint_distribution(cold).to_dict()["findings"]


def test_the_packed_cache_is_invalidated_by_what_the_render_depends_on(make_distro, clean_recipe, tmp_path, monkeypatch):
    from conda_distro.recipe import render

    root, _ = _pack_world(make_distro, clean_recipe, tmp_path, monkeypatch)
    _pack_load(root, monkeypatch)
    parsed: list[str] = []
    # a changed recipe: that one only
    recipe = root / "recipes" / "b" / "recipe.yaml"
    recipe.write_text(recipe.read_text() + "# edited\n")
    _pack_load(root, monkeypatch, parsed=parsed)
    assert parsed == ["b"]
    # a variant file beside a recipe: that one only
    parsed.clear()
    (root / "recipes" / "c" / "variants.yaml").write_text("local_key: ['1']\n")
    _pack_load(root, monkeypatch, parsed=parsed)
    assert parsed == ["c"]
    # the distribution's variants.yaml: all
    parsed.clear()
    variants = root / "variants.yaml"
    variants.write_text(variants.read_text() + "\nextra_key: ['1']\n")
    _pack_load(root, monkeypatch, parsed=parsed)
    assert sorted(parsed) == ["a", "b", "c"]
    # another rattler-build version: all
    parsed.clear()
    monkeypatch.setattr(render, "_version_cache", ["0.0.0-another"])
    _pack_load(root, monkeypatch, parsed=parsed)
    assert sorted(parsed) == ["a", "b", "c"]
    parsed.clear()
    _pack_load(root, monkeypatch, parsed=parsed)
    assert parsed == []


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "a class", "another format"])
def test_a_damaged_packed_cache_is_ignored_and_rebuilt(make_distro, clean_recipe, tmp_path, monkeypatch, damage):
    import pickle

    from conda_distro.recipe.model import pack_file

    root, folder = _pack_world(make_distro, clean_recipe, tmp_path, monkeypatch)
    first = _pack_load(root, monkeypatch)
    pack = pack_file(folder, str(root.resolve()))
    data = pack.read_bytes()
    marker = tmp_path / "executed"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    pack.write_bytes({"truncated": data[: len(data) // 2], "garbage": os.urandom(300), "empty": b"",
                      "a class": pickle.dumps({"format": 1, "entries": {"k": [0, Evil()]}}),
                      "another format": pickle.dumps({"format": 99, "entries": {}})}[damage])
    parsed: list[str] = []
    again = _pack_load(root, monkeypatch, parsed=parsed)
    assert sorted(parsed) == ["a", "b", "c"] and not again.errors and not marker.exists()
    assert {n: r.requirements for n, r in again.recipes.items()} == {n: r.requirements for n, r in first.recipes.items()}
    parsed.clear()
    _pack_load(root, monkeypatch, parsed=parsed)
    assert parsed == []  # rebuilt


def test_packed_cache_writers_merge_under_a_lock_and_the_size_is_bounded(tmp_path):
    import subprocess
    import sys

    from conda_distro.util.cachedir import PackedCache

    path = tmp_path / "p.pack"
    script = ("import sys; from pathlib import Path; from conda_distro.util.cachedir import PackedCache\n"
              "w = sys.argv[1]\n"
              "for i in range(15):\n"
              "    assert PackedCache(Path(sys.argv[2])).update({f'{w}-{i}': [w, i]})\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(w), str(path)]) for w in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    got = PackedCache(path).load()
    assert got == {f"{w}-{i}": [str(w), i] for w in range(4) for i in range(15)}  # no writer lost another's entries
    assert not list(tmp_path.glob(".*.tmp"))
    small = PackedCache(path, max_entries=10)
    small.update({"new": 1}, used=["3-14"])
    kept = small.load()
    assert len(kept) == 10 and {"new", "3-14"} <= set(kept)  # the least recently written or used dropped
    time.sleep(0.05)
    small.update({"newer": 2}, used=["new"], drop_after=0.04)  # what nobody wrote or used lately goes
    assert set(small.load()) == {"new", "newer"}


def test_old_packs_are_pruned_beyond_the_newest(tmp_path):
    from conda_distro.util.cachedir import prune_packs

    for i in range(6):
        (tmp_path / f"{i}.pack").write_bytes(b"x")
        (tmp_path / f"{i}.pack.lock").write_bytes(b"")
        os.utime(tmp_path / f"{i}.pack", (1000 + i, 1000 + i))
    (tmp_path / "fresh.pack").write_bytes(b"x")  # written just now: a writer may hold its lock
    prune_packs(tmp_path, 2, spare=tmp_path / "0.pack")
    assert sorted(p.name for p in tmp_path.glob("*.pack")) == ["0.pack", "5.pack", "fresh.pack"]
    assert sorted(p.name for p in tmp_path.glob("*.lock")) == ["0.pack.lock", "5.pack.lock"]
