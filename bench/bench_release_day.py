"""Benchmark: release day, from a new PyTorch release appearing upstream to every passing package of the
distribution promoted for it. Target: < 120 s on the sandbox (``--standin``); < 3,600 s on the
real world (``--real``, needs ``sandbox --real``, docs/real-world.md).

    python bench/bench_release_day.py --standin [--compiled] [--keep DIR]
    python bench/bench_release_day.py --real [--keep DIR]
    python bench/bench_release_day.py --real --keep DIR --setup-only   # the day before, untimed; then:
    python bench/bench_release_day.py --real --keep DIR                 # release day on it, timed

What it runs, as CI would (release-sweep.yml, then promote.yml on the merges):

0. setup (not in the headline): a world at the two previous releases, built and promoted, so main holds the
   distribution as it is the day before. ``--real``: the repository's real world (`sandbox --real`, PyTorch
   2.13.0 / 2.14.1 / 2.15.0 bridged from PyPI) with 2.15.0's pytorch builds (and its torchvision, when PyPI
   has one) moved out of the upstream channel, 2.15.0 out of distro.yaml and the recipes' bounds at <2.15;
1. **release**: the new release is published upstream (``--standin``: `sandbox publish-release`; ``--real``:
   the builds moved out are put back and the channel re-indexed): t = 0;
2. **sweep**: `sweep --pytorch VER --commit` (jobs 2): pins widened, the affected set built and tested
   against the release, one branch per bumped package, the tracking issue's body;
3. **automerge** (simulated): the branches of packages that passed (bumped, every test of the release
   passed: the rule release-sweep.yml's automerge label follows) are merged into main, as the automerge
   job does once each PR's gate is green;
4. **build on main**: `build --changed-since <main before the merges> --jobs 2` (promote.yml's build job;
   what the sweep built and tested is reused);
5. **promote**: the promotion gate; `build/excuses.json` says why anything is held.

It prints each stage's wall time, the headline (release appearing -> promote done), and how many packages
were promoted, held (with the excuse) and pinged (failed or needs-new-version in the tracking issue), with
each failure's first error line. Exit 1 when the headline misses the target.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bench_lifecycle import compile_tool

from conda_distro.util.scratch import new_scratch

STANDIN_TARGET = 120.0
REAL_TARGET = 3600.0
BEFORE = ("2.5.1", "2.6.0")  # the distribution the day before: the two previous minors
RELEASE = "2.7.0"  # what appears upstream
PINGED = ("failed", "needs-new-version", "not-solvable")  # statuses whose maintainers the tracking issue pings
SETUP_MARKER = "day-before.json"  # what --setup-only leaves in --keep DIR for the timed run


def _cli(root: Path, *args: str, ok: tuple[int, ...] = (0, 1)) -> tuple[int, dict | None]:
    proc = subprocess.run([sys.executable, "-m", "conda_distro", *args, "--root", str(root), "--format", "json"],
                          capture_output=True, text=True, check=False, env={**os.environ, "CI": "true"})
    if proc.returncode not in ok:
        raise SystemExit(f"conda-distro {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError:
        return proc.returncode, None


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def passed(pkg: dict, release: str) -> bool:
    """The automerge rule: bumped, and every test of the release ran and passed."""
    tests = [t for t in pkg.get("tests") or [] if t.get("pytorch") == release]
    return pkg.get("status") == "bumped" and bool(tests) and all(t.get("status") == "passed" for t in tests)


def first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:160]
    return ""


class Clock:
    def __init__(self) -> None:
        self.stages: list[tuple[str, float]] = []

    def run(self, name: str, fn):
        t = time.perf_counter()
        out = fn()
        self.stages.append((name, time.perf_counter() - t))
        return out


def _standin_day_before(root: Path, compiled: bool = False) -> None:
    from conda_distro.sandbox.world import SandboxOptions, create_sandbox

    create_sandbox(SandboxOptions(path=root, force=True, releases=BEFORE, compiled=compiled))


def _standin_publish(root: Path, release: str):
    from conda_distro.sandbox.release import PublishOptions, publish_release

    return lambda: publish_release(PublishOptions(world=root, version=release))


# ------------------------------------------------------------------------------------ the real world

REAL_RELEASES = ("2.13.0", "2.14.1", "2.15.0")  # distro.yaml's; the newest appears on release day
PIN = re.compile(r"(pytorch\s*>=\s*[\d.]+\s*,\s*<\s*)2\.16\b")  # the recipes' bound admitting 2.15


def _reindex(channel: Path) -> None:
    """Index incrementally, as an upstream channel does when a package appears (rattler's indexer reads
    only the files repodata does not list yet, and drops the entries of removed files). In a child
    process that leaves with os._exit: after indexing this 6 GB channel, rattler's runtime can crash
    while the interpreter shuts down, after the repodata was written."""
    code = ("import os; from conda_distro.util.rattler_env import index_channel; "
            f"index_channel({str(channel)!r}, subdirs=['linux-64'], force=False); os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True)


def _real_day_before(root: Path, repo: Path, release: str) -> Path:
    """The repository's real world (`sandbox --real`, from the warm cache) as it was the day before
    ``release``: its pytorch builds (and lockstep packages built for it) moved out of the upstream channel
    into ``held-release/`` beside the world, distro.yaml without it, recipes' pytorch bounds below it."""
    proc = subprocess.run([sys.executable, "-m", "conda_distro", "sandbox", str(root), "--real", "--force"], cwd=repo,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"sandbox --real failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    held = root.parent / "held-release"
    held.mkdir(exist_ok=True)
    major, minor = release.split(".")[:2]
    vision = f"0.{int(minor) + 15}."  # torchvision 0.(Y+15) goes with torch 2.Y
    for f in (root / "upstream" / "linux-64").glob("*.conda"):
        if f.name.startswith(f"pytorch-{release}-") or f.name.startswith(f"torchvision-{vision}"):
            f.rename(held / f.name)
    _reindex(root / "upstream")
    text = (root / "distro.yaml").read_text()
    (root / "distro.yaml").write_text(re.sub(r"releases: \[[^\]]*\]",
                                             "releases: [" + ", ".join(f'"{r}"' for r in REAL_RELEASES if r != release) + "]",
                                             text, count=1))
    bound = f"{major}.{minor}"
    for recipe in (root / "recipes").glob("*/recipe.yaml"):
        recipe.write_text(PIN.sub(lambda m: m.group(1) + bound, recipe.read_text()))
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", f"The day before pytorch {release}")
    return held


def _real_publish(root: Path, held: Path):
    def publish() -> list[str]:
        moved = []
        for f in sorted(held.glob("*.conda")):
            f.rename(root / "upstream" / "linux-64" / f.name)
            moved.append(f.name)
        _reindex(root / "upstream")
        return moved
    return publish


def release_day(mode: str, keep: Path | None, repo: Path, compiled: bool = False, setup_only: bool = False) -> int:
    base = keep or new_scratch("conda-distro-bench-release-day-")
    root = base / "world"
    clock = Clock()
    target = STANDIN_TARGET if mode == "standin" else REAL_TARGET
    release = RELEASE if mode == "standin" else REAL_RELEASES[-1]
    before = BEFORE if mode == "standin" else REAL_RELEASES[:-1]

    # the tool's bytecode, as `pip install` leaves it (not timed): from an editable install under
    # PYTHONDONTWRITEBYTECODE=1 every CLI process and sandboxed runner would compile the tool again
    compile_tool()
    # 0. the day before: main holds the distribution at the two previous releases (or the one a
    # `--setup-only` run left in --keep DIR)
    marker = base / SETUP_MARKER
    if keep is not None and marker.is_file():
        prepared = json.loads(marker.read_text())
        if prepared.get("mode") != mode:
            raise SystemExit(f"{keep} holds a {prepared.get('mode')} world prepared by --setup-only, not {mode}")
        setup, main_size, held = prepared["setup"], prepared["main_size"], base / "held-release"
        marker.unlink()  # release day changes the world: it is used once
        print(f"setup: the day-before world prepared in {keep} ({setup:.1f} s, not counted)", flush=True)
    else:
        t = time.perf_counter()
        if mode == "standin":
            _standin_day_before(root, compiled)
        else:
            held = _real_day_before(root, repo, release)
        _git(root, "config", "user.name", "bench")
        _git(root, "config", "user.email", "bench@example.invalid")
        _, setup_doc = _cli(root, "build", "--all", "--jobs", "2")
        _cli(root, "promote")
        setup = time.perf_counter() - t
        _git(root, "add", "-A", "channel_state")
        _git(root, "commit", "-qm", "channel_state: the day before", "--allow-empty")
        main_size = len(list((root / "build" / "channels" / "pytorch").rglob("*.conda")))
        if setup_only:
            (base / "setup-build.json").write_text(json.dumps(setup_doc, indent=1))
            marker.write_text(json.dumps({"mode": mode, "setup": setup, "main_size": main_size}))
            print(f"setup: the day-before world is ready in {base} ({setup:.1f} s, {main_size} artifacts in main); "
                  f"run again with --keep {base} to measure release day")
            return 0

    # 1. the release appears upstream: t = 0 of the headline
    start = time.perf_counter()
    clock.run("release appears upstream", _standin_publish(root, release) if mode == "standin" else _real_publish(root, held))
    # 2. the sweep (release-sweep.yml's sweep job)
    _, report = clock.run("sweep --commit (build + test the affected set)",
                          lambda: _cli(root, "sweep", "--pytorch", release, "--commit", "--jobs", "2"))
    report = report or {}
    packages = report.get("packages", [])
    # 3. automerge: merge the branches of the packages that passed (their PR gate is green)
    main_before = _git(root, "rev-parse", "HEAD")

    def merge() -> list[str]:
        merged = []
        for pkg in packages:
            branch = f"sweep/pytorch-{release}-{pkg['name']}"
            if passed(pkg, release) and _git(root, "branch", "--list", branch):
                _git(root, "merge", "-q", "--no-ff", "--no-edit", "-m", f"Merge {branch} (automerge)", branch)
                merged.append(pkg["name"])
        if not merged and _git(root, "branch", "--list", f"sweep/pytorch-{release}"):
            commits = len(report.get("commits") or []) or 1
            _git(root, "merge", "-q", "--no-ff", "--no-edit", f"sweep/pytorch-{release}~{commits - 1}")
        return merged

    merged = clock.run("automerge (merge the passing packages' PRs)", merge)
    # 4. build on main (promote.yml's build job), 5. promote
    clock.run("build on main (--changed-since, jobs 2)",
              lambda: _cli(root, "build", "--changed-since", main_before, "--jobs", "2"))
    code, promoted_doc = clock.run("promote (the gate)", lambda: _cli(root, "promote"))
    headline = time.perf_counter() - start

    excuses_file = root / "build" / "excuses.json"
    excuses = json.loads(excuses_file.read_text()) if excuses_file.is_file() else {"candidates": []}
    promoted = sorted({p["artifact"].split("/")[-1].rsplit("-", 2)[0] for p in (promoted_doc or {}).get("promoted", [])})
    held_items = [e for e in excuses.get("candidates", []) if e.get("verdict") != "promote"]
    pinged = [p for p in packages if p.get("status") in PINGED]

    world = "the sandbox" if mode == "standin" else "the real world (PyTorch from PyPI)"
    print(f"release day on {world}: {', '.join(before)} in main, {release} appears upstream (2 cores, jobs 2)")
    print(f"  setup (not counted): world + build + promote at {', '.join(before)}: {setup:6.1f} s "
          f"({main_size} artifacts in main)")
    for name, seconds in clock.stages:
        print(f"  {name:48} {seconds:6.1f} s")
    print(f"headline: release appearing -> last passing package promoted: {headline:.1f} s "
          f"(target < {target:.0f} s: {'ok' if headline < target else 'MISSED'})")
    statuses: dict[str, int] = {}
    for p in packages:
        statuses[p["status"]] = statuses.get(p["status"], 0) + 1
    print(f"sweep: {', '.join(f'{n} {s}' for s, n in sorted(statuses.items()))}; automerged: {', '.join(merged) or 'none'}")
    print(f"promoted: {len(promoted)} package(s): {', '.join(promoted) or 'none'}")
    print(f"held: {len(held_items)}")
    for e in held_items:
        print(f"  {e['name']} {e.get('new_version')}: {e['verdict']}: {'; '.join(e.get('reasons') or [])[:200]}")
    print(f"pinged: {len(pinged)} package(s) in the tracking issue")
    for p in pinged:
        why = first_line(p.get("reason")) or first_line(p.get("log"))
        print(f"  {p['name']} ({p['status']}) -> @{', @'.join(p.get('maintainers') or [])}: {why}")
    if keep is None:
        subprocess.run(["rm", "-rf", str(base)], check=False)
    return 0 if headline < target else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--standin", action="store_true", help="the sandbox world with stand-in PyTorch releases")
    mode.add_argument("--real", action="store_true", help="the real world (sandbox --real)")
    ap.add_argument("--keep", type=Path, help="keep the world in this folder (default: a temporary one, removed)")
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent,
                    help="--real: the repository whose recipes and distro.yaml make the world (default: this one)")
    ap.add_argument("--compiled", action="store_true",
                    help="--standin: with the compiled recipes (sandbox --compiled): built for the new minor on release day")
    ap.add_argument("--setup-only", action="store_true",
                    help="with --keep DIR: make the day-before world (built and promoted, not timed) and stop; a "
                         "later run with the same --keep measures release day on it, so a timed run holds the "
                         "benchmark lock only for release day itself")
    args = ap.parse_args(argv)
    if args.setup_only and args.keep is None:
        ap.error("--setup-only needs --keep DIR (the folder the timed run then uses)")
    return release_day("standin" if args.standin else "real", args.keep, args.repo, args.compiled, args.setup_only)


if __name__ == "__main__":
    sys.exit(main())
