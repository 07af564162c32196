"""The spine's warm caches (the packed recipe models, the lint cache, the one scan of recipes/): whatever
changed on disk since the last run is seen by the next one, whatever the caches hold.

Every test runs with a render cache of its own ($CONDA_DISTRO_CACHE), loads and lints once (cold: the
caches are written), changes something, and loads and lints again (warm)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.repos import clean_recipe_text, write_distro

from conda_distro.distribution import load_distribution, repository_state
from conda_distro.lint import LintOptions, lint_distribution
from conda_distro.recipe.model import recipe_paths, scan_recipes


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("CONDA_DISTRO_CACHE", str(folder))
    return folder


def packs(cache: Path, prefix: str) -> list[Path]:
    return sorted((cache / "render" / "packs").glob(f"{prefix}*.pack"))


def run(root: Path):
    dist = load_distribution(root, strict=False)
    return dist, lint_distribution(dist, LintOptions(hints=False, proposals=False))


def checks_of(result, folder: str) -> set[str]:
    return {f.check for f in result.findings if f.recipe == folder}


def test_a_warm_run_answers_from_the_caches_and_writes_nothing(tmp_path: Path, cache: Path):
    root = write_distro(tmp_path / "d", {"alpha": clean_recipe_text("alpha"), "beta": clean_recipe_text("beta")})
    dist, result = run(root)
    assert set(dist.recipes) == {"alpha", "beta"} and result.errors == 0
    written = {p: p.stat().st_mtime_ns for p in packs(cache, "")}
    assert len(written) == 2, written  # the model pack and the lint pack
    dist2, result2 = run(root)
    assert {p: p.stat().st_mtime_ns for p in packs(cache, "")} == written  # nothing new: no pack rewritten
    assert [f.to_dict() for f in result2.findings] == [f.to_dict() for f in result.findings]
    assert dist2.recipes["alpha"].version == "1.2.0"


def test_an_edit_that_keeps_size_and_time_stamp_is_seen(tmp_path: Path, cache: Path):
    """The caches are keyed by the recipe's content, never by its stat: an edit that keeps the size and the
    modification time (the classic hole of mtime-validated caches) is still seen."""
    root = write_distro(tmp_path / "d", {"alpha": clean_recipe_text("alpha", version="1.2.0")})
    dist, _ = run(root)
    assert dist.recipes["alpha"].version == "1.2.0"
    path = root / "recipes" / "alpha" / "recipe.yaml"
    st = path.stat()
    text = path.read_text()
    assert text.count("1.2.0") == 1
    path.write_text(text.replace("1.2.0", "1.3.0"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    dist, _ = run(root)
    assert dist.recipes["alpha"].version == "1.3.0"


def test_an_edit_that_breaks_a_rule_is_linted_again(tmp_path: Path, cache: Path):
    root = write_distro(tmp_path / "d", {"alpha": clean_recipe_text("alpha")})
    _, result = run(root)
    assert result.errors == 0
    path = root / "recipes" / "alpha" / "recipe.yaml"
    path.write_text(path.read_text().replace("numpy", "requests").replace("pytorch >=2.4,<2.7", "pytorch >=2.4"))
    _, result = run(root)
    assert {"pytorch-bound-granularity", "run-dep-unbounded"} & checks_of(result, "alpha"), result.findings


def test_added_removed_and_renamed_recipes_are_seen(tmp_path: Path, cache: Path):
    root = write_distro(tmp_path / "d", {"alpha": clean_recipe_text("alpha"), "beta": clean_recipe_text("beta")})
    run(root)
    (root / "recipes" / "gamma").mkdir()
    (root / "recipes" / "gamma" / "recipe.yaml").write_text(clean_recipe_text("gamma"))
    shutil.rmtree(root / "recipes" / "beta")
    dist, result = run(root)
    assert set(dist.recipes) == {"alpha", "gamma"} and result.errors == 0
    # renamed: the same text under another folder; the lint cache must not answer for the old place
    (root / "recipes" / "alpha").rename(root / "recipes" / "renamed")
    dist, result = run(root)
    assert set(dist.recipes) == {"renamed", "gamma"}
    assert "folder-name-mismatch" in checks_of(result, "renamed")
    assert all(f.path == "recipes/renamed/recipe.yaml" for f in result.findings if f.recipe == "renamed")


def test_a_changed_lint_configuration_lints_again(tmp_path: Path, cache: Path):
    text = clean_recipe_text("alpha", run=["requests"])  # an unbounded run requirement
    root = write_distro(tmp_path / "d", {"alpha": text})
    _, result = run(root)
    assert "run-dep-unbounded" in checks_of(result, "alpha")
    write_distro(root, None, {"policy": {"unbounded_allowed": ["python", "requests"]}})  # distro.yaml only
    _, result = run(root)
    assert "run-dep-unbounded" not in checks_of(result, "alpha")
    # the selected checks are part of the key too: --check of one id reports only that one
    dist = load_distribution(root, strict=False)
    only = lint_distribution(dist, LintOptions(only=("maintainers-missing",), hints=False, proposals=False))
    assert {f.check for f in only.findings} <= {"maintainers-missing"}


def test_which_requirements_are_distribution_packages_is_part_of_the_key(tmp_path: Path, cache: Path):
    """pytorch-missing: a recipe without a pytorch requirement is in the distribution only when it depends on a
    distribution package. Adding that package (another recipe) changes the unchanged recipe's findings."""
    root = write_distro(tmp_path / "d", {"alpha": clean_recipe_text("alpha", pytorch=None, run=["helperpkg >=1,<2"])})
    _, result = run(root)
    assert "pytorch-missing" in checks_of(result, "alpha")
    (root / "recipes" / "helperpkg").mkdir()
    (root / "recipes" / "helperpkg" / "recipe.yaml").write_text(clean_recipe_text("helperpkg", version="1.0.0"))
    _, result = run(root)
    assert "pytorch-missing" not in checks_of(result, "alpha")


def test_distribution_wide_checks_run_for_unchanged_recipes(tmp_path: Path, cache: Path):
    """package-owner looks at every recipe: a second recipe producing the same package name is reported
    although the first recipe did not change."""
    root = write_distro(tmp_path / "d", {"alpha": clean_recipe_text("alpha")})
    _, result = run(root)
    assert result.errors == 0
    (root / "recipes" / "alpha2").mkdir()
    (root / "recipes" / "alpha2" / "recipe.yaml").write_text(clean_recipe_text("alpha"))
    _, result = run(root)
    assert result.errors > 0
    assert any(f.recipe in ("alpha", "alpha2") and f.check not in ("folder-name-mismatch",) for f in result.findings
               if f.severity == "error"), result.findings


@pytest.mark.parametrize("garbage", [b"", b"not a pickle at all", b"\x80\x05\x95\x10\x00\x00\x00\x00\x00\x00\x00}"])
def test_a_corrupt_cache_reads_as_a_miss(tmp_path: Path, cache: Path, garbage: bytes):
    root = write_distro(tmp_path / "d", {"alpha": clean_recipe_text("alpha", run=["requests"])})
    dist, result = run(root)
    expected = [f.to_dict() for f in result.findings]
    assert expected and dist.recipes["alpha"].version == "1.2.0"
    for pack in packs(cache, ""):
        pack.write_bytes(garbage)
    dist, result = run(root)
    assert [f.to_dict() for f in result.findings] == expected and dist.recipes["alpha"].version == "1.2.0"
    assert all(p.stat().st_size > 100 for p in packs(cache, ""))  # rebuilt


def test_the_scan_lists_what_recipe_paths_lists(tmp_path: Path, cache: Path):
    root = write_distro(tmp_path / "d", {"alpha": clean_recipe_text("alpha"), "beta": clean_recipe_text("beta")})
    recipes = root / "recipes"
    (recipes / "v0only").mkdir()
    (recipes / "v0only" / "meta.yaml").write_text("{% set x = 1 %}\n")
    (recipes / "empty").mkdir()
    (recipes / "linked").mkdir()
    (recipes / "linked" / "recipe.yaml").symlink_to(recipes / "beta" / "recipe.yaml")
    (recipes / "dangling").mkdir()
    (recipes / "dangling" / "recipe.yaml").symlink_to(tmp_path / "nowhere.yaml")
    (recipes / "afile.txt").write_text("not a folder")
    scanned = scan_recipes(recipes, contents=True)
    assert [f.path for f in scanned] == recipe_paths(recipes)
    by = {f.folder: f for f in scanned}
    assert by["dangling"].state is None and by["v0only"].state is None
    assert by["linked"].real is None and by["linked"].state == by["beta"].state[:1] + by["beta"].state[1:]
    assert by["alpha"].real == os.path.realpath(recipes / "alpha" / "recipe.yaml")
    assert by["v0only"].names == frozenset({"meta.yaml"})
    before = repository_state(root)
    (recipes / "alpha" / "recipe.yaml").write_text(clean_recipe_text("alpha", version="9.9.9"))
    assert repository_state(root) != before


def test_a_v0_recipe_beside_a_v1_one_is_still_refused_after_a_warm_run(tmp_path: Path, cache: Path):
    root = write_distro(tmp_path / "d", {"alpha": clean_recipe_text("alpha")})
    run(root)
    (root / "recipes" / "alpha" / "meta.yaml").write_text("package:\n  name: alpha\n")
    dist, result = run(root)
    assert "alpha" not in dist.recipes and any("meta.yaml" in e.message for e in dist.errors)
    assert result.unreadable == 1


def test_a_variant_file_added_beside_a_recipe_is_seen(tmp_path: Path, cache: Path):
    root = write_distro(tmp_path / "d", {"alpha": clean_recipe_text("alpha")})
    dist, _ = run(root)
    plain = dist.recipes["alpha"].settings
    (root / "recipes" / "alpha" / "variants.yaml").write_text("numpy:\n  - '2.0'\n")
    dist, _ = run(root)
    assert dist.recipes["alpha"].settings != plain
    assert ("numpy", ("2.0",)) in dist.recipes["alpha"].settings.variants


def test_no_per_recipe_json_is_written_and_old_entries_are_removed(tmp_path: Path, cache: Path):
    """The packs are the one render cache: no file per recipe text (those were never pruned); the ones an
    older version left are removed when a pack is written."""
    old = cache / "render" / "ab" / ("ab" + "0" * 62 + ".json")
    old.parent.mkdir(parents=True)
    old.write_text("{}")
    model = old.with_name(old.stem + ".model4.json")
    model.write_text("{}")
    kept = cache / "render" / "notes"  # (anything else in the folder is left alone ...)
    kept.mkdir()
    foreign = cache / "render" / "cd" / "notes.txt"  # (... and so is a bucket holding anything else)
    foreign.parent.mkdir()
    foreign.write_text("mine")
    root = write_distro(tmp_path / "d", {"alpha": clean_recipe_text("alpha"), "beta": clean_recipe_text("beta")})
    run(root)
    assert not old.parent.exists() and kept.is_dir() and foreign.read_text() == "mine"
    assert list((cache / "render").rglob("*.json")) == []


def test_a_lag_is_reported_for_an_unchanged_recipe_when_its_dependency_changes(tmp_path: Path, cache: Path):
    """pytorch-pin-lags looks at the recipe's dependencies: torch-thing's pin leaves out 2.6, and so does
    torch-base's (it waits for that one, no warning). Once torch-base admits 2.6, the unchanged torch-thing
    is reported, although its own findings come from the lint cache."""
    import yaml

    case = yaml.safe_load((Path(__file__).parent / "data" / "lint_cases" / "pytorch-pin-lags-awaits-parent-ok.yaml").read_text())
    base = case["extra_recipes"]["torch-base"]
    root = write_distro(tmp_path / "d", {"torch-thing": case["recipe"], "torch-base": base}, variants=True)
    _, result = run(root)
    assert "pytorch-pin-lags" not in checks_of(result, "torch-thing")
    path = root / "recipes" / "torch-base" / "recipe.yaml"
    path.write_text(base.replace("pytorch >=2.5,<2.6  # lockstep: one minor", "pytorch >=2.5,<2.7")
                    .replace("pytorch-lockstep: true", "pytorch-lockstep: false"))
    _, result = run(root)
    assert "pytorch-pin-lags" in checks_of(result, "torch-thing"), result.findings


def test_the_lint_configuration_includes_the_code_of_the_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """An edited module of the tool (a check changed during development) never answers from the lint cache."""
    import sys
    import types

    from conda_distro.lint.cache import code_digest

    source = tmp_path / "probe_module.py"
    source.write_text("X = 1\n")
    module = types.ModuleType("conda_distro._probe_module")
    module.__file__ = str(source)
    before = code_digest()
    monkeypatch.setitem(sys.modules, "conda_distro._probe_module", module)
    with_module = code_digest()
    assert with_module != before
    st = source.stat()
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert code_digest() != with_module


def test_a_recipe_made_a_link_after_the_scan_is_still_refused(tmp_path: Path):
    """The scan's real path of a recipe is opened without following a link: a recipe.yaml replaced by a link
    to a file of the kernel between the scan and the read is resolved and refused like any other."""
    from conda_distro.errors import RecipeError
    from conda_distro.recipe.model import read_recipe_text

    root = write_distro(tmp_path / "d", {"alpha": clean_recipe_text("alpha")})
    (found,) = scan_recipes(root / "recipes", contents=True)
    assert found.real is not None
    path = root / "recipes" / "alpha" / "recipe.yaml"
    assert read_recipe_text(path, found) == path.read_text()
    path.unlink()
    path.symlink_to("/proc/self/environ")
    with pytest.raises(RecipeError, match="kernel"):
        read_recipe_text(path, found)
