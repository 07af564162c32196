"""Benchmark: start-up of the CLI, `python -m conda_distro --help` against a bare `python -c pass`.

    .venv/bin/python bench/bench_cli_start.py [--runs 15] [--target 0.3]

Each command is run RUNS times as a fresh process (after one untimed warm-up run of each, so the
files are in the page cache); the figures are medians of wall time, and of CPU time (user + sys), which
stays meaningful when other processes share the cores. Target: the whole of
`--help` (interpreter start + CLI import + help text) under 0.3 s. Also lists the heavy libraries a
bare `import conda_distro.cli` loads (there should be none: commands import them when they run).
A command's own `--help` is shown for comparison, not held to the target: typer converts its
parameters with pydantic, which it imports only then.
Exits 1 when the median misses the target.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

HEAVY = ("networkx", "pydantic", "rattler", "rattler_build", "rich", "ruamel", "yaml", "git", "jinja2",
         "filelock", "binstar_client")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wall_times(argv: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall times and CPU times (user + sys) of RUNS fresh processes. CPU time hardly moves when other
    processes share the cores; wall time, the target, does."""
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)  # warm-up
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), _children_cpu()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        wall.append(time.perf_counter() - start)
        cpu.append(_children_cpu() - start_cpu)
    return wall, cpu


def heavy_modules_on_import() -> list[str]:
    probe = ("import json, sys, conda_distro.cli; "
             f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--target", type=float, default=0.3, help="seconds, median of `--help`")
    args = ap.parse_args()

    (bare, bare_cpu), (help_, help_cpu), (sub_help, sub_cpu) = (
        wall_times(argv, args.runs) for argv in ([sys.executable, "-c", "pass"],
                                                 [sys.executable, "-m", "conda_distro", "--help"],
                                                 [sys.executable, "-m", "conda_distro", "build", "--help"]))
    m_bare, m_help, m_sub = (statistics.median(t) for t in (bare, help_, sub_help))

    print(f"runs per command: {args.runs} (medians; min..max in brackets; cpu = user + sys)")
    for label, times, cpu in (("python -c pass", bare, bare_cpu), ("python -m conda_distro --help", help_, help_cpu),
                              ("python -m conda_distro build --help", sub_help, sub_cpu)):
        print(f"  {label:38} wall {statistics.median(times):.3f} s  [{min(times):.3f}..{max(times):.3f}]"
              f"  cpu {statistics.median(cpu):.3f} s")
    print(f"  CLI import + help beyond interpreter start: {m_help - m_bare:.3f} s")
    print(f"  ratio --help / bare interpreter: {m_help / m_bare:.1f}x")
    heavy = heavy_modules_on_import()
    print(f"  heavy libraries loaded by `import conda_distro.cli`: {', '.join(heavy) or 'none'}")
    ok = m_help < args.target
    print(f"target: --help < {args.target:.2f} s: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
