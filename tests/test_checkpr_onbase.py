"""check-pr tells the failures a PR causes from those already present on the base (main).

Fast tests: the classifier (:func:`conda_distro.checkpr.onbase.classify` and :func:`main_record`) on typed
records, and the gate's verdict, JSON and comment over a real git repository holding main's ledger at the
base commit and a results store. Slow tests: the sandbox world, where a package fails a release on main and
a PR changes distro.yaml (exit 0, that failure listed as already failing) or introduces a failure of its
own (exit 1).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import git
import pytest
from support.helpers import run_cli

from conda_distro.checkpr.check import CheckPrResult, RecipeLocation
from conda_distro.checkpr.comment import build_report, to_markdown, to_text
from conda_distro.checkpr.onbase import BaseLookup, MainRecord, classify, main_record
from conda_distro.state.ledger import ArtifactEntry, PackageState, TestEvidence
from conda_distro.state.results import ArtifactResults, BuildRecord, ResultsStore
from conda_distro.state.results import TestRecord as Run  # (renamed: pytest would try to collect a Test* class)
from conda_distro.vocab import Target

ART = "noarch/hookprofiler-0.7.0-pyh_0.conda"
SHA = "a" * 64
WHEN = dt.datetime(2026, 1, 5, 12, tzinfo=dt.UTC)
REASON = ("test 0 failed: Script failed with status 1: AttributeError: module 'torch' has no attribute "
          "'legacy_autograd_hook' (/tmp/rattler-build_abc/test_env_h1a2b3c4d5e6/lib/python3.11/site-packages/x.py)")
# the same cause in the PR's run: another test environment's prefix
REASON_PR = REASON.replace("rattler-build_abc/test_env_h1a2b3c4d5e6", "rattler-build_zz9/test_env_h9f8e7d6c5b4a")
OTHER = "test 0 failed: Script failed with status 1: TypeError: hook() takes 1 positional argument but 2 were given"
T26 = Target("2.6.0", "cpu")


def run(status: str, reason: str | None = None, *, name: str = "hookprofiler", pytorch: str = "2.6.0",
        variant: str = "cpu", commit: str | None = None, date: dt.datetime = WHEN, artifact: str = ART,
        baseline: bool | None = None) -> Run:
    return Run(name=name, artifact=artifact, pytorch=pytorch, variant=variant, status=status, reason=reason,
               commit=commit, date=date, baseline=baseline)


def ledger(*tests: tuple[str, str, str], retired: bool = False) -> PackageState:
    """hookprofiler's ledger with one artifact in main, tested (release, variant, status) at WHEN."""
    from conda_distro.state.ledger import Retirement

    entry = ArtifactEntry(artifact=ART, sha256=SHA, version="0.7.0", build="pyh_0", build_number=0, channel="main",
                          promoted_at=WHEN, commit=None,
                          tests=[TestEvidence(release=r, variant=v, status=s, date=WHEN) for r, v, s in tests],
                          retired=Retirement(at=WHEN, reason="gone", by="rm") if retired else None)
    return PackageState(schema_version=1, name="hookprofiler", artifacts=[entry])


def results(*runs: Run) -> ArtifactResults:
    return ArtifactResults(artifact=ART, name="hookprofiler", version="0.7.0", sha256=SHA, tests=list(runs))


def yes(_commit: str) -> bool:
    return True


def no(_commit: str) -> bool:
    return False


# ---------------------------------------------------------------------------------------------
# the classifier


def test_a_failure_main_has_with_the_same_signature_is_on_base_and_everything_else_is_new():
    key = ("hookprofiler", T26)
    failing = [run("failed", REASON_PR)]
    [same] = classify(failing, {key: MainRecord("failed", REASON)})
    assert same.on_base and "same cause" in same.why  # paths cut: one signature
    [other] = classify(failing, {key: MainRecord("failed", OTHER)})
    assert not other.on_base and "another cause" in other.why
    # fail closed: no evidence, main passed, main's failure without a reason, another status
    assert [c.on_base for c in classify(failing, {})] == [False]
    assert [c.on_base for c in classify(failing, {key: MainRecord("passed")})] == [False]
    assert [c.on_base for c in classify(failing, {key: MainRecord("failed", None)})] == [False]
    assert [c.on_base for c in classify(failing, {key: MainRecord("blocked", REASON)})] == [False]
    # a failure without a reason matches nothing, not even main's failure without one
    assert [c.on_base for c in classify([run("failed")], {key: MainRecord("failed")})] == [False]
    # the same failure on another target is not evidence for this one
    assert [c.on_base for c in classify([run("failed", REASON, pytorch="2.5.1")], {key: MainRecord("failed", REASON)})] == [False]
    # passes, flaky runs and infrastructure errors are not failures to classify
    assert classify([run("passed"), run("flaky"), run("error", "timeout")], {key: MainRecord("failed", REASON)}) == []


def test_main_record_reads_the_ledger_then_runs_on_the_base():
    recorded = run("failed", REASON, commit="c" * 40)
    # main's artifact failed here: the reason is the run the ledger recorded (same date)
    rec = main_record(ledger(("2.6.0", "cpu", "failed")), [results(recorded)], T26, no)
    assert rec == MainRecord("failed", REASON, "ledger")
    # main's artifact passed here (even if a run on the base failed): main passes
    assert main_record(ledger(("2.6.0", "cpu", "passed")), [results(recorded)], T26, yes) == MainRecord("passed")
    # the ledger says failed but no run of that artifact says why: a failure without a reason
    assert main_record(ledger(("2.6.0", "cpu", "failed")), [], T26, yes) == MainRecord("failed", None)
    # not in main for this target (no evidence there, or retired): the newest run on the base's history
    for state in (None, ledger(("2.5.1", "cpu", "passed")), ledger(("2.6.0", "cpu", "passed"), retired=True)):
        assert main_record(state, [results(recorded)], T26, yes) == MainRecord("failed", REASON, "results")
        assert main_record(state, [results(recorded)], T26, no) is None  # a run off the base's history: no evidence
    fixed = run("passed", commit="d" * 40, date=WHEN + dt.timedelta(days=1))
    assert main_record(None, [results(recorded, fixed)], T26, yes) == MainRecord("passed", None, "results")
    # a baseline run, a run without a commit (uncommitted recipe) and an infrastructure error are no evidence
    for r in (run("failed", REASON, commit="c" * 40, baseline=True), run("failed", REASON),
              run("error", "timeout", commit="c" * 40)):
        assert main_record(None, [results(r)], T26, yes) is None


# ---------------------------------------------------------------------------------------------
# the gate over a real repository: main's ledger at the base commit, the shared results store


def _repo(tmp_path: Path, state: PackageState | None) -> tuple[Path, str]:
    """A checkout whose base commit holds ``state`` as channel_state/hookprofiler.json; returns (root, base)."""
    root = tmp_path / "dist"
    (root / "channel_state").mkdir(parents=True)
    repo = git.Repo.init(root)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t").set_value("user", "email", "t@example.invalid")
    (root / "README.md").write_text("x\n")
    if state is not None:
        (root / "channel_state" / "hookprofiler.json").write_text(state.to_json())
    repo.git.add("-A")
    repo.index.commit("main")
    return root, repo.head.commit.hexsha


def _gate(root: Path, base: str, tests: list[Run]) -> CheckPrResult:
    lookup = BaseLookup(root, base, root / "channel_state", root / "build" / "results")
    return CheckPrResult(base=base, changed=[], affected=["hookprofiler", "layerkit"], built=True, root=root,
                         builds=[BuildRecord(name=n, version="1", status="built") for n in ("hookprofiler", "layerkit")],
                         locations={"hookprofiler": RecipeLocation("recipes/hookprofiler/recipe.yaml", 9, 27)},
                         maintainers={"hookprofiler": ["ivan-petrov"]}, tests=tests, on_base_lookup=lookup)


def _pr_tests(reason: str) -> list[Run]:
    return [run("failed", reason, variant=v) for v in ("cpu", "cuda")] + \
        [run("passed", pytorch="2.5.1", variant=v) for v in ("cpu", "cuda")] + \
        [run("passed", name="layerkit", variant=v) for v in ("cpu", "cuda")]


def test_the_gate_passes_over_main_failures_and_reports_them_apart(tmp_path):
    root, base = _repo(tmp_path, ledger(("2.6.0", "cpu", "failed"), ("2.6.0", "cuda", "failed")))
    ResultsStore(root / "build" / "results").put(results(run("failed", REASON), run("failed", REASON, variant="cuda")))
    res = _gate(root, base, _pr_tests(REASON_PR))
    assert res.ok and res.exit_code == 0
    doc = res.to_dict()
    assert [t.get("on_base") for t in doc["tests"]] == [True, True, None, None, None, None]
    assert [(c["name"], c["variant"], c["on_base"]) for c in doc["on_base"]] == [
        ("hookprofiler", "cpu", True), ("hookprofiler", "cuda", True)]
    rep = build_report(res)
    assert rep.verdict == "ready to merge" and rep.items == [] and rep.asks == []
    assert [(r.name, r.status, r.failed_on) for r in rep.rows] == [("hookprofiler", "already-failing", "2.6.0 cpu/cuda"),
                                                                  ("layerkit", "pass", "")]
    md = to_markdown(res)
    assert "2 package(s): 1 pass, 1 already-failing;" in md
    assert "**Already failing on the base — not caused by this PR**" in md
    assert ("- 🔸 `recipes/hookprofiler/recipe.yaml:27` `hookprofiler` test failed on 2.6.0 cpu/cuda: test 0 failed: "
            "Script failed with status 1: AttributeError:") in md
    assert "**Findings:**" not in md and "@ivan-petrov" not in md.split("**Next:**")[0]
    assert "already failing on the base — not caused by this PR" in to_text(res)

    # another cause on the same target: the PR's failure, it blocks
    res = _gate(root, base, _pr_tests(OTHER))
    assert not res.ok and res.exit_code == 1
    assert [t.get("on_base") for t in res.to_dict()["tests"]][:2] == [False, False]
    rep = build_report(res)
    assert rep.on_base == [] and rep.rows[0].status == "fail" and "TypeError" in to_markdown(res)

    # fail closed: without main's reasons (a fresh runner: no results store) the same failure is new
    shutil.rmtree(root / "build")
    res = _gate(root, base, _pr_tests(REASON_PR))
    assert not res.ok and res.to_dict()["on_base"] == []


def test_two_builds_of_a_package_on_one_target_are_judged_apart(tmp_path):
    """A package with two builds tested on one target (e.g. its cpu and cuda builds): one failing as main does,
    the other in another way; only the first is main's, the second blocks."""
    root, base = _repo(tmp_path, ledger(("2.6.0", "cpu", "failed"), ("2.6.0", "cuda", "failed")))
    ResultsStore(root / "build" / "results").put(results(run("failed", REASON), run("failed", REASON, variant="cuda")))
    other = run("failed", OTHER, artifact="linux-64/hookprofiler-0.7.0-cuda_0.conda")
    res = _gate(root, base, [*_pr_tests(REASON_PR), other])
    assert not res.ok
    assert [res.on_base(t) for t in res.tests if t.status == "failed"] == [True, True, False]
    assert [t.get("on_base") for t in res.to_dict()["tests"] if t["status"] == "failed"] == [True, True, False]


def test_a_pr_cannot_write_its_own_evidence_only_the_base_commit_counts(tmp_path):
    """The ledger is read at the base commit: a ledger the PR adds (or a work tree edit) is not main's."""
    root, base = _repo(tmp_path, None)
    ResultsStore(root / "build" / "results").put(results(run("failed", REASON), run("failed", REASON, variant="cuda")))
    (root / "channel_state" / "hookprofiler.json").write_text(
        ledger(("2.6.0", "cpu", "failed"), ("2.6.0", "cuda", "failed")).to_json())
    repo = git.Repo(root)
    repo.git.add("-A")
    repo.index.commit("PR: main failed there, says the PR")
    res = _gate(root, base, _pr_tests(REASON_PR))
    assert not res.ok and res.to_dict()["on_base"] == []
    # read at the PR's own commit instead, the same files would count: the base is what decides
    assert _gate(root, repo.head.commit.hexsha, _pr_tests(REASON_PR)).ok


def test_an_unreadable_ledger_at_the_base_is_no_evidence(tmp_path):
    root, base = _repo(tmp_path, None)
    (root / "channel_state" / "hookprofiler.json").write_text('{"schema_version": 1, "name": ')
    repo = git.Repo(root)
    repo.git.add("-A")
    repo.index.commit("a broken ledger file on main")
    ResultsStore(root / "build" / "results").put(results(run("failed", REASON), run("failed", REASON, variant="cuda")))
    res = _gate(root, repo.head.commit.hexsha, _pr_tests(REASON_PR))
    assert not res.ok and res.to_dict()["on_base"] == []


# ---------------------------------------------------------------------------------------------
# the sandbox world: hookprofiler fails 2.6.0 on main (held: not in main), fastquant fails everywhere


def _commit(world: Path, message: str) -> str:
    repo = git.Repo(world)
    repo.git.add("-A")
    repo.index.commit(message)
    return repo.head.commit.hexsha


def _check_pr(capsys, world: Path, base: str) -> tuple[int, dict, str]:
    code, out, err = run_cli(capsys, "check-pr", "--base", base, "--root", str(world), "--format", "json")
    assert out.strip(), err
    _, md, _ = run_cli(capsys, "check-pr", "--base", base, "--root", str(world), "--format", "markdown")
    return code, json.loads(out), md


@pytest.mark.slow
def test_a_distro_yaml_pr_is_not_blocked_by_failures_main_already_has(built_world: Path, capsys):
    world = built_world
    # main: promote what passes (hookprofiler is held: it fails 2.6.0), fix fastquant (its dependent quantserve
    # is blocked by it, and a blocked dependent is judged as the PR's own), build it, promote, commit the ledger
    code, _, _ = run_cli(capsys, "promote", "--root", str(world))
    assert code == 1
    recipe = world / "recipes/fastquant/recipe.yaml"
    recipe.write_text(recipe.read_text().replace('version: "0.2.1"', 'version: "0.2.2"', 1))
    src = world / "recipes/fastquant/src/fastquant/__init__.py"
    src.write_text(src.read_text().replace("scale = (2 ** bits) /", "scale = (2 ** bits - 1) /", 1))
    _commit(world, "fastquant 0.2.2: fix quantize")
    code, out, err = run_cli(capsys, "build", "fastquant", "quantserve", "--root", str(world), "--jobs", "2")
    assert code == 0, out + err
    run_cli(capsys, "promote", "--root", str(world))
    main = _commit(world, "channel_state: promote")

    # the PR drops the oldest release: every package is affected, hookprofiler fails 2.6.0 as on main
    distro = world / "distro.yaml"
    distro.write_text(distro.read_text().replace('releases: ["2.4.1", ', "releases: [", 1))
    _commit(world, "support 2.5.1 and 2.6.0")
    code, doc, md = _check_pr(capsys, world, main)
    assert code == 0, md
    assert doc["ok"] and len(doc["affected"]) == 11
    hook = [t for t in doc["tests"] if t["name"] == "hookprofiler" and t["status"] == "failed"]
    assert sorted((t["pytorch"], t["variant"], t["on_base"]) for t in hook) == [("2.6.0", "cpu", True), ("2.6.0", "cuda", True)]
    assert {(c["name"], c["pytorch"]) for c in doc["on_base"]} == {("hookprofiler", "2.6.0")}
    assert "### ✅ conda-distro check-pr: ready to merge" in md
    assert "| `hookprofiler` | 🔸 already-failing | 2.6.0 cpu/cuda |" in md
    assert "**Already failing on the base — not caused by this PR**" in md and "legacy_autograd_hook" in md

    # the same PR plus a failure of its own (layerkit's test): exit 1, hookprofiler still only listed apart
    rel = world / "recipes/layerkit/recipe.yaml"
    rel.write_text(rel.read_text().replace("== [-1.0, 1.0]", "== [-1.0, 2.0]", 1).replace("number: 0", "number: 1", 1))
    _commit(world, "layerkit: a test that fails")
    code, doc, md = _check_pr(capsys, world, main)
    assert code == 1 and not doc["ok"]
    assert {t["name"] for t in doc["tests"] if t["status"] == "failed" and not t["on_base"]} == {"layerkit"}
    assert {c["name"] for c in doc["on_base"]} == {"hookprofiler"}
    assert "| `layerkit` (changed) | ❌ fail | all 4 | tests failed |" in md
    assert "| `hookprofiler` | 🔸 already-failing | 2.6.0 cpu/cuda |" in md

    # a PR that changes hookprofiler so it fails 2.6.0 another way: new, it blocks
    git.Repo(world).git.reset("--hard", main)
    hp = world / "recipes/hookprofiler/recipe.yaml"
    hp.write_text(hp.read_text().replace("number: 0", "number: 1", 1))
    src = world / "recipes/hookprofiler/src/hookprofiler/__init__.py"
    text = src.read_text()
    assert "    return torch.legacy_autograd_hook(fn)" in text
    src.write_text(text.replace("    return torch.legacy_autograd_hook(fn)", "    if not hasattr(torch, 'legacy_autograd_hook'):\n"
                                "        raise RuntimeError('this torch has no legacy hook API')\n"
                                "    return torch.legacy_autograd_hook(fn)"))
    _commit(world, "hookprofiler: says why it fails on 2.6")
    code, doc, md = _check_pr(capsys, world, main)
    assert code == 1, md
    assert [c for c in doc["on_base"] if c["name"] == "hookprofiler"] == []
    assert "| `hookprofiler` (changed) | ❌ fail | 2.6.0 cpu/cuda | tests failed |" in md


@pytest.mark.slow
def test_without_main_results_the_same_failure_blocks(built_world: Path, capsys):
    """Fail closed: main's runs gone (a fresh runner), the failure main has is not known to be main's."""
    world = built_world
    code, _, _ = run_cli(capsys, "promote", "--root", str(world))
    main = _commit(world, "channel_state: promote")
    hp = world / "recipes/hookprofiler/recipe.yaml"
    hp.write_text(hp.read_text().replace("  summary:", "  # a comment only\n  summary:", 1).replace("number: 0", "number: 1", 1))
    _commit(world, "hookprofiler: a comment")
    code, doc, md = _check_pr(capsys, world, main)
    assert code == 0, md  # (with main's runs: hookprofiler's 2.6.0 failure is main's)
    assert {c["name"] for c in doc["on_base"]} == {"hookprofiler"}
    shutil.rmtree(world / "build" / "results")
    shutil.rmtree(world / "build" / "pr")
    code, doc, md = _check_pr(capsys, world, main)
    assert code == 1 and doc["on_base"] == []
    assert "| `hookprofiler` (changed) | ❌ fail | 2.6.0 cpu/cuda | tests failed |" in md
