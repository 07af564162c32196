"""Sandbox benchmark: what running recipe code inside bubblewrap costs. Prints figures and
ratios measured in one run.

    python bench/bench_sandbox.py

1. build + test of the sandbox world's chain (tensorutils <- layerkit <- trainloop) against one release
   (2 variants), sandboxed vs ``--no-sandbox``, on fresh worlds, three rounds alternating which goes
   first (target: ratio <= 1.10);
2. `build --all --jobs 2` of the whole sandbox world (11 packages, 62 tests: one build sandbox per
   package, one test sandbox per artifact × release × variant), sandboxed vs ``--no-sandbox``;
3. start-up of one runner (interpreter + imports), inside bwrap vs plain: paid once per build sandbox
   (one per package) and once per test sandbox (one per artifact × release × variant).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time

from conda_distro.distribution import load_distribution
from conda_distro.engine.run import BuildOptions, run_build
from conda_distro.engine.sandbox import Layout, require_bwrap, wrap
from conda_distro.sandbox.world import SandboxOptions, create_sandbox
from conda_distro.util.scratch import new_scratch


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> int:
    argparse.ArgumentParser(description=__doc__).parse_args()
    bwrap = require_bwrap()
    tmp = new_scratch("conda-distro-bench-sandbox-")
    try:
        rounds = []
        for rnd in range(3):
            res = {}
            order = (True, False) if rnd % 2 == 0 else (False, True)
            for sandbox in order:
                root = create_sandbox(SandboxOptions(path=tmp / f"w{rnd}-{sandbox}")).path
                opts = BuildOptions(names=("tensorutils",), pytorch=("2.6.0",), sandbox=sandbox)
                t, run = timed(lambda root=root, opts=opts: run_build(load_distribution(root), opts))
                assert run.report is not None and run.report.ok, run.report
                res[sandbox] = t
            rounds.append(res)
        best = {k: min(r[k] for r in rounds) for k in (True, False)}
        print(f"build+test 3 packages x 2 tests: --no-sandbox best {best[False]:.2f} s, sandboxed best {best[True]:.2f} s "
              f"-> ratio {best[True] / best[False]:.3f} (target <= 1.10); rounds: "
              + ", ".join(f"{r[True]:.1f}/{r[False]:.1f}" for r in rounds))

        walls = {}
        for sandbox in (True, False):
            root = create_sandbox(SandboxOptions(path=tmp / f"all-{sandbox}")).path
            t, run = timed(lambda root=root, sandbox=sandbox: run_build(load_distribution(root), BuildOptions(
                all=True, jobs=2, sandbox=sandbox)))
            assert run.report is not None and len(run.report.tests) > 50, run.report
            walls[sandbox] = t
        print(f"build --all --jobs 2 of the sandbox world: sandboxed {walls[True]:.1f} s, --no-sandbox "
              f"{walls[False]:.1f} s -> ratio {walls[True] / walls[False]:.3f}")

        work = tmp / "work"
        work.mkdir()
        argv = [sys.executable, "-I", "-B", "-c", "import conda_distro.engine.worker, rattler_build"]
        lay = Layout(True)
        lay.show(work, "work", writable=True)
        spec = lay.spec()
        plain = min(timed(lambda: subprocess.run(argv, check=True, cwd=work))[0] for _ in range(5))
        boxed = min(timed(lambda: subprocess.run(wrap(argv, spec, bwrap), check=True))[0] for _ in range(5))
        print(f"runner start-up (interpreter + imports), best of 5: plain {plain:.3f} s, in bwrap {boxed:.3f} s "
              f"-> the sandbox adds {boxed - plain:+.3f} s per sandbox (one per package build, one per test)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
