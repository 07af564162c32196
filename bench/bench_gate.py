"""Benchmark: the promotion gate's planning for N candidates against a main of M artifacts, the
reverse-dependency verdicts and the installability solves (real rattler solves) included.

    .venv/bin/python bench/bench_gate.py [--candidates 500] [--main 2000] [--target 5]

Setup (not timed): generated channel records (no package files: the gate reads records and results).
Main holds M artifacts: M/4 names × 4 versions, each name depending on pytorch (with a minor pin), on
python and on two names of the layer below (four layers). Each of the first N names has a new version in staging, tested
(passed) in the environment it would be promoted into; main's newest version of every dependent was
re-tested with the candidates (passed). The upstream is a generated local channel with python and a cpu
and a cuda pytorch per release. Timed: one `plan_gate` (everything promotes). Prints the time, the
number of re-test verdicts and solves; exits 1 when the plan misses the target or holds anything.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

from conda_distro.channels import ChannelFile
from conda_distro.channels.depends import distribution_closure
from conda_distro.gate.installability import Installability, write_channel
from conda_distro.gate.promote import PlanInputs, TestMatrix, plan_gate
from conda_distro.state.results import ArtifactResults, TestRecord
from conda_distro.util.scratch import ScratchDir

RELEASES = ("2.4.1", "2.5.1", "2.6.0")
VARIANTS = ("cpu", "cuda")
T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def cf(name: str, version: str, depends: list[str], sha: str) -> ChannelFile:
    return ChannelFile("noarch", f"{name}-{version}-h0_0.conda", name, version, "h0_0", 0, sha, tuple(depends))


def ident(f: ChannelFile) -> str:
    return f"{f.name}-{f.version}-{f.build}"


def generate(n_main: int, n_cand: int):
    names = [f"pkg{i:04d}" for i in range(n_main // 4)]
    main, staging = {}, {}
    # four layers, each name depending on two names of the layer below (closures of up to 14 names)
    layer = max(1, len(names) // 4)
    deps_of = {n: [names[j] for j in (i - layer, i - layer - 1) if i >= layer and j >= 0] for i, n in enumerate(names)}
    for i, n in enumerate(names):
        for v in range(4):
            depends = ["python >=3.10", "pytorch >=2.4,<2.7", *(f"{d} >=1.0,<3" for d in deps_of[n])]
            f = cf(n, f"1.{v}", depends, f"{i:032x}{v:032x}")
            main[f.artifact] = f
    for i, n in enumerate(names[:n_cand]):
        depends = ["python >=3.10", "pytorch >=2.4,<2.7", *(f"{d} >=1.0,<3" for d in deps_of[n])]
        f = cf(n, "2.0", depends, f"{i:032x}{9:032x}")
        staging[f.artifact] = f
    return names, deps_of, main, staging


def closure_names(name: str, deps_of: dict[str, list[str]]) -> set[str]:
    out, todo = set(), list(deps_of[name])
    while todo:
        d = todo.pop()
        if d not in out:
            out.add(d)
            todo += deps_of[d]
    return out


def results_for(names, deps_of, main, staging) -> dict[str, ArtifactResults]:
    newest = {}
    for f in (*main.values(), *staging.values()):
        if f.name not in newest or tuple(map(int, f.version.split("."))) > tuple(map(int, newest[f.name].version.split("."))):
            newest[f.name] = f
    out = {}
    subjects = [*staging.values(), *(f for f in main.values() if f.version == "1.3" and newest[f.name] is f)]
    for f in subjects:
        against = {d: ident(newest[d]) for d in closure_names(f.name, deps_of)}
        tests = [TestRecord(name=f.name, artifact=f.artifact, pytorch=r, variant=v, status="passed", date=T0,
                            against=against, key="k") for r in RELEASES for v in VARIANTS]
        out[f.artifact] = ArtifactResults(artifact=f.artifact, name=f.name, version=f.version, sha256=f.sha256,
                                          depends=list(f.depends), tests=tests)
    return out


def upstream_channel(folder: Path) -> Path:
    files = [ChannelFile("linux-64", "python-3.11.7-h0_0.conda", "python", "3.11.7", "h0_0", 0, "a" * 64, ())]
    files += [ChannelFile("linux-64", f"pytorch-{r}-{v}_0.conda", "pytorch", r, f"{v}_0", 0, "b" * 64,
                          ("python >=3.11,<3.12", *(("__cuda",) if v == "cuda" else ())))
              for r in RELEASES for v in VARIANTS]
    return write_channel(files, folder)


def main_(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--candidates", type=int, default=500)
    ap.add_argument("--main", type=int, default=2000)
    ap.add_argument("--target", type=float, default=5.0)
    args = ap.parse_args(argv)
    names, deps_of, main, staging = generate(args.main, args.candidates)
    res = results_for(names, deps_of, main, staging)
    matrix = TestMatrix("pytorch", RELEASES, VARIANTS)
    with ScratchDir("conda-distro-bench-gate-") as tmp:
        up = upstream_channel(Path(tmp) / "upstream").as_uri()
        t0 = time.perf_counter()
        checker = Installability([up], ["linux-64", "noarch"], "pytorch", matrix.required,
                                 distribution_closure([*staging.values(), *main.values()]))
        plan = plan_gate(PlanInputs(staging, main, res, {}, matrix, installability=checker))
        took = time.perf_counter() - t0
    print(f"gate plan: {len(staging)} candidates vs {len(main)} in main: {took:.2f} s "
          f"({len(plan.retests)} re-test verdicts, {plan.installability_solves} installability solves); "
          f"promoted {len(plan.promote)}, held {len(plan.held)}; target < {args.target} s")
    if plan.held:
        print("held:", [(h.artifact, h.reason.value, h.detail[:120]) for h in plan.held[:5]])
    return 0 if took < args.target and not plan.held and len(plan.promote) == len(staging) else 1


if __name__ == "__main__":
    sys.exit(main_())
