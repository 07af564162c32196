"""Owned package names: a recipe publishes only the names it owns (package_owners.yaml, then main's ledger,
then the folder named after the package, then the one recipe declaring it).

The probe's repro (a new recipe ``thief`` whose second output is ``fastquant``, another recipe's package,
with bytes of its own: tests/data/hostile/thief) and two recipe folders declaring one name (a copy, a
symlinked recipe.yaml, tests/data/hostile/duplicate-name) are refused by lint, check-pr, graph and build,
and promote holds an artifact built from a recipe that does not own its name. The fast tests render the
hostile recipes with rattler-build in a small repository; the end-to-end ones build them in the sandbox world.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import git
import pytest
from support.helpers import run_cli_at, run_json_at
from support.repos import clean_recipe_text, write_distro

from conda_distro.channels import ChannelFile
from conda_distro.errors import ConfigError
from conda_distro.gate.promote import HoldReason, PlanInputs, TestMatrix, plan_gate
from conda_distro.state.ledger import ArtifactEntry, PackageState
from conda_distro.state.owners import Owner, build_registry, ledger_owners, load_reviewed
from conda_distro.state.results import ArtifactResults
from conda_distro.state.results import TestRecord as Run

HOSTILE = Path(__file__).parent / "data" / "hostile"
T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def repo_with(tmp_path: Path, *hostile: str, owners: str | None = None) -> Path:
    """A small distribution with the recipes ``fastquant`` and ``layerkit`` and the named hostile recipe
    folders (paths under tests/data/hostile) copied into recipes/."""
    root = write_distro(tmp_path / "repo", {"fastquant": clean_recipe_text("fastquant", version="0.2.1"),
                                            "layerkit": clean_recipe_text("layerkit", run=["fastquant >=0.2,<1"])})
    for rel in hostile:
        shutil.copytree(HOSTILE / rel, root / "recipes" / Path(rel).name)
    if owners is not None:
        (root / "package_owners.yaml").write_text(owners)
    return root


def findings(root: Path, capsys, *names: str) -> tuple[int, list[dict]]:
    code, doc = run_json_at(capsys, root, "lint", *names)
    return code, [f for f in doc["findings"] if f["check"] == "package-owner"]


# ---------------------------------------------------------------------------------------------
# the registry, pure


def _owner(name: str, recipe: str) -> Owner:
    return Owner(name, recipe, "package_owners.yaml", "reviewed")


def test_the_folder_named_after_a_package_owns_it_against_a_newcomer():
    reg = build_registry({"fastquant": ["fastquant"], "thief": ["thief", "fastquant"]}, {}, {})
    assert reg.owner_of("fastquant").recipe == "fastquant" and reg.owner_of("thief").recipe == "thief"
    (c,) = reg.conflicts
    assert (c.recipe, c.name, c.owner.recipe) == ("thief", "fastquant", "fastquant")
    assert "recipes/fastquant" in c.message and "package_owners.yaml" in c.hint


def test_a_new_name_belongs_to_the_one_recipe_declaring_it_and_two_make_it_disputed():
    reg = build_registry({"torchlib": ["libtorchx", "torchlib"]}, {}, {})  # a multi-output recipe
    assert reg.owner_of("libtorchx").recipe == "torchlib" and not reg.conflicts
    reg = build_registry({"twin-left": ["twin"], "twin-right": ["twin"]}, {}, {})
    assert reg.owner_of("twin") is None and reg.disputed == {"twin": ("twin-left", "twin-right")}
    assert sorted(c.recipe for c in reg.conflicts) == ["twin-left", "twin-right"]
    assert all(c.owner is None and "no recipe owns it" in c.message for c in reg.conflicts)
    assert reg.verdicts() == {"twin": None}


def test_the_ledger_keeps_a_name_with_the_recipe_it_was_promoted_from():
    """The owner recorded in main's ledger wins over the folder rule: a recipe folder named after a
    package cannot take over a name another recipe published."""
    state = PackageState(schema_version=1, name="fastquant", artifacts=[
        ArtifactEntry(artifact="noarch/fastquant-0.1-h_0.conda", sha256="0" * 64, version="0.1", build="h_0",
                      build_number=0, channel="main", promoted_at=T0, commit=None, recipe="recipes/quanttools"),
        ArtifactEntry(artifact="noarch/fastquant-0.0-h_0.conda", sha256="1" * 64, version="0.0", build="h_0",
                      build_number=0, channel="main", promoted_at=None, commit=None)])  # older: no recipe recorded
    ledger = ledger_owners({"fastquant": state})
    assert ledger["fastquant"].recipe == "quanttools" and "channel_state/fastquant.json" in ledger["fastquant"].detail
    reg = build_registry({"fastquant": ["fastquant"], "quanttools": ["quanttools"]}, {}, ledger)
    (c,) = reg.conflicts
    assert (c.recipe, c.owner.recipe, c.owner.source) == ("fastquant", "quanttools", "channel_state")
    # the reviewed file moves it
    reg = build_registry({"fastquant": ["fastquant"]}, {"fastquant": _owner("fastquant", "fastquant")}, ledger)
    assert not reg.conflicts and reg.owner_of("fastquant").source == "package_owners.yaml"
    # entries promoted before the ledger recorded the recipe say nothing about the owner
    legacy = state.model_copy(update={"artifacts": [a.model_copy(update={"recipe": None}) for a in state.artifacts]})
    assert ledger_owners({"fastquant": legacy}) == {}


def test_ledger_entries_without_a_recipe_stay_byte_identical():
    entry = ArtifactEntry(artifact="noarch/a-1-h_0.conda", sha256="0" * 64, version="1", build="h_0", build_number=0,
                          channel="main", promoted_at=T0, commit=None)
    assert "recipe" not in entry.model_dump(mode="json")
    assert entry.model_copy(update={"recipe": "recipes/a"}).model_dump(mode="json")["recipe"] == "recipes/a"
    with pytest.raises(ValueError):
        ArtifactEntry.model_validate({**entry.model_dump(mode="json"), "recipe": "../../etc"})


# ---------------------------------------------------------------------------------------------
# package_owners.yaml


def test_the_reviewed_file_is_read_with_its_lines(tmp_path):
    (tmp_path / "package_owners.yaml").write_text(
        "# who owns what\nowners:\n  fastquant:\n    recipe: quanttools\n    by: octocat\n    reason: moved (#42)\n")
    (owner,) = load_reviewed(tmp_path).values()
    assert (owner.name, owner.recipe, owner.line) == ("fastquant", "quanttools", 3)
    assert "package_owners.yaml:3, by octocat: moved (#42)" in owner.detail
    assert load_reviewed(tmp_path / "nowhere") == {}


@pytest.mark.parametrize(("text", "field", "words"), [
    ("owners:\n  fastquant:\n    recipe: x\n    by: octocat\n", "owners.fastquant.reason", "missing"),
    ("owners:\n  fastquant:\n    recipe: x\n    by: octocat\n    reason: '  '\n", "owners.fastquant.reason", "empty"),
    ("owners:\n  fastquant:\n    recipe: ../x\n    by: octocat\n    reason: r\n", "owners.fastquant.recipe", "folder"),
    ("owners:\n  fastquant:\n    recipe: x\n    by: '@octo cat'\n    reason: r\n", "owners.fastquant.by", "handle"),
    ("owners:\n  Fast Quant:\n    recipe: x\n    by: octocat\n    reason: r\n", "owners", "conda package name"),
    ("owners:\n  fastquant:\n    recipe: x\n    by: octocat\n    reason: r\n    reson: r\n",
     "owners.fastquant.reson", "did you mean 'reason'"),
    ("ownrs: {}\n", "ownrs", "did you mean 'owners'"),
    ("- fastquant\n", None, "must be a mapping"),
])
def test_a_malformed_reviewed_file_is_bad_input(tmp_path, text, field, words):
    (tmp_path / "package_owners.yaml").write_text(text)
    with pytest.raises(ConfigError) as err:
        load_reviewed(tmp_path)
    assert err.value.field == field and err.value.path.endswith("package_owners.yaml")
    assert words in f"{err.value.message} {err.value.hint}"


# ---------------------------------------------------------------------------------------------
# lint, graph and build refuse; nothing is built


def test_lint_names_the_owner_of_a_stolen_name_and_skip_lints_cannot_hide_it(tmp_path, capsys):
    root = repo_with(tmp_path, "thief")
    code, found = findings(root, capsys)
    assert code == 1
    (f,) = found
    assert f["recipe"] == "thief" and f["path"] == "recipes/thief/recipe.yaml" and f["severity"] == "error"
    assert "'fastquant'" in f["message"] and "recipes/fastquant" in f["message"]
    assert f["line"] == 38  # the stolen output's package:
    recipe = root / "recipes" / "thief" / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace("    - mallory\n", "    - mallory\n  skip-lints: [package-owner]\n"))
    assert findings(root, capsys)[1], "extra.skip-lints turned the ownership check off"
    # linting only the victim says nothing about it: it owns its name
    assert findings(root, capsys, "fastquant") == (0, [])


def test_graph_and_build_refuse_a_recipe_publishing_another_recipes_name(tmp_path, capsys):
    root = repo_with(tmp_path, "thief")
    code, out, err = run_cli_at(capsys, root, "build", "thief", "--dry-run")
    assert code == 2 and "Traceback" not in out + err
    assert "recipes/thief/recipe.yaml" in err and "recipes/fastquant" in err and "'fastquant'" in err
    code, out, err = run_cli_at(capsys, root, "build", "--all", "--dry-run")
    assert code == 2 and "belongs to recipes/fastquant" in err
    code, out, err = run_cli_at(capsys, root, "graph")
    assert code == 2 and "produced by two recipes: recipes/fastquant and recipes/thief" in err
    assert not (root / "build").exists()


@pytest.mark.parametrize("how", ["copy", "symlink", "disputed"])
def test_two_recipes_with_one_name_are_refused(tmp_path, capsys, how):
    if how == "disputed":
        root = repo_with(tmp_path, "duplicate-name/twin-left", "duplicate-name/twin-right")
        culprits, name = ["twin-left", "twin-right"], "twin"
    else:
        root = repo_with(tmp_path)
        copy = root / "recipes" / "fastquant-copy"
        copy.mkdir()
        if how == "copy":
            shutil.copy(root / "recipes" / "fastquant" / "recipe.yaml", copy / "recipe.yaml")
        else:
            (copy / "recipe.yaml").symlink_to("../fastquant/recipe.yaml")
        culprits, name = ["fastquant-copy"], "fastquant"
    code, found = findings(root, capsys)
    assert code == 1 and sorted(f["recipe"] for f in found) == culprits
    assert all(f"'{name}'" in f["message"] for f in found)
    for argv in (("graph",), ("build", "--all", "--dry-run"), ("build", culprits[0], "--dry-run")):
        code, out, err = run_cli_at(capsys, root, *argv)
        assert code == 2 and "Traceback" not in out + err and f"'{name}'" in err, (argv, err)
    assert not (root / "build").exists()


def test_a_reviewed_entry_moves_a_name_and_the_old_recipe_is_then_refused(tmp_path, capsys):
    owners = "owners:\n  fastquant:\n    recipe: thief\n    by: octocat\n    reason: fastquant moves into thief (#7)\n"
    root = repo_with(tmp_path, "thief", owners=owners)
    code, found = findings(root, capsys)
    (f,) = found
    assert f["recipe"] == "fastquant" and "recipes/thief (package_owners.yaml:2, by octocat" in f["message"]
    code, out, err = run_cli_at(capsys, root, "build", "thief", "--dry-run")
    assert code == 2 and "recipes/fastquant/recipe.yaml" in err


def test_lint_reports_the_reviewed_file(tmp_path, capsys):
    root = repo_with(tmp_path, owners="owners:\n  gone:\n    recipe: gone\n    by: octocat\n    reason: kept reserved\n")
    code, doc = run_json_at(capsys, root, "lint")
    (f,) = [f for f in doc["findings"] if f["check"] == "owners-unknown-recipe"]
    assert code == 0 and f["path"] == "package_owners.yaml" and f["line"] == 2 and f["severity"] == "warning"
    (root / "package_owners.yaml").write_text("owners:\n  gone:\n    recipe: gone\n")
    for argv in (("lint",), ("lint", "fastquant")):
        code, doc = run_json_at(capsys, root, *argv)
        (f,) = [f for f in doc["findings"] if f["check"] == "owners-invalid"]
        assert code == 2 and f["line"] == 2 and "owners.gone.by" in f["message"]
    code, out, err = run_cli_at(capsys, root, "build", "fastquant", "--dry-run")
    assert code == 2 and "package_owners.yaml:2" in err and "Traceback" not in err


@pytest.mark.parametrize("path", ["/etc", "../../..", "../../../../../../../../etc/passwd", "src/../../../.."])
def test_a_source_path_outside_the_repository_is_an_error(tmp_path, capsys, path):
    text = clean_recipe_text("fastquant").replace(
        "source:\n  url: https://example.org/fastquant/fastquant-${{ version }}.tar.gz\n  sha256: " + "0123456789abcdef" * 4,
        f"source:\n  path: {path}")
    root = write_distro(tmp_path / "repo", {"fastquant": text.replace("  license_file: LICENSE\n", "") +
                                            "  skip-lints: [source-path-outside]\n"})
    code, doc = run_json_at(capsys, root, "lint")
    (f,) = [f for f in doc["findings"] if f["check"] == "source-path-outside"]
    assert code == 1 and f["line"] == 9 and path in f["message"] and "outside the repository" in f["message"]


def test_a_source_path_inside_the_repository_is_fine(tmp_path, capsys):
    text = clean_recipe_text("fastquant").replace(
        "  url: https://example.org/fastquant/fastquant-${{ version }}.tar.gz\n  sha256: " + "0123456789abcdef" * 4,
        "  path: ../../vendor/fastquant")
    root = write_distro(tmp_path / "repo", {"fastquant": text})
    code, doc = run_json_at(capsys, root, "lint")
    assert not [f for f in doc["findings"] if f["check"] == "source-path-outside"]
    # a symbolic link out of the repository is followed
    (root / "vendor").symlink_to("/etc")
    code, doc = run_json_at(capsys, root, "lint")
    assert [f for f in doc["findings"] if f["check"] == "source-path-outside"]


# ---------------------------------------------------------------------------------------------
# promote: defence in depth (the plan)


def _cf(name: str, sha: str) -> ChannelFile:
    return ChannelFile("noarch", f"{name}-9.9.12-h0_0.conda", name, "9.9.12", "h0_0", 0, sha * 64, ("pytorch >=2.4,<2.7",))


def _results(f: ChannelFile, recipe: str | None) -> ArtifactResults:
    return ArtifactResults(artifact=f.artifact, name=f.name, version=f.version, sha256=f.sha256, depends=list(f.depends),
                           recipe=recipe, tests=[Run(name=f.name, artifact=f.artifact, pytorch="2.6.0", variant=v,
                                                     status="passed", date=T0) for v in ("cpu", "cuda")])


def test_promote_holds_an_artifact_built_from_a_recipe_that_does_not_own_its_name():
    stolen, own, twin = _cf("fastquant", "1"), _cf("thief", "2"), _cf("twin", "3")
    reg = build_registry({"fastquant": ["fastquant"], "thief": ["thief", "fastquant"],
                          "twin-left": ["twin"], "twin-right": ["twin"]}, {}, {})
    inputs = PlanInputs({f.artifact: f for f in (stolen, own, twin)}, {},
                        {stolen.artifact: _results(stolen, "recipes/thief"), own.artifact: _results(own, "recipes/thief"),
                         twin.artifact: _results(twin, "recipes/twin-left")}, {},
                        TestMatrix("pytorch", ("2.6.0",), ("cpu", "cuda")), owners=reg.verdicts())
    plan = plan_gate(inputs)
    held = {h.file.name: h for h in plan.held}
    assert [f.name for f in plan.promote] == ["thief"]
    assert held["fastquant"].reason is HoldReason.NOT_OWNER and held["fastquant"].blocked_by == ("recipes/fastquant",)
    assert "belongs to recipes/fastquant" in held["fastquant"].detail and "built from recipes/thief" in held["fastquant"].detail
    assert held["twin"].reason is HoldReason.NOT_OWNER and "none owns it" in held["twin"].detail
    assert plan.exit_code == 1


# ---------------------------------------------------------------------------------------------
# the probe's repro, end to end on the sandbox world


def _add_thief(world: Path) -> None:
    shutil.copytree(HOSTILE / "thief", world / "recipes" / "thief")


@pytest.mark.slow
def test_the_thief_is_refused_by_lint_check_pr_and_build(sandbox_world: Path, capsys):
    _add_thief(sandbox_world)
    repo = git.Repo(sandbox_world)
    repo.git.add("-A")
    repo.index.commit("add thief")
    code, doc = run_json_at(capsys, sandbox_world, "lint")
    assert code == 1 and [f["recipe"] for f in doc["findings"] if f["check"] == "package-owner"] == ["thief"]
    code, out, err = run_cli_at(capsys, sandbox_world, "check-pr", "--base", "HEAD~1", "--format", "markdown")
    assert code == 1, err
    assert "ready to merge" not in out and "package-owner" in out and "recipes/fastquant" in out
    code, doc = run_json_at(capsys, sandbox_world, "check-pr", "--base", "HEAD~1")
    assert code == 1 and not doc["ok"] and doc["builds"] == [] and doc["tests"] == []
    code, out, err = run_cli_at(capsys, sandbox_world, "build", "thief")
    assert code == 2 and "belongs to recipes/fastquant" in err
    assert not (sandbox_world / "build" / "channels").exists() and not (sandbox_world / "build" / "results").exists()


@pytest.mark.slow
def test_promote_holds_the_stolen_name_and_the_ledger_keeps_each_name_with_its_recipe(sandbox_world: Path, capsys):
    """Defence in depth: thief is built while recipes/fastquant is away (it then owns the name); once the
    owner is back, promote holds thief's fastquant (not-owner) and promotes thief itself, recording the
    recipe. The ledger then keeps 'thief' with recipes/thief: a recipe folder named thief cannot take it."""
    world = sandbox_world
    _add_thief(world)
    away = world.parent / "fastquant-away"
    shutil.move(world / "recipes" / "fastquant", away)
    code, out, err = run_cli_at(capsys, world, "build", "thief")
    assert code in (0, 1), err
    shutil.move(away, world / "recipes" / "fastquant")
    code, doc = run_json_at(capsys, world, "promote")
    assert code == 1
    held = {h["name"]: h for h in doc["held"]}
    assert held["fastquant"]["reason"] == "not-owner" and "recipes/fastquant" in held["fastquant"]["detail"]
    assert [p["artifact"].split("/")[1].split("-")[0] for p in doc["promoted"]] == ["thief"]
    assert not (world / "channel_state" / "fastquant.json").exists()
    main = json.loads((world / "build" / "channels" / "pytorch" / "noarch" / "repodata.json").read_text())
    assert not [r for r in main["packages.conda"].values() if r["name"] == "fastquant"]
    state = json.loads((world / "channel_state" / "thief.json").read_text())
    assert {a["recipe"] for a in state["artifacts"]} == {"recipes/thief"}
    code, doc = run_json_at(capsys, world, "excuses")
    (cand,) = [c for c in doc["candidates"] if c["name"] == "fastquant" and c["new_version"] == "9.9.12"]
    assert cand["verdict"] == "held-permanently"
    # the ledger now owns 'thief' for recipes/thief: another folder declaring it is refused even when thief's
    # own recipe is gone (a change of owner needs package_owners.yaml)
    shutil.rmtree(world / "recipes" / "thief")
    (world / "recipes" / "thief2").mkdir()
    (world / "recipes" / "thief2" / "recipe.yaml").write_text(
        (world / "recipes" / "tensorutils" / "recipe.yaml").read_text().replace("name: tensorutils", "name: thief"))
    code, out, err = run_cli_at(capsys, world, "build", "thief2", "--dry-run")
    assert code == 2 and "channel_state/thief.json" in err


@pytest.mark.slow
def test_check_pr_checks_a_changed_owner_file(sandbox_world: Path, capsys):
    """A PR changing only package_owners.yaml is checked: moving a name away from the recipe that declares
    it fails the gate naming that recipe; a malformed file is bad input with a comment."""
    repo = git.Repo(sandbox_world)
    owners = sandbox_world / "package_owners.yaml"
    owners.write_text("owners:\n  fastquant:\n    recipe: quanttools\n    by: octocat\n    reason: moves (#1)\n")
    repo.git.add("-A")
    repo.index.commit("give fastquant to quanttools")
    code, doc = run_json_at(capsys, sandbox_world, "check-pr", "--base", "HEAD~1")
    assert code == 1 and not doc["ok"] and doc["builds"] == []
    (f,) = [f for f in doc["lint"] if f["check"] == "package-owner"]
    assert f["recipe"] == "fastquant" and "recipes/quanttools (package_owners.yaml:2" in f["message"]
    owners.write_text("owners:\n  fastquant:\n    recipe: quanttools\n")
    repo.git.add("-A")
    repo.index.commit("break it")
    code, out, err = run_cli_at(capsys, sandbox_world, "check-pr", "--base", "HEAD~1", "--format", "markdown")
    assert code == 2 and "package_owners.yaml" in out and "Traceback" not in out + err


@pytest.mark.parametrize("field, value, message", [
    ("by", "'@octocat'", "'@octocat' is not a GitHub handle (write it without '@', e.g. octocat)"),
    ("reason", "'   '", "the reason is empty: "),
])
def test_hints_and_owners_share_one_handle_type_and_one_reason_check(tmp_path, field, value, message):
    """package_owners.yaml and hints.yaml refuse a bad handle and a blank reason through the same checks
    (util/validation.py: ``Handle``, ``check_reason``), each file keeping its own words about the reason."""
    from conda_distro.gate.hints import _HintData, load_hints
    from conda_distro.state.owners import _OwnerData
    from conda_distro.util.validation import Handle

    assert _HintData.model_fields["by"].metadata == _OwnerData.model_fields["by"].metadata == list(Handle.__metadata__)
    owners = {"recipe": "quanttools", "by": "octocat", "reason": "moved", field: value}
    (tmp_path / "package_owners.yaml").write_text("owners:\n  fastquant:\n" + "".join(f"    {k}: {v}\n" for k, v in owners.items()))
    with pytest.raises(ConfigError) as exc:
        load_reviewed(tmp_path)
    assert exc.value.message.startswith(message) and exc.value.field == f"owners.fastquant.{field}"
    hint = {"action": "block", "package": "tensorkit", "by": "octocat", "reason": "why", "expires": "2026-12-31",
            field: value}
    (tmp_path / "hints.yaml").write_text("hints:\n  - " + "".join(f"    {k}: {v}\n" for k, v in hint.items())[4:])
    with pytest.raises(ConfigError) as hexc:
        load_hints(tmp_path)
    assert hexc.value.message.startswith(message) and hexc.value.field == f"hints.0.{field}"
    if field == "reason":  # each file says why in its own words
        assert exc.value.message.endswith("say why the name belongs to this recipe")
        assert hexc.value.message.endswith("say why (an issue link helps the next release manager)")
