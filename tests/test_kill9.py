"""kill -9 at random moments of promote, retire, build, prune and sweep --commit; reruns converge.

A few iterations of ``bench/bench_kill9.py`` (which runs more): each command is killed (its whole
process group, SIGKILL) after a random delay within an uninterrupted run's duration (``sweep-commit``:
within the sweep's commit phase, git's lock windows widened), rerun, and the
invariants are checked: main's repodata names only existing files with their sha256, the ledger agrees
with main, staging's repodata and results match its files, the sweep branch is complete.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from bench_kill9 import make_templates, run_bench  # noqa: E402


@pytest.mark.slow
def test_kill9_at_random_moments_then_rerun_converges(tmp_path, tmp_path_factory, sandbox_template, built_template):
    from test_sweep import published_world

    sweep_template = published_world(tmp_path_factory, sandbox_template, "2.7.0")
    templates = make_templates(tmp_path, sandbox=sandbox_template, built=built_template, sweep=sweep_template)
    lines: list[str] = []
    results = run_bench(templates, tmp_path, runs=2, seed=11,
                        only=("promote", "retire", "rollback", "rollback-locked", "prune", "prune-remove", "sweep",
                              "sweep-commit"), log=lines.append)
    results += run_bench(templates, tmp_path, runs=1, seed=12, only=("build",), log=lines.append)
    assert {r.scenario for r in results} == {"promote", "retire", "rollback", "rollback-locked", "prune", "prune-remove",
                                             "sweep", "sweep-commit", "build"}
    assert [v for r in results for v in r.violations] == [], "\n".join(lines)
