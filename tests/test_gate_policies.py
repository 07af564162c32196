"""The promotion gate's checks as policies (conda_distro.gate.policies): every hold of a candidate is
kept and shown, in order (promote's JSON and text, the excuses' text, markdown and JSON, and the file the
status page reads back); a hint lifts only the holds of the policies that honour it; and a policy added
to the one list is run by promote and reported by the excuses.

Plan-level: hand-made channel records with the results a build writes (as tests/test_gate.py does)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import ClassVar

import pytest

from conda_distro.channels import ChannelFile
from conda_distro.gate import policies
from conda_distro.gate.excuses import excuses_of, read_excuses, write_excuses
from conda_distro.gate.hints import ACTIONS, load_hints
from conda_distro.gate.holds import Held, HoldClass, HoldReason
from conda_distro.gate.promote import PlanInputs, PromoteResult, TestMatrix, plan_gate
from conda_distro.state.results import ArtifactResults
from conda_distro.state.results import TestRecord as Run

RELEASES = ("2.4.1", "2.5.1")
VARIANTS = ("cpu", "cuda")
T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
TODAY = dt.date(2026, 11, 20)


def cf(name: str, version: str = "1.0", sha: str = "1") -> ChannelFile:
    return ChannelFile("noarch", f"{name}-{version}-h0_0.conda", name, version, "h0_0", 0, sha * 64,
                       ("pytorch >=2.4,<2.7",))


def results(f: ChannelFile, status: str = "passed") -> ArtifactResults:
    tests = [Run(name=f.name, artifact=f.artifact, pytorch=r, variant=v, status=status, date=T0,
                 reason="AssertionError: 1 != 2" if status == "failed" else None, log=f"/logs/{f.name}-{r}-{v}")
             for r in RELEASES for v in VARIANTS]
    return ArtifactResults(artifact=f.artifact, name=f.name, version=f.version, sha256=f.sha256,
                           depends=list(f.depends), tests=tests)


def hints(tmp_path: Path, *lines: str):
    (tmp_path / "hints.yaml").write_text("hints:\n" + "".join(f"  - {line}\n" for line in lines))
    return load_hints(tmp_path)


BLOCK = "{action: block, package: tensorkit, by: rm-ann, reason: wait for the 1.3.1 fix, expires: 2026-12-31}"
FORCE = "{action: force, package: tensorkit, by: rm-bob, reason: known-bad test, expires: 2026-12-31}"


def inputs(staging: list[ChannelFile], res: list[ArtifactResults], hint_set=None) -> PlanInputs:
    return PlanInputs({f.artifact: f for f in staging}, {}, {r.artifact: r for r in res}, {},
                      TestMatrix("pytorch", RELEASES, VARIANTS), hints=hint_set, today=TODAY,
                      maintainers={"tensorkit": ("ann",)})


TK = cf("tensorkit", "1.3")


def test_a_candidate_with_two_independent_holds_shows_both_everywhere(tmp_path):
    """A block hint and its own failing tests: both are kept, in the gate's order (the block first), in
    promote's JSON and text and in every form of the excuses."""
    ins = inputs([TK], [results(TK, "failed")], hints(tmp_path, BLOCK))
    plan = plan_gate(ins)
    assert not plan.promote and len(plan.held) == 1
    h = plan.held[0]
    assert [x.reason for x in h.holds] == [HoldReason.BLOCKED_BY_HINT, HoldReason.TEST_FAILED]
    assert [x.policy for x in h.holds] == ["block-hint", "tests"]
    assert h.reason is HoldReason.BLOCKED_BY_HINT  # the first is its primary hold: what promote's exit code reads
    assert int(plan.exit_code) == 1

    out = PromoteResult(plan, dry_run=True).to_dict()
    (entry,) = out["held"]
    assert entry["reason"] == "blocked-by-hint"
    assert [(r["policy"], r["reason"], r["class"]) for r in entry["reasons"]] == \
        [("block-hint", "blocked-by-hint", "permanent"), ("tests", "test-failed", "failure")]
    assert all(r["description"] and r["advice"] for r in entry["reasons"])
    assert "failed against pytorch 2.4.1 cpu" in entry["reasons"][1]["detail"]
    text = "\n".join(PromoteResult(plan, dry_run=True).text_lines())
    assert "blocked-by-hint: block hint by rm-ann" in text and "also test-failed: failed against" in text

    excuses = excuses_of(plan, ins, now=dt.datetime(2026, 11, 20, tzinfo=dt.UTC))
    (e,) = excuses.candidates
    assert e.verdict == "held-permanently"  # the worst of its holds
    assert [r.split(":")[0] for r in e.reasons] == ["blocked-by-hint", "test-failed"]
    assert len(e.advice) == 2 and any("block hint" in a for a in e.advice) and any("force" in a for a in e.advice)
    assert {r.package for r in e.regressions} == {"tensorkit"} and len(e.regressions) == 4
    text = "\n".join(excuses.text_lines())
    assert "- blocked-by-hint: block hint by rm-ann" in text and "- test-failed: failed against" in text
    md = excuses.markdown()
    assert "blocked-by-hint: block hint by rm-ann" in md and "test-failed: failed against" in md
    build = tmp_path / "build"
    build.mkdir()
    write_excuses(build / "excuses.json", excuses)
    doc = json.loads((build / "excuses.json").read_text())
    assert [r.split(":")[0] for r in doc["candidates"][0]["reasons"]] == ["blocked-by-hint", "test-failed"]
    back = read_excuses(build)  # what the status page shows
    assert back is not None and back.candidates[0].reasons == e.reasons


def test_a_hint_lifts_only_the_holds_of_the_policies_that_honour_it(tmp_path):
    """force lifts its own tests' hold, never a block: held by the block alone, and not counted as forced."""
    ins = inputs([TK], [results(TK, "failed")], hints(tmp_path, BLOCK, FORCE))
    plan = plan_gate(ins)
    (h,) = plan.held
    assert [x.reason for x in h.holds] == [HoldReason.BLOCKED_BY_HINT] and not plan.forced and not plan.hints_used
    # without the block, force lets it go (as before), and says so
    plan = plan_gate(inputs([TK], [results(TK, "failed")], hints(tmp_path, FORCE)))
    assert [f.name for f in plan.promote] == ["tensorkit"] and plan.forced == {TK.artifact: "rm-bob"}
    assert plan.hints_used == [f"{TK.artifact}: promoted despite 'test-failed' (force hint by rm-bob (hints.yaml:2): "
                               "known-bad test)"]


def test_a_done_or_stale_build_is_settled_by_that_hold(tmp_path):
    """The same file in main is no candidate: its other checks are not asked (nothing to act on)."""
    ins = PlanInputs({TK.artifact: TK}, {TK.artifact: TK}, {TK.artifact: results(TK, "failed")}, {},
                     TestMatrix("pytorch", RELEASES, VARIANTS), hints=hints(tmp_path, BLOCK), today=TODAY)
    (h,) = plan_gate(ins).held
    assert [x.reason for x in h.holds] == [HoldReason.ALREADY_IN_MAIN] and h.hold_class is HoldClass.DONE


def test_policies_declare_ids_and_the_hint_actions_they_honour():
    ids = [p.id for p in policies.POLICIES] + [p.id for p in policies.SET_POLICIES]
    assert len(ids) == len(set(ids)) and all(ids)
    for p in (*policies.POLICIES, *policies.SET_POLICIES):
        assert p.honours <= set(ACTIONS), p.id
    assert {p.id for p in policies.POLICIES if "force" in p.lifted_by} == {"tests", "no-tests"}
    assert policies.REVDEPS.honours == {"force", "force-badtest", "urgent"}
    assert {p.id for p in policies.POLICIES if p.reads} == {"block-hint"}
    assert all(r.description for r in HoldReason)


def test_hold_reasons_and_classes_are_a_closed_vocabulary_spelled_as_their_values():
    """StrEnums (the package's convention): ``str()``, f-strings and JSON give the value documents hold."""
    assert str(HoldReason.TEST_FAILED) == f"{HoldReason.TEST_FAILED}" == "test-failed"
    assert str(HoldClass.PERMANENT) == "permanent" and HoldReason("not-owner") is HoldReason.NOT_OWNER
    assert json.dumps({"reason": HoldReason.NO_TESTS, "class": HoldClass.WAITING}) == \
        '{"reason": "no-tests", "class": "waiting"}'
    assert {r.hold_class for r in HoldReason} == set(HoldClass)
    h = Held(TK, HoldReason.SHA256_MISMATCH, "main has another")
    assert json.loads(json.dumps(h.to_dict()))["reasons"][0]["class"] == "permanent"


class Embargo(policies.Policy):
    """A new check (as one would add it to gate/policies.py): holds the names it embargoes, and a
    ``force`` hint lifts it."""

    id = "embargo"
    lifted_by: ClassVar[frozenset[str]] = frozenset({"force"})
    names: ClassVar[set[str]] = {"tensorkit"}

    def check(self, c: policies.Candidate) -> Held | None:
        if c.file.name not in self.names:
            return None
        return Held(c.file, HoldReason.WAITING, "embargoed until the release announcement")


def test_a_new_policy_in_the_one_list_is_run_and_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(policies, "POLICIES", (*policies.POLICIES, Embargo()))
    other = cf("audiokit", "0.9", sha="2")
    ins = inputs([TK, other], [results(TK, "failed"), results(other)])
    plan = plan_gate(ins)
    assert [f.name for f in plan.promote] == ["audiokit"]
    (h,) = plan.held
    assert [(x.policy, x.reason) for x in h.holds] == [("tests", HoldReason.TEST_FAILED), ("embargo", HoldReason.WAITING)]
    (e,) = [e for e in excuses_of(plan, ins).candidates if e.name == "tensorkit"]
    assert e.reasons[1] == "waiting: embargoed until the release announcement"
    # its declared hint lifts it with the tests' hold: it goes, forced
    plan = plan_gate(inputs([TK], [results(TK, "failed")], hints(tmp_path, FORCE)))
    assert [f.name for f in plan.promote] == ["tensorkit"] and TK.artifact in plan.forced
    assert len(plan.hints_used) == 2  # both lifted holds are said
    # without the policy in the list, nothing of it is left
    monkeypatch.undo()
    assert [x.policy for x in plan_gate(inputs([TK], [results(TK, "failed")])).held[0].holds] == ["tests"]


@pytest.mark.parametrize("bad", ["tests", "embargo"])
def test_policy_ids_name_their_holds_in_the_json(bad, monkeypatch):
    monkeypatch.setattr(policies, "POLICIES", (*policies.POLICIES, Embargo()))
    staged = TK if bad == "embargo" else cf("tensorkit", "1.3")
    plan = plan_gate(inputs([staged], [results(staged, "passed" if bad == "embargo" else "failed")]))
    (entry,) = PromoteResult(plan, dry_run=True).to_dict()["held"]
    assert entry["policy"] == ("embargo" if bad == "embargo" else "tests")


def _depending(name: str, deps: tuple[str, ...], sha: str) -> ChannelFile:
    return ChannelFile("noarch", f"{name}-1.0-h0_0.conda", name, "1.0", "h0_0", 0, sha * 64,
                       ("pytorch >=2.4,<2.7", *deps))


@pytest.mark.parametrize("own", ["passed", "failed"])
def test_a_candidate_held_by_its_dependencies_lists_every_hold(own, tmp_path):
    """Two held dependencies (their own tests fail): the dependent is held by both, and by its own failing
    tests too when they fail (in the gate's order: its own checks first, then the dependency stage), in
    promote's JSON and in every form of the excuses."""
    base, core = _depending("basekit", (), "2"), _depending("corekit", (), "3")
    app = _depending("appkit", ("basekit >=1", "corekit >=1"), "4")
    ins = inputs([app, base, core], [results(app, own), results(base, "failed"), results(core, "failed")])
    plan = plan_gate(ins)
    assert not plan.promote
    (entry,) = [e for e in PromoteResult(plan, dry_run=True).to_dict()["held"] if e["name"] == "appkit"]
    own_holds = [("tests", "test-failed")] if own == "failed" else []
    assert [(r["policy"], r["reason"]) for r in entry["reasons"]] == \
        [*own_holds, ("dependencies", "dependency-not-in-main"), ("dependencies", "dependency-not-in-main")]
    deps = [r for r in entry["reasons"] if r["policy"] == "dependencies"]
    assert "'basekit >=1'" in deps[0]["detail"] and "'corekit >=1'" in deps[1]["detail"]
    assert "basekit is held (test-failed)" in deps[0]["advice"] and "corekit is held" in deps[1]["advice"]
    assert entry["reason"] == ("test-failed" if own == "failed" else "dependency-not-in-main")  # the primary one

    excuses = excuses_of(plan, ins, now=dt.datetime(2026, 11, 20, tzinfo=dt.UTC))
    (e,) = [e for e in excuses.candidates if e.name == "appkit"]
    assert [r.split(":")[0] for r in e.reasons] == [*(r for _, r in own_holds), "dependency-not-in-main",
                                                    "dependency-not-in-main"]
    assert any("'corekit >=1'" in r for r in e.reasons) and any("corekit is held" in a for a in e.advice)
    text, md = "\n".join(excuses.text_lines()), excuses.markdown()
    assert text.count("- dependency-not-in-main: needs") == 2 and md.count("dependency-not-in-main: needs") == 2
    (tmp_path / "build").mkdir()
    write_excuses(tmp_path / "build" / "excuses.json", excuses)
    back = read_excuses(tmp_path / "build")
    assert back is not None and [x for x in back.candidates if x.name == "appkit"][0].reasons == e.reasons
    # once its dependencies pass, no dependency hold is left on it
    fixed = plan_gate(inputs([app, base, core], [results(app, own), results(base), results(core)]))
    assert {f.name for f in fixed.promote} >= {"basekit", "corekit"}
    assert not [x for h in fixed.held for x in h.holds if x.reason is HoldReason.DEPENDENCY_NOT_IN_MAIN]


def test_a_forced_candidate_held_by_its_dependency_is_not_said_to_be_promoted(tmp_path):
    """A force hint lifts its own failing tests, but its dependency is held: it stays in staging, held by
    the dependency, and neither ``forced`` nor the hints used claim it went."""
    base = _depending("basekit", (), "2")
    app = _depending("tensorkit", ("basekit >=1",), "4")
    plan = plan_gate(inputs([app, base], [results(app, "failed"), results(base, "failed")], hints(tmp_path, FORCE)))
    assert plan.promote == [] and plan.forced == {} and plan.hints_used == []
    (held,) = [h for h in plan.held if h.file.name == "tensorkit"]
    assert [x.reason for x in held.holds] == [HoldReason.DEPENDENCY_NOT_IN_MAIN]
    # with its dependency passing, the hint promotes it (and says so)
    plan = plan_gate(inputs([app, base], [results(app, "failed"), results(base)], hints(tmp_path, FORCE)))
    assert app.artifact in plan.forced and any("promoted despite 'test-failed'" in u for u in plan.hints_used)
