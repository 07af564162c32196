"""Benchmark: does confirmation before blocking keep a flaky dependent from blocking its parent, and a real
regression held? 20 seeded runs per case.

    .venv/bin/python bench/bench_verdicts.py [--runs 20] [--flake 0.5] [--confirm 0 2 4]

A parent (tensorkit 1.2 in main, 1.3 the candidate) and one dependent in main (audiokit), tested on 3
releases × 2 variants. Each test run's outcome is drawn from ``random.Random(seed)``:

* **flaky**: the dependent's test fails with probability FLAKE on every run, with either parent;
* **regression**: it always passes with main's parent and always fails with the candidate.

Each run plays what `build` and `promote` do, with the tool's own code: the dependent's own tests when it
went to main (its failures confirmed: ``engine.confirm.confirm_failure``), its re-test with the candidate
(confirmed the same way, then the baseline side with main's parent, ``run_baseline``, recorded with the
earlier runs on the same inputs as the engine records it), then the real gate (``gate.promote.plan_gate``).
The draws replace the sandboxes only (a real test run is ~1-2 s; 20 runs x 6 targets x up to 7 runs each
would take an hour on the sandbox world: `tests/test_verdicts.py` runs the same flow for real, once).
Bar: the flaky case promotes the parent every time and never marks a regression; the regression case
holds it every time. Exits 1 when the default (``confirm_runs: 2``) misses the bar.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "distro"))

from conda_distro.channels import ChannelFile  # noqa: E402
from conda_distro.engine.confirm import confirm_failure, needs_confirmation, run_baseline, status_of  # noqa: E402
from conda_distro.engine.phases import TestOut  # noqa: E402
from conda_distro.engine.unit import _baseline_record, _Provenance, _TestBase  # noqa: E402
from conda_distro.gate.promote import PlanInputs, TestMatrix, plan_gate  # noqa: E402
from conda_distro.state.results import ArtifactResults, TestRecord  # noqa: E402

RELEASES = ("2.4.1", "2.5.1", "2.6.0")
VARIANTS = ("cpu", "cuda")
PAIRS = [(r, v) for r in RELEASES for v in VARIANTS]
T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def cf(name: str, version: str, depends: list[str], sha: str) -> ChannelFile:
    return ChannelFile("noarch", f"{name}-{version}-h0_0.conda", name, version, "h0_0", 0, sha * 64, tuple(depends))


TK12 = cf("tensorkit", "1.2", ["pytorch >=2.4,<2.7"], "1")
TK13 = cf("tensorkit", "1.3", ["pytorch >=2.4,<2.7"], "2")
AK09 = cf("audiokit", "0.9", ["tensorkit >=1.2,<2", "pytorch >=2.4,<2.7"], "3")


def ident(f: ChannelFile) -> str:
    return f"{f.name}-{f.version}-{f.build}"


class World:
    """Test outcomes drawn from one seed; counts the runs."""

    def __init__(self, seed: int, case: str, flake: float) -> None:
        self.rng = random.Random(seed)
        self.case, self.flake, self.runs = case, flake, 0

    def run(self, parent: ChannelFile) -> TestOut:
        self.runs += 1
        ok = parent is TK12 if self.case == "regression" else self.rng.random() >= self.flake
        return TestOut(ok, message=None if ok else "AssertionError", env={"tensorkit": ident(parent)})


def tested(world: World, parent: ChannelFile, more: int) -> TestOut:
    """One test as `build` runs it: a failure confirmed by up to ``more`` runs."""
    first = world.run(parent)
    if more <= 0 or not needs_confirmation(first):
        return first
    conf = confirm_failure(first, lambda i: world.run(parent), more)
    return TestOut(conf.first.ok, message=conf.first.message, env=conf.first.env, attempts=conf.attempts)


def record(out: TestOut, pair: tuple[str, str], at: dt.datetime) -> TestRecord:
    status = status_of(out.attempts) if out.attempts else ("passed" if out.ok else "failed")
    return TestRecord(name="audiokit", artifact=AK09.artifact, pytorch=pair[0], variant=pair[1], status=status,
                      date=at, against=dict(out.env), attempts=list(out.attempts) or None, reason=out.message)


def one_run(seed: int, case: str, flake: float, more: int) -> tuple[str, int]:
    world = World(seed, case, flake)
    res = ArtifactResults(artifact=AK09.artifact, name="audiokit", version="0.9", sha256=AK09.sha256,
                          depends=list(AK09.depends))
    for pair in PAIRS:  # audiokit's own tests, when it went to main (with tensorkit 1.2)
        res.record(record(tested(world, TK12, more), pair, T0))
    for pair in PAIRS:  # `build tensorkit`: audiokit re-tested with 1.3, then the baseline side
        got = tested(world, TK13, more)
        if more > 0 and got.attempts and status_of(got.attempts) == "failed":
            base = run_baseline(lambda i: world.run(TK12), 1 + more)
            if base is not None:
                b = TestOut(base.first.ok, message=base.first.message, env=base.first.env, attempts=base.attempts)
                res.record(_baseline_record(res, _TestBase(name="audiokit", artifact=AK09.artifact, pytorch=pair[0],
                                                           variant=pair[1]), b, frozenset({"tensorkit"}), None,
                                            _Provenance(recipes={}, commit=None)).model_copy(update={"date": T0 + dt.timedelta(1)}))
        res.record(record(got, pair, T0 + dt.timedelta(days=1)))
    tk = ArtifactResults(artifact=TK13.artifact, name="tensorkit", version="1.3", sha256=TK13.sha256,
                         depends=list(TK13.depends),
                         tests=[TestRecord(name="tensorkit", artifact=TK13.artifact, pytorch=r, variant=v, status="passed",
                                           date=T0, against={}) for r, v in PAIRS])
    plan = plan_gate(PlanInputs({TK13.artifact: TK13}, {TK12.artifact: TK12, AK09.artifact: AK09},
                                {AK09.artifact: res, TK13.artifact: tk}, {}, TestMatrix("pytorch", RELEASES, VARIANTS)))
    if plan.promote:
        return ("promoted-flaky" if plan.flaky else "promoted"), world.runs
    return plan.held[0].reason.value, world.runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--flake", type=float, default=0.5)
    ap.add_argument("--confirm", type=int, nargs="+", default=[0, 2, 4])
    args = ap.parse_args()
    ok = True
    print(f"{args.runs} seeded runs per case; flaky dependent fails with p={args.flake}; 6 targets")
    print(f"{'confirm_runs':>12}  {'case':<10}  {'outcomes':<50}  test runs (mean)")
    for more in args.confirm:
        for case in ("flaky", "regression"):
            outcomes: dict[str, int] = {}
            total = 0
            for seed in range(args.runs):
                what, n = one_run(seed, case, args.flake, more)
                outcomes[what] = outcomes.get(what, 0) + 1
                total += n
            shown = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
            print(f"{more:>12}  {case:<10}  {shown:<50}  {total / args.runs:.1f}")
            if more == 2:
                good = (sum(v for k, v in outcomes.items() if k.startswith("promoted")) == args.runs if case == "flaky"
                        else outcomes.get("regression", 0) == args.runs)
                ok &= good
    print("bar (confirm_runs 2): " + ("met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
