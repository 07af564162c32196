"""Benchmark: a nightly `conda-distro watch` when nothing changed upstream (everything reused).

    .venv/bin/python bench/bench_watch.py [--world DIR] [--target 120]

Setup (timed apart): a sandbox world (`conda-distro sandbox`), `build --all`, `promote`, then a first
`watch` (it tests every package of main on every release × variant its pins admit). Timed: a second
`watch` with nothing changed upstream: every outcome reused, only the test environments solved again.
With ``--world DIR`` an existing world is used as it is (e.g. one made by `sandbox --real`, built and
promoted), so the real world's nightly cost can be measured the same way. Exits 1 when the second watch
tests anything, or takes longer than ``--target`` seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cli(world: Path, *args: str) -> tuple[int, dict, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "conda_distro", *args, "--format", "json"], cwd=world,
                          capture_output=True, text=True)
    took = time.perf_counter() - start
    try:
        doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except json.JSONDecodeError:
        doc = {}
    if proc.returncode == 2:
        sys.exit(f"{' '.join(args)} failed: {proc.stderr[-2000:]}")
    return proc.returncode, doc, took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=Path, help="an existing world, built and promoted")
    ap.add_argument("--target", type=float, default=120.0, help="seconds for a watch with nothing changed")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as td:
        world = args.world
        if world is None:
            world = Path(td) / "world"
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "conda_distro", "sandbox", str(world)], check=True, capture_output=True)
            cli(world, "build", "--all", "--jobs", "2")
            cli(world, "promote")
            print(f"setup (sandbox, build --all, promote): {time.perf_counter() - start:.1f} s")
        code, first, t1 = cli(world, "watch")
        print(f"first watch: {first.get('checked')} checked, {first.get('tested')} tested, "
              f"{len(first.get('failing', []))} failing, {len(first.get('broken', []))} broken: {t1:.1f} s")
        code, again, t2 = cli(world, "watch")
        print(f"nightly watch, nothing changed: {again.get('checked')} checked, {again.get('reused')} reused, "
              f"{again.get('tested')} tested: {t2:.1f} s (target {args.target:g} s)")
        ok = again.get("tested") == 0 and t2 <= args.target
        print("bar: " + ("met" if ok else "MISSED"))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
