"""The own-tests gate fails closed: a candidate goes to main only on real passing evidence per release ×
variant. A deterministically failing own test can never reach main through a status the gate does not
expect (``flaky`` without a passing run, a status added later, a baseline record newer than the own run).

Plan-level tests with hand-made results, as a build writes them (no engines needed: the gate is pure)."""

from __future__ import annotations

import datetime as dt
from typing import get_args

import pytest

from conda_distro.channels import ChannelFile
from conda_distro.gate.promote import HoldReason, PlanInputs, TestMatrix, plan_gate
from conda_distro.state.results import ArtifactResults, TestStatus
from conda_distro.state.results import TestRecord as Run

RELEASES = ("2.4.1", "2.5.1", "2.6.0")
VARIANTS = ("cpu", "cuda")
PAIRS = [(r, v) for r in RELEASES for v in VARIANTS]
T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
FQ = ChannelFile("noarch", "fastquant-0.2.1-h0_0.conda", "fastquant", "0.2.1", "h0_0", 0, "1" * 64,
                 ("pytorch >=2.4,<2.7",))


def run(status: str, pair=PAIRS[0], at=T0, **kw) -> Run:
    return Run(name=FQ.name, artifact=FQ.artifact, pytorch=pair[0], variant=pair[1], status=status,  # type: ignore[arg-type]
                      date=at, **{"against": {}, **kw})


def gate(*tests: Run):
    res = ArtifactResults(artifact=FQ.artifact, name=FQ.name, version=FQ.version, sha256=FQ.sha256,
                          depends=list(FQ.depends), tests=list(tests))
    return plan_gate(PlanInputs({FQ.artifact: FQ}, {}, {FQ.artifact: res}, {}, TestMatrix("pytorch", RELEASES, VARIANTS),
                                evidence={}, hints=None, today=dt.date(2026, 11, 20), maintainers={}))


def others(status="passed") -> list[Run]:
    return [run(status, p) for p in PAIRS[1:]]


def hold_of(plan) -> HoldReason | None:
    assert [f.name for f in plan.promote] in ([], ["fastquant"])
    return plan.held[0].reason if plan.held else None


#: how the gate treats each status an own test's latest record can hold on one pair (the rest passed):
#: None = it may go to main. Every value of ``TestStatus`` must be here: a new status fails this test
#: until it is decided, and :func:`_gate_tests` holds it meanwhile.
EXPECTED: dict[str, tuple[dict, HoldReason | None]] = {
    "passed": ({}, None),
    "failed": ({"attempts": ["failed", "failed", "failed"]}, HoldReason.TEST_FAILED),
    "error": ({}, HoldReason.WAITING),
    "blocked": ({"reason": "a dependency failed"}, HoldReason.NOT_TESTED),
    "flaky": ({"attempts": ["failed", "passed"]}, None),
}


def test_every_test_status_is_decided_by_the_gate():
    assert set(EXPECTED) == set(get_args(TestStatus))


@pytest.mark.parametrize("status", sorted(EXPECTED))
def test_each_status_on_one_pair(status):
    kw, want = EXPECTED[status]
    assert hold_of(gate(run(status, **kw), *others())) == want


def test_an_unknown_status_holds():
    """A record carrying a status this gate does not know (a newer writer, a hand-edited file read
    without validation) is no evidence: held, never promoted."""
    odd = run("passed").model_copy(update={"status": "skipped"})
    plan = gate(odd, *others())
    assert hold_of(plan) == HoldReason.NOT_TESTED and "skipped" in plan.held[0].detail


def test_flaky_without_a_passing_run_holds():
    """``flaky`` means it passed and failed on the same inputs; a flaky record whose runs never passed
    (every confirmation run failed or errored) is a failure, not a flake: it must not pass the gate."""
    for attempts in (["failed", "error", "error"], ["failed", "failed"], None):
        plan = gate(run("flaky", attempts=attempts), *others())
        assert hold_of(plan) == HoldReason.NOT_TESTED, attempts


def test_passed_whose_attempts_never_passed_holds():
    assert hold_of(gate(run("passed", attempts=["failed", "error"]), *others())) == HoldReason.NOT_TESTED
    assert hold_of(gate(run("passed", attempts=["failed", "passed"]), *others())) is None


def test_a_newer_baseline_record_never_stands_for_the_own_failure():
    """The mechanism: a unit records the baseline side's runs (the test with main's packages in place of
    this run's) right after the own run's record is made, so the baseline record is the newer one. Its
    ``passed`` must never become the artifact's own latest outcome: the own failure holds."""
    own = run("failed", attempts=["failed", "failed", "failed"], against={"tensorkit": "tensorkit-1.3-h0_0"})
    base = run("passed", at=T0 + dt.timedelta(microseconds=5), attempts=["passed", "passed", "passed"],
               against={"tensorkit": "tensorkit-1.2-h0_0"}, baseline=True)
    res = ArtifactResults(artifact=FQ.artifact, name=FQ.name, version=FQ.version, sha256=FQ.sha256, tests=[])
    res.record(base)
    res.record(own)  # kept both: they are against other distribution packages
    assert len(res.tests) == 2 and res.latest()[PAIRS[0]] is own
    assert hold_of(gate(own, base, *others())) == HoldReason.TEST_FAILED


def test_equal_dates_keep_the_order_of_recording():
    first = run("passed", against={"a": "a-1-h0_0"})
    second = run("failed", against={"a": "a-2-h0_0"})
    res = ArtifactResults(artifact=FQ.artifact, name=FQ.name, version=FQ.version, sha256=FQ.sha256, tests=[])
    res.record(first)
    res.record(second)
    assert res.latest()[PAIRS[0]] is second
    assert hold_of(gate(first, second, *others())) == HoldReason.TEST_FAILED


# ----------------------------------------------------------------- confirmation runs (engine/confirm.py)

def test_a_confirmation_run_that_ran_no_test_is_no_pass():
    """A deterministically failing test whose confirmation run reports success only because no test ran
    (rattler-build found none: an empty result list) must stay ``failed``, never become ``flaky``; the
    record the unit makes of it then holds the candidate test-failed."""
    from conda_distro.engine.confirm import confirm_failure
    from conda_distro.engine.phases import TestOut

    first = TestOut(False, message="test 1 failed: AssertionError: [0, 128, 256]")
    empty = TestOut(True, no_tests=True)
    conf = confirm_failure(first, lambda i: empty, 2)
    assert conf.attempts == ("failed", "error", "error") and conf.status == "failed"
    rec = run(conf.status, attempts=list(conf.attempts), reason=first.message)
    assert hold_of(gate(rec, *others())) == HoldReason.TEST_FAILED
    # a real pass among the runs is a flake: it never blocks
    real = confirm_failure(first, lambda i: TestOut(True), 2)
    assert real.attempts == ("failed", "passed") and real.status == "flaky"
    assert hold_of(gate(run(real.status, attempts=list(real.attempts)), *others())) is None


def test_a_baseline_run_that_ran_no_test_is_no_evidence():
    from conda_distro.engine.confirm import run_baseline
    from conda_distro.engine.phases import TestOut

    assert run_baseline(lambda i: TestOut(True, no_tests=True), 3) is None  # said nothing: no baseline
