"""Verdicts you can trust: a candidate no test ran for is never promoted without a `force` hint (fail
closed); a failure that would block is confirmed by re-running it (and the baseline side), and a test that
both passes and fails on the same inputs is `flaky`, which never blocks and never counts as a pass.

The plan-level tests use hand-made channel records with the results a build writes (as test_gate.py);
the end-to-end ones run on the sandbox world with real builds (rattler-build) and real solves (rattler).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import git
import pytest
from helpers import run_json_at
from test_gate import PAIRS, T0, TK12, TK13, cf, edit, gate, held, name_of, results, runs, write_hints

from conda_distro.promote import HoldReason
from conda_distro.results import NO_TESTS

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


_ = (dt, T0, cf)
