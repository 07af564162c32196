"""The promotion gate keeps main's promise: reverse-dependency re-tests classified like
britney (pass, regression, always-failed, error, neutral), candidates promoted only with what they were
tested with, installability never decreasing, hints, excuses, and a file name never meaning two contents.

The plan-level tests use hand-made channel records with the results a build writes; the end-to-end ones
run the issue's repros on the sandbox world with real builds (rattler-build) and real solves (rattler).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import git
import pytest
from support.helpers import run_json_at

from conda_distro.channels import ChannelFile, LocalChannel
from conda_distro.channels.depends import distribution_closure
from conda_distro.gate.hints import load_hints
from conda_distro.gate.installability import Installability
from conda_distro.gate.promote import HoldReason, PlanInputs, TestMatrix, plan_gate
from conda_distro.state.ledger import Ledger
from conda_distro.state.results import ArtifactResults
from conda_distro.state.results import TestRecord as Run

RELEASES = ("2.4.1", "2.5.1", "2.6.0")
VARIANTS = ("cpu", "cuda")
PAIRS = [(r, v) for r in RELEASES for v in VARIANTS]
T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
MAIN = Path("build/channels/pytorch")


def cf(name, version="1.0", depends=(), sha="1", build="h0_0") -> ChannelFile:
    return ChannelFile("noarch", f"{name}-{version}-{build}.conda", name, version, build, 0, sha * 64, tuple(depends))


def ident(f: ChannelFile) -> str:
    return f"{f.name}-{f.version}-{f.build}"


def runs(f: ChannelFile, status="passed", against=None, at=T0, pairs=PAIRS, reason=None) -> list[Run]:
    return [Run(name=f.name, artifact=f.artifact, pytorch=r, variant=v, status=status, date=at,
                against={n: ident(x) for n, x in (against or {}).items()}, reason=reason, log=f"/logs/{f.name}-{r}-{v}")
            for r, v in pairs]


def results(f: ChannelFile, *run_lists) -> ArtifactResults:
    return ArtifactResults(artifact=f.artifact, name=f.name, version=f.version, sha256=f.sha256,
                           depends=list(f.depends), tests=[t for rl in run_lists for t in rl])


# parent tensorkit 1.2 in main, 1.3 a candidate; audiokit 0.9 in main depends on it (the repro)
TK12 = cf("tensorkit", "1.2", ["pytorch >=2.4,<2.7"])
TK13 = cf("tensorkit", "1.3", ["pytorch >=2.4,<2.7"], sha="2")
AK09 = cf("audiokit", "0.9", ["tensorkit >=1.2,<2", "pytorch >=2.4,<2.7"], sha="3")


def gate(staging, main, res, *, evidence=None, hints=None, today=dt.date(2026, 11, 20), maintainers=None):
    return plan_gate(PlanInputs({f.artifact: f for f in staging}, {f.artifact: f for f in main},
                                {r.artifact: r for r in res}, {}, TestMatrix("pytorch", RELEASES, VARIANTS),
                                evidence=evidence or {}, hints=hints, today=today, maintainers=maintainers or {}))


def held(plan) -> dict[str, object]:
    return {h.file.name: h for h in plan.held}


def test_a_parent_that_breaks_a_dependent_in_main_is_held_as_a_regression():
    res = [results(TK13, runs(TK13)),
           results(AK09, runs(AK09, against={"tensorkit": TK12}),  # passed with main's parent
                   runs(AK09, "failed", against={"tensorkit": TK13}, at=T0 + dt.timedelta(days=1),
                        reason="ImportError: cannot import name 'center'"))]
    plan = gate([TK13], [TK12, AK09], res, maintainers={"tensorkit": ("alice",), "audiokit": ("bob", "alice")})
    h = held(plan)["tensorkit"]
    assert h.reason is HoldReason.REGRESSION and h.blocked_by == ("audiokit",)
    assert {(r["pytorch"], r["variant"]) for r in h.regressions} == set(PAIRS)
    assert all(r["package"] == "audiokit" and r["log"] for r in h.regressions)
    assert h.maintainers == ("alice", "bob")  # its own, then the broken dependent's
    assert "cannot import name 'center'" in h.detail and not plan.promote
    doc = h.to_dict()
    assert set(doc) >= {"artifact", "name", "reason", "detail", "blocked_by", "regressions", "maintainers"}


def test_a_dependent_that_failed_against_mains_parent_too_does_not_block():
    fails_before = runs(AK09, "failed", against={"tensorkit": TK12}, pairs=[("2.6.0", "cpu")])
    res = [results(TK13, runs(TK13)),
           results(AK09, runs(AK09, against={"tensorkit": TK12}, pairs=PAIRS[:4]), fails_before,
                   runs(AK09, "failed", against={"tensorkit": TK13}, pairs=[("2.6.0", "cpu")], at=T0 + dt.timedelta(1)),
                   runs(AK09, against={"tensorkit": TK13}, pairs=[p for p in PAIRS if p != ("2.6.0", "cpu")],
                        at=T0 + dt.timedelta(1)))]
    plan = gate([TK13], [TK12, AK09], res)
    assert [f.name for f in plan.promote] == ["tensorkit"]
    verdicts = {(r.pytorch, r.variant): r.verdict.value for r in plan.retests}
    assert verdicts.pop(("2.6.0", "cpu")) == "always-failed" and set(verdicts.values()) == {"pass"}
    # with no run against main's parent, the ledger's evidence is the baseline: passed there = regression
    res[1] = results(AK09, runs(AK09, "failed", against={"tensorkit": TK13}, pairs=[("2.6.0", "cpu")]),
                     runs(AK09, against={"tensorkit": TK13}, pairs=[p for p in PAIRS if p != ("2.6.0", "cpu")]))
    plan = gate([TK13], [TK12, AK09], res, evidence={AK09.artifact: {("2.6.0", "cpu"): "passed"}})
    assert held(plan)["tensorkit"].reason is HoldReason.REGRESSION
    plan = gate([TK13], [TK12, AK09], res, evidence={AK09.artifact: {("2.6.0", "cpu"): "failed"}})
    assert [f.name for f in plan.promote] == ["tensorkit"]


def test_infrastructure_errors_and_missing_retests_make_the_candidate_wait():
    base = runs(AK09, against={"tensorkit": TK12})
    errored = runs(AK09, "error", against={"tensorkit": TK13}, at=T0 + dt.timedelta(1),
                   reason="the build worker exited with status -9")
    plan = gate([TK13], [TK12, AK09], [results(TK13, runs(TK13)), results(AK09, base, errored)])
    h = held(plan)["tensorkit"]
    assert h.reason is HoldReason.WAITING and "infrastructure error" in h.detail and "--retry-errors" in h.detail
    assert h.blocked_by == ("audiokit",)
    plan = gate([TK13], [TK12, AK09], [results(TK13, runs(TK13)), results(AK09, base)])  # never re-tested
    h = held(plan)["tensorkit"]
    assert h.reason is HoldReason.WAITING and "not yet tested with tensorkit-1.3-h0_0" in h.detail
    # the candidate's own error: waiting too, never passed or failed
    plan = gate([TK13], [TK12], [results(TK13, runs(TK13, "error", reason="channel unreadable"))])
    assert held(plan)["tensorkit"].reason is HoldReason.WAITING


def test_a_dependent_without_tests_is_neutral():
    from conda_distro.state.results import NO_TESTS

    res = [results(TK13, runs(TK13)), results(AK09, runs(AK09, against={"tensorkit": TK13}, reason=NO_TESTS))]
    plan = gate([TK13], [TK12, AK09], res)
    assert [f.name for f in plan.promote] == ["tensorkit"] and {r.verdict.value for r in plan.retests} == {"neutral"}


def test_a_fixed_dependent_and_its_parent_go_together_or_not_at_all():
    ak10 = cf("audiokit", "1.0", ["tensorkit >=1.3,<2", "pytorch >=2.4,<2.7"], sha="4")
    res = [results(TK13, runs(TK13)),
           results(AK09, runs(AK09, "failed", against={"tensorkit": TK13})),  # the old one breaks ...
           results(ak10, runs(ak10, against={"tensorkit": TK13}))]  # ... the new one, tested with it, passes
    plan = gate([TK13, ak10], [TK12, AK09], res)
    assert [f.name for f in plan.promote] == ["tensorkit", "audiokit"]
    assert plan.sets == [sorted([TK13.artifact, ak10.artifact])]
    # the fix fails its own tests: neither goes (the parent would break main's audiokit 0.9)
    res[2] = results(ak10, runs(ak10, "failed", against={"tensorkit": TK13}))
    plan = gate([TK13, ak10], [TK12, AK09], res, evidence={AK09.artifact: dict.fromkeys(PAIRS, "passed")})
    assert not plan.promote
    assert held(plan)["tensorkit"].reason is HoldReason.REGRESSION
    # a candidate tested only with main's parent does not go with the new one
    res[2] = results(ak10, runs(ak10, against={"tensorkit": TK12}))
    plan = gate([TK13, ak10], [TK12, AK09], res, evidence={AK09.artifact: dict.fromkeys(PAIRS, "passed")})
    assert held(plan)["audiokit"].reason is HoldReason.WAITING and not plan.promote


def write_hints(root: Path, text: str):
    (root / "hints.yaml").write_text(text)
    return load_hints(root)


def test_hints_block_unblock_force_force_badtest_urgent_and_expiry(tmp_path):
    good = [results(TK13, runs(TK13)), results(AK09, runs(AK09, against={"tensorkit": TK13}))]
    broken = [results(TK13, runs(TK13)), results(AK09, runs(AK09, against={"tensorkit": TK12}),
                                                  runs(AK09, "failed", against={"tensorkit": TK13}, at=T0 + dt.timedelta(1)))]
    hint = "  - {{action: {a}, package: {p}, {v}by: rm-ann, reason: {why}, expires: {e}}}\n"

    def hints(*items):
        return write_hints(tmp_path, "hints:\n" + "".join(hint.format(**i) for i in items))

    block = dict(a="block", p="tensorkit", v="", why="wait for the 1.3.1 fix", e="2026-12-31")
    plan = gate([TK13], [TK12, AK09], good, hints=hints(block))
    h = held(plan)["tensorkit"]
    assert h.reason is HoldReason.BLOCKED_BY_HINT and "rm-ann" in h.detail and "hints.yaml:2" in h.detail
    plan = gate([TK13], [TK12, AK09], good, hints=hints(block, dict(block, a="unblock", v="version: '1.3', ")))
    assert [f.name for f in plan.promote] == ["tensorkit"]
    # an expired hint does nothing
    plan = gate([TK13], [TK12, AK09], good, hints=hints(dict(block, e="2026-11-19")))
    assert [f.name for f in plan.promote] == ["tensorkit"]
    # force-badtest audiokit up to 0.9: its failing test is ignored; up to 0.8: it is not
    plan = gate([TK13], [TK12, AK09], broken, hints=hints(dict(a="force-badtest", p="audiokit", v="version: '0.9', ",
                                                                why="flaky", e="2026-12-31")))
    assert [f.name for f in plan.promote] == ["tensorkit"] and {r.verdict.value for r in plan.retests} == {"ignored"}
    plan = gate([TK13], [TK12, AK09], broken, hints=hints(dict(a="force-badtest", p="audiokit", v="version: '0.8', ",
                                                                why="flaky", e="2026-12-31")))
    assert held(plan)["tensorkit"].reason is HoldReason.REGRESSION
    # force: promoted despite the regression, and said so
    plan = gate([TK13], [TK12, AK09], broken, hints=hints(dict(a="force", p="tensorkit", v="", why="r", e="2026-12-31")))
    assert [f.name for f in plan.promote] == ["tensorkit"] and plan.forced == {TK13.artifact: "rm-ann"}
    assert plan.to_dict()["promoted"][0]["forced_by"] == "rm-ann"
    # urgent: does not wait for re-tests that have not run, but never goes over a regression
    untested = [results(TK13, runs(TK13)), results(AK09, runs(AK09, against={"tensorkit": TK12}))]
    urgent = hints(dict(a="urgent", p="tensorkit", v="", why="security fix", e="2026-12-31"))
    assert [f.name for f in gate([TK13], [TK12, AK09], untested, hints=urgent).promote] == ["tensorkit"]
    assert held(gate([TK13], [TK12, AK09], broken, hints=urgent))["tensorkit"].reason is HoldReason.REGRESSION


def test_excuses_say_why_grouped_by_what_blocks(tmp_path):
    from conda_distro.gate.excuses import excuses_of

    broken = [results(TK13, runs(TK13, at=T0)), results(AK09, runs(AK09, against={"tensorkit": TK12}),
                                                         runs(AK09, "failed", against={"tensorkit": TK13}, at=T0 + dt.timedelta(1)))]
    inputs = PlanInputs({TK13.artifact: TK13}, {f.artifact: f for f in (TK12, AK09)}, {r.artifact: r for r in broken},
                        {}, TestMatrix("pytorch", RELEASES, VARIANTS), maintainers={"audiokit": ("bob",)})
    ex = excuses_of(plan_gate(inputs), inputs, now=T0 + dt.timedelta(days=5))
    [c] = ex.to_dict()["candidates"]
    assert (c["name"], c["old_version"], c["new_version"], c["verdict"]) == ("tensorkit", "1.2", "1.3", "held-temporarily")
    assert c["blocked_by"] == ["audiokit"] and c["days_waiting"] == 5 and c["maintainers"] == ["bob"]
    assert c["reasons"][0].startswith("regression: breaks audiokit")
    assert ex.to_dict()["groups"] == [{"blocked_by": "audiokit", "candidates": ["tensorkit"]}]
    assert "blocked by audiokit (1):" in ex.text_lines() and "### blocked by audiokit (1)" in ex.markdown()


# ---------------------------------------------------------------------------------------------
# installability, solved by rattler against a real (sandbox) upstream


@pytest.mark.slow
def test_a_candidate_that_makes_a_package_in_main_uninstallable_is_held(sandbox_world: Path):
    """Our channel overlays upstream with strict priority: a `pytorch` of our own in main would hide
    upstream's for every release it does not provide; main's packages could then not be installed."""
    upstream = (sandbox_world / "upstream").as_uri()
    lib = cf("tensorkit", "1.2", ["python >=3.10", "pytorch >=2.4,<2.7"])
    shadow = cf("pytorch", "2.6.0", ["python >=3.10"], sha="5", build="our_0")
    staging, main = [shadow], [lib]
    matrix = TestMatrix("pytorch", RELEASES, VARIANTS)
    res = {shadow.artifact: results(shadow, runs(shadow, pairs=[("2.6.0", "cpu")]))}
    files = [*staging, *main]
    checker = Installability([upstream], ["linux-64", "noarch"], "pytorch", matrix.required, distribution_closure(files))
    plan = plan_gate(PlanInputs({f.artifact: f for f in staging}, {f.artifact: f for f in main}, res, {}, matrix,
                                installability=checker))
    h = held(plan)["pytorch"]
    assert h.reason is HoldReason.UNINSTALLABLE and h.blocked_by == ("tensorkit",)
    assert "tensorkit (in main) could be installed with pytorch 2.4.1" in h.detail
    assert plan.installability_solves >= 2 and not plan.promote
    # a harmless candidate passes the same check
    other = cf("audiokit", "0.9", ["python >=3.10", "tensorkit >=1.2,<2"], sha="6")
    res = {other.artifact: results(other, runs(other, against={"tensorkit": lib}))}
    checker = Installability([upstream], ["linux-64", "noarch"], "pytorch", matrix.required, distribution_closure([other, lib]))
    plan = plan_gate(PlanInputs({other.artifact: other}, {lib.artifact: lib}, res, {}, matrix, installability=checker))
    assert [f.name for f in plan.promote] == ["audiokit"]


# ---------------------------------------------------------------------------------------------
# end to end on the sandbox world


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def bump_tensorutils(world: Path, *, drop_center: bool) -> None:
    recipe = world / "recipes/tensorutils/recipe.yaml"
    edit(recipe, 'version: "0.3.2"', 'version: "0.3.3"')
    if drop_center:
        edit(recipe, "; assert tensorutils.center(torch.tensor([1.0, 3.0])).tolist() == [-1.0, 1.0]", "")
        src = world / "recipes/tensorutils/src/tensorutils/__init__.py"
        text = src.read_text()
        src.write_text(text[:text.index("def center(")] + text[text.index("def describe("):])
    repo = git.Repo(world)
    repo.git.add("-A")
    repo.index.commit("tensorutils 0.3.3" + (": drop center()" if drop_center else ""))


def name_of(artifact: str) -> str:
    return artifact.split("/")[-1].rsplit("-", 2)[0]


def main_files(world: Path) -> set[str]:
    return set(LocalChannel(world / MAIN).list_files())


@pytest.mark.slow
def test_regression_held_naming_the_dependent_then_promoted_with_the_fix(built_world: Path, capsys):
    world = built_world
    code, out = run_json_at(capsys, world, "promote")
    assert {name_of(a["artifact"]) for a in out["promoted"]} >= {"tensorutils", "layerkit", "trainloop"}
    bump_tensorutils(world, drop_center=True)

    code, doc = run_json_at(capsys, world, "build", "tensorutils")
    assert code == 1
    built = [b["name"] for b in doc["builds"] if b["status"] == "built"]
    assert built == ["tensorutils"]  # the dependents' main artifacts are re-tested, not rebuilt
    assert {b["status"] for b in doc["builds"] if b["name"] == "layerkit"} == {"skipped-existing"}
    lk = [t for t in doc["tests"] if t["name"] == "layerkit"]
    assert len(lk) == 6 and {t["status"] for t in lk} == {"failed"}
    assert {t["against"]["tensorutils"].rsplit("-", 1)[0] for t in lk} == {"tensorutils-0.3.3"}

    code, out = run_json_at(capsys, world, "promote")
    assert code == 1
    [h] = [h for h in out["held"] if "tensorutils-0.3.3" in h["artifact"]]
    assert h["reason"] == "regression" and h["blocked_by"] == ["layerkit"]
    assert {(r["pytorch"], r["variant"]) for r in h["regressions"]} == set(PAIRS)
    assert all(r["package"] == "layerkit" and Path(r["log"]).is_file() for r in h["regressions"])
    assert {"alice-ml", "bkowalski"} <= set(h["maintainers"])
    assert not any("0.3.3" in a for a in main_files(world))
    code, ex = run_json_at(capsys, world, "excuses")
    [c] = [c for c in ex["candidates"] if c["name"] == "tensorutils"]
    assert (c["old_version"], c["new_version"], c["verdict"], c["blocked_by"]) == ("0.3.2", "0.3.3", "held-temporarily", ["layerkit"])
    written = json.loads((world / "build/excuses.json").read_text())
    assert [x for x in written["candidates"] if x["name"] == "tensorutils"] == [c]
    # the ledger keeps main's evidence: layerkit's failures with the held tensorutils are not main's
    lk_entry = Ledger(world / "channel_state").load("layerkit").artifacts[0]
    assert {t.status for t in lk_entry.tests} == {"passed"}

    # layerkit 1.1.1 stops using tensorutils.center: both go, together
    lk_src = world / "recipes/layerkit/src/layerkit/__init__.py"
    edit(lk_src, "from tensorutils import center\n", "\n\ndef center(t):\n    return t - t.mean().item()\n")
    edit(world / "recipes/layerkit/recipe.yaml", 'version: "1.1.0"', 'version: "1.1.1"')
    repo = git.Repo(world)
    repo.git.add("-A")
    repo.index.commit("layerkit 1.1.1: own center()")
    code, doc = run_json_at(capsys, world, "build", "layerkit")
    assert code == 0, [t for t in doc["tests"] if t["status"] != "passed"]
    code, out = run_json_at(capsys, world, "promote")
    promoted = {name_of(a["artifact"]): a["artifact"] for a in out["promoted"]}
    assert "0.3.3" in promoted["tensorutils"] and "1.1.1" in promoted["layerkit"], out["held"]
    assert sorted(promoted[n] for n in ("layerkit", "tensorutils")) in out["sets"]
    assert {promoted["tensorutils"], promoted["layerkit"]} <= main_files(world)


def kill_workers_of(world: Path, name: str, stop: threading.Event, killed: list[int]) -> None:
    """Kill (SIGKILL) the build worker of package ``name`` in ``world`` as soon as it runs: an
    infrastructure failure. (Its job file lies in the world's build/work/NAME-*/.)"""
    needle = f"{world / 'build' / 'work' / name}-".encode()
    while not stop.is_set():
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if b"conda_distro.engine.worker" in cmd and needle in cmd:
                try:
                    os.kill(int(proc.name), signal.SIGKILL)
                    killed.append(int(proc.name))
                except OSError:
                    pass
        time.sleep(0.02)


@pytest.mark.slow
def test_an_infrastructure_error_makes_the_parent_wait_and_retry_errors_reruns_it(built_world: Path, capsys):
    world = built_world
    run_json_at(capsys, world, "promote")
    bump_tensorutils(world, drop_center=False)  # a good bump
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=kill_workers_of, args=(world, "layerkit", stop, killed), daemon=True)
    killer.start()
    try:
        proc = subprocess.run([sys.executable, "-m", "conda_distro", "build", "tensorutils", "--format", "json"],
                              cwd=world, capture_output=True, text=True, timeout=600)
    finally:
        stop.set()
        killer.join(timeout=60)
    assert killed and proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert {t["status"] for t in doc["tests"] if t["name"] == "layerkit"} == {"error"}
    code, out = run_json_at(capsys, world, "promote")
    [h] = [h for h in out["held"] if "tensorutils-0.3.3" in h["artifact"]]
    assert h["reason"] == "waiting" and h["blocked_by"] == ["layerkit"] and "--retry-errors" in h["detail"]
    code, doc = run_json_at(capsys, world, "build", "--retry-errors")
    assert code == 0 and {t["name"] for t in doc["tests"] if not t.get("cached")} == {"layerkit", "trainloop"}
    assert not [b for b in doc["builds"] if b["status"] == "built"]
    code, out = run_json_at(capsys, world, "promote")
    assert any("0.3.3" in a["artifact"] for a in out["promoted"]), out["held"]  # (exit 1: the sandbox's own failures)


@pytest.mark.slow
def test_a_file_name_in_main_is_never_built_again(built_world: Path, capsys):
    world = built_world
    run_json_at(capsys, world, "promote")
    main = LocalChannel(world / MAIN).list_files()
    [lk] = [f for f in main.values() if f.name == "layerkit"]
    (world / "build/channels/staging" / lk.artifact).unlink()  # staging lost it; main has it
    code, doc = run_json_at(capsys, world, "build", "layerkit", "--dry-run")
    assert [v["action"] for p in doc["plan"]["packages"] if p["name"] == "layerkit" for v in p["variants"]] == ["from-main"]
    code, doc = run_json_at(capsys, world, "build", "layerkit")
    assert code == 0 and {b["status"] for b in doc["builds"] if b["name"] == "layerkit"} == {"skipped-existing"}
    assert LocalChannel(world / "build/channels/staging").list_files()[lk.artifact].sha256 == lk.sha256
    # the recipe changes, the build number does not: refused, with what to do
    edit(world / "recipes/layerkit/recipe.yaml", "Reusable torch.nn building blocks", "Reusable torch.nn blocks")
    code, doc = run_json_at(capsys, world, "build", "layerkit")
    [b] = [b for b in doc["builds"] if b["name"] == "layerkit"]
    assert code == 1 and b["status"] == "failed" and "bump build.number in recipes/layerkit/recipe.yaml" in b["reason"]
    assert {b["status"] for b in doc["builds"] if b["name"] == "trainloop"} == {"blocked"}
    assert LocalChannel(world / "build/channels/staging").list_files()[lk.artifact].sha256 == lk.sha256
    assert LocalChannel(world / MAIN).list_files()[lk.artifact].sha256 == lk.sha256


@pytest.mark.slow
def test_mains_artifact_of_a_dependent_whose_recipe_moved_on_is_retested(built_world: Path, capsys):
    """layerkit's recipe is at 1.1.1 (not promoted: a block hint holds it) while main serves 1.1.0: a
    tensorutils bump re-tests main's 1.1.0 too, as it is, so tensorutils can go without layerkit 1.1.1."""
    world = built_world
    run_json_at(capsys, world, "promote")
    edit(world / "recipes/layerkit/recipe.yaml", 'version: "1.1.0"', 'version: "1.1.1"')
    (world / "hints.yaml").write_text("hints:\n  - {action: block, package: layerkit, version: '1.1.1', by: rm-ann, "
                                      "reason: wait for the docs, expires: 2999-01-01}\n")
    repo = git.Repo(world)
    repo.git.add("-A")
    repo.index.commit("layerkit 1.1.1; hold it")
    bump_tensorutils(world, drop_center=False)
    code, doc = run_json_at(capsys, world, "build", "tensorutils", "--dry-run")
    lk = next(p for p in doc["plan"]["packages"] if p["name"] == "layerkit")
    assert [(v["artifact"].split("-")[1], v["action"]) for v in lk["variants"]] == [("1.1.1", "build"), ("1.1.0", "from-main")]
    code, doc = run_json_at(capsys, world, "build", "tensorutils")
    assert code == 0, [t for t in doc["tests"] if t["status"] != "passed"]
    old = [t for t in doc["tests"] if t["artifact"].startswith("noarch/layerkit-1.1.0-")]
    assert len(old) == 6 and {t["against"]["tensorutils"].rsplit("-", 1)[0] for t in old} == {"tensorutils-0.3.3"}
    code, out = run_json_at(capsys, world, "promote")
    held = {h["artifact"]: h for h in out["held"]}
    assert next(h for a, h in held.items() if "layerkit-1.1.1" in a)["reason"] == "blocked-by-hint"
    assert any("tensorutils-0.3.3" in a["artifact"] for a in out["promoted"]), out["held"]
