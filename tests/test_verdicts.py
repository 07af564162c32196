"""Verdicts you can trust: a candidate no test ran for is never promoted without a `force` hint (fail
closed); a failure that would block is confirmed by re-running it (and the baseline side), and a test that
both passes and fails on the same inputs is `flaky`, which never blocks and never counts as a pass.

The plan-level tests use hand-made channel records with the results a build writes (as test_gate.py);
the end-to-end ones run on the sandbox world with real builds (rattler-build) and real solves (rattler).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import git
import pytest
from support.ghrunner import Runner, load_workflow, write_shim
from support.helpers import run_cli_at, run_json_at
from test_gate import PAIRS, T0, TK12, TK13, cf, edit, gate, held, name_of, results, runs, write_hints

from conda_distro.gate.promote import HoldReason
from conda_distro.reports import watch as watch_mod
from conda_distro.state.results import NO_TESTS

NIGHTLY = Path(__file__).parent.parent / ".github" / "workflows" / "nightly.yml"

# ---------------------------------------------------------------------------------------------
# fail closed


def test_a_candidate_no_test_ran_for_is_held_until_a_force_hint(tmp_path):
    plan = gate([TK13], [TK12], [results(TK13, runs(TK13, reason=NO_TESTS))])
    h = held(plan)["tensorkit"]
    assert h.reason is HoldReason.NO_TESTS and h.hold_class.value == "permanent" and not plan.promote
    assert "no test ran on" in h.detail and "force" in h.what_to_do and "tests:" in h.what_to_do
    assert plan.exit_code == 1
    # one target where a test did run is evidence: the package has tests (the others are judged as usual)
    some = runs(TK13, reason=NO_TESTS, pairs=PAIRS[1:]) + runs(TK13, pairs=PAIRS[:1])
    assert [f.name for f in gate([TK13], [TK12], [results(TK13, some)]).promote] == ["tensorkit"]
    # only a force hint lets it go, and the plan says so
    hints = write_hints(tmp_path, "hints:\n  - {action: force, package: tensorkit, by: rm-ann, reason: no tests "
                                  "upstream, expires: 2026-12-31}\n")
    plan = gate([TK13], [TK12], [results(TK13, runs(TK13, reason=NO_TESTS))], hints=hints)
    assert [f.name for f in plan.promote] == ["tensorkit"] and plan.forced == {TK13.artifact: "rm-ann"}
    assert any("no-tests" in u for u in plan.hints_used)
    # every target not tested at all: held too (not-tested), never promoted
    assert held(gate([TK13], [TK12], [results(TK13)]))["tensorkit"].reason is HoldReason.NOT_TESTED


@pytest.mark.slow
def test_skip_every_test_and_the_gate_holds(built_world: Path, capsys):
    """The injected fault: tensorutils 0.3.3's tests render away (an `if:` no target meets), so
    rattler-build runs no test anywhere; the build passes, promote holds it `no-tests`."""
    world = built_world
    run_json_at(capsys, world, "promote")
    recipe = world / "recipes/tensorutils/recipe.yaml"
    edit(recipe, 'version: "0.3.2"', 'version: "0.3.3"')
    text = recipe.read_text()
    start, end = text.index("tests:\n"), text.index("\nabout:")
    recipe.write_text(text[:start] + "tests:\n  - if: win\n    then:\n      - python:\n          imports: [tensorutils]\n"
                      + text[end:])
    repo = git.Repo(world)
    repo.git.add("-A")
    repo.index.commit("tensorutils 0.3.3: tests only on windows")
    code, doc = run_json_at(capsys, world, "build", "tensorutils")
    own = [t for t in doc["tests"] if t["name"] == "tensorutils"]
    assert own and {(t["status"], t.get("reason")) for t in own} == {("passed", NO_TESTS)}
    code, out = run_json_at(capsys, world, "promote")
    assert code == 1
    [h] = [h for h in out["held"] if name_of(h["artifact"]) == "tensorutils" and "0.3.3" in h["artifact"]]
    assert h["reason"] == "no-tests" and h["class"] == "permanent" and "force" in h["advice"]
    assert not any("0.3.3" in a["artifact"] for a in out["promoted"])
    code, ex = run_json_at(capsys, world, "excuses")
    [c] = [c for c in ex["candidates"] if c["name"] == "tensorutils"]
    assert c["verdict"] == "held-permanently"
    # a reviewed force hint lets it go
    (world / "hints.yaml").write_text("hints:\n  - {action: force, package: tensorutils, version: '0.3.3', by: rm-ann, "
                                      "reason: tests moved upstream, expires: 2099-12-31}\n")
    code, out = run_json_at(capsys, world, "promote")
    assert [a.get("forced_by") for a in out["promoted"] if "tensorutils-0.3.3" in a["artifact"]] == ["rm-ann"]


# ---------------------------------------------------------------------------------------------
# confirmation before blocking: flaky never blocks, a confirmed regression still does

AK09 = cf("audiokit", "0.9", ["tensorkit >=1.2,<2", "pytorch >=2.4,<2.7"], sha="3")
LATER = T0 + dt.timedelta(days=1)


def attempts(status, tries, rl):
    return [t.model_copy(update={"status": status, "attempts": list(tries)}) for t in rl]


def test_a_dependent_flaky_with_the_candidate_never_blocks_and_is_reported():
    res = [results(TK13, runs(TK13)),
           results(AK09, runs(AK09, against={"tensorkit": TK12}),
                   attempts("flaky", ["failed", "passed"], runs(AK09, "failed", against={"tensorkit": TK13}, at=LATER,
                                                                reason="AssertionError: 0.51 < 0.5")))]
    plan = gate([TK13], [TK12, AK09], res, maintainers={"audiokit": ("bob",), "tensorkit": ("alice",)})
    assert [f.name for f in plan.promote] == ["tensorkit"] and not plan.held
    assert {r.verdict.value for r in plan.retests} == {"flaky"}
    assert all("passed 1 of 2 runs" in r.detail for r in plan.retests)
    assert {(t.package, t.pytorch, t.variant) for t in plan.flaky} == {("audiokit", r, v) for r, v in PAIRS}
    t = plan.flaky[0]
    assert t.maintainers == ("bob",) and t.candidate == TK13.artifact and "force-badtest" in t.advice and "@bob" in t.advice
    assert plan.to_dict()["flaky"][0]["package"] == "audiokit"
    assert any(line.startswith("  flaky    audiokit 0.9") for line in plan.text_lines())


def test_a_confirmed_failure_with_a_flaky_baseline_is_flaky_and_with_a_steady_one_a_regression():
    fails = attempts("failed", ["failed"] * 3, runs(AK09, "failed", against={"tensorkit": TK13}, at=LATER))
    flaky_base = [t.model_copy(update={"baseline": True}) for t in
                  attempts("flaky", ["passed", "failed"], runs(AK09, "flaky", against={"tensorkit": TK12}, at=LATER))]
    plan = gate([TK13], [TK12, AK09], [results(TK13, runs(TK13)), results(AK09, flaky_base, fails)])
    assert [f.name for f in plan.promote] == ["tensorkit"]
    assert {r.verdict.value for r in plan.retests} == {"flaky"}
    assert all("with main's packages it is flaky" in r.detail for r in plan.retests)
    steady = [t.model_copy(update={"baseline": True}) for t in
              attempts("passed", ["passed"] * 3, runs(AK09, against={"tensorkit": TK12}, at=LATER))]
    plan = gate([TK13], [TK12, AK09], [results(TK13, runs(TK13)), results(AK09, steady, fails)])
    assert held(plan)["tensorkit"].reason is HoldReason.REGRESSION and not plan.flaky
    # the baseline failing as well: always-failed, does not block
    broken = [t.model_copy(update={"baseline": True}) for t in
              attempts("failed", ["failed"], runs(AK09, "failed", against={"tensorkit": TK12}, at=LATER))]
    plan = gate([TK13], [TK12, AK09], [results(TK13, runs(TK13)), results(AK09, broken, fails)])
    assert [f.name for f in plan.promote] == ["tensorkit"] and {r.verdict.value for r in plan.retests} == {"always-failed"}


def test_a_dependent_flaky_on_one_target_proves_no_regression_on_another():
    one = PAIRS[:1]
    rest = PAIRS[1:]
    res = [results(TK13, runs(TK13)),
           results(AK09, runs(AK09, against={"tensorkit": TK12}),
                   attempts("flaky", ["failed", "passed"], runs(AK09, "failed", against={"tensorkit": TK13}, at=LATER,
                                                                pairs=one)),
                   attempts("failed", ["failed"] * 3, runs(AK09, "failed", against={"tensorkit": TK13}, at=LATER,
                                                           pairs=rest)))]
    plan = gate([TK13], [TK12, AK09], res)
    assert [f.name for f in plan.promote] == ["tensorkit"] and {r.verdict.value for r in plan.retests} == {"flaky"}
    assert sum("no regression proven" in r.detail for r in plan.retests) == len(rest)


def test_a_candidates_own_flaky_test_never_blocks_it_and_is_reported(tmp_path):
    from conda_distro.gate.excuses import excuses_of
    from conda_distro.gate.promote import PlanInputs, TestMatrix

    own = attempts("flaky", ["failed", "failed", "passed"], runs(TK13, "flaky", pairs=PAIRS[:1])) + runs(TK13, pairs=PAIRS[1:])
    plan = gate([TK13], [TK12], [results(TK13, own)], maintainers={"tensorkit": ("alice",)})
    assert [f.name for f in plan.promote] == ["tensorkit"]
    [t] = plan.flaky
    assert (t.package, t.pytorch, t.variant, t.candidate) == ("tensorkit", "2.4.1", "cpu", None)
    assert "passed 1 of 3 runs" in t.detail
    inputs = PlanInputs({TK13.artifact: TK13}, {TK12.artifact: TK12}, {TK13.artifact: results(TK13, own)}, {},
                        TestMatrix("pytorch", ("2.4.1", "2.5.1", "2.6.0"), ("cpu", "cuda")),
                        maintainers={"tensorkit": ("alice",)})
    ex = excuses_of(plan, inputs)
    [c] = ex.candidates
    assert c.verdict == "promote" and [n.package for n in c.flaky] == ["tensorkit"]
    assert any("flaky: tensorkit on pytorch 2.4.1 cpu" in line for line in ex.text_lines())
    assert "@alice" in ex.markdown() and "force-badtest" in ex.markdown()


def add_flakykit(world: Path, confirm_runs: int) -> None:
    import shutil

    shutil.copytree(Path(__file__).parent / "data" / "verdicts" / "flakykit", world / "recipes" / "flakykit")
    cfg = world / "distro.yaml"
    cfg.write_text(cfg.read_text().replace("  unmaintained_grace_days: 60\n",
                                           f"  unmaintained_grace_days: 60\n  confirm_runs: {confirm_runs}\n"))
    assert f"confirm_runs: {confirm_runs}" in cfg.read_text()
    repo = git.Repo(world)
    repo.git.add("-A")
    repo.index.commit("flakykit: a dependent whose test fails at random")


def bump_tensorutils_version(world: Path) -> None:
    edit(world / "recipes/tensorutils/recipe.yaml", 'version: "0.3.2"', 'version: "0.3.3"')
    edit(world / "recipes/tensorutils/src/tensorutils/__init__.py", '__version__ = "0.3.2"', '__version__ = "0.3.3"')
    repo = git.Repo(world)
    repo.git.add("-A")
    repo.index.commit("tensorutils 0.3.3")


@pytest.mark.slow
def test_a_flaky_dependent_is_named_flaky_and_the_parent_promoted(built_world: Path, capsys, tmp_path: Path):
    """flakykit's test fails one run in two next to tensorutils 0.3.2 and nine in ten next to 0.3.3; with
    ten confirmation runs it is flaky on both sides (a false regression would need eleven failures in a row
    with 0.3.3 and eleven passes in a row with 0.3.2 on one of four targets: about 1 in 1000)."""
    world = built_world
    add_flakykit(world, confirm_runs=10)
    code, doc = run_json_at(capsys, world, "build", "flakykit")
    own = [t for t in doc["tests"] if t["name"] == "flakykit"]
    assert len(own) == 4 and {t["status"] for t in own} <= {"passed", "flaky"}, own
    for t in own:  # a failure was re-run until it passed, each run logged
        assert t["status"] == "passed" or (t["attempts"][-1] == "passed" and set(t["attempts"][:-1]) == {"failed"})
    code, out = run_json_at(capsys, world, "promote")
    assert any(name_of(a["artifact"]) == "flakykit" for a in out["promoted"]), out["held"]

    bump_tensorutils_version(world)
    code, doc = run_json_at(capsys, world, "build", "tensorutils")
    fk = [t for t in doc["tests"] if t["name"] == "flakykit"]
    assert len(fk) == 4 and {t["status"] for t in fk} <= {"passed", "flaky", "failed"}
    code, ex = run_json_at(capsys, world, "excuses")
    [c] = [c for c in ex["candidates"] if c["name"] == "tensorutils"]
    assert c["verdict"] == "promote", c
    assert c["flaky"] and {n["package"] for n in c["flaky"]} == {"flakykit"}
    assert all(n["maintainers"] == ["flaky-fran"] and "force-badtest" in n["advice"] for n in c["flaky"])
    run_json_at(capsys, world, "promote", "--dry-run")  # (writes build/excuses.json, which the page shows)
    page = tmp_path / "page"
    code, _ = run_json_at(capsys, world, "status", "--out", str(page))
    html = (page / "index.html").read_text()
    assert 'class="flaky" data-package="flakykit"' in html and "force-badtest" in html
    code, out = run_json_at(capsys, world, "promote")
    assert any("tensorutils-0.3.3" in a["artifact"] for a in out["promoted"]), out["held"]
    verdicts = {r["verdict"] for r in out["retests"] if r["package"] == "flakykit"}
    assert "flaky" in verdicts and verdicts <= {"flaky", "pass"} and "regression" not in verdicts
    assert {t["package"] for t in out["flaky"]} == {"flakykit"}


@pytest.mark.slow
def test_a_reproducible_regression_is_confirmed_on_both_sides_and_held(built_world: Path, capsys):
    from test_gate import bump_tensorutils

    from conda_distro.state.results import ResultsStore

    world = built_world
    run_json_at(capsys, world, "promote")
    bump_tensorutils(world, drop_center=True)
    code, doc = run_json_at(capsys, world, "build", "tensorutils")
    lk = [t for t in doc["tests"] if t["name"] == "layerkit"]
    assert len(lk) == 6 and all(t["status"] == "failed" and t["attempts"] == ["failed"] * 3 for t in lk), lk
    # the baseline side: layerkit with main's tensorutils 0.3.2, three runs, each passed
    [res] = [r for r in ResultsStore(world / "build" / "results").all() if r.name == "layerkit"]
    base = [t for t in res.tests if t.baseline]
    # (its own run with 0.3.2, when it went to main, counts with them)
    assert len(base) == 6 and all(t.status == "passed" and t.attempts == ["passed"] * 4 for t in base), base
    assert {t.against["tensorutils"].rsplit("-", 1)[0] for t in base} == {"tensorutils-0.3.2"}
    logs = sorted(p.name for p in (world / "build" / "logs" / "layerkit").glob("*2.6.0-cpu*.test.log"))
    assert any(".run3." in n for n in logs) and any(".baseline3." in n for n in logs), logs
    code, out = run_json_at(capsys, world, "promote")
    [h] = [h for h in out["held"] if "tensorutils-0.3.3" in h["artifact"]]
    assert h["reason"] == "regression" and h["blocked_by"] == ["layerkit"] and not out["flaky"]


# ---------------------------------------------------------------------------------------------
# failure signatures


@pytest.mark.parametrize(("a", "b"), [
    ("test 1 failed: Script failed with status 1: ImportError: cannot import name 'center' from 'tensorutils' "
     "(/tmp/rattler-build_tensorutils_1/test_env_h1a2b3/lib/python3.11/site-packages/tensorutils/__init__.py)",
     "test 2 failed: Script failed with status 1: ImportError: cannot import name 'center' from 'tensorutils' "
     "($SRC_DIR_env/lib/python3.12/site-packages/tensorutils/__init__.py)"),
    ("AssertionError: <Tensor at 0x7f3a2b1c9d> after 1.25s at 2026-11-26T16:00:01Z (pid 1234) in /job/work/tmp/tmpab12cd34/x.py",
     "AssertionError: <Tensor at 0x55d1e0> after 3 ms at 2026-11-27 09:12:44 (pid 77) in /tmp/tmpzz99yy88/x.py"),
    ("OSError: $PREFIX/lib/libtorch_cpu.so: cannot open shared object file (run 3f2a9c1b7d4e5f60a1b2)",
     "OSError: /opt/conda/envs/test_x/lib/libtorch_cpu.so: cannot open shared object file (run 9c1b7d4e5f60a1b23f2a)"),
])
def test_one_cause_has_one_signature_whatever_paths_addresses_times_and_ids(a, b):
    from conda_distro.gate.signature import normalize, signature_id

    assert normalize(a) == normalize(b) and signature_id(a) == signature_id(b)
    assert "/tmp" not in normalize(a) and "0x7f" not in normalize(a)


def test_other_causes_keep_other_signatures_and_group_by_cause():
    from conda_distro.gate.signature import Finding, group, normalize

    assert normalize("undefined symbol _ZN2at6Tensor4meanEv") != normalize("undefined symbol _ZN2at6Tensor3sumEv")
    assert normalize("ImportError: cannot import name 'center'") != normalize("ImportError: cannot import name 'mean'")
    causes = group([Finding("layerkit", r, v, f"ImportError: cannot import name 'center' (/tmp/t{r}{v}/site-packages/x.py)")
                    for r, v in PAIRS] + [Finding("trainloop", "2.6.0", "cpu", "RuntimeError: shape mismatch")])
    assert [(c.packages, len(c.targets)) for c in causes] == [(["layerkit"], 6), (["trainloop"], 1)]
    assert causes[0].where() == "2.4.1 cpu/cuda, 2.5.1 cpu/cuda, 2.6.0 cpu/cuda"


def test_a_regression_is_new_only_when_its_signature_was_not_in_the_baseline():
    before = "AssertionError: loss is nan (/tmp/a/site-packages/audiokit/x.py)"
    fails_before = runs(AK09, "failed", against={"tensorkit": TK12}, reason=before)
    same = runs(AK09, "failed", against={"tensorkit": TK13}, at=LATER,
                reason="AssertionError: loss is nan ($SRC_DIR_env/lib/python3.11/site-packages/audiokit/x.py)")
    plan = gate([TK13], [TK12, AK09], [results(TK13, runs(TK13)), results(AK09, fails_before, same)])
    assert [f.name for f in plan.promote] == ["tensorkit"] and {r.verdict.value for r in plan.retests} == {"always-failed"}
    other = runs(AK09, "failed", against={"tensorkit": TK13}, at=LATER, reason="ImportError: cannot import name 'resample'")
    plan = gate([TK13], [TK12, AK09], [results(TK13, runs(TK13)), results(AK09, fails_before, other)])
    h = held(plan)["tensorkit"]
    assert h.reason is HoldReason.REGRESSION and "a new failure" in h.detail


def test_excuses_show_one_entry_per_cause_with_the_targets_it_hit():
    from conda_distro.gate.excuses import excuses_of
    from conda_distro.gate.promote import PlanInputs, TestMatrix

    res = [results(TK13, runs(TK13)),
           results(AK09, runs(AK09, against={"tensorkit": TK12}),
                   [t.model_copy(update={"reason": f"test 1 failed: Script failed with status 1: ImportError: cannot "
                                                   f"import name 'center' (/tmp/env_{t.pytorch}_{t.variant}_h0a1b2c3"
                                                   f"/lib/python3.11/site-packages/tensorkit/__init__.py)"})
                    for t in runs(AK09, "failed", against={"tensorkit": TK13}, at=LATER)])]
    inputs = PlanInputs({TK13.artifact: TK13}, {TK12.artifact: TK12, AK09.artifact: AK09}, {r.artifact: r for r in res},
                        {}, TestMatrix("pytorch", ("2.4.1", "2.5.1", "2.6.0"), ("cpu", "cuda")))
    plan = gate([TK13], [TK12, AK09], res)
    [c] = excuses_of(plan, inputs).candidates
    [cause] = c.causes()
    assert cause.packages == ["audiokit"] and len(cause.targets) == 6
    assert cause.signature == "ImportError: cannot import name 'center' (<site>/tensorkit/__init__.py)"
    ex = excuses_of(plan, inputs)
    assert sum(line.strip().startswith("cause:") for line in ex.text_lines()) == 1
    assert ex.to_dict()["candidates"][0]["causes"][0]["targets"][0] == {"pytorch": "2.4.1", "variant": "cpu"}


# ---------------------------------------------------------------------------------------------
# as people see them: check-pr's comment, build's table


def _pr_result(tests):
    from conda_distro.checkpr.check import CheckPrResult
    from conda_distro.state.results import BuildRecord

    names = list(dict.fromkeys(t.name for t in tests))
    return CheckPrResult(base="origin/main", changed=[names[0]], affected=names, built=True, root=Path("/w"),
                         builds=[BuildRecord(name=n, version="1.0", status="built") for n in names], tests=tests,
                         maintainers={n: [f"{n}-owner"] for n in names})


def _pr_run(name, release, variant, status, reason=None):
    from conda_distro.state.results import TestRecord as Run

    return Run(name=name, artifact=f"noarch/{name}-1.0-h_0.conda", pytorch=release, variant=variant, status=status,
               reason=reason, log=f"/w/build/pr/main/logs/{name}/h_0.{release}-{variant}.test.log",
               attempts=["failed", "passed"] if status == "flaky" else None)


def test_check_pr_shows_one_finding_per_cause_and_names_a_flaky_dependent():
    from conda_distro.checkpr.comment import build_report, to_markdown
    from conda_distro.engine.executor import ExecutionResult
    from conda_distro.engine.summary import build_table

    why = ("test 1 failed: Script failed with status 1: ImportError: cannot import name 'center' from 'tensorutils' "
           "({}/lib/python3.11/site-packages/tensorutils/__init__.py)")
    tests = [_pr_run("tensorutils", r, v, "passed") for r, v in PAIRS]
    tests += [_pr_run("layerkit", r, v, "failed", why.format(f"/tmp/rattler-build_{r}_{v}_h1a2b3/test_env"))
              for r, v in PAIRS]
    tests += [_pr_run("flakykit", r, v, "flaky" if v == "cpu" else "passed") for r, v in PAIRS]
    res = _pr_result(tests)
    rep = build_report(res)
    md = to_markdown(res)
    assert md.count("`layerkit` test failed on") == 1  # six targets, six prefixes, one cause
    row = next(r for r in rep.rows if r.name == "flakykit")
    assert row.status == "pass" and row.note.startswith("flaky") and "cpu" in row.failed_on
    assert "@flakykit-owner" in md and "flaky" in md
    table = "\n".join(build_table(ExecutionResult(tests=tests)))
    assert "flaky" in table
    # a flaky package alone does not fail the check
    only_flaky = _pr_result([_pr_run("flakykit", r, v, "flaky" if v == "cpu" else "passed") for r, v in PAIRS])
    assert only_flaky.ok and build_report(only_flaky).verdict == "ready to merge"


# ---------------------------------------------------------------------------------------------
# spurious is not failure: a full disk


def test_a_test_that_hits_a_full_disk_is_an_infrastructure_error_not_a_failure(tmp_path):
    """/dev/full answers every write with ENOSPC, as a full disk does (rattler-build runs the test for real)."""
    from test_killed_tests import _package_with_test

    from conda_distro.checkpr.comment import infra_cause
    from conda_distro.engine.backends import DISK_FULL_WHY, RattlerBuildBackend, file_sink
    from conda_distro.engine.backends import TestJob as Job

    out = tmp_path / "channel"
    artifact = _package_with_test(out, "fullpkg", "dd if=/dev/zero of=/dev/full bs=1k count=1")
    outcome = RattlerBuildBackend().test(Job(artifact, (out.as_uri(),), "", file_sink(tmp_path / "test.log")))
    assert outcome.error and not outcome.ok and outcome.message.startswith(DISK_FULL_WHY), outcome
    assert "No space left on device" in outcome.message and infra_cause(outcome.message) == "disk full"
    assert "--retry-errors" in (tmp_path / "test.log").read_text()


# ---------------------------------------------------------------------------------------------
# main watched against upstream


def publish(world: Path, tmp: Path, name: str, version: str, source: str, capsys) -> str:
    from support.helpers import run_cli

    src = tmp / f"src-{name}-{version}" / name
    src.mkdir(parents=True)
    (src / "__init__.py").write_text(source)
    code, out, err = run_cli(capsys, "sandbox", "publish-package", str(world), name, version, "--source", str(src.parent),
                             "--format", "json")
    assert code == 0, err
    return json.loads(out)["added"][0]


def why_not_passed(world: Path, doc: dict, name: str) -> str:
    """Each of ``name``'s tests that did not pass, with its reason and the end of its log: what a failure
    of a test built on a passing build says (a one-off on a loaded machine can be read from it)."""
    said = []
    for t in doc["tests"]:
        if t["name"] == name and t["status"] != "passed":
            log = Path(t["log"]) if t.get("log") else None
            log = log if log is None or log.is_absolute() else world / log
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:]) if log and log.is_file() else "(no log)"
            said.append(f"{t['pytorch']} {t['variant']}: {t['status']}: {t.get('reason')}\n{tail}")
    return "\n\n".join(said)


def promote_with_upstream_libs(world: Path, tmp_path: Path, capsys, name: str) -> dict:
    """arraylib 1.0.0 and helperlib 1.0.0 published upstream, then ``name`` (tests/data/verdicts/NAME)
    committed, built (every test passed) and promoted on ``world``: the build's JSON."""
    import shutil

    publish(world, tmp_path, "arraylib", "1.0.0", "def old_api(x):\n    return list(x)\n", capsys)
    publish(world, tmp_path, "helperlib", "1.0.0", "def identity(x):\n    return x\n", capsys)
    shutil.copytree(Path(__file__).parent / "data" / "verdicts" / name, world / "recipes" / name)
    repo = git.Repo(world)
    repo.git.add("-A")
    repo.index.commit(name)
    code, doc = run_json_at(capsys, world, "build", name)
    assert {t["status"] for t in doc["tests"] if t["name"] == name} == {"passed"}, why_not_passed(world, doc, name)
    code, out = run_json_at(capsys, world, "promote")
    assert any(name_of(a["artifact"]) == name for a in out["promoted"]), out["held"]
    return doc


def watch_until_broken(world: Path, tmp_path: Path, capsys, promoted=None) -> tuple[dict, str]:
    """arrayuser (tests/data/verdicts) built and promoted on ``world``, watched (the first watch reuses the
    build's outcomes where today's environment is the one the build tested in, and tests the others; the
    next one reuses everything), then broken by an arraylib update published upstream next to a harmless
    helperlib one: the last watch's JSON, checked, and the breaking arraylib file. ``promoted()`` is
    called once arrayuser is in main, before the first watch (e.g. to serve main over HTTP)."""
    doc = promote_with_upstream_libs(world, tmp_path, capsys, "arrayuser")
    if promoted is not None:
        promoted()

    assert all("environment" not in t for t in doc["tests"])  # recorded in the results, not printed
    # the build recorded each test's whole environment; today's solve gives the same: nothing to test again
    killed = world / "build" / "work" / "watch-killed"  # (a watch killed with -9 left its private folder)
    killed.mkdir(parents=True, exist_ok=True)
    (killed / ".in-use").touch()
    code, first = run_json_at(capsys, world, "watch", "arrayuser")
    assert code == 0 and (first["checked"], first["reused"], first["tested"]) == (2, 2, 0) and not first["broken"], first
    assert not killed.exists()  # (a watch clears them as a build does: where only watches run, they piled up)
    state_file = world / "build" / "watch" / "state.json"
    assert json.loads(state_file.read_text())["schema"] == watch_mod.STATE_SCHEMA
    state = watch_mod.read_state(world / "build")
    assert sorted(k.split("|", 1)[1] for k in state) == ["2.6.0|cpu", "2.6.0|cuda"]
    assert all(e["from_build"] and e["status"] == "passed" and e["passed_in"] == e["env"]
               and any(i.startswith("arraylib-1.0.0-") for i in e["env"].values()) for e in state.values()), state
    # a build outcome from another environment is not reused: that target is tested
    [res_file] = (world / "build" / "results").glob("*arrayuser-*.json")
    res = json.loads(res_file.read_text())
    [cuda] = [t for t in res["tests"] if t["variant"] == "cuda" and not t.get("baseline")]
    assert cuda["environments"] == [cuda["environment"]]  # arrayuser has one test: one environment
    cuda["environments"][0]["helperlib"] = "helperlib-0.9.0-h0_0"
    res_file.write_text(json.dumps(res))
    state_file.unlink()
    code, first = run_json_at(capsys, world, "watch", "arrayuser")
    assert code == 0 and (first["checked"], first["reused"], first["tested"]) == (2, 1, 1) and not first["broken"], first
    assert [k.split("|")[2] for k, e in watch_mod.read_state(world / "build").items() if e.get("from_build")] == ["cpu"]
    code, again = run_json_at(capsys, world, "watch", "arrayuser")  # nothing changed upstream: all reused
    assert code == 0 and (again["checked"], again["reused"], again["tested"]) == (2, 2, 0), again
    # a state the watch cannot read (a cache restored from a truncated save) is a miss: the build's
    # outcome is taken again where it matches (cpu) and the other target is tested, never a crash or a pass
    state_file.write_text(state_file.read_text()[:40])
    code, again = run_json_at(capsys, world, "watch", "arrayuser")
    assert code == 0 and (again["checked"], again["reused"], again["tested"]) == (2, 1, 1), again

    # upstream publishes two updates the package installs; only arraylib's breaks it
    new_array = publish(world, tmp_path, "arraylib", "1.1.0", "def new_api(x):\n    return list(x)\n", capsys)
    publish(world, tmp_path, "helperlib", "1.0.1", "def identity(x):\n    return x\n\n\nHELPED = True\n", capsys)
    code, out = run_json_at(capsys, world, "watch", "arrayuser")
    assert code == 1 and out["tested"] == 2
    assert {(b["name"], b["pytorch"], b["variant"]) for b in out["broken"]} == {("arrayuser", "2.6.0", "cpu"),
                                                                               ("arrayuser", "2.6.0", "cuda")}
    for b in out["broken"]:
        assert set(b["changed"]) == {"arraylib", "helperlib"}
        assert len(b["culprit"]) == 1 and b["culprit"][0].startswith("arraylib arraylib-1.0.0-")
        assert b["culprit"][0].endswith(new_array.split("/")[1].removesuffix(".conda"))
        assert b["maintainers"] == ["array-ann"] and Path(b["log"]).is_file()
    return out, new_array


@pytest.mark.slow
def test_watch_reuses_unchanged_environments_and_names_the_upstream_update_that_broke_a_package(
        built_world: Path, capsys, tmp_path: Path):
    world = built_world
    out, _ = watch_until_broken(world, tmp_path, capsys)
    report = json.loads((world / "build" / "watch" / "report.json").read_text())
    assert report["broken"] == out["broken"]
    code, md, _ = run_cli_at(capsys, world, "watch", "arrayuser", "--format", "markdown")
    assert code == 1 and "| `arrayuser` | 2.6.0 | cpu | arraylib" in md and "@array-ann" in md
    page = tmp_path / "page"
    code, _ = run_json_at(capsys, world, "status", "--out", str(page))
    html = (page / "index.html").read_text()
    assert '<section id="watch">' in html and 'class="broken" data-package="arrayuser"' in html
    assert "broken by arraylib arraylib-1.0.0-" in html

    # the nightly's issue job, on this report: one issue per broken package, maintainers and culprit named
    gh = NightlyIssues(tmp_path / "nightly-issues")
    gh.run(out)
    (issue,) = gh.issues()
    assert issue["title"] == "arrayuser is broken by an upstream update" and issue["labels"] == ["broken-upstream"]
    assert issue["state"] == "open" and "@array-ann" in issue["body"]
    assert issue["body"].count("| `arraylib arraylib-1.0.0-") == 2  # cpu and cuda, each naming the culprit
    gh.run(out)  # the next night, still broken: a comment on the same issue, no second issue
    (issue,) = gh.issues()
    assert issue["state"] == "open" and len(issue["comments"]) == 1 and "@array-ann" in issue["comments"][0]

    # upstream fixes it (arraylib 1.2.0 has the old API again): the watch passes it, the issue is closed
    publish(world, tmp_path, "arraylib", "1.2.0", "def old_api(x):\n    return list(x)\n", capsys)
    code, fixed = run_json_at(capsys, world, "watch", "arrayuser")
    assert code == 0 and fixed["tested"] == 2 and not fixed["broken"] and not fixed["failing"], fixed
    gh.run(fixed)
    (issue,) = gh.issues()
    assert issue["state"] == "closed" and "No longer broken" in issue["comments"][-1]

    # a package with no pytorch dependency (as einops) is built and tested on every target, and watched on
    # every target too (before, it was not watched at all)
    (world / "recipes" / "arraytool").mkdir()
    (world / "recipes" / "arraytool" / "recipe.yaml").write_text(ARRAYTOOL)
    git.Repo(world).git.add("-A")
    git.Repo(world).index.commit("arraytool")
    code, doc = run_json_at(capsys, world, "build", "arraytool")
    assert {t["status"] for t in doc["tests"] if t["name"] == "arraytool"} == {"passed"}, doc["tests"]
    code, out = run_json_at(capsys, world, "promote")
    assert any(name_of(a["artifact"]) == "arraytool" for a in out["promoted"]), out["held"]
    from conda_distro.engine.needs import package_test_specs

    before = package_test_specs.cache_info()
    code, tool = run_json_at(capsys, world, "watch", "arraytool")
    assert code == 0 and (tool["checked"], tool["reused"], tool["tested"]) == (6, 6, 0), tool
    after = package_test_specs.cache_info()  # the file's tests read once, not once per target
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 5), (before, after)

    # a lockstep package (as torchvision is) with no build for a target's pytorch: nobody can install
    # arrayuser or arraytool there, so the watch does not test them there (as promote does not require
    # them); before, it tested every target their pins admit and reported those it could not install
    cfg = world / "distro.yaml"
    cfg.write_text(cfg.read_text().replace("  variants: [cpu, cuda]\n", "  variants: [cpu, cuda]\n  lockstep: [arraylib]\n", 1))
    git.Repo(world).git.commit("-am", "arraylib in lockstep with pytorch", "--no-verify")
    code, none = run_json_at(capsys, world, "watch", "arrayuser", "arraytool")
    assert code == 0 and (none["checked"], none["tested"]) == (0, 0) and not none["failing"], none


#: a package of main with no pytorch dependency; its test imports it
ARRAYTOOL = """\
package:
  name: arraytool
  version: "1.0.0"
build:
  number: 0
  noarch: python
  script:
    - mkdir -p $SP_DIR/arraytool
    - echo "import arraylib" > $SP_DIR/arraytool/__init__.py
requirements:
  host:
    - python >=3.10
  run:
    - python >=3.10
    - arraylib >=1,<2
tests:
  - python:
      imports: [arraytool]
about:
  summary: Uses arraylib, no pytorch (conda-distro test data)
  license: MIT
extra:
  recipe-maintainers:
    - array-ann
"""


class NightlyIssues:
    """The nightly workflow's `watch-issues` job run as GitHub would (tests/support/ghrunner.py), its
    `watch-report` artifact a watch's JSON, `gh` the stand-in of tests/support/fake_gh.py (its issues
    kept from run to run, as GitHub's are)."""

    def __init__(self, folder: Path) -> None:
        import shlex
        import sys

        self.folder = folder
        self.state = folder / "gh.json"
        folder.mkdir(parents=True, exist_ok=True)
        self.state.write_text("{}")
        self.shims = folder / "shims"
        fake_gh = Path(__file__).parent / "support" / "fake_gh.py"
        write_shim(self.shims, "gh", f'exec {shlex.quote(sys.executable)} {shlex.quote(str(fake_gh))} "$@"\n')
        self.nights = 0

    def run(self, report: dict) -> None:
        self.nights += 1
        night = self.folder / f"night-{self.nights}"
        workspace, temp = night / "work", night / "temp"
        for d in (workspace, temp):
            d.mkdir(parents=True)

        def download(with_: dict, runner: Runner) -> None:
            assert with_["name"] == "watch-report"
            Path(with_["path"]).mkdir(parents=True, exist_ok=True)
            (Path(with_["path"]) / "watch.json").write_text(json.dumps(report))

        runner = Runner(workspace=workspace, shims=self.shims, temp=temp,
                        expressions={"runner.temp": str(temp), "github.token": "t0ken", "github.repository": "o/r",
                                     "github.run_id": "99", "github.run_attempt": "1", "github.workflow": "nightly"},
                        github_env={"FAKE_GH_STATE": str(self.state)}, handlers={"actions/download-artifact": download})
        doc = load_workflow(NIGHTLY)
        run = runner.run_job(doc, "watch-issues")
        assert run.ok, [(s.name, s.returncode, s.stderr) for s in run.steps]

    def issues(self) -> list[dict]:
        return json.loads(self.state.read_text()).get("issues", [])


@pytest.mark.slow
def test_watch_against_an_http_upstream_reuses_and_names_the_culprit(built_world: Path, capsys, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    """Upstream served over HTTP on loopback (a remote channel, as conda-forge is): the sandboxes read it
    through their mirrors, and bisection downloads the older files it pins back to from the channel
    itself (before, a remote upstream got the change list and no culprit)."""
    import re

    from support.channel_server import ChannelServer

    monkeypatch.setenv("CONDA_DISTRO_CACHE", str(tmp_path / "cache"))  # an empty mirror store of its own
    world = built_world
    server = ChannelServer(world, tmp_path / "requests.log", lifetime=1800)
    try:
        cfg = world / "distro.yaml"
        text, n = re.subn(r"upstream: \[\./upstream\][^\n]*", f'upstream: ["{server.url}/upstream"]', cfg.read_text())
        assert n == 1
        cfg.write_text(text)
        git.Repo(world).git.commit("-am", "upstream over http", "--no-verify")
        out, new_array = watch_until_broken(world, tmp_path, capsys)
        # the bisection fetched arraylib 1.0.0 (pinned back) over HTTP, and the sandboxes read nothing else
        gets = [r.split()[1] for r in server.requests() if r.startswith("GET ")]
        assert any(g.startswith("/upstream/") and "/arraylib-1.0.0-" in g for g in gets), gets
        assert any(g.startswith("/upstream/") and g.endswith(new_array.split("/")[1]) for g in gets), gets
    finally:
        server.close()


def test_the_nightly_keeps_one_issue_per_broken_package_and_closes_the_fixed_ones(tmp_path: Path):
    """The `watch-issues` job of nightly.yml on two nights' reports (as `watch --format json` writes
    them): one issue per package whatever its number of broken targets; a package still broken gets a
    comment on its issue, a package no longer broken gets its issue closed, another package its own."""
    def broken(name: str, variant: str, culprit: list[str]) -> dict:
        return {"name": name, "artifact": f"noarch/{name}-1.0-h0_0.conda", "pytorch": "2.6.0", "variant": variant,
                "culprit": culprit, "changed": {"arraylib": ["arraylib-1.0.0-h_0", "arraylib-1.1.0-h_0"],
                                                "odd`|name": [None, "odd-1-h_0"]},
                "log": "/x.log", "reason": "@everyone `rm -rf` recipe text", "maintainers": [f"{name}-ann", "bob"]}

    first = {"broken": [broken("arrayuser", "cpu", ["arraylib arraylib-1.0.0-h_0 -> arraylib-1.1.0-h_0"]),
                        broken("arrayuser", "cuda", []), broken("tinyjson", "cpu", ["x x-1-h_0 -> x-2-h_0"])]}
    gh = NightlyIssues(tmp_path)
    gh.run(first)
    issues = {i["title"]: i for i in gh.issues()}
    assert set(issues) == {"arrayuser is broken by an upstream update", "tinyjson is broken by an upstream update"}
    body = issues["arrayuser is broken by an upstream update"]["body"]
    assert "| 2.6.0 | cpu | `arraylib arraylib-1.0.0-h_0 -> arraylib-1.1.0-h_0` |" in body
    assert "| 2.6.0 | cuda | not found; changed: `arraylib`, `odd  name` |" in body
    assert "@arrayuser-ann @bob" in body and "@everyone" not in body and "rm -rf" not in body
    gh.run({"broken": [b for b in first["broken"] if b["name"] == "tinyjson"]})
    issues = {i["title"]: i for i in gh.issues()}
    assert len(issues) == 2
    assert issues["arrayuser is broken by an upstream update"]["state"] == "closed"
    tiny = issues["tinyjson is broken by an upstream update"]
    assert tiny["state"] == "open" and len(tiny["comments"]) == 1 and "`x x-1-h_0 -> x-2-h_0`" in tiny["comments"][0]
    calls = json.dumps(json.loads(gh.state.read_text())["calls"])
    assert "t0ken" not in calls


_ENV = {"arraylib": "arraylib-1.0.0-h0_0", "python": "python-3.11.9-h0_0"}
_GOOD = {"env": _ENV, "status": "passed", "passed_in": _ENV, "log": "build/logs/watch/a/test.log", "reason": None,
         "from_build": True}
_BROKEN = {"env": _ENV, "status": "failed", "passed_in": _ENV, "culprit": ["arraylib a -> b"],
           "changed": {"arraylib": ["arraylib-0.9.0-h0_0", "arraylib-1.0.0-h0_0"], "gone": ["gone-1-h0_0", None]}}


def test_watch_state_round_trips_through_its_schema(tmp_path: Path):
    """What the watch writes it reads back as it was (the nightly job keeps this file between nights)."""
    state = {"noarch/a-1-h0_0.conda|2.6.0|cpu": dict(_GOOD), "noarch/a-1-h0_0.conda|2.6.0|cuda": dict(_BROKEN)}
    watch_mod._write_state(tmp_path, state)
    doc = json.loads((tmp_path / watch_mod.STATE).read_text())
    assert doc["schema"] == watch_mod.STATE_SCHEMA and set(doc["entries"]) == set(state)
    assert watch_mod.read_state(tmp_path) == {k: {n: v for n, v in e.items() if v is not None} for k, e in state.items()}


@pytest.mark.parametrize("text", [
    "",  # empty (a save cut short)
    '{"schema": 1, "entries": {"a|2.6.0|cpu": {"env": {',  # truncated
    b"\xff\xfe not utf-8",
    "[" * 100_000,  # nested past the parser's depth
    "[]",  # not an object
    json.dumps({"a|2.6.0|cpu": _GOOD}),  # the unversioned layout of earlier watches
    json.dumps({"schema": 3, "entries": {"a|2.6.0|cpu": _GOOD}}),  # a newer schema
    json.dumps({"schema": "1", "entries": {"a|2.6.0|cpu": _GOOD}}),
    json.dumps({"schema": 1, "entries": [_GOOD]}),
])
def test_a_watch_state_it_cannot_read_is_a_miss_never_a_crash(tmp_path: Path, text: str | bytes):
    """A state the watch cannot read (corrupt, another schema) reads as empty: every target is taken from
    the build again or tested; nothing in it is reused."""
    (tmp_path / "watch").mkdir()
    (tmp_path / watch_mod.STATE).write_bytes(text if isinstance(text, bytes) else text.encode())
    assert watch_mod.read_state(tmp_path) == {}
    assert watch_mod.read_state(tmp_path / "nowhere") == {}


def test_a_watch_state_that_is_a_fifo_is_a_miss_without_waiting(tmp_path: Path):
    """A FIFO (or folder) where the state file goes is not read at all: the watch does not wait for a writer."""
    (tmp_path / "watch").mkdir()
    os.mkfifo(tmp_path / watch_mod.STATE)
    assert watch_mod.read_state(tmp_path) == {}  # (before: a plain read_text blocked here for good)
    (tmp_path / watch_mod.STATE).unlink()
    (tmp_path / watch_mod.STATE).mkdir()
    assert watch_mod.read_state(tmp_path) == {}


@pytest.mark.parametrize("bad", [
    "passed",  # not an object
    {**_GOOD, "status": "error"},  # never kept by the tool
    {**_GOOD, "status": "PASSED"},
    {**_GOOD, "env": ["arraylib-1.0.0-h0_0"]},  # the environment is a name -> file table
    {**_GOOD, "env": {"arraylib": 1}},
    {k: v for k, v in _GOOD.items() if k != "env"},
    {k: v for k, v in _GOOD.items() if k != "status"},
    {**_GOOD, "from_build": "true"},  # no coercion
    {**_GOOD, "verdict": "passed"},  # a field the tool never writes
    {**_BROKEN, "changed": {"arraylib": ["only-one"]}},
    {**_BROKEN, "culprit": "arraylib"},
])
def test_a_watch_state_entry_not_in_the_tools_form_is_left_out(tmp_path: Path, bad: object):
    """One entry the tool would not have written is a miss for that target only; the others are kept."""
    good_key, bad_key = "noarch/a-1-h0_0.conda|2.6.0|cpu", "noarch/a-1-h0_0.conda|2.6.0|cuda"
    (tmp_path / "watch").mkdir()
    (tmp_path / watch_mod.STATE).write_text(json.dumps({"schema": watch_mod.STATE_SCHEMA,
                                                        "entries": {good_key: _GOOD, bad_key: bad}}))
    assert set(watch_mod.read_state(tmp_path)) == {good_key}

