"""Release-day sweep: `conda-distro sweep --pytorch VER [--commit]`.

End to end on the sandbox world with a new stand-in release published into its upstream channel:
statuses per package, recipe diffs line by line, the git branch and its commits, a bugfix release
that changes nothing, and the refusals (exit 2, nothing written). The line editor and the plan are
also tested on small hand-written recipes (fast).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import git
import pytest
import yaml
from filelock import FileLock
from support.helpers import run_cli
from support.worlds import _shared, copy_world

from conda_distro.config import load_config
from conda_distro.distribution import load_distribution
from conda_distro.graph import RecipeGraph
from conda_distro.pins import own_admitted, pytorch_pins
from conda_distro.recipe.model import parse_recipe
from conda_distro.sweep import (
    EditError,
    Outcome,
    ReleaseTest,
    add_release_text,
    decide,
    edited_text,
    plan_sweep,
    widen,
)
from conda_distro.sweep import to_test as _to_test
from conda_distro.sweep.model import TEST, WIDEN

PYTORCH_DEPENDENT = {"tensorutils", "layerkit", "trainloop", "metrickit", "visionmetrics", "textmetrics", "evalsuite",
                     "visionkit", "hookprofiler", "fastquant", "quantserve"}
BUMPED = {"tensorutils", "layerkit", "trainloop", "metrickit", "visionmetrics", "textmetrics", "evalsuite"}
HOOKVIZ = """\
# Test addition: depends on pytorch only through hookprofiler (a distribution package).
context:
  name: hookviz
  version: "0.1.0"

package:
  name: ${{ name }}
  version: ${{ version }}

source:
  path: src

build:
  number: 0
  noarch: python
  script:
    - mkdir -p $SP_DIR
    - cp -r $SRC_DIR/hookviz $SP_DIR/

requirements:
  host:
    - python >=3.10
  run:
    - python >=3.10
    - hookprofiler >=0.7,<0.8

tests:
  - python:
      imports:
        - hookviz
      pip_check: false

about:
  homepage: https://github.com/torch-sandbox/hookviz
  summary: Draws hookprofiler timelines (sandbox stand-in)
  license: MIT
  license_file: LICENSE

extra:
  recipe-maintainers:
    - viz-owner
"""

# ---------------------------------------------------------------------------------------------
# helpers


def sweep(capsys, world: Path, *argv: str) -> tuple[int, str, str]:
    return run_cli(capsys, "sweep", *argv, "--root", str(world))


def sweep_json(capsys, world: Path, *argv: str) -> tuple[int, dict]:
    code, out, err = sweep(capsys, world, *argv, "--format", "json")
    assert out.strip(), err
    return code, json.loads(out)


def tracked_state(world: Path) -> dict[str, str]:
    """Text of distro.yaml and every recipe, to prove that nothing was written."""
    files = [world / "distro.yaml", *sorted((world / "recipes").glob("*/recipe.yaml"))]
    return {p.relative_to(world).as_posix(): p.read_text() for p in files}


def changed_lines(before: str, after: str) -> list[tuple[int, str, str]]:
    """(line number, old, new) for each differing line; both texts must have the same line count."""
    a, b = before.split("\n"), after.split("\n")
    assert len(a) == len(b), "an edit must not add or remove lines"
    return [(i + 1, x, y) for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]


def releases_of(world: Path) -> list[str]:
    return list(load_config(world).config.pytorch.releases)


def load_config_text(text: str) -> list[str]:
    """pytorch.releases of a distro.yaml text."""
    return [str(r) for r in yaml.safe_load(text)["pytorch"]["releases"]]


def add_recipe(world: Path, name: str, text: str) -> None:
    folder = world / "recipes" / name
    (folder / "src" / name).mkdir(parents=True)
    (folder / "src" / name / "__init__.py").write_text("def draw(timeline):\n    return list(timeline)\n")
    (folder / "src" / "LICENSE").write_text("MIT (sandbox stand-in)\n")
    (folder / "recipe.yaml").write_text(text)


def commit_all(world: Path, message: str) -> None:
    repo = git.Repo(world)
    repo.git.add("-A")
    repo.index.commit(message)


def published_world(tmp_path_factory: pytest.TempPathFactory, sandbox_template: Path, release: str) -> Path:
    """A sandbox world whose upstream also holds stand-in ``release`` (built once per test run)."""
    from conda_distro.sandbox import PublishOptions, publish_release

    shared = _shared(tmp_path_factory)
    path = shared / f"sweep-world-{release}"
    with FileLock(str(shared / f"sweep-world-{release}.lock")):
        if not (path / ".published").is_file():
            shutil.rmtree(path, ignore_errors=True)
            copy_world(sandbox_template, path)
            publish_release(PublishOptions(world=path, version=release))
            (path / ".git" / "info" / "exclude").write_text(".published\n")
            (path / ".published").write_text(release)
    return path


@pytest.fixture(scope="session")
def world27_template(tmp_path_factory, sandbox_template) -> Path:
    return published_world(tmp_path_factory, sandbox_template, "2.7.0")


@pytest.fixture()
def world27(world27_template: Path, tmp_path: Path) -> Path:
    return copy_world(world27_template, tmp_path / "w27")


# ---------------------------------------------------------------------------------------------
# end to end: a new minor release (builds and tests against it)


@pytest.mark.slow
def test_sweep_new_minor_release_commits_one_package_per_commit(world27: Path, capsys):
    add_recipe(world27, "hookviz", HOOKVIZ)
    commit_all(world27, "Add hookviz (depends on hookprofiler)")
    repo = git.Repo(world27)
    base = repo.head.commit
    before = tracked_state(world27)

    code, doc = sweep_json(capsys, world27, "--pytorch", "2.7.0", "--commit")

    assert code == 0  # the sweep ran: failures are statuses in the report, `ok` says so
    assert doc["release"] == "2.7.0" and doc["ok"] is False
    status = {p["name"]: p["status"] for p in doc["packages"]}
    assert status == {**{n: "bumped" for n in BUMPED}, "visionkit": "needs-new-version", "hookprofiler": "failed",
                      "fastquant": "failed", "quantserve": "awaiting-parents", "hookviz": "awaiting-parents"}
    pkgs = {p["name"]: p for p in doc["packages"]}
    # dependency order: every package comes after the distribution packages it depends on
    order = [p["name"] for p in doc["packages"]]
    assert order.index("tensorutils") < order.index("layerkit") < order.index("trainloop")
    assert order.index("metrickit") < order.index("visionmetrics") < order.index("evalsuite")
    assert order.index("hookprofiler") < order.index("hookviz")

    # bumped: pin widened to the next minor, build number + 1, tested against the new release only
    for name in BUMPED:
        p = pkgs[name]
        assert p["old_pin"] == "pytorch >=2.4,<2.7" and p["new_pin"] == "pytorch >=2.4,<2.8", name
        assert (p["old_build"], p["new_build"]) == (0, 1) and p["applied"] is True
        assert sorted((t["pytorch"], t["variant"], t["status"]) for t in p["tests"]) == \
            [("2.7.0", "cpu", "passed"), ("2.7.0", "cuda", "passed")], name
    # failures: named reason, the failing part of the log, the maintainers for the ping
    hp = pkgs["hookprofiler"]
    assert hp["applied"] is False and hp["maintainers"] == ["ivan-petrov"]
    assert hp["reason"].startswith("test failed on pytorch 2.7.0")
    assert "AttributeError: module 'torch' has no attribute 'legacy_autograd_hook'" in hp["log"]
    assert hp["log"].startswith("Traceback")
    assert "AssertionError" in pkgs["fastquant"]["log"]
    assert pkgs["quantserve"]["reason"] == "waits for fastquant"
    # hookprofiler's only dependent in the graph depends on pytorch through it alone: it waits too
    graph = RecipeGraph.from_recipes(load_distribution(world27).recipes)
    assert graph.dependents("hookprofiler") == {"hookviz"} and graph.dependents("fastquant") == {"quantserve"}
    assert pkgs["hookviz"]["reason"] == "waits for hookprofiler"
    assert pkgs["hookviz"]["pytorch_dependency"] == "indirect" and pkgs["hookviz"]["old_pin"] is None
    assert "needs the upstream release made for pytorch 2.7" in pkgs["visionkit"]["reason"]

    # the sweep returned to the branch it started from: the work tree is as it was, the edits are on the branch
    assert repo.active_branch.name == "main" and doc["start"] == "main"
    assert tracked_state(world27) == before and not repo.is_dirty()
    on_branch = lambda rel: repo.git.show(f"sweep/pytorch-2.7.0:{rel}") + "\n"  # noqa: E731
    # files: distro.yaml lists the release, only its releases line changed
    assert load_config_text(on_branch("distro.yaml")) == ["2.4.1", "2.5.1", "2.6.0", "2.7.0"]
    [(_, old, new)] = changed_lines(before["distro.yaml"], on_branch("distro.yaml"))
    assert old == '  releases: ["2.4.1", "2.5.1", "2.6.0"]   # oldest first; each has a cpu and a cuda stand-in upstream'
    assert new == '  releases: ["2.4.1", "2.5.1", "2.6.0", "2.7.0"]   # oldest first; each has a cpu and a cuda stand-in upstream'
    for name in BUMPED:  # exactly the pin line and the build-number line
        rel = f"recipes/{name}/recipe.yaml"
        diff = changed_lines(before[rel], on_branch(rel))
        assert [(o, n) for _, o, n in diff] == [("  number: 0", "  number: 1"),
                                                ("    - pytorch >=2.4,<2.7", "    - pytorch >=2.4,<2.8")], name
    for name in ("hookprofiler", "fastquant", "quantserve", "visionkit", "hookviz"):  # reverted / never edited
        rel = f"recipes/{name}/recipe.yaml"
        assert on_branch(rel) == before[rel], name

    # git: branch sweep/pytorch-2.7.0, one commit for distro.yaml, then one per bumped package
    assert doc["branch"] == "sweep/pytorch-2.7.0"
    commits = list(reversed(list(repo.iter_commits(f"{base.hexsha}..sweep/pytorch-2.7.0"))))
    assert [c.hexsha for c in commits] == [c["sha"] for c in doc["commits"]]
    assert commits[0].parents[0] == base
    assert list(commits[0].stats.files) == ["distro.yaml"]
    assert commits[0].message.startswith("Add pytorch 2.7.0")
    per_package = commits[1:]
    assert [c["package"] for c in doc["commits"][1:]] == [n for n in order if n in BUMPED]
    for c, name in zip(per_package, (n for n in order if n in BUMPED), strict=True):
        assert list(c.stats.files) == [f"recipes/{name}/recipe.yaml"], name
        assert c.stats.files[f"recipes/{name}/recipe.yaml"]["lines"] == 4  # 2 lines out, 2 in
        assert c.message.startswith(f"{name}: admit pytorch 2.7 (pytorch >=2.4,<2.7 -> pytorch >=2.4,<2.8, build 1)")
        assert c.author.name == "conda-distro bot"
    assert repo.git.show(f"{commits[-1].hexsha}:recipes/hookprofiler/recipe.yaml") + "\n" == \
        before["recipes/hookprofiler/recipe.yaml"]
    # one branch per bumped package (one pull request each): the release commit, then that package's commit
    for name in BUMPED:
        pr = doc["pull_requests"][name]
        assert pr["branch"] == f"sweep/pytorch-2.7.0-{name}"
        c = repo.commit(pr["branch"])
        assert c.hexsha == pr["sha"] and c.parents[0] == commits[0] and list(c.stats.files) == [f"recipes/{name}/recipe.yaml"]
        assert repo.git.show(f"{pr['branch']}:recipes/{name}/recipe.yaml") + "\n" == on_branch(f"recipes/{name}/recipe.yaml")
    assert doc["summary"] == {"bumped": 7, "needs-new-version": 1, "failed": 2, "awaiting-parents": 2}
    assert any("back on main" in step for step in doc["next_steps"])

    # reports: one PR body per bumped package mentioning its maintainers; the tracking issue lists all
    assert set(doc["pull_requests"]) == BUMPED
    for name in BUMPED:
        body = doc["pull_requests"][name]["body"]
        for m in pkgs[name]["maintainers"]:
            assert f"@{m}" in body, (name, m)
        assert "`pytorch >=2.4,<2.7` → `pytorch >=2.4,<2.8`" in body and "| 2.7.0 | cpu | passed |" in body
    issue = doc["tracking_issue"]
    for name, st in status.items():
        assert re.search(rf"^\| {name} \| {st} \|", issue, re.M), name
    assert re.search(r"^\| hookprofiler \| failed \| .*reverted.* \| ivan-petrov \|", issue, re.M)
    # a checklist of the per-package pull requests, and the maintainers to ping, each once
    for name in BUMPED:
        assert f"- [ ] `{name}`: branch `sweep/pytorch-2.7.0-{name}`" in issue
    assert "- [ ] `visionkit` (needs-new-version): @hwang-cv @conda-distro/core: publish the release" in issue
    assert "- [ ] `hookprofiler` (failed): @ivan-petrov: fix the package" in issue
    assert issue.count("@ivan-petrov") == 1 and "**Summary:** 7 bumped, 1 needs-new-version, 2 failed, 2 awaiting-parents." in issue
    assert "legacy_autograd_hook" in issue  # the failing log excerpt
    # the document is kept for `report unmaintained` (open statuses are evidence)
    assert doc["report_file"] == "build/sweep/pytorch-2.7.0.json"
    saved = json.loads((world27 / doc["report_file"]).read_text())
    assert {p["name"]: p["status"] for p in saved["packages"]} == status


@pytest.mark.slow
def test_sweep_bugfix_release_changes_no_recipe(sandbox_world: Path, capsys):
    from conda_distro.sandbox import PublishOptions, publish_release

    publish_release(PublishOptions(world=sandbox_world, version="2.6.1"))
    repo = git.Repo(sandbox_world)
    base = repo.head.commit
    before = tracked_state(sandbox_world)

    code, doc = sweep_json(capsys, sandbox_world, "--pytorch", "2.6.1", "--commit")

    assert code == 0 and doc["ok"] is True
    assert {p["name"]: p["status"] for p in doc["packages"]} == {n: "unchanged" for n in PYTORCH_DEPENDENT}
    assert all(p["old_pin"] == p["new_pin"] and p["old_build"] == p["new_build"] for p in doc["packages"])
    assert "a bugfix release changes nothing" in next(p for p in doc["packages"] if p["name"] == "visionkit")["reason"]
    assert tracked_state(sandbox_world) == before and repo.active_branch.name == "main"  # back where it started
    branch_distro = repo.git.show("sweep/pytorch-2.6.1:distro.yaml") + "\n"
    assert load_config_text(branch_distro) == ["2.4.1", "2.5.1", "2.6.0", "2.6.1"]
    assert len(changed_lines(before["distro.yaml"], branch_distro)) == 1
    assert not (sandbox_world / "build" / "channels").exists()  # nothing needed a build
    assert sorted(p.name for p in (sandbox_world / "build").iterdir()) == ["locks", "sweep"]  # the repository's lock
    assert [p.name for p in (sandbox_world / "build" / "sweep").iterdir()] == ["pytorch-2.6.1.json"]  # no journal left
    assert doc["pull_requests"] == {}
    commits = list(repo.iter_commits(f"{base.hexsha}..sweep/pytorch-2.6.1"))
    assert len(commits) == 1 and list(commits[0].stats.files) == ["distro.yaml"]


# ---------------------------------------------------------------------------------------------
# end to end without builds


@pytest.mark.slow
def test_no_build_sweep_edits_and_parks_dependents_of_lockstep_package(world27: Path, capsys):
    visionextra = HOOKVIZ.replace("hookviz", "visionextra").replace(
        "    - hookprofiler >=0.7,<0.8", "    - pytorch >=2.5,<2.6\n    - visionkit >=0.20,<0.21")
    add_recipe(world27, "visionextra", visionextra)
    commit_all(world27, "Add visionextra (depends on the lockstep visionkit)")
    before = tracked_state(world27)

    code, doc = sweep_json(capsys, world27, "--pytorch", "2.7.0", "--no-build")

    assert code == 0
    pkgs = {p["name"]: p for p in doc["packages"]}
    assert pkgs["visionkit"]["status"] == "needs-new-version"
    assert pkgs["visionextra"]["status"] == "awaiting-parents" and pkgs["visionextra"]["reason"] == "waits for visionkit"
    assert pkgs["visionextra"]["new_pin"] == "pytorch >=2.5,<2.8" and pkgs["visionextra"]["applied"] is False
    # without builds nothing can fail: all the others keep their edits
    assert {n for n, p in pkgs.items() if p["status"] == "bumped"} == PYTORCH_DEPENDENT - {"visionkit"}
    assert (world27 / "recipes/visionextra/recipe.yaml").read_text() == before["recipes/visionextra/recipe.yaml"]
    for name in PYTORCH_DEPENDENT - {"visionkit"}:
        rel = f"recipes/{name}/recipe.yaml"
        assert [n for _, _, n in changed_lines(before[rel], (world27 / rel).read_text())] == \
            ["  number: 1", "    - pytorch >=2.4,<2.8"], name
    assert not (world27 / "build" / "channels").exists()
    assert pkgs["tensorutils"]["tests"] == []


@pytest.mark.slow
def test_uneditable_pin_fails_that_package_only(world27: Path, capsys):
    rel = "recipes/fastquant/recipe.yaml"
    path = world27 / rel
    path.write_text(path.read_text().replace("    - pytorch >=2.4,<2.7", "    - pytorch >=2.4,<2.6|2.6.*"))
    commit_all(world27, "fastquant: an odd pin")
    before = tracked_state(world27)

    code, doc = sweep_json(capsys, world27, "--pytorch", "2.7.0", "--no-build")

    pkgs = {p["name"]: p for p in doc["packages"]}
    assert code == 0 and doc["ok"] is False
    assert pkgs["fastquant"]["status"] == "failed"
    assert "cannot be edited automatically" in pkgs["fastquant"]["reason"] and rel in pkgs["fastquant"]["reason"]
    assert pkgs["quantserve"]["status"] == "awaiting-parents"
    assert path.read_text() == before[rel]
    assert pkgs["tensorutils"]["status"] == "bumped"


# ---------------------------------------------------------------------------------------------
# refusals and no-ops: nothing written


@pytest.mark.slow
def test_supported_release_with_nothing_to_admit_is_refused_naming_the_report(sandbox_world: Path, capsys):
    """2.6.0 is supported and only the lockstep visionkit leaves it out (it needs a new version): a sweep of
    it has nothing to admit. Exit 2 naming the read-only `sweep report`, nothing written, not even a lock."""
    before = tracked_state(sandbox_world)
    for argv in (("--commit",), (), ("--dry-run",)):
        code, out, err = sweep(capsys, sandbox_world, "--pytorch", "2.6.0", *argv)
        assert code == 2 and out == "", argv
        assert "pytorch 2.6.0 is a supported release already and no package is ready to be admitted" in err
        assert "(needs-new-version: visionkit)" in err and "`conda-distro sweep report --pytorch 2.6.0`" in err
    assert tracked_state(sandbox_world) == before and not (sandbox_world / "build").exists()
    assert [h.name for h in git.Repo(sandbox_world).heads] == ["main"]
    code, out, _ = run_cli(capsys, "sweep", "report", "--pytorch", "2.6.0", "--root", str(sandbox_world), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["state"] == "supported" and doc["next_command"] is None
    assert [(w["name"], w["status"]) for w in doc["waiting"]] == [("visionkit", "needs-new-version")]
    assert not (sandbox_world / "build").exists()


@pytest.mark.slow
@pytest.mark.parametrize("version", ["2.7", "abc", "2.7.0.1", "v2.7.0"])
def test_bad_version_is_refused(sandbox_world: Path, capsys, version):
    before = tracked_state(sandbox_world)
    code, out, err = sweep(capsys, sandbox_world, "--pytorch", version, "--commit")
    assert code == 2
    assert "--pytorch" in err and "is not a release version" in err
    assert tracked_state(sandbox_world) == before
    assert [h.name for h in git.Repo(sandbox_world).heads] == ["main"]


@pytest.mark.slow
def test_unpublished_release_is_refused(sandbox_world: Path, capsys):
    before = tracked_state(sandbox_world)
    code, _, err = sweep(capsys, sandbox_world, "--pytorch", "2.8.0")
    assert code == 2
    assert "pytorch 2.8.0 is not in the upstream channels" in err
    assert tracked_state(sandbox_world) == before


@pytest.mark.slow
def test_dry_run_refuses_an_unpublished_release(sandbox_world: Path, capsys):
    before = tracked_state(sandbox_world)
    code, out, err = sweep(capsys, sandbox_world, "--pytorch", "2.8.0", "--dry-run")
    assert code == 2 and out == ""
    assert "pytorch 2.8.0 is not in the upstream channels" in err and "sweep once the release is published" in err
    assert tracked_state(sandbox_world) == before and not (sandbox_world / "build").exists()


@pytest.mark.slow
def test_dry_run_reports_as_a_run_would_marked_dry(world27: Path, capsys):
    before = tracked_state(world27)
    code, doc = sweep_json(capsys, world27, "--pytorch", "2.7.0", "--dry-run")
    assert code == 0 and doc["dry_run"] is True
    assert not any(p["applied"] for p in doc["packages"])  # nothing was edited
    assert doc["summary"] == {"bumped": 10, "needs-new-version": 1}
    assert set(doc["pull_requests"]) == set(NO_BUILD_BUMPED)
    assert doc["next_steps"][0].startswith("run `conda-distro sweep --pytorch 2.7.0` to edit, build and test")
    code, md, _ = sweep(capsys, world27, "--pytorch", "2.7.0", "--dry-run", "--format", "markdown")
    assert code == 0
    assert md.startswith("# PyTorch 2.7.0 release sweep (dry run)\n\n> **Dry run**: the plan only;")
    assert "- [ ] `tensorutils`: planned" in md and "| tensorutils | bumped | `pytorch >=2.4,<2.7` → `pytorch >=2.4,<2.8` |" in md
    assert md.count("## PR: ") == 10 and md.count("> **Dry run**: the planned edit") == 10
    assert "- [ ] `visionkit` (needs-new-version): @hwang-cv @conda-distro/core:" in md
    assert len(md.splitlines()) > 20  # the whole report, not one line
    assert tracked_state(world27) == before and not (world27 / "build").exists()


@pytest.mark.slow
def test_dry_run_prints_the_plan_and_writes_nothing(world27: Path, capsys):
    sandbox_world = world27
    before = tracked_state(sandbox_world)
    code, out, _ = sweep(capsys, sandbox_world, "--pytorch", "2.7.0", "--dry-run", "--commit")
    assert code == 0
    assert out.startswith("dry run: nothing edited, built or committed")
    assert re.search(r"^\s+bumped\s+tensorutils\s+pytorch >=2.4,<2.7 -> pytorch >=2.4,<2.8  \[widen the pins\]$", out, re.M)
    assert re.search(r"^\s+needs-new-version\s+visionkit\s+pytorch >=2.5,<2.6", out, re.M)
    assert len(re.findall(r"^\s+bumped\s", out, re.M)) == 10
    assert tracked_state(sandbox_world) == before
    assert [h.name for h in git.Repo(sandbox_world).heads] == ["main"]
    assert not (sandbox_world / "build").exists()


@pytest.mark.slow
def test_commit_outside_a_git_checkout_is_bad_input(world27: Path, capsys):
    """`sweep --commit` where the distribution is no git checkout: exit 2 naming --commit, nothing written."""
    shutil.rmtree(world27 / ".git")
    before = tracked_state(world27)
    code, _, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--commit")
    assert code == 2 and "Traceback" not in err
    assert "not inside a git repository" in err and "--commit" in err and "run the sweep in a git checkout" in err
    assert tracked_state(world27) == before
    assert not (world27 / "build" / "sweep" / "pytorch-2.7.0.json").exists()


@pytest.mark.slow
def test_commit_refuses_dirty_recipes(world27: Path, capsys):
    path = world27 / "recipes" / "layerkit" / "recipe.yaml"
    path.write_text(path.read_text() + "# local change\n")
    before = tracked_state(world27)
    code, _, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--commit")
    assert code == 2
    assert "uncommitted changes" in err
    assert tracked_state(world27) == before
    assert [h.name for h in git.Repo(world27).heads] == ["main"]


@pytest.mark.slow
def test_commit_refuses_existing_branch_before_writing(world27: Path, capsys):
    repo = git.Repo(world27)
    repo.create_head("sweep/pytorch-2.7.0")
    before = tracked_state(world27)
    code, _, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--commit", "--no-build")
    assert code == 2 and "pytorch 2.7.0 was swept already: its branches (sweep/pytorch-2.7.0)" in err
    assert "conda-distro sweep report --pytorch 2.7.0" in err and "git branch -D sweep/pytorch-2.7.0" in err
    assert tracked_state(world27) == before and not (world27 / "build").exists()  # refused before any lock


@pytest.mark.slow
def test_commit_refuses_staged_changes(world27: Path, capsys):
    (world27 / "README.md").write_text("staged\n")
    git.Repo(world27).index.add(["README.md"])
    before = tracked_state(world27)
    code, _, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--commit", "--no-build")
    assert code == 2 and "staged" in err
    assert tracked_state(world27) == before


# ---------------------------------------------------------------------------------------------
# the plan and the edits on hand-written recipes (fast)


RECIPE = """\
# a recipe with the shapes people write
context:
  name:    tricky
  version: "1.0.0"
  torch_max: "2.7"   # upper bound of the second pin
  build_number: 3

package:
  name: ${{ name }}
  version: ${{ version }}

build:
  number: ${{ build_number }}   # bumped by hand on rebuilds
  noarch: python

requirements:
  host:
      - python >=3.10
      - "pytorch >=2.4,<2.7"   # host pin, quoted
  run:
    - python >=3.10
    - if: linux
      then: pytorch >=2.4,<2.7
    - pytorch >=2.4,<${{ torch_max }}
    - numpy >=1.24,<3    
    - 'scipy >=1.10,<2'

about:
  summary: Tricky   # a comment
  license: MIT

extra:
  recipe-maintainers: [octocat]
"""


def _recipe(text: str, name: str = "tricky"):
    """Rendered as the distribution does: by rattler-build, with the repository's variants.yaml
    (conda-forge's values: python, cuda_compiler_version incl. "None", ...)."""
    from conda_distro.recipe.render import RenderSettings
    from conda_distro.recipe.variants import read_variant_files

    variants, zips = read_variant_files([Path(__file__).parent.parent / "variants.yaml"])
    return parse_recipe(text, Path(f"/dist/recipes/{name}/recipe.yaml"), RenderSettings.make(variants, zips))


@pytest.mark.parametrize("version, expected", [
    (">=2.4,<2.7", ">=2.4,<2.8"),
    (">=2.4,<2.7.0a0", ">=2.4,<2.8.0a0"),
    (">=2.4,<=2.6", ">=2.4,<2.8"),
    ("2.5.*", ">=2.5,<2.8"),
    ("~=2.4.0", ">=2.4.0,<2.8"),
    (">=${{ lo }},<2.7", ">=${{ lo }},<2.8"),
])
def test_widen(version, expected):
    assert widen(version, "2.7.0") == expected


def test_line_edit_changes_only_pin_and_build_number_lines():
    recipe = _recipe(RECIPE)
    dec = decide(recipe, "pytorch", "2.7.0")
    assert dec.status == "bumped" and (dec.old_build, dec.new_build) == (3, 4)
    assert dec.old_pin == "pytorch >=2.4,<2.7" and dec.new_pin == "pytorch >=2.4,<2.8"
    assert [e.line for e in dec.edits] == [19, 23, 24]  # identical host and run pins are both edited
    out = edited_text(recipe, dec, "pytorch", "2.7.0")
    assert changed_lines(RECIPE, out) == [
        (5, '  torch_max: "2.7"   # upper bound of the second pin', '  torch_max: "2.8"   # upper bound of the second pin'),
        (6, "  build_number: 3", "  build_number: 4"),
        (19, '      - "pytorch >=2.4,<2.7"   # host pin, quoted', '      - "pytorch >=2.4,<2.8"   # host pin, quoted'),
        (23, "      then: pytorch >=2.4,<2.7", "      then: pytorch >=2.4,<2.8"),
    ]
    edited = _recipe(out)
    assert edited.build_number == 4
    assert [d.raw for d in edited.deps("host", "run") if d.name == "pytorch"] == ["pytorch >=2.4,<2.8"] * 3


def test_line_edit_keeps_crlf_line_endings():
    text = RECIPE.replace("\n", "\r\n")
    recipe = _recipe(text)
    out = edited_text(recipe, decide(recipe, "pytorch", "2.7.0"), "pytorch", "2.7.0")
    assert out.count("\r\n") == text.count("\r\n")
    assert "  build_number: 4\r\n" in out and '"pytorch >=2.4,<2.8"   # host pin, quoted\r\n' in out


def test_literal_build_number_and_inline_comment():
    text = RECIPE.replace("number: ${{ build_number }}   # bumped", "number: 7   # bumped")
    recipe = _recipe(text)
    out = edited_text(recipe, decide(recipe, "pytorch", "2.7.0"), "pytorch", "2.7.0")
    assert (13, "  number: 7   # bumped by hand on rebuilds", "  number: 8   # bumped by hand on rebuilds") in \
        changed_lines(text, out)
    assert "  build_number: 3" in out  # the unused context variable is left alone


def test_uneditable_pin_raises_edit_error():
    text = RECIPE.replace('"pytorch >=2.4,<2.7"', '"pytorch >=2.4,<2.6|2.6.*"')
    recipe = _recipe(text)
    dec = decide(recipe, "pytorch", "2.7.0")
    with pytest.raises(EditError, match="does not admit pytorch 2.7.0"):
        edited_text(recipe, dec, "pytorch", "2.7.0")


def test_decide_statuses():
    def pin(spec: str, lockstep: bool = False) -> str:
        extra = "\n  pytorch-lockstep: true" if lockstep else ""
        return RECIPE.replace('"pytorch >=2.4,<2.7"', f'"pytorch {spec}"').replace(
            "then: pytorch >=2.4,<2.7", f"then: pytorch {spec}").replace("<${{ torch_max }}", "<3") + extra + "\n"

    assert decide(_recipe(pin(">=2.4,<3")), "pytorch", "2.7.0").status == "unchanged"
    assert decide(_recipe(pin(">=2.5,<2.6", lockstep=True)), "pytorch", "2.7.0").status == "needs-new-version"
    # a bugfix release of a minor the package did not admit before either changes nothing for it
    assert decide(_recipe(pin(">=2.5,<2.6", lockstep=True)), "pytorch", "2.6.1", ("2.5.1", "2.6.0")).status == "unchanged"
    assert decide(_recipe(pin(">=2.5,<2.6", lockstep=True)), "pytorch", "2.6.1", ("2.5.1",)).status == "needs-new-version"
    no_torch = RECIPE.replace('      - "pytorch >=2.4,<2.7"   # host pin, quoted\n', "").replace(
        "    - if: linux\n      then: pytorch >=2.4,<2.7\n    - pytorch >=2.4,<${{ torch_max }}\n", "")
    assert decide(_recipe(no_torch), "pytorch", "2.7.0") is None


def test_plan_includes_packages_that_depend_on_pytorch_only_through_the_distribution(make_distro, clean_recipe):
    root = make_distro({
        "base": clean_recipe("base"),
        "middle": clean_recipe("middle", pytorch=None, run=["base >=1.2,<2"]),
        "top": clean_recipe("top", pytorch=None, run=["middle >=1.2,<2"]),
        "unrelated": clean_recipe("unrelated", pytorch=None),
    })
    plan = plan_sweep(load_distribution(root), "2.7.0")
    assert [(d.name, d.status, d.depends_on_pytorch) for d in plan.decisions] == [
        ("base", "bumped", True), ("middle", "unchanged", False), ("top", "unchanged", False)]


def test_what_is_built_and_tested(make_distro, clean_recipe):
    root = make_distro({
        "a": clean_recipe("a"),  # bumped
        "b": clean_recipe("b", pytorch=None, run=["a >=1.2,<2"]),  # through a
        "wide": clean_recipe("wide", pytorch="pytorch >=2.4,<3"),  # already admits
        "wide-dep": clean_recipe("wide-dep", pytorch="pytorch >=2.4,<3", run=["wide >=1.2,<2"]),
    })
    dist = load_distribution(root)
    graph = RecipeGraph.from_recipes(dist.recipes)
    plan = plan_sweep(dist, "2.7.0")
    assert {d.name: d.status for d in plan.decisions} == {"a": "bumped", "b": "unchanged", "wide": "unchanged",
                                                          "wide-dep": "unchanged"}
    assert _to_test(plan, graph, new_minor=True) == ["a", "b", "wide", "wide-dep"]  # never tested with 2.7
    assert _to_test(plan, graph, new_minor=False) == ["a", "b"]  # a bugfix release: only what changed
    outcomes = [Outcome(d, "failed" if d.name == "a" else d.status) for d in plan.decisions]  # (the plan is frozen)
    assert _to_test(outcomes, graph, new_minor=False) == []


def _test_pinned(name: str, pin: str) -> str:
    """A recipe with no pytorch requirement whose script test installs ``pin`` (einops' shape)."""
    from support.repos import clean_recipe_text

    script_test = (f"  - requirements:\n      run:\n        - {pin}   # the torch backend is tested\n"
                   "    script:\n      interpreter: python\n      content: import torch\n")
    text = clean_recipe_text(name, pytorch=None)
    return text.replace("\nabout:", f"{script_test}\nabout:", 1)


def test_sweep_widens_a_pytorch_pin_written_only_in_a_test(make_distro):
    text = _test_pinned("testonly", "pytorch >=2.4,<2.7")
    root = make_distro({"testonly": text, "other": _test_pinned("other", "pytorch >=2.4,<3")})
    dist = load_distribution(root)
    recipe = dist.recipes["testonly"]
    line = text.splitlines().index("        - pytorch >=2.4,<2.7   # the torch backend is tested") + 1
    assert [(d.section, d.raw, d.line) for d in pytorch_pins(recipe, "pytorch")] == [("tests.run", "pytorch >=2.4,<2.7", line)]
    assert own_admitted(recipe, "pytorch", ["2.6.0", "2.7.0"]) == {"2.6.0"}  # (its test cannot run on 2.7)
    plan = plan_sweep(dist, "2.7.0")
    by_name = {d.name: d for d in plan.decisions}
    dec = by_name["testonly"]
    assert (dec.status, dec.action, dec.old_pin, dec.new_pin) == ("bumped", WIDEN, "pytorch >=2.4,<2.7", "pytorch >=2.4,<2.8")
    assert [(e.line, e.old, e.new) for e in dec.edits] == [(line, "pytorch >=2.4,<2.7", "pytorch >=2.4,<2.8")]
    # a test that admits the release already: its package depends on pytorch and is tested with the new minor
    assert (by_name["other"].status, by_name["other"].action) == ("unchanged", TEST)
    assert _to_test(plan, RecipeGraph.from_recipes(dist.recipes), new_minor=True) == ["other", "testonly"]
    out = edited_text(recipe, dec, "pytorch", "2.7.0")  # the sweep's edit: that line and the build number
    assert changed_lines(text, out) == [
        (text.splitlines().index("  number: 0") + 1, "  number: 0", "  number: 1"),
        (line, "        - pytorch >=2.4,<2.7   # the torch backend is tested",
         "        - pytorch >=2.4,<2.8   # the torch backend is tested")]
    edited = parse_recipe(out, recipe.path, recipe.settings)  # (rendered by rattler-build again)
    assert edited.test_requirements() == ["pytorch >=2.4,<2.8"]
    assert own_admitted(edited, "pytorch", ["2.6.0", "2.7.0"]) == {"2.6.0", "2.7.0"}


def test_round_trip_fallback_widens_a_test_pin_too():
    """The ruamel fallback (for shapes a line edit cannot handle) finds a test's pin as well."""
    from conda_distro.sweep.edit import _roundtrip_edit, _verify

    text = _test_pinned("testonly", "pytorch >=2.4,<2.7")
    recipe = _recipe(text, "testonly")
    dec = decide(recipe, "pytorch", "2.7.0")
    out = _roundtrip_edit(recipe, dec)
    assert "        - pytorch >=2.4,<2.8   # the torch backend is tested\n" in out and "  number: 1\n" in out
    assert _verify(recipe, out, dec, "pytorch", "2.7.0").test_requirements() == ["pytorch >=2.4,<2.8"]


def _conditional_test_pinned(name: str, pin: str) -> str:
    """A recipe with no pytorch requirement whose tests install ``pin`` in both branches of an ``if:``
    item: a script test on linux, a list of one on the other platforms."""
    from support.repos import clean_recipe_text

    tests = (f"  - if: linux\n    then:\n      requirements:\n        run:\n          - {pin}\n"
             "      script:\n        interpreter: python\n        content: import torch\n"
             f"    else:\n      - requirements:\n          run: [\"{pin}\"]\n        script: [\"true\"]\n")
    text = clean_recipe_text(name, pytorch=None)
    return text.replace("\nabout:", f"{tests}\nabout:", 1)


def test_sweep_widens_a_test_pin_inside_an_if_item_of_tests(make_distro):
    """A test written inside an ``if:`` item of ``tests:`` (both branches) is read like any other: its
    pytorch pins are the recipe's pins, and the sweep widens each (the line edit and the ruamel fallback)."""
    from conda_distro.sweep.edit import _roundtrip_edit, _verify

    text = _conditional_test_pinned("condtest", "pytorch >=2.4,<2.7")
    root = make_distro({"condtest": text})
    dist = load_distribution(root)
    recipe = dist.recipes["condtest"]
    lines = [i + 1 for i, ln in enumerate(text.splitlines()) if "pytorch >=2.4,<2.7" in ln]
    assert len(lines) == 2
    assert [(d.section, d.raw, d.line) for d in pytorch_pins(recipe, "pytorch")] == \
        [("tests.run", "pytorch >=2.4,<2.7", ln) for ln in lines]
    assert own_admitted(recipe, "pytorch", ["2.6.0", "2.7.0"]) == {"2.6.0"}
    [dec] = plan_sweep(dist, "2.7.0").decisions
    assert (dec.status, dec.action, dec.new_pin) == ("bumped", WIDEN, "pytorch >=2.4,<2.8")
    out = edited_text(recipe, dec, "pytorch", "2.7.0")
    assert [n for n, _, _ in changed_lines(text, out)] == sorted([recipe.lines["build.number"], *lines])
    assert "<2.7" not in out
    fallback = _roundtrip_edit(recipe, dec)  # (the shapes a line edit cannot handle: it finds both too)
    assert "<2.7" not in fallback and fallback.count("pytorch >=2.4,<2.8") == 2
    assert own_admitted(_verify(recipe, fallback, dec, "pytorch", "2.7.0"), "pytorch", ["2.6.0", "2.7.0"]) == {"2.6.0", "2.7.0"}


def test_sweep_widens_a_test_pin_written_with_a_context_variable(make_distro):
    """A test's pin written with an expression (``pytorch >=2.4,<${{ torch_hi }}``) is read as rattler-build
    renders it, at its line; the sweep edits the context variable its bound comes from. One in a branch
    that does not render here is not read, nor taken for a literal pin that renders alike."""
    from conda_distro.sweep.edit import _verify

    text = _test_pinned("ctxtest", "pytorch >=2.4,<${{ torch_hi }}").replace("context:\n", 'context:\n  torch_hi: "2.7"\n', 1)
    hidden = _test_pinned("hidden", "pytorch >=2.4,<2.7").replace("context:\n", 'context:\n  torch_hi: "2.9"\n', 1).replace(
        "\nabout:", "  - if: win\n    then:\n      requirements:\n        run:\n          - pytorch >=2.4,<${{ torch_hi }}\n"
        "      script: [\"true\"]\n\nabout:", 1)
    root = make_distro({"ctxtest": text, "hidden": hidden})
    dist = load_distribution(root)
    recipe = dist.recipes["ctxtest"]
    line = next(i + 1 for i, ln in enumerate(text.splitlines()) if "<${{ torch_hi }}" in ln)
    assert [(d.section, d.raw, d.line) for d in pytorch_pins(recipe, "pytorch")] == [("tests.run", "pytorch >=2.4,<2.7", line)]
    assert own_admitted(recipe, "pytorch", ["2.6.0", "2.7.0"]) == {"2.6.0"}
    literal = next(i + 1 for i, ln in enumerate(hidden.splitlines()) if "pytorch >=2.4,<2.7" in ln)
    assert [(d.raw, d.line) for d in pytorch_pins(dist.recipes["hidden"], "pytorch")] == [("pytorch >=2.4,<2.7", literal)]
    by_name = {d.name: d for d in plan_sweep(dist, "2.7.0").decisions}
    dec = by_name["ctxtest"]
    assert (dec.status, dec.action, dec.new_pin) == ("bumped", WIDEN, "pytorch >=2.4,<2.8")
    out = edited_text(recipe, dec, "pytorch", "2.7.0")
    hi = text.splitlines().index('  torch_hi: "2.7"') + 1
    assert [(n, new) for n, _, new in changed_lines(text, out)] == sorted(
        [(hi, '  torch_hi: "2.8"'), (recipe.lines["build.number"], "  number: 1")])
    assert own_admitted(_verify(recipe, out, dec, "pytorch", "2.7.0"), "pytorch", ["2.6.0", "2.7.0"]) == {"2.6.0", "2.7.0"}
    warm = load_distribution(root).recipes["ctxtest"]  # (read back from the packed model cache)
    assert warm.data is None and [(d.raw, d.line) for d in pytorch_pins(warm, "pytorch")] == [("pytorch >=2.4,<2.7", line)]


def test_a_bare_pytorch_in_a_test_counts_as_depending_on_pytorch(make_distro):
    root = make_distro({"bare": _test_pinned("bare", "pytorch"), "none": _test_pinned("none", "numpy >=1.24,<3")})
    plan = plan_sweep(load_distribution(root), "2.7.0")
    assert [(d.name, d.status, d.depends_on_pytorch, d.edits) for d in plan.decisions] == [("bare", "unchanged", True, ())]


def test_einops_pinned_only_in_its_test_is_in_the_release_day_plan(make_distro):
    """The repository's einops recipe (no pytorch requirement; its script test installs pytorch) with its
    test pin one minor short of the release swept."""
    text = (Path(__file__).resolve().parents[1] / "recipes" / "einops" / "recipe.yaml").read_text()
    pins = [ln for ln in text.splitlines() if ln.strip().startswith("- pytorch >=")]
    assert len(pins) == 1 and pins[0].endswith("<2.16")
    text = text.replace(pins[0], pins[0].replace("<2.16", "<2.15"))
    root = make_distro({"einops": text}, {"pytorch": {"releases": ["2.13.0", "2.14.1"]}}, variants=True)
    dist = load_distribution(root)
    plan = plan_sweep(dist, "2.15.0")
    [dec] = plan.decisions
    line = text.splitlines().index(pins[0].replace("<2.16", "<2.15")) + 1
    assert (dec.name, dec.status, dec.new_pin) == ("einops", "bumped", "pytorch >=2.13,<2.16")
    assert [e.line for e in dec.edits] == [line]
    out = edited_text(dist.recipes["einops"], dec, "pytorch", "2.15.0")
    assert [n for n, _, _ in changed_lines(text, out)] == [dist.recipes["einops"].lines["build.number"], line]


def test_add_release_flow_list_keeps_the_line_layout(tmp_path):
    text = textwrap.dedent("""\
        name: d
        channels:
          upstream: [conda-forge]
          staging: build/staging
          main: build/main
        pytorch:
          name: pytorch
          releases: ['2.4.1', '2.6.0']     # oldest first
        platforms: [linux-64]
        """)
    (tmp_path / "distro.yaml").write_text(text)
    out = add_release_text(load_config(tmp_path), "2.5.1")
    assert changed_lines(text, out) == [(8, "  releases: ['2.4.1', '2.6.0']     # oldest first",
                                         "  releases: ['2.4.1', '2.5.1', '2.6.0']     # oldest first")]


def test_add_release_block_list_adds_one_line(tmp_path):
    text = textwrap.dedent("""\
        name: d
        channels:
          upstream: [conda-forge]
          staging: build/staging
          main: build/main
        pytorch:
          name: pytorch
          releases:
            - "2.4.1"   # first
            - "2.5.1"
          variants: [cpu]
        platforms: [linux-64]
        """)
    (tmp_path / "distro.yaml").write_text(text)
    out = add_release_text(load_config(tmp_path), "2.7.0")
    assert out.split("\n") == text.split("\n")[:10] + ['    - "2.7.0"'] + text.split("\n")[10:]
    assert yaml.safe_load(out)["pytorch"]["releases"] == ["2.4.1", "2.5.1", "2.7.0"]


# ---------------------------------------------------------------------------------------------
# sweep edits keep meaning: only the version part of a pytorch pin is widened; build
# strings, brackets and channels stay; every pin the release must satisfy is edited; the recipe's own
# outputs are never touched. Each edited text is also read and rendered by rattler-build itself.

CUDA_VARIANTS = ({"cuda_compiler_version": ["None"]}, {"cuda_compiler_version": ["12.8"]})


def sweep_edit(text: str, name: str, release: str = "2.11.0", supported=("2.9.1", "2.10.0")):
    recipe = _recipe(text, name)
    dec = decide(recipe, "pytorch", release, supported)
    assert dec is not None and dec.status == "bumped", dec
    return dec, edited_text(recipe, dec, "pytorch", release)


def rattler_build_requirements(text: str, variants: dict) -> list[dict]:
    """Requirements per output as rattler-build renders ``text`` with ``variants``."""
    from rattler_build import Stage0Recipe, VariantConfig

    with tempfile.TemporaryDirectory() as tmp:  # (from_yaml writes the text into a folder)
        return [{"name": v.recipe.package.name, **v.recipe.requirements.to_dict()}
                for v in Stage0Recipe.from_yaml(text, recipe_dir=tmp).render(VariantConfig(variants))]


CUDAOPS = """\
context:
  name: cudaops
  version: "0.4.0"

package:
  name: ${{ name }}
  version: ${{ version }}

build:
  number: 2   # bumped by hand

requirements:
  host:
    - python
    - if: cuda_compiler_version != "None"
      then: pytorch 2.10.* *cuda*   # the CUDA build only
      else: pytorch 2.10.* *cpu*
  run:
    - python
    - pytorch 2.10.* *cuda*
    - conda-forge::pytorch >=2.9,<2.11
    - pytorch >=2.9,<2.11 [build=*cuda*]
    - "pytorch [version='>=2.9,<2.11']"
    - numpy >=1.24,<3

about:
  license: MIT
"""


def test_sweep_edit_keeps_build_string_bracket_and_channel():
    dec, out = sweep_edit(CUDAOPS, "cudaops")
    assert changed_lines(CUDAOPS, out) == [
        (10, "  number: 2   # bumped by hand", "  number: 3   # bumped by hand"),
        (16, "      then: pytorch 2.10.* *cuda*   # the CUDA build only",
             "      then: pytorch >=2.10,<2.12 *cuda*   # the CUDA build only"),
        (17, "      else: pytorch 2.10.* *cpu*", "      else: pytorch >=2.10,<2.12 *cpu*"),
        (20, "    - pytorch 2.10.* *cuda*", "    - pytorch >=2.10,<2.12 *cuda*"),
        (21, "    - conda-forge::pytorch >=2.9,<2.11", "    - conda-forge::pytorch >=2.9,<2.12"),
        (22, "    - pytorch >=2.9,<2.11 [build=*cuda*]", "    - pytorch >=2.9,<2.12 [build=*cuda*]"),
        (23, "    - \"pytorch [version='>=2.9,<2.11']\"", "    - \"pytorch [version='>=2.9,<2.12']\""),
    ]
    assert dec.old_pin == "pytorch 2.10.* *cuda*" and dec.new_pin == "pytorch >=2.10,<2.12 *cuda*"
    cpu, cuda = (rattler_build_requirements(out, v)[0] for v in CUDA_VARIANTS)
    assert "pytorch >=2.10,<2.12 *cpu*" in cpu["host"] and "pytorch >=2.10,<2.12 *cuda*" in cuda["host"]
    assert cuda["run"] == ["python", "pytorch >=2.10,<2.12 *cuda*", "conda-forge::pytorch >=2.9,<2.12",
                           "pytorch >=2.9,<2.12 *cuda*", "pytorch >=2.9,<2.12", "numpy >=1.24,<3"]


SECTIONS_RECIPE = """\
context:
  version: "1.0.0"
  torch_max: "2.11"   # the upper bound of the cuda run pin

package:
  name: crossops
  version: ${{ version }}

build:
  number: 0

requirements:
  build:
    - if: build_platform != target_platform
      then:
        - pytorch >=2.9,<2.11   # cross-compilation: the build machine's pytorch
  host:
    - pytorch >=2.9,<2.11
  run:
    - pytorch >=2.9,<${{ torch_max }} *cuda*
  run_constraints:
    - pytorch >=2.9,<2.11
    - if: win
      then: pytorch >=2.9,<2.11

about:
  license: MIT
"""


def test_sweep_edit_covers_build_host_run_constraints_and_every_branch():
    text = SECTIONS_RECIPE
    dec, out = sweep_edit(text, "crossops")
    assert [(e.line, e.old) for e in dec.edits] == [(16, "pytorch >=2.9,<2.11"), (18, "pytorch >=2.9,<2.11"),
                                                    (20, "pytorch >=2.9,<2.11 *cuda*"), (22, "pytorch >=2.9,<2.11"),
                                                    (24, "pytorch >=2.9,<2.11")]
    assert changed_lines(text, out) == [
        (3, '  torch_max: "2.11"   # the upper bound of the cuda run pin',
            '  torch_max: "2.12"   # the upper bound of the cuda run pin'),
        (10, "  number: 0", "  number: 1"),
        (16, "        - pytorch >=2.9,<2.11   # cross-compilation: the build machine's pytorch",
             "        - pytorch >=2.9,<2.12   # cross-compilation: the build machine's pytorch"),
        (18, "    - pytorch >=2.9,<2.11", "    - pytorch >=2.9,<2.12"),
        (22, "    - pytorch >=2.9,<2.11", "    - pytorch >=2.9,<2.12"),
        (24, "      then: pytorch >=2.9,<2.11", "      then: pytorch >=2.9,<2.12"),
    ]
    (req,) = rattler_build_requirements(out, {})
    assert req["host"] == ["pytorch >=2.9,<2.12"] and req["run"] == ["pytorch >=2.9,<2.12 *cuda*"]
    assert req["run_constraints"] == ["pytorch >=2.9,<2.12"]
    # the cross-compilation branch, rendered for another build platform, is edited too
    from rattler_build import Stage0Recipe, VariantConfig

    with tempfile.TemporaryDirectory() as tmp:
        (osx,) = Stage0Recipe.from_yaml(out, recipe_dir=tmp).render(VariantConfig({}),
                                                                    render_config=_render_config("osx-arm64"))
    assert osx.recipe.requirements.to_dict()["build"] == ["pytorch >=2.9,<2.12"]


def _render_config(target: str):
    from rattler_build import PlatformConfig, RenderConfig

    return RenderConfig(platform=PlatformConfig(target_platform=target, build_platform="linux-64", host_platform=target))


OWN_OUTPUTS = """\
context:
  name: audiokit
  version: "0.5.0"

recipe:
  name: ${{ name }}-split
  version: ${{ version }}

build:
  number: 4

outputs:
  - package:
      name: ${{ name }}
    requirements:
      host:
        - pytorch 2.10.*
      run:
        - pytorch >=2.10,<2.11
  - package:
      name: ${{ name }}-tests
    requirements:
      run:
        - ${{ pin_subpackage(name, exact=True) }}
        - audiokit ==${{ version }}
        - pytorch >=2.10,<2.11
      run_constraints:
        - audiokit-split ==${{ version }}

about:
  license: MIT
"""


def test_sweep_edit_multi_output_keeps_own_output_pins():
    dec, out = sweep_edit(OWN_OUTPUTS, "audiokit")
    assert changed_lines(OWN_OUTPUTS, out) == [
        (10, "  number: 4", "  number: 5"),
        (17, "        - pytorch 2.10.*", "        - pytorch >=2.10,<2.12"),
        (19, "        - pytorch >=2.10,<2.11", "        - pytorch >=2.10,<2.12"),
        (26, "        - pytorch >=2.10,<2.11", "        - pytorch >=2.10,<2.12"),
    ]
    lib, tests = rattler_build_requirements(out, {})
    assert (lib["name"], lib["run"]) == ("audiokit", ["pytorch >=2.10,<2.12"])
    assert tests["run"][1:] == ["audiokit ==0.5.0", "pytorch >=2.10,<2.12"]
    assert tests["run"][0] == {"pin_subpackage": {"name": "audiokit", "exact": True}}


TORCH_FEEDSTOCK_LIKE = """\
context:
  version: "2.10.0"

recipe:
  name: torch-split
  version: ${{ version }}

build:
  number: 0

outputs:
  - package:
      name: libtorch
    requirements:
      run_constraints:
        - pytorch ==${{ version }}
  - package:
      name: pytorch
    requirements:
      host:
        - ${{ pin_subpackage('libtorch', exact=True) }}
      run:
        - libtorch ==${{ version }}
  - package:
      name: pytorch-tests
    requirements:
      run:
        - pytorch ==${{ version }}
        - pytorch >=2.10,<2.11

about:
  license: BSD-3-Clause
"""


def test_recipe_that_produces_pytorch_is_never_swept(make_distro, clean_recipe):
    recipe = _recipe(TORCH_FEEDSTOCK_LIKE, "torch-split")
    assert decide(recipe, "pytorch", "2.11.0", ("2.10.0",)) is None  # its pytorch pins are self-pins
    root = make_distro({"torch-split": TORCH_FEEDSTOCK_LIKE, "user": clean_recipe("user")})
    plan = plan_sweep(load_distribution(root), "2.7.0")
    assert [(d.name, d.status) for d in plan.decisions] == [("user", "bumped")]
    assert rattler_build_requirements(TORCH_FEEDSTOCK_LIKE, {})[0]["run_constraints"] == ["pytorch ==2.10.0"]


def test_exact_pin_fails_that_package_with_the_reason():
    text = CUDAOPS.replace("    - pytorch 2.10.* *cuda*\n", "    - pytorch ==2.10.0 *cuda*\n")
    recipe = _recipe(text, "cudaops")
    dec = decide(recipe, "pytorch", "2.11.0", ("2.10.0",))
    with pytest.raises(EditError, match=r"'pytorch ==2.10.0 \*cuda\*' .* still does not admit pytorch 2.11.0"):
        edited_text(recipe, dec, "pytorch", "2.11.0")


# ---------------------------------------------------------------------------------------------
# sweep --commit is resumable: kill -9 at each step, then a rerun finishes the branch


def sweep_subprocess(world: Path, *argv: str, crash_at: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"CONDA_DISTRO_TEST_CRASH_AT": crash_at} if crash_at else {})}
    return subprocess.run([sys.executable, "-m", "conda_distro", "sweep", *argv, "--root", str(world), "--format", "json"],
                          capture_output=True, text=True, env=env, timeout=timeout)


NO_BUILD_BUMPED = sorted(PYTORCH_DEPENDENT - {"visionkit"})


def assert_complete_sweep_branch(world: Path, base: str, before: dict[str, str]) -> None:
    """The branch of a ``--no-build --commit`` sweep of 2.7.0, complete: one commit for distro.yaml then
    one per bumped package, each holding exactly the edited file, a branch per bumped package; the sweep
    is back on main with the work tree as it was before."""
    repo = git.Repo(world)
    assert repo.active_branch.name == "main"
    assert not repo.is_dirty() and tracked_state(world) == before
    commits = list(reversed(list(repo.iter_commits(f"{base}..sweep/pytorch-2.7.0"))))
    assert len(commits) == 1 + len(NO_BUILD_BUMPED)
    assert commits[0].parents[0].hexsha == base and list(commits[0].stats.files) == ["distro.yaml"]
    assert sorted(next(iter(c.stats.files)).split("/")[1] for c in commits[1:]) == NO_BUILD_BUMPED
    for c in commits[1:]:
        (path,) = c.stats.files
        assert c.stats.files[path]["lines"] == 4 and repo.git.show(f"{c.hexsha}:{path}") + "\n" != before[path]
        package = path.split("/")[1]
        assert repo.commit(f"sweep/pytorch-2.7.0-{package}").tree[path].hexsha == c.tree[path].hexsha
    assert load_config_text(repo.git.show("sweep/pytorch-2.7.0:distro.yaml")) == ["2.4.1", "2.5.1", "2.6.0", "2.7.0"]
    assert not list((world / "build" / "sweep").glob("*.journal.json"))
    assert json.loads((world / "build" / "sweep" / "pytorch-2.7.0.json").read_text())["branch"] == "sweep/pytorch-2.7.0"


COMMIT_STEPS = ["sweep-before-commits", "sweep-after-commit-objects", "sweep-after-branch",
                "sweep-after-package-branches", "sweep-after-restore"]


def plant_git_leftovers(world: Path, committing: bool) -> list[Path]:
    """The lock files git commands killed mid-way leave (as bench_kill9 found them): the sweep's private
    index and its lock (killed while making commit objects); once committing, also a ref lock of a branch
    being created, and index.lock and HEAD.lock (an older version switched branches then)."""
    git_dir = world / ".git"
    planted = [git_dir / "conda-distro-sweep.index", git_dir / "conda-distro-sweep.index.lock"]
    if committing:
        planted += [git_dir / "refs" / "heads" / "sweep" / "pytorch-2.7.0-textmetrics.lock",
                    git_dir / "index.lock", git_dir / "HEAD.lock"]
    for p in planted:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("")
    return planted


@pytest.mark.slow
@pytest.mark.parametrize("step, finished, leftovers", [
    ("sweep-after-edits", False, False),  # recipes and distro.yaml edited, nothing committed: rolled back, swept again
    ("sweep-after-build", False, False),  # builds done and failures reverted: the same
    ("sweep-before-commits", False, True),  # killed while making commit objects: the same
    ("sweep-after-commit-objects", True, False),  # commits made as objects, no branch yet: the branches are created
    ("sweep-after-commit-objects", True, True),  # ... with a killed `git update-ref`'s lock file in the way
    ("sweep-after-branch", True, True),  # the sweep branch made, not the package branches
    ("sweep-after-package-branches", True, True),  # every branch made, the work tree still holds the edits
    ("sweep-after-restore", True, False),  # the work tree put back, the report and journal not written yet
])
def test_sweep_commit_killed_at_each_step_then_rerun_converges(world27: Path, step: str, finished: bool, leftovers: bool):
    """kill -9 at each step of `sweep --commit` (crash hooks), with or without the lock files a git command
    killed in the middle leaves: the rerun converges to the uninterrupted sweep's branches, main checked
    out and clean, no lock file left, no traceback; a third run has nothing to do."""
    repo = git.Repo(world27)
    base = repo.head.commit.hexsha
    before = tracked_state(world27)
    modes = {rel: (world27 / rel).stat().st_mode for rel in before}

    crashed = sweep_subprocess(world27, "--pytorch", "2.7.0", "--commit", "--no-build", crash_at=step)
    assert crashed.returncode == -9, crashed.stderr
    assert (world27 / "build" / "sweep" / "pytorch-2.7.0.journal.json").is_file()
    assert repo.active_branch.name == "main"  # the sweep never checks a branch out
    if not finished:
        assert "sweep/pytorch-2.7.0" not in [h.name for h in repo.heads]  # never a half-made branch
        assert releases_of(world27)[-1] == "2.7.0"  # the edits are in the work tree: the old "nothing to do" case
    planted = plant_git_leftovers(world27, committing=finished) if leftovers else []

    rerun = sweep_subprocess(world27, "--pytorch", "2.7.0", "--commit", "--no-build")

    assert rerun.returncode == 0, rerun.stderr
    assert "Traceback" not in rerun.stderr
    doc = json.loads(rerun.stdout)
    assert "nothing to do" not in (doc["message"] or "")
    if finished:
        assert doc["message"].startswith("finished the commits of the interrupted sweep of pytorch 2.7.0")
    else:
        assert doc["message"].startswith("an interrupted sweep of pytorch 2.7.0 was rolled back")
    assert sorted(n for n, p in {p["name"]: p for p in doc["packages"]}.items() if p["status"] == "bumped") == NO_BUILD_BUMPED
    assert [c["sha"] for c in doc["commits"]] == [c.hexsha for c in reversed(list(repo.iter_commits(f"{base}..sweep/pytorch-2.7.0")))]
    assert_complete_sweep_branch(world27, base, before)
    assert not any(p.exists() for p in planted) and not list((world27 / ".git").rglob("*.lock"))
    assert {rel: (world27 / rel).stat().st_mode for rel in before} == modes  # the files put back keep their mode
    again = sweep_subprocess(world27, "--pytorch", "2.7.0", "--commit", "--no-build")  # swept: refused, read-only report named
    assert again.returncode == 2 and "pytorch 2.7.0 was swept already: its branches" in again.stderr, again.stderr
    assert "conda-distro sweep report --pytorch 2.7.0" in again.stderr and again.stdout == ""
    assert_complete_sweep_branch(world27, base, before)


@pytest.mark.slow
def test_rerun_finishes_what_an_older_sweep_left_half_switched(world27: Path):
    """An older sweep checked the branch out and then main again: killed inside that `git checkout`, it
    left HEAD on the sweep branch, the index at the branch's tree, some files switched back and others
    not, and index.lock. The rerun puts HEAD, the index and the files back and removes the lock."""
    repo = git.Repo(world27)
    base = repo.head.commit.hexsha
    before = tracked_state(world27)
    crashed = sweep_subprocess(world27, "--pytorch", "2.7.0", "--commit", "--no-build",
                               crash_at="sweep-after-package-branches")
    assert crashed.returncode == -9, crashed.stderr
    repo.git.symbolic_ref("HEAD", "refs/heads/sweep/pytorch-2.7.0")
    repo.git.read_tree("sweep/pytorch-2.7.0")
    (world27 / "recipes" / "layerkit" / "recipe.yaml").write_text(before["recipes/layerkit/recipe.yaml"])  # switched back
    (world27 / ".git" / "index.lock").write_text("")

    rerun = sweep_subprocess(world27, "--pytorch", "2.7.0", "--commit", "--no-build")

    assert rerun.returncode == 0 and "Traceback" not in rerun.stderr, rerun.stderr
    assert json.loads(rerun.stdout)["message"].startswith("finished the commits of the interrupted sweep")
    assert_complete_sweep_branch(world27, base, before)
    assert not (world27 / ".git" / "index.lock").exists()


KILLED_WRITE = """
import os, sys
from pathlib import Path
from conda_distro.util import fsutil
os.replace = lambda src, dst: os.kill(os.getpid(), 9)  # killed after the temp file is written, before the rename
fsutil.atomic_write_text(Path(sys.argv[1]), "half of a recipe\\n")
"""


def killed_write(path: Path) -> Path:
    """Kill a process inside ``atomic_write_text(path)``; returns the temp file it left behind."""
    done = subprocess.run([sys.executable, "-c", KILLED_WRITE, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == -9, done.stderr
    (tmp,) = path.parent.glob(f".{path.name}.*.tmp")
    return tmp


def test_atomic_write_keeps_the_mode_of_the_file_it_replaces_and_new_files_follow_the_umask(tmp_path: Path):
    from conda_distro.util.fsutil import atomic_write_text

    kept = tmp_path / "recipe.yaml"
    kept.write_text("a\n")
    kept.chmod(0o664)
    atomic_write_text(kept, "b\n")
    atomic_write_text(tmp_path / "new.json", "{}\n")
    assert kept.read_text() == "b\n" and stat.S_IMODE(kept.stat().st_mode) == 0o664
    old = os.umask(0o002)
    try:
        atomic_write_text(tmp_path / "shared.json", "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o666 & ~old  # not mkstemp's 0600
    assert stat.S_IMODE((tmp_path / "shared.json").stat().st_mode) == 0o664


def test_clear_stale_temps_removes_only_what_a_killed_atomic_write_left(tmp_path: Path):
    from conda_distro.util.fsutil import clear_stale_temps

    recipe = tmp_path / "recipes" / "a" / "recipe.yaml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text("kept\n")
    others = [recipe.parent / "notes.tmp", recipe.parent / ".other.yaml.x.tmp", recipe.parent / ".recipe.yaml.bak"]
    for p in others:
        p.write_text("not the sweep's\n")
    stale = killed_write(recipe)
    assert recipe.read_text() == "kept\n"

    assert clear_stale_temps(recipe) == [stale]
    assert not stale.exists() and recipe.read_text() == "kept\n" and all(p.exists() for p in others)
    assert clear_stale_temps(tmp_path / "missing" / "recipe.yaml") == []


@pytest.mark.slow
def test_a_sweep_killed_inside_a_write_is_rerun_despite_its_temp_file(world27: Path):
    """tests/test_kill9.py's flake: a kill inside atomic_write_text leaves recipes/x/.recipe.yaml.*.tmp,
    an untracked file under recipes/; the rerun took it for uncommitted changes and refused. The sweep
    removes its own temp files under its lock, then rolls back and sweeps again."""
    repo = git.Repo(world27)
    base = repo.head.commit.hexsha
    before = tracked_state(world27)
    crashed = sweep_subprocess(world27, "--pytorch", "2.7.0", "--commit", "--no-build", crash_at="sweep-after-edits")
    assert crashed.returncode == -9, crashed.stderr
    stale = [killed_write(world27 / "recipes" / "layerkit" / "recipe.yaml"), killed_write(world27 / "distro.yaml")]
    assert "recipes/layerkit/" in repo.git.status("--porcelain", "--untracked-files=all", "recipes")

    rerun = sweep_subprocess(world27, "--pytorch", "2.7.0", "--commit", "--no-build")

    assert rerun.returncode == 0, rerun.stderr
    assert not any(p.exists() for p in stale)
    assert json.loads(rerun.stdout)["message"].startswith("an interrupted sweep of pytorch 2.7.0 was rolled back")
    assert_complete_sweep_branch(world27, base, before)


@pytest.mark.slow
def test_half_made_branch_without_journal_is_not_nothing_to_do(world27: Path, capsys):
    """The issue's repro, as an older sweep left it: on the sweep branch, some packages committed, the
    other edits uncommitted, no journal. The rerun says what to do instead of 'nothing to do'."""
    code, doc = sweep_json(capsys, world27, "--pytorch", "2.7.0", "--no-build")  # edits only, no commits
    assert code == 0
    repo = git.Repo(world27)
    repo.git.checkout("-b", "sweep/pytorch-2.7.0")
    repo.git.add("distro.yaml", "recipes/layerkit", "recipes/tensorutils")
    repo.index.commit("part of an interrupted sweep")
    before = tracked_state(world27)

    code, _, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--commit", "--no-build")

    assert code == 2 and "nothing to do" not in err
    assert "branch sweep/pytorch-2.7.0 is checked out with" in err and "uncommitted change(s)" in err
    assert "git checkout -- recipes distro.yaml" in err and "git branch -D sweep/pytorch-2.7.0" in err
    assert tracked_state(world27) == before


@pytest.mark.slow
def test_commit_after_a_run_without_commit_commits_what_it_left(world27: Path, capsys):
    """The issue's repro: `sweep` then `sweep --commit` answered "already a supported release: nothing to
    do", made no branch and left the tree dirty. Now the second run commits the first run's edits."""
    repo = git.Repo(world27)
    base = repo.head.commit.hexsha
    before = tracked_state(world27)
    code, first = sweep_json(capsys, world27, "--pytorch", "2.7.0", "--no-build")
    assert code == 0 and first["branch"] is None and repo.is_dirty()
    assert any("--commit` commits them" in step for step in first["next_steps"])

    code, out, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--commit", "--no-build")

    assert code == 0, err
    assert "nothing to do" not in out
    assert "committed the edits of the earlier sweep of pytorch 2.7.0: branch sweep/pytorch-2.7.0" in out
    assert "back on main (the sweep's edits are on the branches)" in out
    assert re.search(r"^summary: 10 bumped, 1 needs-new-version$", out, re.M)
    assert_complete_sweep_branch(world27, base, before)
    saved = json.loads((world27 / "build/sweep/pytorch-2.7.0.json").read_text())
    assert saved["branch"] == "sweep/pytorch-2.7.0" and len(saved["commits"]) == 1 + len(NO_BUILD_BUMPED)
    assert not (world27 / "build/sweep/pytorch-2.7.0.uncommitted.json").exists()


@pytest.mark.slow
def test_commit_after_a_run_without_commit_refuses_files_changed_since(world27: Path, capsys):
    code, _ = sweep_json(capsys, world27, "--pytorch", "2.7.0", "--no-build")
    assert code == 0
    path = world27 / "recipes" / "layerkit" / "recipe.yaml"
    path.write_text(path.read_text() + "# a hand edit\n")
    before = tracked_state(world27)
    code, _, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--commit", "--no-build")
    assert code == 2 and "recipes/layerkit/recipe.yaml changed after the sweep of pytorch 2.7.0 edited it" in err
    assert tracked_state(world27) == before and [h.name for h in git.Repo(world27).heads] == ["main"]


@pytest.mark.slow
def test_uncommitted_release_without_any_record_is_not_nothing_to_do(world27: Path, capsys):
    """An older sweep's edits, with no record of them: exit 2 with what to do (not "nothing to do")."""
    code, _ = sweep_json(capsys, world27, "--pytorch", "2.7.0", "--no-build")
    assert code == 0
    (world27 / "build/sweep/pytorch-2.7.0.uncommitted.json").unlink()
    before = tracked_state(world27)
    code, _, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--commit", "--no-build")
    assert code == 2 and "the checked-out commit does not" in err and "git checkout -- distro.yaml recipes" in err
    assert tracked_state(world27) == before


@pytest.mark.slow
def test_file_changed_after_the_kill_is_refused_and_nothing_written(world27: Path, capsys):
    crashed = sweep_subprocess(world27, "--pytorch", "2.7.0", "--commit", "--no-build", crash_at="sweep-after-edits")
    assert crashed.returncode == -9
    path = world27 / "recipes" / "layerkit" / "recipe.yaml"
    path.write_text(path.read_text() + "# a hand edit\n")
    before = tracked_state(world27)
    code, _, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--commit", "--no-build")
    assert code == 2 and "recipes/layerkit/recipe.yaml was changed after the sweep of pytorch 2.7.0 was interrupted" in err
    assert tracked_state(world27) == before


@pytest.mark.slow
def test_other_release_waits_for_the_unfinished_sweep(world27: Path, capsys):
    crashed = sweep_subprocess(world27, "--pytorch", "2.7.0", "--no-build", crash_at="sweep-after-edits")
    assert crashed.returncode == -9
    before = tracked_state(world27)
    code, _, err = sweep(capsys, world27, "--pytorch", "2.6.1", "--no-build")
    assert code == 2 and "the sweep of pytorch 2.7.0 was interrupted" in err
    assert "conda-distro sweep --pytorch 2.7.0" in err
    assert tracked_state(world27) == before
    code, out, _ = sweep(capsys, world27, "--pytorch", "2.7.0", "--dry-run")
    assert code == 0 and "an interrupted sweep of pytorch 2.7.0 is unfinished" in out


# ---------------------------------------------------------------------------------------------
# sweep and build take a lock: a second run waits (bounded) or exits 2

HOLD_LOCK = ("import sys, time; from filelock import FileLock; l = FileLock(sys.argv[1]); l.acquire(); "
             "print('held', flush=True); time.sleep(float(sys.argv[2]))")


def hold_lock(path: Path, seconds: float) -> subprocess.Popen:
    path.parent.mkdir(parents=True, exist_ok=True)
    p = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


@pytest.mark.slow
def test_second_sweep_times_out_with_exit_2_and_writes_nothing(world27: Path, capsys):
    holder = hold_lock(world27 / "build" / "locks" / "repository.lock", 60)
    before = tracked_state(world27)
    try:
        code, _, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--commit", "--no-build", "--lock-timeout", "1")
    finally:
        holder.kill()
        holder.wait(timeout=60)
    assert code == 2 and "--lock-timeout" in err
    assert "another conda-distro process (a sweep, build, check-pr, promote or retire) is using the repository" in err
    assert tracked_state(world27) == before and [h.name for h in git.Repo(world27).heads] == ["main"]


@pytest.mark.slow
def test_second_sweep_waits_for_the_first(world27: Path, capsys):
    holder = hold_lock(world27 / "build" / "locks" / "repository.lock", 2)
    t0 = time.monotonic()
    code, doc = sweep_json(capsys, world27, "--pytorch", "2.7.0", "--no-build", "--lock-timeout", "60")
    holder.wait(timeout=60)
    assert code == 0 and time.monotonic() - t0 >= 1.5
    assert releases_of(world27)[-1] == "2.7.0" and {p["status"] for p in doc["packages"]} >= {"bumped"}


@pytest.mark.slow
def test_build_times_out_on_a_locked_staging_channel(sandbox_world: Path, capsys):
    staging = sandbox_world / "build" / "channels" / "staging"
    holder = hold_lock(staging / ".conda-distro.lock", 60)
    try:
        code, _, err = run_cli(capsys, "build", "tensorutils", "--lock-timeout", "1", "--root", str(sandbox_world))
    finally:
        holder.kill()
        holder.wait(timeout=60)
    assert code == 2
    assert "another conda-distro process (a build, sweep or promote) is using the staging channel" in err
    assert [p.name for p in staging.iterdir()] == [".conda-distro.lock"]  # nothing built
    assert not (sandbox_world / "build" / "results").exists()


@pytest.mark.slow
def test_two_concurrent_builds_leave_staging_consistent(sandbox_world: Path):
    """The issue's repro: two builds at once. The second waits for the first, then finds everything up to
    date; staging's repodata names exactly its files with their sha256, and every result is for the file
    that is there (promote holds nothing as 'results for another build of this file')."""
    from support.helpers import sha256

    from conda_distro.state.results import ResultsStore

    cmd = [sys.executable, "-m", "conda_distro", "build", "tensorutils", "layerkit", "--root", str(sandbox_world),
           "--format", "json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    docs = [json.loads(o[0]) for o in outs]
    built = [b for d in docs for b in d["builds"] if b["status"] == "built"]
    assert len(built) == len({b["artifact"] for b in built})  # each artifact built once
    staging = sandbox_world / "build" / "channels" / "staging"
    on_disk = {f"{p.parent.name}/{p.name}": sha256(p) for p in staging.glob("*/*.conda")}
    indexed = {}
    for rd in staging.glob("*/repodata.json"):
        for fn, rec in json.loads(rd.read_text()).get("packages.conda", {}).items():
            indexed[f"{rd.parent.name}/{fn}"] = rec["sha256"]
    assert indexed == on_disk and on_disk
    store = ResultsStore(sandbox_world / "build" / "results")
    for artifact, digest in on_disk.items():
        assert store.get(artifact).sha256 == digest, artifact


@pytest.mark.slow
def test_unreadable_journal_is_a_clear_error(world27: Path, capsys):
    journal = world27 / "build" / "sweep" / "pytorch-2.7.0.journal.json"
    journal.parent.mkdir(parents=True)
    journal.write_text('{"release": "2.7.0", "phase": "half"}')
    before = tracked_state(world27)
    code, _, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--commit", "--no-build")
    assert code == 2 and "the journal of an interrupted sweep cannot be read" in err and "pytorch-2.7.0.journal.json" in err
    assert "Traceback" not in err and tracked_state(world27) == before


# ---------------------------------------------------------------------------------------------
# one schema for the sweep document; the build runs on what the sweep wrote, not on a reload


def test_the_sweep_document_is_one_schema_written_and_read(tmp_path: Path):
    from conda_distro.reports.facts import sweep_statuses
    from conda_distro.sweep import Decision, Outcome, ReleaseTest, SweepDocument, SweepPlan, SweepResult

    plan = SweepPlan("2.7.0", (
        Decision("a", "bumped", ("x",), "pytorch >=2.4,<2.7", "pytorch >=2.4,<2.8", old_build=0, new_build=1),
        Decision("b", "bumped", ("y",), "pytorch", "pytorch", old_build=2, new_build=3, depends_on_pytorch=False)))
    outcomes = [Outcome(plan.decisions[0], "failed", "test failed on pytorch 2.7.0 (cpu): boom",
                        tests=[ReleaseTest(pytorch="2.7.0", variant="cpu", status="failed", reason="boom")]),
                Outcome(plan.decisions[1], "bumped")]
    res = SweepResult(plan, outcomes, branch="sweep/pytorch-2.7.0", commits=[{"package": None, "sha": "abc", "message": "m"}],
                      report_file="build/sweep/pytorch-2.7.0.json", start="main")
    text = res.document().to_json()
    assert json.loads(text) == res.to_dict() and res.to_dict()["packages"][1]["pytorch_dependency"] == "indirect"
    assert SweepDocument.model_validate_json(text).result().to_dict() == res.to_dict()  # the sweep reads it back
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "pytorch-2.7.0.json").write_text(text)
    statuses = sweep_statuses(tmp_path, tmp_path)  # and report unmaintained reads the same document
    assert set(statuses) == {"a"} and statuses["a"].status == "failed" and statuses["a"].release == "2.7.0"


@pytest.mark.slow
def test_the_edited_distribution_is_made_from_the_written_texts(world27: Path):
    from conda_distro.sweep.run import _edited_distribution

    dist = load_distribution(world27, strict=False)
    pytorch = dist.config.pytorch.name
    dec = plan_sweep(dist, "2.7.0").get("tensorutils")
    text = edited_text(dist.recipes["tensorutils"], dec, pytorch, "2.7.0")
    distro_text = add_release_text(dist.distro, "2.7.0")
    shutil.rmtree(world27 / "recipes")  # nothing left on disk to read back
    (world27 / "distro.yaml").unlink()
    edited = _edited_distribution(dist, distro_text, {"tensorutils": text})
    assert "2.7.0" in edited.config.pytorch.releases
    assert edited.recipes["tensorutils"].text == text and edited.recipes["tensorutils"].build_number == dec.new_build
    assert set(edited.recipes) == set(dist.readable().recipes)


@pytest.mark.slow
def test_the_result_renders_what_the_command_prints(world27: Path, capsys):
    """The text lines and the markdown (templates) of the result are the bytes `sweep` prints, for a
    dry run and for a release already supported (the message only)."""
    from conda_distro.sweep import SweepOptions, run_sweep

    res = run_sweep(SweepOptions(release="2.7.0", dry_run=True, root=world27))
    _, text, _ = sweep(capsys, world27, "--pytorch", "2.7.0", "--dry-run")
    _, md, _ = sweep(capsys, world27, "--pytorch", "2.7.0", "--dry-run", "--format", "markdown")
    assert text == "".join(line + "\n" for line in res.text_lines()) and "next: run `conda-distro sweep" in text
    assert md == res.markdown() and md.count("\n---\n## PR: ") == 10
    code, _, _ = sweep(capsys, world27, "--pytorch", "2.7.0", "--no-build")  # edits distro.yaml: 2.7.0 is listed
    assert code == 0
    from conda_distro.sweep.report import SweepReportOptions, sweep_report

    rep = sweep_report(SweepReportOptions(release="2.7.0", root=world27))
    _, text, _ = run_cli(capsys, "sweep", "report", "--pytorch", "2.7.0", "--root", str(world27))
    _, md, _ = run_cli(capsys, "sweep", "report", "--pytorch", "2.7.0", "--root", str(world27), "--format", "markdown")
    assert text == "".join(line + "\n" for line in rep.text_lines()) and md == rep.markdown()
    assert text.startswith("pytorch 2.7.0: swept; its edits are in the work tree, not committed\n")
    assert "next: review the edits (git diff), then `conda-distro sweep --pytorch 2.7.0 --commit`" in text
    assert md.startswith("> **pytorch 2.7.0**: swept; its edits are in the work tree, not committed.")
    assert "# PyTorch 2.7.0 release sweep" in md and md.count("\n---\n## PR: ") == 10
    code, out, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--no-build")  # (no second sweep over the edits)
    assert code == 2 and out == "" and "pytorch 2.7.0 was swept and its edits are not committed" in err


def test_a_bump_that_upstream_lets_nobody_test_awaits_upstream():
    """The real release day: PyPI had no torchvision for pytorch 2.15.0, so timm's 2.15.0 targets were not
    tested at all, and the sweep called timm 'bumped' (pins widened, untested). A bump with no test of the
    release and targets upstream cannot serve is `awaiting-upstream`: pins stay, dependents wait."""
    from pathlib import Path

    from conda_distro.engine.executor import ExecutionResult
    from conda_distro.engine.plan import BuildPlan, PackagePlan
    from conda_distro.state.results import TestRecord
    from conda_distro.sweep.model import BLOCKING, Decision, SweepPlan, planned_outcomes
    from conda_distro.sweep.run import _apply_results
    from conda_distro.vocab import Target

    why = "no cuda build of torchvision for pytorch 2.15.0 in the upstream channels"
    pkg = PackagePlan(name="timm", recipe=Path("recipes/timm/recipe.yaml"), version="1.0", deps=(), closure=(),
                      variants=(), targets=(), unavailable=((Target("2.15.0", "cuda"), why),))
    other = PackagePlan(name="einops", recipe=Path("recipes/einops/recipe.yaml"), version="0.8", deps=(), closure=(),
                        variants=(), targets=(Target("2.15.0", "cuda"),))
    build_plan = BuildPlan(packages=(pkg, other), levels=(("timm", "einops"),), targets=(Target("2.15.0", "cuda"),),
                           engine="rattler-build")
    report = ExecutionResult(tests=[TestRecord(name="einops", artifact="noarch/einops-0.8-0.conda", pytorch="2.15.0",
                                           variant="cuda", status="passed")])
    plan = SweepPlan("2.15.0", (Decision("timm", "bumped", ("alice",)), Decision("einops", "bumped", ("bob",))))
    outcomes = _apply_results(planned_outcomes(plan), report, {"timm", "einops"}, "2.15.0", build_plan)
    timm, einops = outcomes["timm"], outcomes["einops"]
    assert plan.get("timm").status == "bumped"  # the plan is frozen: execution's findings are the outcomes
    assert timm.status == "awaiting-upstream" and why in timm.reason and not timm.applied
    assert "awaiting-upstream" in BLOCKING
    assert einops.status == "bumped" and einops.tests == [ReleaseTest(pytorch="2.15.0", variant="cuda", status="passed")]


def test_the_sweep_document_keeps_its_tests_typed_and_its_json_as_before():
    """A package's tests of the release are typed (ReleaseTest), and the document on disk stays as it was
    written before they were: no ``"reason": null`` where a test has no reason."""
    from conda_distro.sweep.model import SweepDocument

    text = ('{"release": "2.7.0", "packages": [{"name": "kit", "status": "failed", "tests": ['
            '{"pytorch": "2.7.0", "variant": "cpu", "status": "passed"}, '
            '{"pytorch": "2.7.0", "variant": "cuda", "status": "failed", "reason": "ImportError"}]}]}')
    doc = SweepDocument.model_validate_json(text)
    dec = doc.packages[0].outcome()  # (a package as read back: its outcome)
    assert dec.tests == [ReleaseTest(pytorch="2.7.0", variant="cpu", status="passed"),
                         ReleaseTest(pytorch="2.7.0", variant="cuda", status="failed", reason="ImportError")]
    assert json.loads(doc.to_json())["packages"][0]["tests"] == json.loads(text)["packages"][0]["tests"]


# ---------------------------------------------------------------------------------------------
# the sweep as a state machine: `sweep report` (read-only), refusals naming it, late admission


HOOKPROFILER_FIX = '''def attach(fn):
    """Register ``fn`` as a profiling hook; returns the hook handle (without legacy_autograd_hook since 2.6)."""
    hook = getattr(torch, "legacy_autograd_hook", None)
    return hook(fn) if hook is not None else {"active": True, "fn": fn}
'''


def repository_snapshot(world: Path) -> dict[str, object]:
    """Everything a read-only command must leave as it was: the tracked files, git's status, refs, HEAD and
    index, and every file under build/ (bytes)."""
    repo = git.Repo(world)
    build = world / "build"
    return {"tracked": tracked_state(world), "status": repo.git.status("--porcelain", "--untracked-files=all"),
            "refs": repo.git.for_each_ref(), "head": repo.git.symbolic_ref("HEAD"),
            "index": (world / ".git" / "index").read_bytes(),
            "build": {p.relative_to(build).as_posix(): p.read_bytes() for p in sorted(build.rglob("*"))
                      if p.is_file() and "locks" not in p.parts} if build.is_dir() else {}}


def report_of(capsys, world: Path, fmt: str = "json") -> tuple[int, str]:
    code, out, err = run_cli(capsys, "sweep", "report", "--pytorch", "2.7.0", "--root", str(world), "--format", fmt)
    assert "Traceback" not in err
    return code, out


@pytest.mark.slow
def test_release_life_cycle_report_refusals_and_late_admission(world27: Path, capsys):
    """Release day with --commit; `sweep report` prints it and changes nothing (the old `sweep --format
    markdown` swept again, editing main and overwriting the report: now exit 2 naming `sweep report`); the
    branch is merged; hookprofiler, which failed, is fixed after release day (its pins still leave 2.7.0 out:
    lint and check-pr warn, naming `sweep --package`); a later `sweep --pytorch 2.7.0 --commit` admits exactly
    it, on its own branch, and its JSON says what was admitted, what waits and what to run next."""
    add_recipe(world27, "hookviz", HOOKVIZ)
    commit_all(world27, "Add hookviz (depends on hookprofiler)")
    repo = git.Repo(world27)
    code, day = sweep_json(capsys, world27, "--pytorch", "2.7.0", "--commit")
    assert code == 0 and day["state"] == "committed" and day["mode"] == "release-day"
    assert sorted(day["admitted"]) == sorted(BUMPED) and day["next_command"] is None
    saved = world27 / "build/sweep/pytorch-2.7.0.json"

    # --- committed, not merged: the report is read-only; every sweep refuses, naming it
    before = repository_snapshot(world27)
    code, out = report_of(capsys, world27)
    rep = json.loads(out)
    assert code == 0 and rep["state"] == "committed" and rep["authoritative"] == "repository"
    assert rep["report_file"] == "build/sweep/pytorch-2.7.0.json"
    assert {p["name"]: p["status"] for p in rep["packages"]} == {p["name"]: p["status"] for p in day["packages"]}
    assert rep["pull_requests"] == day["pull_requests"] and rep["tracking_issue"] == day["tracking_issue"]
    assert any("`conda-distro sweep report --pytorch 2.7.0` prints this report again" in s for s in rep["next_steps"])
    assert not any("back on main" in s for s in rep["next_steps"])
    code, md = report_of(capsys, world27, "markdown")
    assert code == 0 and md.startswith("> **pytorch 2.7.0**: swept; its branches wait to be merged")
    assert day["tracking_issue"].rstrip("\n") in md and md.count("\n---\n## PR: ") == len(BUMPED)
    code, text = report_of(capsys, world27, "text")
    assert code == 0 and text.startswith("pytorch 2.7.0: swept; its branches wait to be merged")
    for argv in (("--format", "markdown"), ("--commit",), ("--package", "hookprofiler"), ("--dry-run",)):
        code, out, err = sweep(capsys, world27, "--pytorch", "2.7.0", *argv)
        assert code == 2 and out == "" and "`conda-distro sweep report --pytorch 2.7.0`" in err, (argv, err)
        assert "pytorch 2.7.0 was swept already: its branches" in err
    assert repository_snapshot(world27) == before  # byte for byte: work tree, git, the saved report

    # --- merged: supported; the failed packages wait for a fix, nothing is ready
    repo.git.merge("--ff-only", "sweep/pytorch-2.7.0")
    code, out = report_of(capsys, world27)
    rep = json.loads(out)
    waits = {w["name"]: w["status"] for w in rep["waiting"]}
    assert rep["state"] == "supported" and waits == {"hookprofiler": "needs-fix", "fastquant": "needs-fix",
                                                     "quantserve": "awaiting-parents", "visionkit": "needs-new-version"}
    assert rep["next_command"] is None
    assert any("`conda-distro sweep --pytorch 2.7.0 --package NAME` on a checkout whose distro.yaml lists 2.7.0 admits it" in s
               for s in rep["next_steps"])
    code, out, err = sweep(capsys, world27, "--pytorch", "2.7.0")
    assert code == 2 and "no package is ready to be admitted" in err and "needs-fix: fastquant, hookprofiler" in err
    code, lint = run_cli(capsys, "lint", "--root", str(world27), "--format", "json")[:2]
    lags = {f["recipe"]: f for f in json.loads(lint)["findings"] if f["check"] == "pytorch-pin-lags"}
    assert code == 0 and set(lags) == {"hookprofiler", "fastquant"}  # not quantserve (waits), not visionkit (lockstep)
    assert "conda-distro sweep --pytorch 2.7.0 --package hookprofiler" in lags["hookprofiler"]["hint"]

    # --- hookprofiler fixed after release day, in a PR: check-pr is green and warns that its pins lag
    repo.git.checkout("-b", "fix-hookprofiler")
    source = world27 / "recipes/hookprofiler/src/hookprofiler/__init__.py"
    text = source.read_text()
    source.write_text(text[:text.index("def attach(fn):")] + HOOKPROFILER_FIX)
    rel = "recipes/hookprofiler/recipe.yaml"
    (world27 / rel).write_text((world27 / rel).read_text().replace("  number: 0", "  number: 1", 1))
    commit_all(world27, "hookprofiler: works without legacy_autograd_hook")
    code, md, _ = run_cli(capsys, "check-pr", "--base", "main", "--root", str(world27), "--format", "markdown")
    assert code == 0 and md.startswith("### ✅ conda-distro check-pr: ready to merge")
    assert "[pytorch-pin-lags]" in md and "conda-distro sweep --pytorch 2.7.0 --package hookprofiler" in md
    repo.git.checkout("main")
    repo.git.merge("--ff-only", "fix-hookprofiler")
    code, out = report_of(capsys, world27)
    rep = json.loads(out)
    assert {w["name"]: w["status"] for w in rep["waiting"]}["hookprofiler"] == "ready"
    assert rep["next_command"] == "conda-distro sweep --pytorch 2.7.0 --package hookprofiler"

    # --- the late admission: only hookprofiler, on its own branch; the work tree as it was
    base = repo.head.commit.hexsha
    before = tracked_state(world27)
    code, late = sweep_json(capsys, world27, "--pytorch", "2.7.0", "--commit")
    assert code == 0 and late["mode"] == "admission" and late["state"] == "supported" and late["ok"] is True
    assert late["admitted"] == ["hookprofiler"]
    [entry] = late["packages"]
    assert (entry["name"], entry["status"], entry["old_pin"], entry["new_pin"]) == \
        ("hookprofiler", "bumped", "pytorch >=2.4,<2.7", "pytorch >=2.4,<2.8")
    assert (entry["old_build"], entry["new_build"]) == (1, 2)
    assert sorted((t["pytorch"], t["variant"], t["status"]) for t in entry["tests"]) == \
        [("2.7.0", "cpu", "passed"), ("2.7.0", "cuda", "passed")]
    assert {w["name"]: w["status"] for w in late["waiting"]} == {
        "fastquant": "needs-fix", "quantserve": "awaiting-parents", "visionkit": "needs-new-version"}
    assert late["next_command"] is None and late["branch"] is None
    assert late["pull_requests"]["hookprofiler"]["branch"] == "sweep/pytorch-2.7.0-hookprofiler"
    commit = repo.commit("sweep/pytorch-2.7.0-hookprofiler")
    assert commit.parents[0].hexsha == base and list(commit.stats.files) == [rel]
    assert [c["sha"] for c in late["commits"]] == [commit.hexsha]
    assert repo.active_branch.name == "main" and not repo.is_dirty() and tracked_state(world27) == before
    assert "pytorch >=2.4,<2.8" in repo.git.show(f"{commit.hexsha}:{rel}")
    merged = json.loads(saved.read_text())  # the release's saved report: the newest entry per package
    assert {p["name"]: p["status"] for p in merged["packages"]}["hookprofiler"] == "bumped"
    assert merged["tracking_issue"] == day["tracking_issue"] and len(merged["admissions"]) == 1
    assert "hookprofiler" in merged["admitted"] and set(BUMPED) <= set(merged["admitted"])

    # --- admitted on its branch: waits for its merge, and is not swept twice
    code, out = report_of(capsys, world27)
    assert {w["name"]: w["status"] for w in json.loads(out)["waiting"]}["hookprofiler"] == "awaiting-merge"
    code, _, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--package", "hookprofiler")
    assert code == 2 and "admitted on branch sweep/pytorch-2.7.0-hookprofiler" in err
    code, _, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--package", "quantserve")
    assert code == 2 and "quantserve waits for fastquant" in err and "--package fastquant" in err


def supported_world(world: Path) -> None:
    """world27 whose main lists 2.7.0 already while every pin still leaves it out (as if every package had
    failed on release day and been fixed since): a late admission has every package to admit."""
    path = world / "distro.yaml"
    path.write_text(path.read_text().replace('"2.6.0"]', '"2.6.0", "2.7.0"]', 1))
    commit_all(world, "Add pytorch 2.7.0")


ADMISSION_STEPS = ["sweep-after-edits", "sweep-before-commits", "sweep-after-commit-objects",
                   "sweep-after-package-branches", "sweep-after-restore"]


@pytest.mark.slow
@pytest.mark.parametrize("step", ADMISSION_STEPS)
def test_late_admission_killed_at_each_step_then_rerun_converges(world27: Path, step: str):
    """kill -9 in a late admission with --commit: the rerun converges to one branch per admitted package on
    the checked-out commit, main clean and as it was, no journal; a third run refuses (nothing ready,
    everything awaits its merge) naming `sweep report`."""
    supported_world(world27)
    repo = git.Repo(world27)
    base = repo.head.commit.hexsha
    before = tracked_state(world27)
    crashed = sweep_subprocess(world27, "--pytorch", "2.7.0", "--commit", "--no-build", crash_at=step)
    assert crashed.returncode == -9, crashed.stderr
    rerun = sweep_subprocess(world27, "--pytorch", "2.7.0", "--commit", "--no-build")
    assert rerun.returncode == 0 and "Traceback" not in rerun.stderr, rerun.stderr
    doc = json.loads(rerun.stdout)
    assert doc["mode"] == "admission" and sorted(doc["admitted"]) == NO_BUILD_BUMPED
    assert repo.active_branch.name == "main" and not repo.is_dirty() and tracked_state(world27) == before
    for name in NO_BUILD_BUMPED:
        c = repo.commit(f"sweep/pytorch-2.7.0-{name}")
        assert c.parents[0].hexsha == base and list(c.stats.files) == [f"recipes/{name}/recipe.yaml"], name
    assert "sweep/pytorch-2.7.0" not in [h.name for h in repo.heads]  # no release commit: distro.yaml lists it
    assert not list((world27 / "build" / "sweep").glob("*.journal.json"))
    assert not list((world27 / ".git").rglob("*.lock"))
    again = sweep_subprocess(world27, "--pytorch", "2.7.0", "--commit", "--no-build")
    assert again.returncode == 2 and "conda-distro sweep report --pytorch 2.7.0" in again.stderr


@pytest.mark.slow
def test_late_admission_without_commit_then_commit(world27: Path, capsys):
    """`sweep --pytorch VER --package NAME` without --commit edits NAME's recipe; a second sweep refuses
    (its edits are not committed), `--commit` commits them on NAME's branch and puts the work tree back."""
    supported_world(world27)
    repo = git.Repo(world27)
    before = tracked_state(world27)
    code, doc = sweep_json(capsys, world27, "--pytorch", "2.7.0", "--package", "tensorutils", "--no-build")
    assert code == 0 and doc["admitted"] == ["tensorutils"] and doc["state"] == "uncommitted"
    assert doc["next_command"] == "conda-distro sweep --pytorch 2.7.0 --commit"
    assert [p for p, _ in [(ln[3:], 0) for ln in repo.git.status("--porcelain").splitlines()]] == \
        ["recipes/tensorutils/recipe.yaml"]
    code, _, err = sweep(capsys, world27, "--pytorch", "2.7.0", "--no-build")
    assert code == 2 and "edits are not committed" in err and "`conda-distro sweep report --pytorch 2.7.0`" in err
    code, doc = sweep_json(capsys, world27, "--pytorch", "2.7.0", "--commit", "--no-build")
    assert code == 0 and doc["message"].startswith("committed the edits of the earlier sweep of pytorch 2.7.0")
    assert [c["package"] for c in doc["commits"]] == ["tensorutils"] and doc["branch"] is None
    assert tracked_state(world27) == before and not repo.is_dirty()
    assert list(repo.commit("sweep/pytorch-2.7.0-tensorutils").stats.files) == ["recipes/tensorutils/recipe.yaml"]
