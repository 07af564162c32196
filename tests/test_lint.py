"""Recipe lint: the data-driven cases in tests/data/lint_cases/, --fix, malformed input, options."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest
import yaml

from conda_distro.cli import main
from conda_distro.distribution import load_distribution
from conda_distro.errors import DistroError
from conda_distro.lint import CHECKS, LintCheck, LintOptions, lint_distribution
from conda_distro.recipe.model import parse_recipe
from conda_distro.recipe.render import RenderSettings
from conda_distro.recipe.variants import read_variant_files

CASES_DIR = Path(__file__).parent / "data" / "lint_cases"
CF_SETTINGS = RenderSettings.make(*read_variant_files([Path(__file__).parent.parent / "variants.yaml"]))
CASES = sorted(CASES_DIR.glob("*.yaml"))
CASE_KEYS = {"recipe", "folder", "distro", "files", "extra_recipes", "expect", "not_expect"}


def load_case(path: Path) -> dict:
    case = yaml.safe_load(path.read_text())
    unknown = set(case) - CASE_KEYS
    assert not unknown, f"{path.name}: unknown keys {unknown}"
    assert "recipe" in case and "expect" in case, f"{path.name}: needs recipe: and expect:"
    return case


def recipe_of(case: dict) -> str:
    recipe = case["recipe"]
    return recipe if isinstance(recipe, str) else yaml.safe_dump(recipe, sort_keys=False)


def folder_of(case: dict) -> str:
    if case.get("folder"):
        return case["folder"]
    return parse_recipe(recipe_of(case), Path("x/recipe.yaml"), CF_SETTINGS).name


def run_case(case: dict, make_distro) -> tuple[set[str], list]:
    """Each case is linted in a distribution with the repository's variants.yaml (conda-forge's values)."""
    folder = folder_of(case)
    root = make_distro({folder: recipe_of(case), **(case.get("extra_recipes") or {})}, case.get("distro"), variants=True)
    for rel, content in (case.get("files") or {}).items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content if isinstance(content, str) else json.dumps(content))
    result = lint_distribution(load_distribution(root, strict=False))
    mine = [f for f in result.findings if f.recipe == folder]
    others = [f for f in result.findings if f.recipe != folder]
    assert not others, f"helper recipes must lint clean: {others}"
    return {f.check for f in mine}, mine


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_lint_case(path: Path, make_distro):
    case = load_case(path)
    fired, findings = run_case(case, make_distro)
    detail = "\n".join(f"  {f.check}: {f.message} (line {f.line})" for f in findings)
    assert fired == set(case["expect"]), f"{path.name}: fired {sorted(fired)}, expected {sorted(case['expect'])}\n{detail}"
    assert not fired & set(case.get("not_expect") or ()), path.name
    for f in findings:
        assert f.path.endswith("recipe.yaml") and (f.line is None or f.line >= 1)


def recipe_check_ids() -> set[str]:
    # proposal-* checks look at proposals/<name>.yaml, not recipes: tests/test_proposal.py covers them;
    # hint-* checks look at hints.yaml: tests/test_hints.py; owners-* look at package_owners.yaml: tests/test_owners.py
    return {cid for cid in CHECKS if not cid.startswith(("proposal-", "hint-", "owners-"))}


def test_every_recipe_check_has_a_positive_case():
    covered = set()
    for path in CASES:
        covered |= set(load_case(path)["expect"])
    missing = recipe_check_ids() - covered
    assert not missing, f"checks without a lint case in {CASES_DIR}: {sorted(missing)}"
    assert covered - recipe_check_ids() <= {"recipe-invalid"}, "a case expects a check id that does not exist"


def test_there_are_clean_cases_and_they_are_realistic():
    clean = [p for p in CASES if not load_case(p)["expect"]]
    assert len(clean) >= 5
    for path in clean:
        text = recipe_of(load_case(path))
        assert "#" in text  # comments everywhere


@pytest.mark.parametrize("cid", sorted(CHECKS))
def test_every_check_is_documented(cid):
    cls = CHECKS[cid]
    assert cls.id == cid and cid == cid.lower() and " " not in cid
    assert len(cls.explanation()) > 20, "the docstring is the help text"
    assert cls.severity.value in ("error", "warning")


# ---------------------------------------------------------------------------------------------
# --fix

FIXABLE = {"build-number-missing", "duplicate-deps", "maintainers-duplicate", "version-v-prefix"}


def test_fixable_checks_are_exactly_the_tested_ones():
    assert {cid for cid, cls in CHECKS.items() if cls.fix is not LintCheck.fix} == FIXABLE


def _with_comments(clean_recipe) -> str:
    text = clean_recipe("foo", run=["numpy >=1.24,<3  # arrays"])
    text = "# recipe for foo (header comment)\n" + text
    text = text.replace("build:\n  number: 0\n", "build:\n  # bump on every rebuild\n  number: 0\n")
    return text.replace("    - octocat\n", "    - octocat  # lead maintainer\n")


FIX_CASES = {
    # name: (check id, transform of the clean text, lines removed, lines added)
    "build-number": ("build-number-missing", lambda t: t.replace("  number: 0\n", ""), [], ["  number: 0"]),
    "build-section": (
        "build-number-missing",
        lambda t: t.replace("build:\n  # bump on every rebuild\n  number: 0\n  noarch: python\n"
                            "  script: python -m pip install . --no-deps\n\n", ""),
        [], ["build:", "  number: 0"]),
    "duplicate-deps": (
        "duplicate-deps",
        lambda t: t.replace("    - numpy >=1.24,<3  # arrays\n",
                            "    - numpy >=1.24,<3  # arrays\n    - scipy >=1.10,<2  # stats\n    - numpy >=1.24,<3  # again\n"),
        ["    - numpy >=1.24,<3  # again"], []),
    "duplicate-last": (
        "duplicate-deps",
        lambda t: t.replace("    - numpy >=1.24,<3  # arrays\n", "    - numpy >=1.24,<3  # arrays\n    - numpy >=1.24,<3\n"),
        ["    - numpy >=1.24,<3"], []),
    "maintainers": (
        "maintainers-duplicate",
        lambda t: t.replace("    - octocat  # lead maintainer\n",
                            "    - octocat  # lead maintainer\n    - alice\n    # a comment line\n    - OctoCat  # twice\n"),
        ["    - OctoCat  # twice"], []),
    "version-context": (
        "version-v-prefix", lambda t: t.replace('  version: "1.2.0"\n', '  version: "v1.2.0"  # the git tag\n'),
        ['  version: "v1.2.0"  # the git tag'], ['  version: "1.2.0"   # the git tag']),
    "version-package": (
        "version-v-prefix",
        lambda t: t.replace('context:\n  version: "1.2.0"\n\n', "").replace("version: ${{ version }}", "version: v1.2.0")
        .replace("${{ version }}", "1.2.0"),
        ["  version: v1.2.0"], ["  version: 1.2.0"]),
}


@pytest.mark.parametrize("name", sorted(FIX_CASES))
def test_fix_rewrites_only_the_intended_lines(name, make_distro, clean_recipe, capsys):
    cid, transform, removed, added = FIX_CASES[name]
    before = transform(_with_comments(clean_recipe))
    root = make_distro({"foo": before})
    path = root / "recipes" / "foo" / "recipe.yaml"

    first = lint_distribution(load_distribution(root, strict=False), LintOptions())
    assert cid in {f.check for f in first.findings}

    code = main(["lint", "--fix", "--root", str(root), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    after = path.read_text()
    assert report["fixed"] == ["recipes/foo/recipe.yaml"]
    assert code == 0 and report["errors"] == 0 and report["findings"] == []

    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    assert [d[2:] for d in diff if d.startswith("- ")] == removed
    assert [d[2:] for d in diff if d.startswith("+ ")] == added
    comments = [ln.strip() for ln in before.splitlines() if "#" in ln and ln not in removed]
    for comment in comments:
        assert any(comment.split("#", 1)[1] in ln for ln in after.splitlines()), f"comment lost: {comment}"

    again = lint_distribution(load_distribution(root, strict=False), LintOptions(only=(cid,)))
    assert again.findings == []


def test_fix_leaves_unfixable_findings_and_clean_files_alone(make_distro, clean_recipe, capsys):
    clean = clean_recipe("good")
    bad = clean_recipe("bad", run=["numpy >=1.24"]).replace("  number: 0\n", "")
    root = make_distro({"good": clean, "bad": bad})
    assert main(["lint", "--fix", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "fixed: recipes/bad/recipe.yaml" in out and "run-dep-unbounded" in out
    assert (root / "recipes/good/recipe.yaml").read_text() == clean
    assert "  number: 0\n" in (root / "recipes/bad/recipe.yaml").read_text()


def test_without_fix_nothing_is_written(make_distro, clean_recipe, capsys):
    text = clean_recipe("foo").replace("  number: 0\n", "")
    root = make_distro({"foo": text})
    assert main(["lint", "--root", str(root)]) == 1
    assert (root / "recipes/foo/recipe.yaml").read_text() == text


# ---------------------------------------------------------------------------------------------
# malformed input


@pytest.mark.parametrize("broken,line,words", [
    ("bad-yaml", 6, ["invalid YAML"]),
    ("no-name", 4, ["missing required field 'name'"]),
    ("bad-spec", 23, [">=2,,<3", "unable to parse"]),
    ("ambiguous-spec", 23, ["'2.5'", "==2.5"]),
])
def test_unreadable_recipe_is_reported_and_the_others_are_linted(broken, line, words, make_distro, clean_recipe, capsys):
    """A recipe rattler-build cannot read is a finding (file:line, its message); the others are still
    linted and the run exits 1 (found failures). Naming that recipe is bad input: exit 2."""
    texts = {
        "bad-yaml": clean_recipe("bad-yaml").replace("package:\n  name: bad-yaml\n", "package:\n  name: [bad-yaml\n"),
        "no-name": clean_recipe("no-name").replace("  name: no-name\n", ""),
        "bad-spec": clean_recipe("bad-spec", pytorch="pytorch >=2,,<3"),
        "ambiguous-spec": clean_recipe("ambiguous-spec", pytorch="pytorch 2.5"),
    }
    other = clean_recipe("other", run=["numpy >=1.24"])
    root = make_distro({broken: texts[broken], "other": other, "fine": clean_recipe("fine")})

    assert main(["lint", "--root", str(root), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    mine = [f for f in report["findings"] if f["recipe"] == broken]
    assert len(mine) == 1 and mine[0]["severity"] == "error"
    assert mine[0]["path"] == f"recipes/{broken}/recipe.yaml" and mine[0]["line"] == line
    assert all(w in mine[0]["message"] for w in words), mine[0]["message"]
    assert [f["check"] for f in report["findings"] if f["recipe"] == "other"] == ["run-dep-unbounded"]
    assert not [f for f in report["findings"] if f["recipe"] == "fine"]

    assert main(["lint", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"recipes/{broken}/recipe.yaml:{line}: error:" in out
    assert main(["lint", broken, "--root", str(root)]) == 2
    assert main(["lint", "other", "--root", str(root)]) == 1


def test_recipe_that_is_not_utf8_is_reported(make_distro, clean_recipe, capsys):
    root = make_distro({"ok": clean_recipe("ok")})
    (root / "recipes" / "latin").mkdir()
    (root / "recipes" / "latin" / "recipe.yaml").write_bytes(b"package:\n  name: caf\xe9\n")
    assert main(["lint", "--root", str(root), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [(f["recipe"], f["check"]) for f in report["findings"]] == [("latin", "recipe-invalid")]
    assert "UTF-8" in report["findings"][0]["message"]


# ---------------------------------------------------------------------------------------------
# options


def test_only_selected_checks_run(make_distro, clean_recipe):
    text = clean_recipe("foo", run=["numpy >=1.24"]).replace("  summary: The foo test package\n", "")
    root = make_distro({"foo": text})
    dist = load_distribution(root, strict=False)
    assert {f.check for f in lint_distribution(dist).findings} == {"run-dep-unbounded", "summary-missing"}
    only = lint_distribution(dist, LintOptions(only=("summary-missing",)))
    assert [f.check for f in only.findings] == ["summary-missing"] and only.exit_code == 0
    errors_only = lint_distribution(dist, LintOptions(include_warnings=False))
    assert [f.check for f in errors_only.findings] == ["run-dep-unbounded"] and errors_only.exit_code == 1


def test_unknown_check_id_is_a_usage_error_with_a_hint(make_distro, clean_recipe, capsys):
    root = make_distro({"foo": clean_recipe("foo")})
    assert main(["lint", "--root", str(root), "--check", "run-dep-unbouned"]) == 2
    err = capsys.readouterr().err
    assert "unknown check id 'run-dep-unbouned'" in err and "did you mean 'run-dep-unbounded'" in err
    with pytest.raises(DistroError):
        lint_distribution(load_distribution(root), LintOptions(only=("nope",)))


def test_lint_named_recipes_only(make_distro, clean_recipe, capsys):
    root = make_distro({"a": clean_recipe("a", run=["numpy"]), "b": clean_recipe("b", run=["numpy"])})
    assert main(["lint", "b", "--root", str(root), "--format", "json"]) == 1
    assert {f["recipe"] for f in json.loads(capsys.readouterr().out)["findings"]} == {"b"}
    assert main(["lint", "bb", "--root", str(root)]) == 2
    assert "did you mean 'b'" in capsys.readouterr().err


def test_findings_point_at_the_offending_line(make_distro, clean_recipe):
    text = clean_recipe("foo", run=["numpy >=1.24,<3", "scipy", "numpy >=1.24,<3"])
    root = make_distro({"foo": text})
    lines = text.splitlines()
    findings = {f.check: f for f in lint_distribution(load_distribution(root)).findings}
    assert lines[findings["run-dep-unbounded"].line - 1].strip() == "- scipy"
    dup = findings["duplicate-deps"]
    assert lines[dup.line - 1].strip() == "- numpy >=1.24,<3" and dup.line == lines.index("    - numpy >=1.24,<3", 25) + 1


def test_findings_are_sorted_by_path_and_line(make_distro, clean_recipe):
    root = make_distro({n: clean_recipe(n, run=["numpy"]).replace(f"  summary: The {n} test package\n", "")
                        for n in ("zeta", "alpha", "mid")})
    findings = lint_distribution(load_distribution(root)).findings
    keys = [(f.path, f.line or 0, f.check) for f in findings]
    assert keys == sorted(keys) and {f.recipe for f in findings} == {"zeta", "alpha", "mid"}


def test_pin_function_messages_show_the_recipe_text(make_distro, clean_recipe):
    text = clean_recipe("foo", pytorch="${{ pin_compatible('pytorch') }}", host=["pytorch >=2.4"])
    root = make_distro({"foo": text}, {"policy": {"run_exports": {}}})
    [finding] = lint_distribution(load_distribution(root)).findings
    assert finding.check == "pytorch-bound-granularity"
    assert "${{ pin_compatible('pytorch') }}" in finding.message and "major" in finding.message
    assert "\x00" not in finding.message


def test_benchmark_generator_makes_a_clean_distribution(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_recipes", Path(__file__).parents[1] / "bench" / "gen_recipes.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    names = gen.generate(40, tmp_path)
    dist = load_distribution(tmp_path)
    assert sorted(dist.recipes) == names
    result = lint_distribution(dist)
    assert result.findings == []
    from conda_distro.graph import RecipeGraph

    assert len(RecipeGraph.from_recipes(dist.recipes).levels()) > 2  # inter-dependencies form a DAG
