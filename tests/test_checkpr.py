"""The PR gate (spec §2 `check-pr`, §5 proposals): `conda-distro check-pr --base REF`.

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

from conda_distro.checkpr import CheckPrResult, suggest_pin, to_markdown

TARGETS = [(r, v) for r in ("2.4.1", "2.5.1", "2.6.0") for v in ("cpu", "cuda")]
HEADER = "| package | " + " | ".join(f"{r} {v}" for r, v in TARGETS) + " |"
PASS_ROW = " | ".join(["✅ pass"] * len(TARGETS))
from helpers import run_cli


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
    assert md.startswith("### conda-distro check-pr: ✅ nothing to build\n")
    assert "changes no recipe, proposal or distro.yaml (compared with `HEAD~1`)" in md


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
    assert lines[0] == "### conda-distro check-pr: ✅ ready to merge"
    assert "Changed: `newpkg`; proposals: `newpkg`" in lines
    assert "Affected (changed + reverse dependencies): `newpkg`" in lines
    table = lines.index(HEADER)
    assert lines[table + 2] == f"| `newpkg` | {PASS_ROW} |"
    assert "**Lint:**" not in md and "needs-pin-update" not in md
    assert lines[-2].startswith("**Next:** a maintainer of the changed packages reviews and merges")


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
    assert md.startswith("### conda-distro check-pr: ❌ changes needed\n")
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
    assert rows == [f"| `{n}` | {PASS_ROW} |" for n in ("tensorutils", "layerkit", "trainloop")]


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
    assert md.startswith("### conda-distro check-pr: ❌ changes needed\n")
    assert ("- `layerkit` (@bkowalski @alice-ml): `tensorutils >=0.3.1,<0.4` does not admit tensorutils 0.4.0; "
            f"change it to `tensorutils >=0.3.1,<0.5` in `recipes/layerkit/recipe.yaml:{pin_line}`") in md
    assert "- pytorch 2.6.0 (cuda): `layerkit`" in md
    assert "update the dependents' pins listed above" in md


# ---------------------------------------------------------------------------------------------
# lint errors and malformed input


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
    assert f"- ❌ `{rel}:{line}` [run-dep-unbounded] run requirement 'pytorch >=2.4' has no upper bound" in md
    assert "**Next:** fix the lint errors" in md


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
    assert code == 1 and md.startswith("### conda-distro check-pr: ❌ changes needed\n")
    assert f"`{rel}:" in md


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
    assert "| package |" not in md


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
    from conda_distro.specs import admits

    got = suggest_pin("tensorutils", spec, new)
    assert got == expected
    assert admits(got.split(" ", 1)[1], new)


def test_markdown_lists_failed_tests_with_their_maintainers():
    res = CheckPrResult(base="origin/main", changed=["hookprofiler"], affected=["hookprofiler"],
                        maintainers={"hookprofiler": ["ivan-petrov"]}, built=True,
                        builds=[{"name": "hookprofiler", "status": "built"}],
                        tests=[{"name": "hookprofiler", "pytorch": p, "variant": "cpu",
                                "status": "failed" if p == "2.6.0" else "passed",
                                "reason": "AttributeError: legacy_autograd_hook" if p == "2.6.0" else None}
                               for p in ("2.4.1", "2.5.1", "2.6.0")])
    md = to_markdown(res)
    assert res.exit_code == 1
    assert md.startswith("### conda-distro check-pr: ❌ changes needed\n")
    assert "| `hookprofiler` | ✅ pass | ✅ pass | ❌ fail |" in md
    assert "- `hookprofiler` failed on pytorch 2.6.0 (cpu): AttributeError: legacy_autograd_hook (@ivan-petrov)" in md
    assert "fix the failing builds/tests" in md
