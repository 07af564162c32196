"""The PR gate (`check-pr`, with the proposal checks): `conda-distro check-pr --base REF`.

Each test makes a commit in a copy of the sandbox world (a git repository) and runs check-pr against
the commit before it, asserting the affected set, the verdict, the exit code and the PR comment.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import git
import pytest
from ruamel.yaml import YAML
from support.helpers import run_cli

from conda_distro.checkpr.check import CheckPrResult, RecipeLocation, suggest_pin
from conda_distro.checkpr.comment import to_markdown
from conda_distro.state.results import BuildRecord
from conda_distro.state.results import TestRecord as Run  # (renamed: pytest would try to collect a Test* class)

TARGETS = [(r, v) for r in ("2.4.1", "2.5.1", "2.6.0") for v in ("cpu", "cuda")]
HEADER = "| package | status | failed on | note |"

# ---------------------------------------------------------------------------------------------
# helpers


def check_pr(capsys, world: Path, *argv: str) -> tuple[int, dict]:
    code, out, err = run_cli(capsys, "check-pr", "--base", "HEAD~1", "--root", str(world), "--format", "json", *argv)
    assert out.strip(), err
    return code, json.loads(out)


def check_pr_markdown(capsys, world: Path, *argv: str) -> tuple[int, str]:
    code, out, _ = run_cli(capsys, "check-pr", "--base", "HEAD~1", "--root", str(world), "--format", "markdown", *argv)
    return code, out


def commit_all(world: Path, message: str) -> None:
    repo = git.Repo(world)
    repo.git.add("-A")
    repo.index.commit(message)


def edit(world: Path, rel: str, old: str, new: str) -> None:
    path = world / rel
    text = path.read_text()
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new, 1))


def line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().split("\n"), 1) if needle in line)


def propose_newpkg(world: Path, capsys, *, consent: bool) -> None:
    """`conda-distro propose newpkg`, then answered and completed like a sandbox recipe."""
    code, out, err = run_cli(capsys, "propose", "newpkg", "--maintainer", "someone", "--version", "0.1.0",
                         "--root", str(world))
    assert code == 0, err
    y = YAML()
    y.preserve_quotes = True
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)

    proposal = world / "proposals" / "newpkg.yaml"
    doc = y.load(proposal.read_text())
    doc.update(summary="Doubles torch tensors (sandbox stand-in)", homepage="https://github.com/torch-sandbox/newpkg",
               repository="https://github.com/torch-sandbox/newpkg", license="MIT",
               pytorch_dependency="Its whole API takes and returns torch tensors.", focus_area="deep learning",
               downstream_users="sandbox users", test_plan="An import test and a script test calling torch.")
    doc["maintainers"][0]["consent"] = consent
    with proposal.open("w") as fh:
        y.dump(doc, fh)

    recipe = world / "recipes" / "newpkg" / "recipe.yaml"
    doc = y.load(recipe.read_text())
    del doc["source"]["url"], doc["source"]["sha256"]
    doc["source"]["path"] = "src"
    doc["build"]["script"] = ["mkdir -p $SP_DIR", "cp -r $SRC_DIR/newpkg $SP_DIR/"]
    doc["requirements"]["host"] = ["python >=3.10"]
    doc["tests"] = [{"python": {"imports": ["newpkg"], "pip_check": False}},
                    {"script": ['python -c "import torch, newpkg; '
                                'assert newpkg.double(torch.tensor([1.0, 2.0])).tolist() == [2.0, 4.0]"']}]
    for key, value in (("homepage", "https://github.com/torch-sandbox/newpkg"),
                       ("summary", "Doubles torch tensors (sandbox stand-in)"), ("license", "MIT")):
        doc["about"][key] = value
    with recipe.open("w") as fh:
        y.dump(doc, fh)
    src = recipe.parent / "src"
    (src / "newpkg").mkdir(parents=True)
    (src / "newpkg" / "__init__.py").write_text("def double(t):\n    return t * 2\n")
    (src / "LICENSE").write_text("MIT License (sandbox stand-in)\n")
    commit_all(world, "Propose newpkg")


# ---------------------------------------------------------------------------------------------
# nothing buildable


@pytest.mark.slow
def test_readme_only_change_builds_nothing(sandbox_world: Path, capsys):
    (sandbox_world / "README.md").write_text((sandbox_world / "README.md").read_text() + "\nMore words.\n")
    commit_all(sandbox_world, "README")

    code, doc = check_pr(capsys, sandbox_world)
    assert code == 0
    assert doc["nothing_buildable"] is True and doc["ok"] is True
    assert doc["changed"] == [] and doc["affected"] == []
    assert doc["solve"] == [] and doc["builds"] == [] and doc["tests"] == [] and doc["built"] is False
    assert not (sandbox_world / "build").exists()

    code, md = check_pr_markdown(capsys, sandbox_world)
    assert code == 0
    assert md.startswith("### ✅ conda-distro check-pr: nothing to build\n")
    assert "changes no recipe, proposal or distro.yaml (compared with `HEAD~1`)" in md


@pytest.mark.slow
def test_unknown_base_is_bad_input(sandbox_world: Path, capsys):
    code, out, err = run_cli(capsys, "check-pr", "--base", "no-such-ref", "--root", str(sandbox_world), "--format", "json")
    assert code == 2 and out == ""
    assert "--base" in err and "unknown git reference 'no-such-ref'" in err


# ---------------------------------------------------------------------------------------------
# a new package: proposal + recipe


@pytest.mark.slow
def test_new_package_proposal_and_recipe_pass(sandbox_world: Path, capsys):
    propose_newpkg(sandbox_world, capsys, consent=True)

    code, doc = check_pr(capsys, sandbox_world)
    assert code == 0, doc
    assert doc["ok"] is True and doc["nothing_buildable"] is False
    assert doc["changed"] == ["newpkg"] and doc["changed_proposals"] == ["newpkg"]
    assert doc["affected"] == ["newpkg"]
    assert doc["lint"] == [] and doc["proposals"] == []
    assert len(doc["solve"]) == 6 and all(s["ok"] for s in doc["solve"])
    assert any(p.startswith("newpkg 0.1.0 ") for p in doc["solve"][0]["packages"])
    assert [(b["name"], b["status"]) for b in doc["builds"]] == [("newpkg", "built")]
    assert sorted((t["name"], t["pytorch"], t["variant"], t["status"]) for t in doc["tests"]) == \
        [("newpkg", r, v, "passed") for r, v in TARGETS]
    assert doc["maintainers"] == {"newpkg": ["someone"]}
    assert doc["scope"] == "build/pr/main"  # the checkout's branch: its own staging, results and logs
    assert list((sandbox_world / doc["scope"] / "channels/staging/noarch").glob("newpkg-0.1.0-*.conda"))
    assert not (sandbox_world / "build/channels/staging").exists() and not (sandbox_world / "build/results").exists()

    code, md = check_pr_markdown(capsys, sandbox_world)  # a second run reuses the build and the results
    assert code == 0
    lines = md.split("\n")
    assert lines[0] == "### ✅ conda-distro check-pr: ready to merge"
    assert "1 package(s): 1 pass; changed: `newpkg`; proposals: `newpkg`; base `HEAD~1`" in lines
    table = lines.index(HEADER)
    assert lines[table + 2] == "| `newpkg` (changed) | ✅ pass | – |  |"
    assert "**Findings:**" not in md and "needs-pin-update" not in md and "@" not in md
    assert lines[-2].startswith("**Next:** a maintainer of the changed packages (someone) reviews and merges")


@pytest.mark.slow
def test_proposal_without_consent_fails(sandbox_world: Path, capsys):
    propose_newpkg(sandbox_world, capsys, consent=False)
    consent_line = line_of(sandbox_world / "proposals/newpkg.yaml", "consent: false")

    code, doc = check_pr(capsys, sandbox_world, "--no-build")
    assert code == 1 and doc["ok"] is False
    assert doc["affected"] == ["newpkg"]
    assert [(f["check"], f["severity"], f["path"], f["line"]) for f in doc["proposals"]] == \
        [("proposal-consent-missing", "error", "proposals/newpkg.yaml", consent_line)]
    assert doc["lint"] == []

    code, md = check_pr_markdown(capsys, sandbox_world, "--no-build")
    assert code == 1
    assert md.startswith("### ❌ conda-distro check-pr: changes needed\n")
    assert f"- ❌ `proposals/newpkg.yaml:{consent_line}` [proposal-consent-missing] maintainer 'someone' has not consented" in md
    assert "Build and tests: not run here (`--no-build`" in md


# ---------------------------------------------------------------------------------------------
# a change with dependents


@pytest.mark.slow
def test_change_to_chain_root_builds_and_tests_its_dependents(sandbox_world: Path, capsys):
    rel = "recipes/tensorutils/recipe.yaml"
    edit(sandbox_world, rel, "  number: 0", "  number: 1")
    edit(sandbox_world, rel, "tensorutils.total([1, 2, 3]) == 6", "tensorutils.total([1, 2, 3, 4]) == 10")
    commit_all(sandbox_world, "tensorutils: rebuild, one more test case")

    code, doc = check_pr(capsys, sandbox_world)
    assert code == 0, doc
    assert doc["changed"] == ["tensorutils"]
    assert doc["affected"] == ["tensorutils", "layerkit", "trainloop"]  # dependency order
    assert [(b["name"], b["status"]) for b in doc["builds"]] == \
        [("tensorutils", "built"), ("layerkit", "built"), ("trainloop", "built")]
    assert re.fullmatch(r"noarch/tensorutils-0\.3\.2-\w+_1\.conda", doc["builds"][0]["artifact"])
    assert sorted({t["name"] for t in doc["tests"]}) == ["layerkit", "tensorutils", "trainloop"]
    for name in doc["affected"]:
        assert sorted((t["pytorch"], t["variant"], t["status"]) for t in doc["tests"] if t["name"] == name) == \
            [(r, v, "passed") for r, v in TARGETS], name
    assert doc["needs_pin_update"] == [] and doc["ok"] is True
    staged = {p.name.split("-")[0] for p in (sandbox_world / doc["scope"] / "channels/staging/noarch").glob("*.conda")}
    assert staged == {"tensorutils", "layerkit", "trainloop"}  # nothing else was built
    assert doc["maintainers"] == {"tensorutils": ["alice-ml"], "layerkit": ["bkowalski", "alice-ml"],
                                  "trainloop": ["chen-wei"]}

    code, md = check_pr_markdown(capsys, sandbox_world)
    assert code == 0
    rows = [line for line in md.split("\n") if line.startswith("| `")]
    assert rows == ["| `tensorutils` (changed) | ✅ pass | – |  |", "| `layerkit` | ✅ pass | – |  |",
                    "| `trainloop` | ✅ pass | – |  |"]


@pytest.mark.slow
def test_version_bump_asks_dependents_to_update_their_pins(sandbox_world: Path, capsys):
    edit(sandbox_world, "recipes/tensorutils/recipe.yaml", 'version: "0.3.2"', 'version: "0.4.0"')
    commit_all(sandbox_world, "tensorutils 0.4.0")
    layerkit = sandbox_world / "recipes/layerkit/recipe.yaml"
    pin_line = line_of(layerkit, "- tensorutils >=0.3.1,<0.4")

    code, doc = check_pr(capsys, sandbox_world, "--no-build")
    assert code == 1 and doc["ok"] is False
    assert doc["affected"] == ["tensorutils", "layerkit", "trainloop"]
    assert doc["needs_pin_update"] == [{
        "name": "layerkit", "dependency": "tensorutils", "new_version": "0.4.0", "pin": "tensorutils >=0.3.1,<0.4",
        "suggested": "tensorutils >=0.3.1,<0.5", "maintainers": ["bkowalski", "alice-ml"],
        "path": "recipes/layerkit/recipe.yaml", "line": pin_line}]
    # the solver agrees: layerkit cannot be installed with the new tensorutils
    assert all(not s["ok"] and s["conflicting"] == ["layerkit"] for s in doc["solve"])
    assert doc["builds"] == [] and doc["built"] is False

    code, md = check_pr_markdown(capsys, sandbox_world, "--no-build")
    assert code == 1
    assert md.startswith("### ❌ conda-distro check-pr: changes needed\n")
    assert "| `layerkit` | 📌 needs-pin-update | all 6 | pin `tensorutils >=0.3.1,<0.4` → `tensorutils >=0.3.1,<0.5` |" in md
    assert (f"- ❌ `recipes/layerkit/recipe.yaml:{pin_line}` `layerkit`: `tensorutils >=0.3.1,<0.4` does not admit "
            "tensorutils 0.4.0\n  hint: change it to `tensorutils >=0.3.1,<0.5`") in md
    assert "- ❌ not co-installable on all 6: `layerkit`" in md
    # the downstream maintainers, each mentioned once, with what they must do
    assert ("- @bkowalski: `layerkit`: change `tensorutils >=0.3.1,<0.4` to `tensorutils >=0.3.1,<0.5` in "
            f"`recipes/layerkit/recipe.yaml:{pin_line}`") in md
    assert md.count("@bkowalski") == 1 and md.count("@alice-ml") == 1
    assert "update the dependents' pins listed above" in md


# ---------------------------------------------------------------------------------------------
# lint errors and malformed input


@pytest.mark.slow
def test_lint_error_in_changed_recipe_is_reported_with_its_location(sandbox_world: Path, capsys):
    rel = "recipes/tensorutils/recipe.yaml"
    line = line_of(sandbox_world / rel, "- pytorch >=2.4,<2.7")
    edit(sandbox_world, rel, "    - pytorch >=2.4,<2.7", "    - pytorch >=2.4")
    commit_all(sandbox_world, "tensorutils: no upper bound")

    code, doc = check_pr(capsys, sandbox_world, "--no-build")
    assert code == 1 and doc["ok"] is False
    errors = [f for f in doc["lint"] if f["severity"] == "error"]
    assert [(f["check"], f["path"], f["line"]) for f in errors] == [("run-dep-unbounded", rel, line)]
    assert {f["recipe"] for f in doc["lint"]} == {"tensorutils"}  # only the changed recipe is linted
    assert all(s["ok"] for s in doc["solve"])  # still solved

    code, md = check_pr_markdown(capsys, sandbox_world, "--no-build")
    assert code == 1
    # the message quotes the recipe: escaped for markdown ('>' as a character reference, shown as '>')
    assert f"- ❌ `{rel}:{line}` [run-dep-unbounded] run requirement 'pytorch &#62;=2.4' has no upper bound" in md
    assert "**Next:** fix the lint errors" in md


@pytest.mark.slow
def test_unreadable_recipe_fails_the_gate_and_blocks_its_dependents(sandbox_world: Path, capsys):
    """A changed recipe rattler-build cannot read is a lint error of the PR (exit 1, file:line); its
    dependents are reported as blocked by it and nothing of theirs is built."""
    rel = "recipes/layerkit/recipe.yaml"
    (sandbox_world / rel).write_text((sandbox_world / rel).read_text() + "broken: [unclosed\n")
    commit_all(sandbox_world, "layerkit: bad YAML")

    code, doc = check_pr(capsys, sandbox_world)
    assert code == 1
    assert doc["malformed"] is False and doc["ok"] is False
    assert [(f["check"], f["path"]) for f in doc["lint"]] == [("recipe-invalid", rel)]
    assert [u["recipe"] for u in doc["unreadable"]] == ["layerkit"]
    assert doc["blocked"] and {b["by"] for b in doc["blocked"]} == {"layerkit"}
    assert doc["builds"] == []
    code, md = check_pr_markdown(capsys, sandbox_world)
    assert code == 1 and md.startswith("### ❌ conda-distro check-pr: changes needed\n")
    assert f"`{rel}:" in md
    assert "| `layerkit` (changed) | ❌ fail | – | recipe cannot be read |" in md
    assert "| `trainloop` | ⛔ blocked | – | waits for `layerkit` (unreadable) |" in md


@pytest.mark.slow
def test_no_build_lints_and_solves_but_builds_nothing(sandbox_world: Path, capsys):
    edit(sandbox_world, "recipes/metrickit/recipe.yaml", "  number: 0", "  number: 1")
    commit_all(sandbox_world, "metrickit: rebuild")

    code, doc = check_pr(capsys, sandbox_world, "--no-build")
    assert code == 0 and doc["ok"] is True
    assert doc["affected"] == ["metrickit", "textmetrics", "visionmetrics", "evalsuite"]
    assert [(s["pytorch"], s["variant"]) for s in doc["solve"]] == TARGETS and all(s["ok"] for s in doc["solve"])
    assert doc["builds"] == [] and doc["tests"] == [] and doc["built"] is False
    assert not (sandbox_world / "build").exists()  # no staging channel, no artifact, no log

    code, md = check_pr_markdown(capsys, sandbox_world, "--no-build")
    assert "Build and tests: not run here (`--no-build`; the sharded build jobs run them)." in md
    assert "| `metrickit` (changed) | ➖ n-a | – | not built here (`--no-build`) |" in md


# ---------------------------------------------------------------------------------------------
# pieces


@pytest.mark.parametrize("spec, new, expected", [
    (">=0.3.1,<0.4", "0.4.0", "tensorutils >=0.3.1,<0.5"),
    (">=1.1,<2", "2.0.0", "tensorutils >=1.1,<3"),
    (">=0.3.1,<0.4", "0.2.0", "tensorutils >=0.2.0,<0.3"),  # a downgrade lowers the floor
    ("<0.4", "0.4.1", "tensorutils >=0.4.1,<0.5"),
    ("==0.3.2", "0.4.0", "tensorutils >=0.4.0,<1"),
])
def test_suggest_pin_admits_the_new_version(spec, new, expected):
    from conda_distro.recipe.specs import admits

    got = suggest_pin("tensorutils", spec, new)
    assert got == expected
    assert admits(got.split(" ", 1)[1], new)


def _failing_hookprofiler(**kw) -> CheckPrResult:
    """hookprofiler changed, fails on 2.6.0 (cpu and cuda) with the same reason; hookviz, downstream, fails too."""
    tests = [Run(name=n, artifact=f"noarch/{n}-1.0-h_0.conda", pytorch=p, variant=v,
                        status="failed" if p == "2.6.0" else "passed",
                        reason="AttributeError: legacy_autograd_hook" if p == "2.6.0" else None,
                        log=f"/w/build/pr/main/logs/{n}/h_0.{p}-{v}.test.log")
             for n in ("hookprofiler", "hookviz") for p in ("2.4.1", "2.5.1", "2.6.0") for v in ("cpu", "cuda")]
    return CheckPrResult(base="origin/main", changed=["hookprofiler"], affected=["hookprofiler", "hookviz"],
                         maintainers={"hookprofiler": ["ivan-petrov"], "hookviz": ["viz-owner", "ivan-petrov"]},
                         built=True, root=Path("/w"), builds=[BuildRecord(name="hookprofiler", version="1.0", status="built"),
                                                             BuildRecord(name="hookviz", version="1.0", status="built")],
                         locations={"hookprofiler": RecipeLocation("recipes/hookprofiler/recipe.yaml", 12, 30),
                                    "hookviz": RecipeLocation("recipes/hookviz/recipe.yaml", 10, 25)},
                         tests=tests, **kw)


def test_markdown_groups_failures_links_logs_and_asks_downstream_once():
    from conda_distro.checkpr.comment import to_text

    res = _failing_hookprofiler()
    md = to_markdown(res, log_url="https://ci.example/run/7/logs/{path}")
    assert res.exit_code == 1
    lines = md.split("\n")
    assert lines[0] == "### ❌ conda-distro check-pr: changes needed"  # the verdict first
    assert "2 package(s): 2 fail; changed: `hookprofiler`; base `origin/main`" in lines
    assert "| `hookprofiler` (changed) | ❌ fail | 2.6.0 cpu/cuda | tests failed |" in lines
    assert "| `hookviz` | ❌ fail | 2.6.0 cpu/cuda | tests failed |" in lines
    # one finding per package and reason (not one per release × variant), with file:line, log link and hint
    findings = [ln for ln in lines if ln.startswith("- ❌ ")]
    assert findings == [
        "- ❌ `recipes/hookprofiler/recipe.yaml:30` `hookprofiler` test failed on 2.6.0 cpu/cuda: AttributeError: "
        "legacy_autograd_hook · [log](https://ci.example/run/7/logs/build/pr/main/logs/hookprofiler/h_0.2.6.0-cpu.test.log) "
        "(`build/pr/main/logs/hookprofiler/h_0.2.6.0-cpu.test.log`, +1 more)",
        "- ❌ `recipes/hookviz/recipe.yaml:25` `hookviz` test failed on 2.6.0 cpu/cuda: AttributeError: "
        "legacy_autograd_hook · [log](https://ci.example/run/7/logs/build/pr/main/logs/hookviz/h_0.2.6.0-cpu.test.log) "
        "(`build/pr/main/logs/hookviz/h_0.2.6.0-cpu.test.log`, +1 more)"]
    assert "  hint: reproduce with `conda-distro check-pr --base origin/main --only hookprofiler --pytorch 2.6.0`" in lines
    # downstream maintainers: each once, with what to do; the changed package's maintainer is not pinged for it
    assert md.count("@ivan-petrov") == 1 and md.count("@viz-owner") == 1
    assert ("- @viz-owner: `hookviz`: fails with this change (2.6.0 cpu/cuda); tell the author whether `hookviz` "
            "or this PR must change") in lines
    assert "fix the failing builds/tests" in md
    # without a log URL: the log's path
    assert "· log `build/pr/main/logs/hookviz/h_0.2.6.0-cpu.test.log` (+1 more)" in to_markdown(res)
    # --format text: the same content, no markdown
    text = to_text(res)
    assert text.startswith("check-pr: changes needed\n")
    assert not re.search(r"^#|\|---|\*\*|`|\]\(", text, re.M), text
    assert re.search(r"^  hookviz\s+fail\s+2.6.0 cpu/cuda\s+tests failed$", text, re.M)
    assert "    log: build/pr/main/logs/hookprofiler/h_0.2.6.0-cpu.test.log (+1 more)" in text
    assert "@" not in text


def test_statuses_cover_pass_fail_pin_blocked_and_na():
    from conda_distro.checkpr.check import PinUpdate
    from conda_distro.checkpr.comment import build_report

    tests = [Run(name=n, artifact=f"noarch/{n}-1.0-h_0.conda", pytorch="2.6.0", variant="cpu", status=st)
             for n, st in (("a", "passed"), ("b", "failed"), ("c", "failed"), ("d", "blocked"))]
    res = CheckPrResult(base="main", changed=["a"], affected=["a", "b", "c", "d", "e"], built=True, tests=tests,
                        builds=[BuildRecord(name=n, version="1.0", status="built") for n in "abce"]
                        + [BuildRecord(name="d", version="1.0", status="blocked", reason="dependency b passed no test")],
                        needs_pin_update=[PinUpdate("c", "a", "2.0", "a >=1,<2", "a >=1,<3", ["cee"], "recipes/c/recipe.yaml", 9)],
                        maintainers={"b": ["bee"], "c": ["cee"], "d": ["dee"]})
    rep = build_report(res)
    assert [(r.name, r.status, r.failed_on, r.note) for r in rep.rows] == [
        ("a", "pass", "", ""), ("b", "fail", "2.6.0 cpu", "tests failed"),
        ("c", "needs-pin-update", "2.6.0 cpu", "pin `a >=1,<2` → `a >=1,<3`"),
        ("d", "blocked", "2.6.0 cpu", "waits for `b`"), ("e", "n-a", "", "no supported release admitted")]
    assert [a.handle for a in rep.asks] == ["bee", "cee"]  # blocked and passing packages: nobody to ping


@pytest.mark.slow
def test_markdown_of_a_pr_that_breaks_one_package_fits_one_screen(built_world: Path, capsys):
    """The issue's bar: a PR that breaks one package, 2 packages × 6 release-variants, in ≤ 40 lines."""
    edit(built_world, "recipes/layerkit/recipe.yaml", "== [-1.0, 1.0]", "== [-1.0, 2.0]")
    commit_all(built_world, "layerkit: a test that fails")
    code, out, _ = run_cli(capsys, "check-pr", "--base", "HEAD~1", "--root", str(built_world), "--format", "markdown",
                           "--log-url", "https://github.com/o/r/actions/runs/5#artifacts")
    assert code == 1
    lines = out.rstrip("\n").split("\n")
    print(f"check-pr markdown: {len(lines)} lines")
    assert len(lines) <= 40, out
    assert lines[0] == "### ❌ conda-distro check-pr: changes needed"
    assert "| `layerkit` (changed) | ❌ fail | all 6 | tests failed |" in lines
    assert "| `trainloop` | ⛔ blocked | all 6 | waits for `layerkit` |" in lines
    [finding] = [ln for ln in lines if ln.startswith("- ❌ ")]
    line = line_of(built_world / "recipes/layerkit/recipe.yaml", "tests:")
    assert finding.startswith(f"- ❌ `recipes/layerkit/recipe.yaml:{line}` `layerkit` test failed on all 6: ")
    assert "AssertionError" in finding
    assert "[log](https://github.com/o/r/actions/runs/5#artifacts) (`build/pr/main/logs/layerkit/" in finding
    assert finding.endswith(", +5 more)")
    # text: the same verdict, no markdown
    code, text, _ = run_cli(capsys, "check-pr", "--base", "HEAD~1", "--root", str(built_world))
    assert code == 1 and text.startswith("check-pr: changes needed\n") and "|---" not in text and "###" not in text


@pytest.mark.slow
def test_a_changed_recipe_whose_build_main_already_has_needs_a_build_number_bump(built_world: Path, capsys):
    """layerkit 1.1.0 build 0 is in main; a PR changes its test but not its build number. The build would give
    main's file name a second content (and the gate re-tested main's file, with the OLD test: "ready to
    merge"). check-pr says: bump build.number. Once bumped, the new test really runs (and fails here)."""
    code, _, _ = run_cli(capsys, "promote", "--root", str(built_world))
    assert code == 1  # fastquant and hookprofiler are held; layerkit goes to main
    edit(built_world, "recipes/layerkit/recipe.yaml", "== [-1.0, 1.0]", "== [-1.0, 2.0]")
    commit_all(built_world, "layerkit: change a test, not the build number")
    code, out = check_pr_markdown(capsys, built_world)
    assert code == 1, out
    line = line_of(built_world / "recipes/layerkit/recipe.yaml", "number: 0")
    assert (f"- ❌ `recipes/layerkit/recipe.yaml:{line}` [build-number-bump] main already has layerkit 1.1.0 build 0 "
            "(promoted from commit ") in out
    assert "  hint: set build.number to 1 (or release a new version)" in out
    assert "| `layerkit` (changed) | ❌ fail |" in out
    edit(built_world, "recipes/layerkit/recipe.yaml", "number: 0", "number: 1")
    commit_all(built_world, "layerkit: build 1")
    code, out, _ = run_cli(capsys, "check-pr", "--base", "HEAD~2", "--root", str(built_world), "--format", "markdown")
    assert code == 1 and "build-number-bump" not in out
    assert "`layerkit` test failed on all 6: " in out and "AssertionError" in out


# ---------------------------------------------------------------------------------------------
# exit 2 still comments


@pytest.mark.slow
def test_licence_typo_in_a_recipe_is_reported_in_the_comment(sandbox_world: Path, capsys):
    rel = "recipes/tensorutils/recipe.yaml"
    edit(sandbox_world, rel, "  license: ", "  licence: ")
    line = line_of(sandbox_world / rel, "licence:")
    commit_all(sandbox_world, "tensorutils: typo")
    code, md = check_pr_markdown(capsys, sandbox_world, "--no-build")
    assert code == 1 and md.startswith("### ❌ conda-distro check-pr: changes needed\n")
    assert f"- ❌ `{rel}:{line}` [recipe-invalid] rattler-build cannot read the recipe: invalid value for 'about': " \
           "unknown field 'licence'" in md


@pytest.mark.slow
def test_licence_typo_in_a_proposal_exits_2_with_a_comment(sandbox_world: Path, capsys):
    propose_newpkg(sandbox_world, capsys, consent=True)
    edit(sandbox_world, "proposals/newpkg.yaml", "\nlicense: ", "\nlicence: ")
    line = line_of(sandbox_world / "proposals/newpkg.yaml", "licence:")
    commit_all(sandbox_world, "typo")
    code, md = check_pr_markdown(capsys, sandbox_world, "--no-build")
    assert code == 2
    assert md.startswith(f"### 🛑 conda-distro check-pr: cannot read `proposals/newpkg.yaml:{line}`: unknown key 'licence'")
    assert "**Next:** fix it and push again: nothing was built or tested." in md


@pytest.mark.slow
@pytest.mark.parametrize("case", ["distro.yaml key", "unknown base"])
def test_every_exit_2_prints_a_comment(sandbox_world: Path, capsys, case):
    base = "HEAD~1"
    if case == "distro.yaml key":
        edit(sandbox_world, "distro.yaml", "platforms:", "platfroms:")
        commit_all(sandbox_world, "typo")
    else:
        base = "no-such-ref"
    code, out, err = run_cli(capsys, "check-pr", "--base", base, "--root", str(sandbox_world), "--format", "markdown")
    assert code == 2 and "error:" in err
    assert out.startswith("### 🛑 conda-distro check-pr: ")
    if case == "distro.yaml key":
        assert out.startswith("### 🛑 conda-distro check-pr: cannot read `distro.yaml:")
        assert "platfroms" in out and "**What to do:** did you mean 'platforms'?" in out
    else:
        assert out.startswith("### 🛑 conda-distro check-pr: bad input: --base: unknown git reference 'no-such-ref'")
    code, out, _ = run_cli(capsys, "check-pr", "--base", base, "--root", str(sandbox_world), "--format", "json")
    assert code == 2 and out == ""  # JSON and text: stderr only, as every command


# ---------------------------------------------------------------------------------------------
# the reproduce command reproduces: the PR's own parent, a private scope, the shared staging untouched


def tree_state(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with the sha256 of its bytes: proof that nothing was changed there."""
    import hashlib

    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()} if folder.is_dir() else {}


@pytest.mark.slow
def test_the_reproduce_hint_fails_like_ci_did_and_leaves_shared_staging_alone(built_world: Path, capsys, tmp_path):
    """The shared staging holds main's metrickit; the PR renames metrickit.accuracy (and its own test), which
    breaks textmetrics. check-pr fails textmetrics; its hint used to be `build textmetrics --pytorch 2.4.1`,
    which tests against the shared staging's old metrickit and passes (and leaves its build there). The hint
    now names `check-pr --base B --only textmetrics --pytorch 2.4.1`: it fails the same way, from a private
    scope, and the shared staging and results are byte for byte what they were."""
    from support.worlds import copy_world

    repo = git.Repo(built_world)
    repo.git.checkout("-b", "rename-accuracy")
    for rel in ("recipes/metrickit/src/metrickit/__init__.py", "recipes/metrickit/recipe.yaml"):
        edit(built_world, rel, "accuracy(", "accuracy_score(")
    edit(built_world, "recipes/metrickit/recipe.yaml", "  number: 0", "  number: 1")
    commit_all(built_world, "metrickit: accuracy is accuracy_score now")
    shared = {name: tree_state(built_world / "build" / name) for name in ("channels", "results")}
    old_hint_world = copy_world(built_world, tmp_path / "old-hint")  # where the old hint may write

    code, md = check_pr_markdown(capsys, built_world)
    assert code == 1
    hint = "  hint: reproduce with `conda-distro check-pr --base HEAD~1 --only textmetrics --pytorch 2.4.1`"
    assert "| `textmetrics` | ❌ fail | all 6 | tests failed |" in md and hint in md.split("\n")

    command = hint.split("`")[1].split()[1:]  # as a person runs it, on the PR branch
    code, out, err = run_cli(capsys, *command, "--root", str(built_world), "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and doc["only"] == "textmetrics", err
    assert doc["affected"] == ["metrickit", "textmetrics"] and doc["scope"] == "build/pr/rename-accuracy--only-textmetrics"
    assert sorted((b["name"], b["status"]) for b in doc["builds"]) == [("metrickit", "built"), ("textmetrics", "built")]
    assert sorted((t["name"], t["pytorch"], t["variant"], t["status"]) for t in doc["tests"]) == \
        [("metrickit", "2.4.1", v, "passed") for v in ("cpu", "cuda")] + \
        [("textmetrics", "2.4.1", v, "failed") for v in ("cpu", "cuda")]
    assert all("accuracy" in t["reason"] for t in doc["tests"] if t["status"] == "failed")  # as CI saw it
    assert all(not t["cached"] for t in doc["tests"])  # run again, not a stored outcome
    now = {name: tree_state(built_world / "build" / name) for name in ("channels", "results")}
    assert now == shared, sorted(k for n in now for k in set(now[n].items()) ^ set(shared[n].items()))
    code, again, _ = run_cli(capsys, *command, "--root", str(built_world), "--format", "json")  # runs again, fresh
    assert code == 1 and all(not t["cached"] for t in json.loads(again)["tests"])

    # the old hint, in a copy of the world: it passes against the shared staging's old metrickit, and writes there
    code, out, _ = run_cli(capsys, "build", "textmetrics", "--pytorch", "2.4.1", "--root", str(old_hint_world),
                           "--format", "json")
    old = json.loads(out)
    assert code == 0 and {t["status"] for t in old["tests"] if t["name"] == "textmetrics"} == {"passed"}
    assert tree_state(old_hint_world / "build" / "results") != shared["results"]


@pytest.mark.slow
def test_a_window_pr_takes_mains_outcomes_for_the_files_it_does_not_change(built_world: Path, capsys):
    """A PR that only drops the oldest release affects every package; the files main serves are re-tested
    from main in the PR's scope. A test whose key main's results already hold (same file, release view and
    dependencies) takes that outcome (``cached``) instead of running again; the verdicts are those of a
    fresh runner that has no results of main and runs every test; the shared results are only read."""
    world = built_world
    code, _, _ = run_cli(capsys, "promote", "--root", str(world))  # hookprofiler and fastquant's pair are held
    assert code == 1
    commit_all(world, "channel_state: promote")
    edit(world, "distro.yaml", 'releases: ["2.4.1", ', "releases: [")
    commit_all(world, "support 2.5.1 and 2.6.0")
    shared = tree_state(world / "build" / "results")

    code, doc = check_pr(capsys, world)
    taken = {t["name"] for t in doc["tests"] if t.get("cached")}
    ran = {t["name"] for t in doc["tests"] if not t.get("cached")}
    # main's files (tested by `build --all` with every package in the run: same keys) are not tested again;
    # the held ones (not in main) are built and tested in the scope
    assert {"tensorutils", "layerkit", "metrickit", "evalsuite", "visionkit"} <= taken, doc["tests"]
    assert {"hookprofiler", "fastquant"} <= ran and not taken & {"hookprofiler", "fastquant"}
    assert {(t["pytorch"], t["variant"]) for t in doc["tests"]} == {(r, v) for r in ("2.5.1", "2.6.0") for v in ("cpu", "cuda")}
    assert tree_state(world / "build" / "results") == shared  # read, never written

    # a fresh runner (no results of main): every test runs, and the gate comes to the same verdicts
    fresh = {(t["name"], t["artifact"], t["pytorch"], t["variant"]): t["status"] for t in doc["tests"]}
    import shutil

    shutil.rmtree(world / "build" / "results")
    shutil.rmtree(world / "build" / "pr")
    code2, doc2 = check_pr(capsys, world)
    assert not any(t.get("cached") for t in doc2["tests"])
    assert {(t["name"], t["artifact"], t["pytorch"], t["variant"]): t["status"] for t in doc2["tests"]} == fresh
    assert code2 == 1 and code in (0, 1)  # without main's runs, hookprofiler's 2.6.0 failure is the PR's (fail closed)
