"""Benchmark: a nightly `conda-distro watch` when nothing changed upstream (everything reused).

    .venv/bin/python bench/bench_watch.py [--world DIR] [--target 120]

Setup (timed apart): a sandbox world (`conda-distro sandbox`), `build --all`, `promote`, then a first
`watch` (it tests every package of main on every release × variant its pins admit). Timed: a second
`watch` with nothing changed upstream: every outcome reused, only the test environments solved again.
With ``--world DIR`` an existing world is used as it is (e.g. one made by `sandbox --real`, built and
promoted), so the real world's nightly cost can be measured the same way: nothing is built or promoted
then (the first watch reuses the outcomes `build` recorded for main's files where today's environment is
the one they were tested in, and tests the rest). Each watch's wall time, CPU time (user + system, its
process and children) and peak RSS are printed, with the load (``/proc/loadavg``) before it. Exits 1 when
the second watch tests anything, or takes longer than ``--target`` seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from conda_distro.util.scratch import ScratchDir


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


TIME = Path("/usr/bin/time")


def cli(world: Path, *args: str, rss: list[float] | None = None) -> tuple[int, dict, float]:
    """Run one command in ``world``; with ``rss``, under ``/usr/bin/time -v`` (when the machine has it),
    appending its peak RSS in MiB (the largest process of the run)."""
    argv = [sys.executable, "-m", "conda_distro", *args, "--format", "json"]
    with tempfile.NamedTemporaryFile(prefix="bench-watch-time-", suffix=".txt") as tf:
        timed = rss is not None and TIME.is_file()
        start = time.perf_counter()
        proc = subprocess.run([str(TIME), "-v", "-o", tf.name, *argv] if timed else argv, cwd=world,
                              capture_output=True, text=True, timeout=4 * 3600)
        took = time.perf_counter() - start
        if timed and rss is not None:
            line = next((ln for ln in Path(tf.name).read_text().splitlines() if "Maximum resident set size" in ln), "")
            rss.append(int(line.rsplit(":", 1)[1]) / 1024 if line else float("nan"))
    try:
        doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except json.JSONDecodeError:
        doc = {}
    if proc.returncode == 2:
        sys.exit(f"{' '.join(args)} failed: {proc.stderr[-2000:]}")
    return proc.returncode, doc, took


def cpu(a: os.times_result, b: os.times_result) -> float:
    """CPU seconds (user + system) of the children waited for between ``a`` and ``b``."""
    return (b.children_user - a.children_user) + (b.children_system - a.children_system)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=Path, help="an existing world, built and promoted")
    ap.add_argument("--target", type=float, default=120.0, help="seconds for a watch with nothing changed")
    args = ap.parse_args()
    with ScratchDir("conda-distro-bench-watch-") as td:
        world = args.world
        if world is None:
            world = Path(td) / "world"
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "conda_distro", "sandbox", str(world)], check=True, capture_output=True)
            cli(world, "build", "--all", "--jobs", "2")
            cli(world, "promote")
            print(f"setup (sandbox, build --all, promote): {time.perf_counter() - start:.1f} s")
        print(f"load {load()}")
        cpu0 = os.times()
        peaks: list[float] = []
        code, first, t1 = cli(world, "watch", rss=peaks)
        cpu1 = os.times()
        print(f"first watch: {first.get('checked')} checked, {first.get('reused')} reused, {first.get('tested')} "
              f"tested, {len(first.get('failing', []))} failing, {len(first.get('broken', []))} broken, "
              f"{len(first.get('flaky', []))} flaky: {t1:.1f} s wall, {cpu(cpu0, cpu1):.1f} s CPU, "
              f"peak RSS {peaks[0]:.0f} MiB (load after {load()})")
        code, again, t2 = cli(world, "watch", rss=peaks)
        cpu2 = os.times()
        print(f"nightly watch, nothing changed: {again.get('checked')} checked, {again.get('reused')} reused, "
              f"{again.get('tested')} tested: {t2:.1f} s wall, {cpu(cpu1, cpu2):.1f} s CPU, "
              f"peak RSS {peaks[1]:.0f} MiB (load after {load()}; target {args.target:g} s)")
        ok = again.get("tested") == 0 and t2 <= args.target
        print("bar: " + ("met" if ok else "MISSED"))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
