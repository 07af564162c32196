"""`conda-distro propose`, the proposal schema and the proposal-* lint checks."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from support.helpers import run_cli

from conda_distro.channels.upstream_index import UpstreamIndex
from conda_distro.config import load_config
from conda_distro.distribution import load_distribution
from conda_distro.errors import ProposalError
from conda_distro.lint import CHECKS
from conda_distro.lint.proposals import lint_proposals
from conda_distro.proposal import changed_proposals, load_proposal, load_proposals, pytorch_pin
from conda_distro.recipe.model import load_recipe

RELEASES = ["2.4.1", "2.5.1", "2.6.0"]
PIN = "pytorch >=2.4,<2.7"
SHA = "a" * 64

# ---------------------------------------------------------------------------------------------
# a small distribution world


def _record(name: str, version: str, subdir: str = "noarch") -> dict:
    return {"name": name, "version": version, "build": "0", "build_number": 0, "depends": [], "subdir": subdir}


def write_channel(folder: Path, noarch: dict[str, str], linux: dict[str, str] | None = None) -> None:
    """A hand-written local channel: name-level checks only read names and versions."""
    for subdir, pkgs, key in (("noarch", noarch, "packages"), ("linux-64", linux or {}, "packages.conda")):
        records = {f"{n}-{v}-0.{'tar.bz2' if key == 'packages' else 'conda'}": _record(n, v, subdir)
                   for n, v in pkgs.items()}
        (folder / subdir).mkdir(parents=True, exist_ok=True)
        (folder / subdir / "repodata.json").write_text(json.dumps({"info": {"subdir": subdir}, key: records}))


def write_distro(root: Path, upstream: list[str], releases: list[str] = RELEASES) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "distro.yaml").write_text(textwrap.dedent(f"""\
        name: test-distro
        channels:
          upstream: {json.dumps(upstream)}
          staging: build/staging
          main: build/main
        pytorch:
          name: pytorch
          releases: {json.dumps(releases)}
        platforms: [linux-64]
        """))


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    """A distribution whose upstream is a local channel holding python, pytorch, numpy, taken-pkg."""
    r = tmp_path / "distro"
    write_distro(r, ["./upstream"])
    write_channel(r / "upstream",
                  {"python": "3.11.7", "numpy": "1.26.4", "taken-pkg": "1.0"},
                  {"pytorch": "2.4.1", "libtorch": "2.4.1"})
    # a second pytorch release in the same subdir (several records per name)
    data = json.loads((r / "upstream/linux-64/repodata.json").read_text())
    for v in ("2.5.1", "2.6.0"):
        data["packages.conda"][f"pytorch-{v}-0.conda"] = _record("pytorch", v, "linux-64")
    (r / "upstream/linux-64/repodata.json").write_text(json.dumps(data))
    return r


def recipe_text(name: str = "torch-foo", version: str = "1.2.0", run_deps: tuple[str, ...] = ("python >=3.10", PIN),
                maintainers: tuple[str, ...] = ("octocat",)) -> str:
    run_lines = "\n".join(f"    - {d}" for d in run_deps)
    maint = "\n".join(f"    - {m}" for m in maintainers)
    return f"""\
context:
  version: "{version}"
package:
  name: {name}
  version: ${{{{ version }}}}
source:
  url: https://pypi.org/packages/source/t/{name}/{name}-${{{{ version }}}}.tar.gz
  sha256: {SHA}
build:
  number: 0
  noarch: python
  script: ${{{{ PYTHON }}}} -m pip install . -vv --no-deps --no-build-isolation
requirements:
  host:
    - python >=3.10
    - pip
    - setuptools
  run:
{run_lines}
tests:
  - python:
      imports:
        - {name.replace('-', '_')}
about:
  homepage: https://github.com/octocat/{name}
  summary: A test package
  license: MIT
  license_file: LICENSE
extra:
  recipe-maintainers:
{maint}
"""


def proposal_doc(name: str = "torch-foo", version: str = "1.2.0", maintainers: tuple[tuple[str, bool], ...] = (("octocat", True),),
                 **overrides) -> dict:
    doc = {
        "schema_version": 1,
        "name": name,
        "version": version,
        "summary": "A test package",
        "homepage": f"https://github.com/octocat/{name}",
        "repository": f"https://github.com/octocat/{name}",
        "license": "MIT",
        "issue": "",
        "maintainers": [{"handle": h, "consent": c} for h, c in maintainers],
        "pytorch_dependency": "Builds nn.Module layers on torch.autograd.",
        "focus_area": "deep learning",
        "downstream_users": "some lab",
        "test_plan": "import and a forward pass on CPU",
    }
    doc.update(overrides)
    return doc


def write_package(root: Path, name: str = "torch-foo", *, recipe: str | None = None, proposal: dict | None = None) -> None:
    (root / "recipes" / name).mkdir(parents=True, exist_ok=True)
    (root / "recipes" / name / "recipe.yaml").write_text(recipe if recipe is not None else recipe_text(name))
    (root / "proposals").mkdir(exist_ok=True)
    (root / "proposals" / f"{name}.yaml").write_text(yaml.safe_dump(proposal or proposal_doc(name), sort_keys=False))


def proposal_findings(root: Path, names: tuple[str, ...] = ()) -> list:
    dist = load_distribution(root, strict=False)
    return lint_proposals(dist, names=names)


def ids(findings) -> list[str]:
    return sorted(f.check for f in findings)


# ---------------------------------------------------------------------------------------------
# propose


@pytest.mark.parametrize("releases, expected", [
    (["2.4.1", "2.5.1", "2.6.0"], ">=2.4,<2.7"),
    (["2.7.1", "2.8.0", "2.9.1"], ">=2.7,<2.10"),
    (["1.13.1", "2.0.0"], ">=1.13,<2.1"),
    (["2.5.0"], ">=2.5,<2.6"),
])
def test_pytorch_pin_spans_supported_releases_at_minor_granularity(releases, expected):
    assert pytorch_pin(releases) == expected


def test_propose_writes_proposal_and_recipe_skeleton(root, capsys):
    code, out, err = run_cli(capsys, "propose", "torch-foo", "--maintainer", "octocat", "--maintainer", "org/team",
                         "--version", "1.10", "--summary", "Tensor foo", "--homepage", "https://github.com/o/torch-foo",
                         "--license", "BSD-3-Clause", "--root", str(root), "--format", "json")
    assert code == 0, err
    assert json.loads(out) == {"ok": True, "written": ["proposals/torch-foo.yaml", "recipes/torch-foo/recipe.yaml"]}

    ptext = (root / "proposals/torch-foo.yaml").read_text()
    doc = yaml.safe_load(ptext)
    assert doc["name"] == "torch-foo"
    assert doc["version"] == "1.10"  # a string, not the float 1.1
    assert doc["summary"] == "Tensor foo"
    assert doc["homepage"] == doc["repository"] == "https://github.com/o/torch-foo"
    assert doc["license"] == "BSD-3-Clause"
    assert doc["maintainers"] == [{"handle": "octocat", "consent": False}, {"handle": "org/team", "consent": False}]
    for key in ("pytorch_dependency", "focus_area", "downstream_users", "test_plan", "issue"):
        assert doc[key] == ""
    assert "consent: true" in ptext  # the comment tells maintainers what to do
    assert load_proposal(root / "proposals/torch-foo.yaml").data.maintainers[1].handle == "org/team"

    rtext = (root / "recipes/torch-foo/recipe.yaml").read_text()
    recipe = load_recipe(root / "recipes/torch-foo/recipe.yaml")
    assert recipe.name == "torch-foo" and recipe.version == "1.10"
    assert recipe.noarch == "python" and recipe.build_number == 0
    assert [d.raw for d in recipe.deps("run")] == ["python >=3.10", PIN]
    assert {"python", "pip"} <= recipe.dep_names("host")
    assert recipe.maintainers == ["octocat", "org/team"]
    assert recipe.tests == [{"python": {"imports": ["torch_foo"]}}]
    assert recipe.about["license"] == "BSD-3-Clause" and recipe.about["summary"] == "Tensor foo"
    assert "version: ${{ version }}" in rtext
    assert "torch_foo-${{ version }}.tar.gz" in rtext
    assert recipe.sources[0].sha256 == "0" * 64 and "TODO: sha256" in rtext
    assert recipe.sources[0].url == "https://pypi.org/packages/source/t/torch-foo/torch_foo-1.10.tar.gz"


def test_propose_text_output_and_placeholder_version(root, capsys):
    code, out, _ = run_cli(capsys, "propose", "foo", "--maintainer", "octocat", "--root", str(root))
    assert code == 0
    assert "wrote proposals/foo.yaml" in out and "wrote recipes/foo/recipe.yaml" in out
    assert load_recipe(root / "recipes/foo/recipe.yaml").version == "0.0.0"
    findings = proposal_findings(root)
    assert any(f.check == "proposal-incomplete" and "placeholder" in f.message for f in findings)


def test_skeleton_builds_with_rattler_build_once_sha256_is_filled(root, capsys):
    import rattler_build  # a dependency of the package: never a reason to skip
    assert run_cli(capsys, "propose", "torch-foo", "--maintainer", "octocat", "--version", "1.2.0",
               "--root", str(root))[0] == 0
    text = (root / "recipes/torch-foo/recipe.yaml").read_text()
    assert '0' * 64 in text  # the placeholder: well-formed, and lint flags it (next test)
    recipe = rattler_build.Stage0Recipe.from_yaml(text.replace("0" * 64, SHA), recipe_dir=root / "build" / "parsed")
    [variant] = recipe.render(rattler_build.VariantConfig(), rattler_build.RenderConfig())
    package = variant.recipe.package
    assert (package.name, str(package.version)) == ("torch-foo", "1.2.0")


def _lint(capsys, root: Path) -> tuple[int, dict]:
    code, out, err = run_cli(capsys, "lint", "--root", str(root), "--format", "json")
    return code, json.loads(out)


def test_lint_on_fresh_skeleton_flags_only_what_a_person_must_fill_in(root, capsys):
    assert run_cli(capsys, "propose", "torch-foo", "--maintainer", "octocat", "--version", "1.2.0", "--summary", "Foo",
               "--homepage", "https://github.com/o/torch-foo", "--license", "MIT", "--root", str(root))[0] == 0
    code, doc = _lint(capsys, root)
    assert code == 1
    recipe_checks = {f["check"] for f in doc["findings"] if f["path"].startswith("recipes/")}
    assert recipe_checks == {"source-missing-sha256"}  # the placeholder
    proposal_checks = {f["check"] for f in doc["findings"] if f["path"] == "proposals/torch-foo.yaml"}
    assert proposal_checks == {"proposal-consent-missing", "proposal-incomplete", "proposal-details-missing"}
    incomplete = {f["message"] for f in doc["findings"] if f["check"] == "proposal-incomplete"}
    assert incomplete == {"'pytorch_dependency' is not answered"}

    # a person fills in the blanks: lint passes
    ppath = root / "proposals/torch-foo.yaml"
    pdoc = yaml.safe_load(ppath.read_text())
    pdoc["maintainers"][0]["consent"] = True
    pdoc.update(pytorch_dependency="torch.nn layers", focus_area="deep learning", downstream_users="labs",
                test_plan="forward pass")
    ppath.write_text(yaml.safe_dump(pdoc, sort_keys=False))
    rpath = root / "recipes/torch-foo/recipe.yaml"
    rpath.write_text(rpath.read_text().replace("0" * 64, SHA))
    code, doc = _lint(capsys, root)
    assert (code, doc["findings"]) == (0, [])


def test_lint_on_bare_skeleton(root, capsys):
    assert run_cli(capsys, "propose", "torch-foo", "--maintainer", "octocat", "--version", "1.2.0", "--root", str(root))[0] == 0
    code, doc = _lint(capsys, root)
    recipe_checks = {f["check"] for f in doc["findings"] if f["path"].startswith("recipes/")}
    assert recipe_checks == {"source-missing-sha256", "license-missing", "summary-missing", "homepage-missing"}
    assert code == 1


@pytest.mark.parametrize("argv, field", [
    (["Bad_Name", "--maintainer", "octocat"], "NAME"),
    (["-", "--maintainer", "octocat"], "NAME"),
    (["foo bar", "--maintainer", "octocat"], "NAME"),
    (["pytorch", "--maintainer", "octocat"], "NAME"),
    (["foo", "--maintainer", "@octocat"], "--maintainer"),
    (["foo", "--maintainer", "bad handle"], "--maintainer"),
    (["foo", "--maintainer", "-octocat"], "--maintainer"),
    (["foo", "--maintainer", "a", "--maintainer", "A"], "--maintainer"),
    (["foo"], "--maintainer"),
    (["foo", "--maintainer", "octocat", "--version", "v1.0"], "--version"),
    (["foo", "--maintainer", "octocat", "--version", "1.0-1"], "--version"),
    (["foo", "--maintainer", "octocat", "--homepage", "github.com/x"], "--homepage"),
])
def test_propose_refuses_bad_input_and_writes_nothing(root, capsys, argv, field):
    code, out, err = run_cli(capsys, "propose", *argv, "--root", str(root))
    assert code == 2
    assert f"field '{field}'" in err
    assert not (root / "proposals").exists() and not (root / "recipes").exists()


def test_propose_refuses_existing_proposal(root, capsys):
    (root / "proposals").mkdir()
    (root / "proposals/foo.yaml").write_text("mine\n")
    code, _, err = run_cli(capsys, "propose", "foo", "--maintainer", "octocat", "--root", str(root))
    assert code == 2 and "proposals/foo.yaml" in err and "--force" in err
    # (what lint's proposal-recipe-missing leads to: the recipe by hand, never --force over the answers)
    assert "write recipes/foo/recipe.yaml by hand" in err and "overwrite both files" in err
    assert (root / "proposals/foo.yaml").read_text() == "mine\n"
    assert not (root / "recipes/foo/recipe.yaml").exists()


def test_propose_refuses_existing_recipe_unless_forced(root, capsys):
    (root / "recipes/foo").mkdir(parents=True)
    (root / "recipes/foo/recipe.yaml").write_text("mine\n")
    code, _, err = run_cli(capsys, "propose", "foo", "--maintainer", "octocat", "--root", str(root), "--format", "json")
    assert code == 2 and "recipes/foo/recipe.yaml" in err
    assert not (root / "proposals/foo.yaml").exists()
    assert (root / "recipes/foo/recipe.yaml").read_text() == "mine\n"

    code, out, _ = run_cli(capsys, "propose", "foo", "--maintainer", "octocat", "--root", str(root), "--format", "json",
                       "--force")
    assert code == 0 and len(json.loads(out)["written"]) == 2
    assert load_recipe(root / "recipes/foo/recipe.yaml").name == "foo"


def test_propose_leaves_no_temp_files(root, capsys):
    assert run_cli(capsys, "propose", "foo", "--maintainer", "octocat", "--root", str(root))[0] == 0
    leftovers = [p for p in root.rglob(".*.tmp")]
    assert leftovers == []


# ---------------------------------------------------------------------------------------------
# proposal checks: each fires on a crafted case and not on the good one


def test_good_proposal_has_no_findings(root):
    write_package(root)
    assert proposal_findings(root) == []


def test_every_proposal_check_is_registered_and_documented(capsys, root):
    pids = [c for c in CHECKS if c.startswith("proposal-")]
    assert set(pids) == {
        "proposal-invalid", "proposal-recipe-missing", "proposal-recipe-mismatch", "proposal-pytorch-not-run-dep",
        "proposal-consent-missing", "proposal-name-taken", "proposal-deps-unresolvable", "proposal-incomplete",
        "proposal-details-missing"}
    for cid in pids:
        assert CHECKS[cid].explanation()
    code, out, _ = run_cli(capsys, "lint", "--list-checks", "--format", "json", "--root", str(root))
    assert code == 0 and set(pids) <= {c["id"] for c in json.loads(out)["checks"]}


def _mutate_recipe(**kw):
    return lambda root: (root / "recipes/torch-foo/recipe.yaml").write_text(recipe_text(**kw))


def _mutate_proposal(**kw):
    return lambda root: (root / "proposals/torch-foo.yaml").write_text(
        yaml.safe_dump(proposal_doc(**kw), sort_keys=False))


CASES = {
    "recipe-missing": (lambda root: (root / "recipes/torch-foo/recipe.yaml").unlink(),
                       "proposal-recipe-missing", "does not exist"),
    "recipe-name": (_mutate_recipe(name="torch-bar"), "proposal-recipe-mismatch", "package.name is 'torch-bar'"),
    "recipe-older": (_mutate_recipe(version="1.1.9"), "proposal-recipe-mismatch", "older than the proposed version"),
    "recipe-extra-maintainer": (_mutate_recipe(maintainers=("octocat", "hubot")), "proposal-recipe-mismatch",
                                "'hubot' is not listed"),
    "proposal-extra-maintainer": (_mutate_proposal(maintainers=(("octocat", True), ("hubot", True))),
                                  "proposal-recipe-mismatch", "'hubot' is not in the recipe"),
    "no-pytorch": (_mutate_recipe(run_deps=("python >=3.10", "numpy >=1.24,<3")), "proposal-pytorch-not-run-dep",
                   "pytorch is not a run requirement"),
    "no-consent": (_mutate_proposal(maintainers=(("octocat", False),)), "proposal-consent-missing",
                   "'octocat' has not consented"),
    "unknown-dep": (_mutate_recipe(run_deps=("python >=3.10", PIN, "not-a-pkg >=1,<2")),
                    "proposal-deps-unresolvable", "'not-a-pkg' is neither"),
    "dep-version": (_mutate_recipe(run_deps=("python >=3.10", PIN, "numpy >=2,<3")),
                    "proposal-deps-unresolvable", "no upstream version matches"),
    "python-version": (_mutate_recipe(run_deps=("python >=3.12", PIN)), "proposal-deps-unresolvable",
                       "'python >=3.12'"),
    "no-summary": (_mutate_proposal(summary=""), "proposal-incomplete", "'summary' is not answered"),
    "no-why": (_mutate_proposal(pytorch_dependency=None), "proposal-incomplete", "'pytorch_dependency'"),
    "no-repository": (_mutate_proposal(repository=""), "proposal-incomplete", "'repository'"),
    "no-version": (_mutate_proposal(version=""), "proposal-incomplete", "'version' is not answered"),
    "no-test-plan": (_mutate_proposal(test_plan=""), "proposal-details-missing", "'test_plan'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_proposal_check_fires_on_crafted_case(root, case):
    mutate, check, message = CASES[case]
    write_package(root)
    mutate(root)
    findings = proposal_findings(root)
    assert [f.check for f in findings] == [check], findings
    [f] = findings
    assert message in f.message
    assert f.path == "proposals/torch-foo.yaml" and f.recipe == "torch-foo"
    assert f.line and f.line >= 1
    assert f.severity == ("warning" if check == "proposal-details-missing" else "error")


def test_consent_finding_points_at_the_consent_line(root):
    write_package(root, proposal=proposal_doc(maintainers=(("octocat", True), ("hubot", False))),
                  recipe=recipe_text(maintainers=("octocat", "hubot")))
    [f] = proposal_findings(root)
    lines = (root / "proposals/torch-foo.yaml").read_text().splitlines()
    assert f.check == "proposal-consent-missing" and lines[f.line - 1].strip() == "consent: false"


def test_name_taken_upstream(root):
    write_package(root, "taken-pkg")
    findings = proposal_findings(root)
    assert [f.check for f in findings] == ["proposal-name-taken"]
    assert "upstream/noarch/repodata.json" in findings[0].message


def test_name_taken_reads_packages_conda_of_platform_subdirs(root):
    write_package(root, "libtorch")
    assert [f.check for f in proposal_findings(root)] == ["proposal-name-taken"]


def test_dependency_on_a_distribution_recipe_resolves(root):
    write_package(root, "torch-bar")
    write_package(root, recipe=recipe_text(run_deps=("python >=3.10", PIN, "torch-bar >=1.2,<2")))
    assert proposal_findings(root) == []
    write_package(root, recipe=recipe_text(run_deps=("python >=3.10", PIN, "torch-bar >=2,<3")))
    [f] = proposal_findings(root, names=("torch-foo",))
    assert f.check == "proposal-deps-unresolvable" and "the distribution's torch-bar is 1.2.0" in f.message


def test_virtual_packages_and_pin_functions_are_not_looked_up(root):
    deps = ("python >=3.10", PIN, "__cuda", "${{ pin_compatible('numpy', upper_bound='x') }}")
    write_package(root, recipe=recipe_text(run_deps=deps))
    assert proposal_findings(root) == []


def test_channel_names_cannot_be_read_offline_so_upstream_checks_are_skipped(tmp_path):
    root = tmp_path / "d"
    write_distro(root, ["conda-forge"])
    write_package(root, "taken-pkg", recipe=recipe_text("taken-pkg", run_deps=("python >=3.10", PIN, "not-a-pkg")))
    assert proposal_findings(root) == []
    index = UpstreamIndex.load(load_config(root))
    assert index.unreadable == ["conda-forge"] and not index.complete


def test_mixed_upstream_reports_taken_names_but_not_unresolvable_deps(root):
    cfg = (root / "distro.yaml").read_text().replace('["./upstream"]', '["./upstream", "conda-forge"]')
    (root / "distro.yaml").write_text(cfg)
    write_package(root, "taken-pkg", recipe=recipe_text("taken-pkg", run_deps=("python >=3.10", PIN, "not-a-pkg")))
    assert ids(proposal_findings(root)) == ["proposal-name-taken"]


def test_lint_reports_proposals_with_recipes(root, capsys):
    write_package(root, proposal=proposal_doc(maintainers=(("octocat", False),)))
    code, doc = _lint(capsys, root)
    assert code == 1
    assert [(f["check"], f["path"]) for f in doc["findings"]] == [("proposal-consent-missing", "proposals/torch-foo.yaml")]

    code, out, _ = run_cli(capsys, "lint", "--root", str(root), "--check", "license-missing")
    assert code == 0  # --check selects among proposal checks too
    code, out, _ = run_cli(capsys, "lint", "--root", str(root), "--format", "github")
    assert "::error file=proposals/torch-foo.yaml,line=" in out


def test_lint_names_select_proposals(root, capsys):
    write_package(root, proposal=proposal_doc(maintainers=(("octocat", False),)))
    write_package(root, "torch-bar")
    assert ids(proposal_findings(root, names=("torch-bar",))) == []
    code, doc = _lint(capsys, root)
    assert ids(proposal_findings(root, names=("torch-foo",))) == ["proposal-consent-missing"]


# ---------------------------------------------------------------------------------------------
# malformed proposals: exit 2, file and line


@pytest.mark.parametrize("text, line, message, hint", [
    ("name: torch-foo\nmaintainer:\n  - handle: octocat\n", 2, "unknown key 'maintainer'", "did you mean 'maintainers'?"),
    ("name: torch-foo\nmaintainers:\n  - handle: octocat\n    consnet: true\n", 4, "unknown key 'consnet'",
     "did you mean 'consent'?"),
    ("name: torch-foo\nmaintainers:\n  - handle: octocat\n    consent: maybe\n", 4, "consent must be true or false", None),
    ("name: torch-foo\nmaintainers:\n  - handle: '@octocat'\n", 3, "is not a GitHub handle", None),
    ("name: torch-foo\nmaintainers: [{handle: a}, {handle: A}]\n", 2, "listed more than once", None),
    ("name: torch-foo\nmaintainers:\n  - handle: octocat\n  consent: true\n- x\n", 4, "invalid YAML", None),
    ("name: torch-foo\nsummary: [unclosed\n", 3, "invalid YAML", None),
    ("name: torch-foo\n", 1, "required key is missing", "add 'maintainers:'"),
    ("name: torch-bar\nmaintainers: [{handle: a}]\n", 1, "names 'torch-bar'", "rename the file"),
    ("name: torch-foo\nhomepage: example.org\nmaintainers: [{handle: a}]\n", 2, "not an http(s) URL", None),
    ("schema_version: 2\nname: torch-foo\nmaintainers: [{handle: a}]\n", 1, "unsupported schema_version 2", None),
    ("- just\n- a list\n", 1, "must be a YAML mapping", None),
])
def test_malformed_proposal_is_bad_input_with_path_and_line(root, capsys, text, line, message, hint):
    write_package(root)
    (root / "proposals/torch-foo.yaml").write_text(text)
    with pytest.raises(ProposalError) as exc:
        load_proposal(root / "proposals/torch-foo.yaml")
    assert exc.value.line == line and message in exc.value.message
    if hint:
        assert hint in exc.value.hint

    code, doc = _lint(capsys, root)
    assert code == 2
    [f] = [f for f in doc["findings"] if f["path"] == "proposals/torch-foo.yaml"]
    assert f["check"] == "proposal-invalid" and f["line"] == line and message in f["message"]
    if hint:
        assert hint in f["hint"]
    code, out, _ = run_cli(capsys, "lint", "--root", str(root))
    assert code == 2 and f"proposals/torch-foo.yaml:{line}: error: [proposal-invalid]" in out


def test_load_proposals_collects_errors_and_strict_raises(root):
    write_package(root)
    write_package(root, "torch-bar")
    (root / "proposals/torch-bar.yaml").write_text("name: torch-bar\nmaintainerz: []\n")
    (root / "proposals/README.md").write_text("not a proposal\n")
    loaded = load_proposals(load_config(root))
    assert list(loaded.proposals) == ["torch-foo"]
    assert [e.field for e in loaded.errors] == ["maintainerz"]
    with pytest.raises(ProposalError, match="unknown key 'maintainerz'"):
        load_proposals(load_config(root), strict=True)


def test_yaml_scalars_stay_strings(root):
    write_package(root, proposal=None)
    p = root / "proposals/torch-foo.yaml"
    p.write_text(p.read_text().replace("version: 1.2.0", "version: 1.10"))
    assert load_proposal(p).data.version == "1.10"


def test_changed_proposals_since_a_git_ref(root):
    import git  # gitpython, a dependency of the package
    repo = git.Repo.init(root)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t").set_value("user", "email", "t@example.org")
    write_package(root, "torch-bar")
    repo.index.add([str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".git" not in p.parts])
    repo.index.commit("base")
    write_package(root)  # a new proposal, untracked
    p = root / "proposals/torch-bar.yaml"
    p.write_text(p.read_text().replace("some lab", "two labs"))
    assert changed_proposals(root, "HEAD") == ["torch-bar", "torch-foo"]


def test_corrupt_upstream_repodata_is_bad_input(root, capsys):
    write_package(root)
    (root / "upstream/noarch/repodata.json").write_text("{not json")
    code, out, err = run_cli(capsys, "lint", "--root", str(root))
    assert code == 2 and "upstream/noarch/repodata.json" in err and "cannot read repodata" in err
