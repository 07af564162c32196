"""Provenance (issue 12): artifacts and test results record the recipe input hash and the commit they
came from; `check-pr` builds in a scope of its own; `promote` takes only what this checkout's recipes
built and tested (`not-from-this-checkout` otherwise); the ledger's commit is the build's commit.

The end-to-end tests are the issue's repro on the sandbox world with real builds: a branch breaks
`tensorutils` (drops `center`, which `layerkit` uses), and main must never promote any of it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import git
import pytest
from support.helpers import run_cli_at, run_json_at, sha256

from conda_distro.channels import ChannelFile
from conda_distro.gate.promote import HoldReason, PlanInputs, TestMatrix, plan_gate
from conda_distro.state.ledger import Ledger
from conda_distro.state.provenance import BuildProvenance, CheckoutRecipes, Stamp, build_provenance, recipe_digest
from conda_distro.state.results import ArtifactResults, ResultsStore
from conda_distro.state.results import TestRecord as Run

STAGING = Path("build/channels/staging")
RESULTS = Path("build/results")
MAIN = Path("build/channels/pytorch")
BRANCH = "break-tensorutils"


def name_of(artifact: str) -> str:
    return artifact.split("/")[-1].rsplit("-", 2)[0]


def snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    if not folder.exists():
        return {}
    return {p.relative_to(folder).as_posix(): (p.stat().st_mtime_ns, sha256(p))
            for p in sorted(folder.rglob("*")) if p.is_file()}


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def break_tensorutils_on_a_branch(world: Path) -> git.Repo:
    """A branch where tensorutils 0.3.3 drops `center` (its own tests adjusted, so they pass)."""
    repo = git.Repo(world)
    repo.git.checkout("-b", BRANCH)
    recipe = world / "recipes/tensorutils/recipe.yaml"
    edit(recipe, 'version: "0.3.2"', 'version: "0.3.3"')
    edit(recipe, "; assert tensorutils.center(torch.tensor([1.0, 3.0])).tolist() == [-1.0, 1.0]", "")
    src = world / "recipes/tensorutils/src/tensorutils/__init__.py"
    text = src.read_text()
    start = text.index("def center(")
    src.write_text(text[:start] + text[text.index("def describe("):])
    repo.git.add("-A")
    repo.index.commit("tensorutils 0.3.3: drop center()")
    return repo


# ---------------------------------------------------------------------------------------------
# the issue's repro, end to end


@pytest.mark.slow
def test_check_pr_on_a_branch_never_reaches_what_main_promotes(built_world: Path, capsys):
    world = built_world
    repo = git.Repo(world)
    built_at = repo.head.commit.hexsha  # main's build (the session's `build --all`) ran here
    shared = snapshot(world / STAGING), snapshot(world / RESULTS)

    break_tensorutils_on_a_branch(world)
    code, doc = run_json_at(capsys, world, "check-pr", "--base", "main")
    assert code == 1 and doc["ok"] is False  # it fails, correctly: layerkit needs center()
    assert doc["scope"] == f"build/pr/{BRANCH}"
    assert doc["affected"] == ["tensorutils", "layerkit", "trainloop"]
    assert {t["status"] for t in doc["tests"] if t["name"] == "tensorutils"} == {"passed"}
    assert {t["status"] for t in doc["tests"] if t["name"] == "layerkit"} == {"failed"}
    assert {b["status"] for b in doc["builds"] if b["name"] == "trainloop"} == {"blocked"}  # layerkit failed
    scope = world / doc["scope"]
    assert {p.name.rsplit("-", 2)[0] for p in (scope / "channels/staging/noarch").glob("*.conda")} == \
        {"tensorutils", "layerkit"}
    assert list((scope / "channels/staging/noarch").glob("tensorutils-0.3.3-*.conda"))
    pr_results = ResultsStore(scope / "results").all()
    assert {r.name for r in pr_results} == {"tensorutils", "layerkit"}
    branch_head = repo.head.commit.hexsha
    for r in pr_results:  # the PR's own store: provenance of the branch's checkout
        assert r.commit == branch_head and r.recipe == f"recipes/{r.name}"
        assert all(t.commit == branch_head and "recipes/tensorutils" in t.recipes for t in r.tests)
    # nothing of the branch reached the shared staging channel or main's results
    assert (snapshot(world / STAGING), snapshot(world / RESULTS)) == shared
    code, out, _ = run_cli_at(capsys, world, "check-pr", "--base", "main", "--format", "markdown")  # all reused
    assert code == 1 and f"Builds, results and logs of this PR: `build/pr/{BRANCH}/`" in out
    assert re.search(rf"^- ❌ `recipes/layerkit/recipe.yaml:\d+` `layerkit` test failed on .* · log `build/pr/{BRANCH}/logs/layerkit/",
                     out, re.M), out
    assert (snapshot(world / STAGING), snapshot(world / RESULTS)) == shared

    # back on main, after an unrelated merge: promote promotes main's builds
    repo.git.checkout("main")
    repo.index.commit("an unrelated merge on main")
    code, out = run_json_at(capsys, world, "promote")
    promoted = {a["artifact"] for a in out["promoted"]}
    assert {name_of(a) for a in promoted} >= {"tensorutils", "layerkit", "trainloop"}
    assert not any("0.3.3" in a for a in promoted) and not any("0.3.3" in h["artifact"] for h in out["held"])
    held = {name_of(h["artifact"]): h["reason"] for h in out["held"]}
    assert held == {"fastquant": "test-failed", "hookprofiler": "test-failed"}  # the sandbox's own failures
    # the ledger names the commit whose recipes built the artifacts, not the merge promote ran at
    entries = [a for s in Ledger(world / "channel_state").load_all().values() for a in s.artifacts]
    assert {e.artifact for e in entries} == promoted
    assert {e.commit for e in entries} == {built_at} != {repo.head.commit.hexsha}


@pytest.mark.slow
def test_an_artifact_built_from_another_checkouts_recipe_is_held(built_world: Path, capsys):
    """`build` on a branch writes the shared staging (that is what `build` does); promote on main then
    holds the branch's artifact, and the tests it influenced, as not-from-this-checkout; a build on main
    re-tests those and they go."""
    world = built_world
    repo = break_tensorutils_on_a_branch(world)
    code, doc = run_json_at(capsys, world, "build", "tensorutils")
    assert code == 1  # layerkit fails against the branch's tensorutils
    [t033] = [b["artifact"] for b in doc["builds"] if b["name"] == "tensorutils"]
    assert "0.3.3" in t033 and (world / STAGING / t033).is_file()
    branch_hash = recipe_digest(world / "recipes/tensorutils")

    repo.git.checkout("main")
    code, out = run_json_at(capsys, world, "promote", "--dry-run")
    held = {h["artifact"]: h for h in out["held"]}
    assert code == 1
    assert held[t033]["reason"] == "not-from-this-checkout"
    assert "another version of recipes/tensorutils" in held[t033]["detail"]
    assert branch_hash[:12] in held[t033]["detail"]
    assert held[t033]["class"] == "stale" and "prune" in held[t033]["advice"]
    lk = next(h for a, h in held.items() if name_of(a) == "layerkit")
    assert lk["reason"] == "tested-with-other-recipes"  # not test-failed: those tests ran with other recipes
    assert "recipes/tensorutils" in lk["detail"] and "re-test" in lk["detail"]

    code, doc = run_json_at(capsys, world, "build", "--all")  # main re-tests what the branch touched
    retested = {t["name"] for t in doc["tests"] if not t.get("cached") and t["status"] != "blocked"}
    # layerkit's run against main's tensorutils is kept beside the branch's (results keep one outcome per
    # environment): the same test in the same environment is reused, not run again
    assert retested == set(), [t for t in doc["tests"] if not t.get("cached") and t["status"] != "blocked"]
    lk_tests = [t for t in doc["tests"] if t["name"] == "layerkit"]
    assert lk_tests and all(t["cached"] and t["status"] == "passed" for t in lk_tests)
    assert {t["against"]["tensorutils"] for t in lk_tests} == {"tensorutils-0.3.2-pyh4616a5c_0"}
    assert not [b for b in doc["builds"] if b["status"] == "built"]  # re-tested, nothing rebuilt
    code, out = run_json_at(capsys, world, "promote")
    held = {h["artifact"]: h["reason"] for h in out["held"]}
    assert held[t033] == "not-from-this-checkout"
    assert {name_of(a["artifact"]) for a in out["promoted"]} >= {"tensorutils", "layerkit", "trainloop"}
    assert not any(a["artifact"] == t033 for a in out["promoted"])
    assert not any("0.3.3" in a.name for a in (world / MAIN / "noarch").glob("*.conda"))


@pytest.mark.slow
def test_every_artifact_and_test_records_its_recipe_and_commit(built_world: Path):
    repo = git.Repo(built_world)
    head = repo.head.commit.hexsha
    results = ResultsStore(built_world / RESULTS).all()
    assert results
    for r in results:
        folder = built_world / (r.recipe or "?")
        assert folder.is_dir() and r.recipe_hash == recipe_digest(folder) and r.commit == head
        for t in r.tests:
            assert t.commit == head and t.recipes[r.recipe] == r.recipe_hash
    layerkit = next(r for r in results if r.name == "layerkit")
    assert set(layerkit.tests[0].recipes) == {"recipes/layerkit", "recipes/tensorutils"}


# ---------------------------------------------------------------------------------------------
# the gate (pure) and the git side, without builds


def cf(name: str, sha: str = "1") -> ChannelFile:
    return ChannelFile("noarch", f"{name}-1.0-h0_0.conda", name, "1.0", "h0_0", 0, sha * 64,
                       ("pytorch >=2.5,<2.6",))


def results_for(f: ChannelFile, recipe: str | None, recipe_hash: str | None, test_recipes: dict) -> ArtifactResults:
    tests = [Run(name=f.name, artifact=f.artifact, pytorch="2.5.1", variant=v, status="passed",
                 recipes=test_recipes) for v in ("cpu", "cuda")]
    return ArtifactResults(artifact=f.artifact, name=f.name, version=f.version, sha256=f.sha256,
                           depends=list(f.depends), recipe=recipe, recipe_hash=recipe_hash, commit="c0ffee" * 7,
                           tests=tests)


def test_the_gate_takes_only_this_checkouts_recipes():
    here = {"recipes/a": "a" * 64, "recipes/b": "b" * 64, "recipes/gone": None}
    files = {n: cf(n) for n in ("ok", "other", "gone", "old", "tested-elsewhere", "unrecorded-test")}
    res = {
        "ok": results_for(files["ok"], "recipes/a", "a" * 64, {"recipes/a": "a" * 64, "recipes/b": "b" * 64}),
        "other": results_for(files["other"], "recipes/a", "f" * 64, {"recipes/a": "f" * 64}),
        "gone": results_for(files["gone"], "recipes/gone", "a" * 64, {"recipes/gone": "a" * 64}),
        "old": results_for(files["old"], None, None, {}),
        "tested-elsewhere": results_for(files["tested-elsewhere"], "recipes/a", "a" * 64,
                                        {"recipes/a": "a" * 64, "recipes/b": "e" * 64}),
        "unrecorded-test": results_for(files["unrecorded-test"], "recipes/a", "a" * 64, {}),
    }
    inputs = PlanInputs(staging={f.artifact: f for f in files.values()}, main={},
                        results={files[n].artifact: r for n, r in res.items()}, retired={},
                        matrix=TestMatrix("pytorch", ("2.5.1",), ("cpu", "cuda")), recipes=here)
    plan = plan_gate(inputs)
    assert [f.name for f in plan.promote] == ["ok"]
    held = {h.file.name: h for h in plan.held}
    # the artifact's own recipe is not this checkout's: stale (prune removes it); its tests saw other
    # recipes: a build re-tests it
    assert {n: h.reason for n, h in held.items()} == {
        "other": HoldReason.NOT_FROM_THIS_CHECKOUT, "gone": HoldReason.NOT_FROM_THIS_CHECKOUT,
        "old": HoldReason.NOT_FROM_THIS_CHECKOUT, "tested-elsewhere": HoldReason.TESTED_WITH_OTHER_RECIPES,
        "unrecorded-test": HoldReason.TESTED_WITH_OTHER_RECIPES}
    assert held["other"].to_dict()["reason"] == "not-from-this-checkout"
    assert held["other"].to_dict()["class"] == "stale" and "conda-distro prune" in held["other"].to_dict()["advice"]
    assert held["tested-elsewhere"].to_dict()["class"] == "waiting"
    assert held["tested-elsewhere"].to_dict()["advice"].startswith("`conda-distro build tested-elsewhere`")
    assert "another version of recipes/a at commit c0ffeec0ffee" in held["other"].detail
    assert "ffffffffffff" in held["other"].detail and "aaaaaaaaaaaa" in held["other"].detail
    assert "recipes/gone" in held["gone"].detail and "does not have" in held["gone"].detail
    assert "no recipe input hash" in held["old"].detail
    assert held["tested-elsewhere"].detail.startswith(
        "tested with other recipes than this checkout's: recipes/b against pytorch 2.5.1 cpu, pytorch 2.5.1 cuda")
    assert "(unrecorded)" in held["unrecorded-test"].detail
    assert plan.exit_code == 1
    # without a checkout (recipes=None) provenance is not judged: the plan stays a pure function of its inputs
    plain = plan_gate(PlanInputs(**{**inputs.__dict__, "recipes": None}))
    assert {f.name for f in plain.promote} == set(files)


def test_commit_is_head_only_for_committed_recipes(tmp_path: Path):
    root = tmp_path / "repo"
    for name in ("a", "b", "c"):
        (root / "recipes" / name).mkdir(parents=True)
        (root / "recipes" / name / "recipe.yaml").write_text(f"# {name}\n")
    assert build_provenance(root, root / "recipes") == BuildProvenance()  # not a git repository
    repo = git.Repo.init(root)
    repo.git.add("-A")
    actor = git.Actor("t", "t@x")
    head = repo.index.commit("init", author=actor, committer=actor).hexsha
    assert build_provenance(root, root / "recipes") == BuildProvenance(head=head)
    (root / "recipes/a/recipe.yaml").write_text("# a, edited\n")  # modified
    (root / "recipes/b/extra.patch").write_text("new\n")  # untracked
    prov = build_provenance(root, root / "recipes")
    assert prov.head == head and prov.dirty == {"recipes/a", "recipes/b"}
    assert prov.commit_for(["recipes/c"]) == head and prov.commit_for(["recipes/c", "recipes/a"]) is None
    stamp = Stamp.of((("recipes/c", "1" * 64), ("recipes/b", "2" * 64)), prov)
    assert (stamp.recipe, stamp.commit, stamp.test_commit) == ("recipes/c", head, None)
    checkout = CheckoutRecipes(root)
    assert checkout.digest("recipes/a") == recipe_digest(root / "recipes/a")
    assert checkout.digest("recipes/nope") is None and checkout.digest("../repo/recipes/a") is None
    assert checkout.differing({"recipes/a": recipe_digest(root / "recipes/a"), "recipes/c": "0" * 64}) == ["recipes/c"]


def test_check_pr_scope_is_named_after_the_branch_or_commit(tmp_path: Path):
    from conda_distro.util.gitutil import scope_name

    repo = git.Repo.init(tmp_path, initial_branch="feature/x+y")
    assert scope_name(tmp_path) == "feature-x-y"
    (tmp_path / "f").write_text("1")
    repo.git.add("-A")
    actor = git.Actor("t", "t@x")
    sha = repo.index.commit("one", author=actor, committer=actor).hexsha
    repo.git.checkout(sha)  # detached, as CI checks out a PR's merge commit
    assert scope_name(tmp_path) == sha[:12]


@pytest.mark.slow
def test_a_scope_name_that_would_leave_build_pr_is_refused(sandbox_world: Path):
    from conda_distro.distribution import load_distribution
    from conda_distro.engine.run import build_paths
    from conda_distro.errors import UsageError

    dist = load_distribution(sandbox_world)
    paths = build_paths(dist, "topic")
    assert paths.staging == sandbox_world / "build/pr/topic/channels/staging"
    assert paths.store == sandbox_world / "build/pr/topic/results" and paths.fallback == (sandbox_world / STAGING,)
    for bad in ("..", "a/b", "", "x:y"):
        with pytest.raises(UsageError):
            build_paths(dist, bad)
    assert json.dumps(str(paths.logs)).count("build/pr/topic/logs") == 1
