"""Every hold's advice, followed, unblocks it.

Per hold reason: a scenario that makes the gate hold a candidate for it; the advice the hold carries is
checked to say what to run or change; then that is done to the gate's inputs exactly as the command
does it (new results where `conda-distro build` would test, the file out of staging and its results
where `conda-distro prune` removes it, hints.yaml rewritten, a build with the next build number) and the
gate is asked again: the candidate is promoted, and nothing holds the command's exit code for it.
The real commands are followed on the sandbox world in tests/test_prune.py (prune, build NAME).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re

from test_gate import AK09, PAIRS, T0, TK12, TK13, cf, runs, write_hints
from test_gate import results as results_of

from conda_distro.gate.holds import HoldClass, HoldReason
from conda_distro.gate.promote import PlanInputs, TestMatrix, plan_gate
from conda_distro.gate.prune import plan_prune
from conda_distro.gate.staleness import RecipeOutput, StalenessInputs, stale_builds
from conda_distro.state.results import ArtifactResults

RELEASES = ("2.4.1", "2.5.1", "2.6.0")
LATER = T0 + dt.timedelta(days=2)
TODAY = dt.date(2026, 11, 20)


def plan(staging, main, res, *, hints=None, recipes=None, outputs=None, retired=frozenset()):
    st, mn = {f.artifact: f for f in staging}, {f.artifact: f for f in main}
    rs = {r.artifact: r for r in res}
    stale = stale_builds(StalenessInputs(st, mn, rs, recipes or {}, outputs or {}, retired)) if recipes else {}
    inputs = PlanInputs(st, mn, rs, {}, TestMatrix("pytorch", RELEASES, ("cpu", "cuda")), hints=hints, today=TODAY,
                        recipes=recipes, stale=stale)
    return plan_gate(inputs), inputs


def hold_of(p, f):
    return next(h for h in p.held if h.artifact == f.artifact)


def command(advice: str) -> str:
    m = re.search(r"`conda-distro ([^`]+)`", advice)
    assert m, f"no command in the advice: {advice}"
    return m.group(1)


def promoted(p, f) -> bool:
    return f.artifact in {x.artifact for x in p.promote}


def test_test_failed_fix_and_build():
    res = [results_of(TK13, runs(TK13, "failed", reason="AssertionError"))]
    p, _ = plan([TK13], [TK12], res)
    h = hold_of(p, TK13)
    assert h.reason is HoldReason.TEST_FAILED and command(h.what_to_do) == "build tensorkit" and p.exit_code == 1
    fixed = results_of(TK13, runs(TK13, at=LATER))  # the fixed package, built and tested
    p, _ = plan([TK13], [TK12], [fixed])
    assert promoted(p, TK13) and p.exit_code == 0


def test_not_tested_build():
    p, _ = plan([TK13], [TK12], [results_of(TK13, runs(TK13, pairs=PAIRS[:2]))])
    h = hold_of(p, TK13)
    assert h.reason is HoldReason.NOT_TESTED and command(h.what_to_do) == "build tensorkit"
    p, _ = plan([TK13], [TK12], [results_of(TK13, runs(TK13))])  # `build tensorkit` tests every pair
    assert promoted(p, TK13)


def test_waiting_for_an_error_retry_errors():
    err = results_of(TK13, runs(TK13, "error", reason="the build worker exited with status -9"))
    p, _ = plan([TK13], [TK12], [err])
    h = hold_of(p, TK13)
    assert h.reason is HoldReason.WAITING and "build --retry-errors" in h.detail and h.hold_class is HoldClass.WAITING
    again = ArtifactResults(**{**err.model_dump(), "tests": []})
    for t in runs(TK13, at=LATER):
        again.record(t)
    p, _ = plan([TK13], [TK12], [again])
    assert promoted(p, TK13)


def test_waiting_for_a_retest_build_both():
    res = [results_of(TK13, runs(TK13)), results_of(AK09, runs(AK09, against={"tensorkit": TK12}))]
    p, _ = plan([TK13], [TK12, AK09], res)
    h = hold_of(p, TK13)
    assert h.reason is HoldReason.WAITING and command(h.what_to_do) == "build audiokit tensorkit"
    # `build audiokit tensorkit` re-tests audiokit (in main) with the candidate
    res[1] = results_of(AK09, runs(AK09, against={"tensorkit": TK12}), runs(AK09, against={"tensorkit": TK13}, at=LATER))
    p, _ = plan([TK13], [TK12, AK09], res)
    assert promoted(p, TK13)


def test_regression_fix_the_dependent_and_build():
    base = runs(AK09, against={"tensorkit": TK12})
    res = [results_of(TK13, runs(TK13)), results_of(AK09, base, runs(AK09, "failed", against={"tensorkit": TK13}, at=LATER))]
    p, _ = plan([TK13], [TK12, AK09], res)
    h = hold_of(p, TK13)
    assert h.reason is HoldReason.REGRESSION and command(h.what_to_do) == "build audiokit tensorkit"
    # a fixed audiokit 0.9.1 (a candidate) that works with tensorkit 1.3, built with it
    ak091 = cf("audiokit", "0.9.1", AK09.depends, sha="7")
    res += [results_of(ak091, runs(ak091, against={"tensorkit": TK13}, at=LATER))]
    p, _ = plan([TK13, ak091], [TK12, AK09], res)
    assert promoted(p, TK13) and promoted(p, ak091)


def test_dependency_held_follow_the_dependencys_advice():
    res = [results_of(TK13, runs(TK13, "failed")),
           results_of(ak := cf("audiokit", "1.0", ["tensorkit >=1.3,<2", "pytorch >=2.4,<2.7"], sha="8"),
                      runs(ak, against={"tensorkit": TK13}))]
    p, _ = plan([TK13, ak], [TK12], res)
    h = hold_of(p, ak)
    assert h.reason is HoldReason.DEPENDENCY_NOT_IN_MAIN and "tensorkit is held (test-failed)" in h.what_to_do
    assert command(h.what_to_do) == "build tensorkit"
    res[0] = results_of(TK13, runs(TK13, at=LATER))
    p, _ = plan([TK13, ak], [TK12], res)
    assert promoted(p, TK13) and promoted(p, ak)


def test_blocked_by_hint_remove_the_hint(tmp_path):
    res = [results_of(TK13, runs(TK13))]
    hints = write_hints(tmp_path, "hints:\n  - {action: block, package: tensorkit, by: rm-ann, reason: wait, "
                                  "expires: 2026-12-31}\n")
    p, _ = plan([TK13], [TK12], res, hints=hints)
    h = hold_of(p, TK13)
    assert h.reason is HoldReason.BLOCKED_BY_HINT and "remove the block hint on tensorkit from hints.yaml" in h.what_to_do
    p, _ = plan([TK13], [TK12], res, hints=write_hints(tmp_path, "hints: []\n"))
    assert promoted(p, TK13)


HERE = {"recipes/tensorkit": "a" * 64, "recipes/audiokit": "b" * 64}


def with_recipe(res: ArtifactResults, digest: str, tests: dict | None = None) -> ArtifactResults:
    recipe = f"recipes/{res.name}"
    return res.model_copy(update={"recipe": recipe, "recipe_hash": digest, "tests": [
        t.model_copy(update={"recipes": tests if tests is not None else {recipe: digest}}) for t in res.tests]})


def test_tested_with_other_recipes_build_retests():
    ak = cf("audiokit", "1.0", ["tensorkit >=1.2,<2", "pytorch >=2.4,<2.7"], sha="8")
    res = [with_recipe(results_of(ak, runs(ak, against={"tensorkit": TK12})), "b" * 64,
                       {"recipes/audiokit": "b" * 64, "recipes/tensorkit": "f" * 64})]  # tested with a branch's parent
    p, _ = plan([ak], [TK12], res, recipes=HERE)
    h = hold_of(p, ak)
    assert h.reason is HoldReason.TESTED_WITH_OTHER_RECIPES and command(h.what_to_do) == "build audiokit"
    res = [with_recipe(results_of(ak, runs(ak, against={"tensorkit": TK12}, at=LATER)), "b" * 64,
                       {"recipes/audiokit": "b" * 64, "recipes/tensorkit": "a" * 64})]  # re-tested here
    p, _ = plan([ak], [TK12], res, recipes=HERE)
    assert promoted(p, ak)


def follow_prune(staging, main, res, **kw):
    """`conda-distro prune`: what it removes leaves staging and the results store."""
    p, inputs = plan(staging, main, res, **kw)
    pp = plan_prune(inputs, p)
    gone = {f.artifact for f in pp.remove}
    return ([f for f in staging if f.artifact not in gone], [r for r in res if r.artifact not in set(pp.results)], gone)


def test_stale_holds_prune():
    outputs = {"tensorkit": RecipeOutput("recipes/tensorkit", "1.3", 0)}
    pr = cf("tensorkit", "1.4", ["pytorch >=2.4,<2.7"], sha="9")  # a PR branch's build: another recipe
    old = dataclasses.replace(cf("tensorkit", "1.2.9", ["pytorch >=2.4,<2.7"], sha="6"))  # older than main's 1.3 below
    res = [with_recipe(results_of(pr, runs(pr)), "f" * 64), with_recipe(results_of(old, runs(old)), "e" * 64),
           with_recipe(results_of(TK13, runs(TK13)), "a" * 64)]
    p, _ = plan([pr, old, TK13], [TK12], res, recipes=HERE, outputs=outputs)
    holds = {h.file.filename: h for h in p.held}
    assert {n: h.reason for n, h in holds.items()} == {pr.filename: HoldReason.NOT_FROM_THIS_CHECKOUT,
                                                      old.filename: HoldReason.SUPERSEDED}
    assert all(h.hold_class is HoldClass.STALE and "`conda-distro prune`" in h.what_to_do for h in holds.values())
    assert p.exit_code == 0 and promoted(p, TK13)  # stale builds never make promote exit 1
    staging, res, gone = follow_prune([pr, old, TK13], [TK12], res, recipes=HERE, outputs=outputs)
    assert gone == {pr.artifact, old.artifact}
    p, _ = plan(staging, [TK12], res, recipes=HERE, outputs=outputs)
    assert not p.held and promoted(p, TK13)


def test_sha256_mismatch_bump_the_build_number_then_prune():
    clash = dataclasses.replace(TK12, sha256="d" * 64)  # same file name as main's, other bytes
    outputs = {"tensorkit": RecipeOutput("recipes/tensorkit", "1.2", 0)}
    res = [with_recipe(results_of(clash, runs(clash)), "a" * 64)]
    p, _ = plan([clash], [TK12], res, recipes=HERE, outputs=outputs)
    h = hold_of(p, clash)
    assert h.reason is HoldReason.SHA256_MISMATCH and "bump build.number in recipes/tensorkit/recipe.yaml" in h.what_to_do
    assert command(h.what_to_do) == "build tensorkit"
    # bumped: the recipe now makes build number 1; `build tensorkit` makes and tests it
    outputs = {"tensorkit": RecipeOutput("recipes/tensorkit", "1.2", 1)}
    bumped = dataclasses.replace(TK12, filename="tensorkit-1.2-h0_1.conda", build="h0_1", build_number=1, sha256="e" * 64)
    res += [with_recipe(results_of(bumped, runs(bumped)), "a" * 64)]
    p, _ = plan([clash, bumped], [TK12], res, recipes=HERE, outputs=outputs)
    # the bumped build goes; the clashing file is superseded by it (stale: no exit 1), and prune removes it
    assert promoted(p, bumped) and hold_of(p, clash).reason is HoldReason.SUPERSEDED and p.exit_code == 0
    staging, res, gone = follow_prune([clash, bumped], [TK12], res, recipes=HERE, outputs=outputs)
    assert gone == {clash.artifact}
    p, _ = plan(staging, [TK12], res, recipes=HERE, outputs=outputs)
    assert not p.held and promoted(p, bumped)


def test_waiting_on_a_retest_that_installs_a_stale_build_prune_then_build():
    """Two builds of tensorkit 1.3: ``ha_0`` from this checkout and ``hz_0`` built from another recipe a
    minute later. The solver prefers ``hz_0`` (newer), so `build` keeps re-testing audiokit with it, and the
    gate (which never promotes it) keeps waiting for a run with ``ha_0``: the advice is prune first."""
    outputs = {"tensorkit": RecipeOutput("recipes/tensorkit", "1.3", 0), "audiokit": RecipeOutput("recipes/audiokit", "0.9", 0)}
    ha = dataclasses.replace(TK13, filename="tensorkit-1.3-ha_0.conda", build="ha_0", timestamp=1_000)
    hz = dataclasses.replace(TK13, filename="tensorkit-1.3-hz_0.conda", build="hz_0", sha256="c" * 64, timestamp=61_000)
    ak = with_recipe(results_of(AK09, runs(AK09, against={"tensorkit": TK12}),
                                runs(AK09, against={"tensorkit": hz}, at=LATER)), "b" * 64)
    res = [with_recipe(results_of(ha, runs(ha)), "a" * 64), with_recipe(results_of(hz, runs(hz)), "f" * 64), ak]
    p, _ = plan([ha, hz], [TK12, AK09], res, recipes=HERE, outputs=outputs)
    h = hold_of(p, ha)
    assert h.reason is HoldReason.WAITING and "tensorkit-1.3-hz_0" in h.detail
    assert h.what_to_do.startswith("`conda-distro prune` (removes tensorkit-1.3-hz_0)")
    staging, res, gone = follow_prune([ha, hz], [TK12, AK09], res, recipes=HERE, outputs=outputs)
    assert gone == {hz.artifact}
    # then `conda-distro build audiokit tensorkit`: the solver now installs ha_0 in audiokit's re-test
    res = [r if r.name != "audiokit" else with_recipe(results_of(AK09, runs(AK09, against={"tensorkit": TK12}),
                                                                 runs(AK09, against={"tensorkit": ha}, at=LATER)), "b" * 64)
           for r in res]
    p, _ = plan(staging, [TK12, AK09], res, recipes=HERE, outputs=outputs)
    assert promoted(p, ha) and p.exit_code == 0


def test_untested_and_unsealed_name_the_package_to_build(tmp_path):
    """What has no results, results of another build, or results without a recipe hash is advised
    `conda-distro build NAME` with its name: a bare `conda-distro build` selects nothing and is refused."""
    from conda_distro.gate.excuses import excuses_of
    from conda_distro.gate.policies import _gate_provenance, _gate_sealed
    from conda_distro.state.results import read_results

    p, inputs = plan([TK13], [TK12], [])  # in staging, no results at all
    assert p.untracked == [TK13.artifact]
    line = next(x for x in p.text_lines() if "untested" in x)
    assert command(line) == "build tensorkit"
    (e,) = [e for e in excuses_of(p, inputs).candidates if e.name == "tensorkit"]
    assert command(next(r for r in e.reasons if "not tested yet" in r)) == "build tensorkit"
    (kept,) = [k for k in plan_prune(inputs, p).kept if k.artifact == TK13.artifact]
    assert command(kept.detail) == "build tensorkit"

    res = results_of(TK13, runs(TK13))
    h = _gate_sealed(TK13, res, on_disk="f" * 64)  # the file on disk is not the one tested
    assert h is not None and command(h.detail) == "build tensorkit"
    h = _gate_provenance(TK13, res, HERE)  # results that record no recipe input hash
    assert h is not None and command(h.detail) == "build tensorkit"

    bad = tmp_path / "noarch__tensorkit-1.3-h0_0.conda.json"
    bad.write_text("{not json", encoding="utf-8")
    try:
        read_results(bad, TK13.artifact)
    except Exception as exc:  # noqa: BLE001 - the error's hint is what is checked
        assert command(exc.hint) == "build tensorkit", exc.hint
    else:
        raise AssertionError("a corrupt results file was read")
