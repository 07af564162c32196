"""The real world against real PyTorch (README "Against real PyTorch"). Prints figures measured in one run.

    python bench/bench_real.py [--world DIR] [--reuse DIR] [--no-build]

1. first `sandbox --real` (download, conversion, total time; bytes downloaded; peak disk growth),
   unless the caches are already warm (then it says so);
2. second `sandbox --real` into a new folder: the caches are reused (target < 30 s);
3. one test environment per pytorch build (solve + install with rattler from one shared package cache,
   cold then warm: the warm one hard-links ~1-3 GB of torch instead of extracting it);
4. `build --all --jobs 2` on the world (wall time, tests, passed/failed, time per test) unless --no-build,
   then `promote` and `verify-channel`;
5. orchestration overhead (as bench_engine does it): `conda-distro build` of two real packages against one
   release (cpu and cuda) on a fresh world vs a direct py-rattler-build loop over the same recipes and tests
   (--overhead; skipped by default: it builds and tests twice more).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from conda_distro.util.scratch import new_scratch

REPO = Path(__file__).resolve().parent.parent


class DiskPeak:
    """Peak growth of used space on the file system of ``path``, sampled every second."""

    def __init__(self, path: Path) -> None:
        self.path, self.base, self.peak, self._stop = path, self._used(path), 0, threading.Event()

    @staticmethod
    def _used(path: Path) -> int:
        st = os.statvfs(path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def __enter__(self) -> DiskPeak:
        def loop() -> None:
            while not self._stop.wait(1.0):
                self.peak = max(self.peak, self._used(self.path) - self.base)

        self._t = threading.Thread(target=loop, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self._used(self.path) - self.base)


def gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def cli(*args: str, cwd: Path | None = None) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "conda_distro", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)
    return time.perf_counter() - t0, proc


def sandbox_real(dest: Path) -> tuple[float, dict, int]:
    with DiskPeak(dest.parent) as disk:
        t, proc = cli("sandbox", str(dest), "--real", "--force", "--format", "json", cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"sandbox --real failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return t, json.loads(proc.stdout), disk.peak


def test_env_times(world: Path) -> list[str]:
    from rattler import Channel, Subdir, VirtualPackage, install, solve

    lines = []
    upstream = world / "upstream"
    repodata = json.loads((upstream / "linux-64" / "repodata.json").read_text())["packages.conda"]
    builds = sorted((r["version"], r["build"]) for r in repodata.values() if r["name"] == "pytorch")
    cache = new_scratch("conda-distro-bench-real-pkgs-")
    os.environ["RATTLER_CACHE_DIR"] = str(cache)
    vps = [v.into_generic() for v in VirtualPackage.detect()]
    from rattler import BuildString, GenericVirtualPackage, PackageName, Version

    vps.append(GenericVirtualPackage(PackageName("__cuda"), Version("12.4"), BuildString("0")))
    try:
        for version, build in builds:
            for rnd in ("cold", "warm"):
                prefix = new_scratch("conda-distro-bench-real-env-")

                async def go(version=version, build=build, prefix=prefix):
                    recs = await solve([Channel(upstream.as_uri())], [f"pytorch =={version} {build}", "python 3.11.*"],
                                       platforms=[Subdir("linux-64"), Subdir("noarch")], virtual_packages=vps)
                    await install(recs, target_prefix=str(prefix), show_progress=False)
                    return recs

                t0 = time.perf_counter()
                recs = asyncio.run(go())
                t = time.perf_counter() - t0
                size = sum(f.stat().st_size for f in prefix.rglob("*") if f.is_file() and not f.is_symlink())
                t1 = time.perf_counter()
                out = subprocess.run([str(prefix / "bin" / "python"), "-c", "import torch; print(torch.__version__, "
                                      "torch.ones(2).sum().item())"], capture_output=True, text=True, check=False)
                imp = time.perf_counter() - t1
                status = out.stdout.strip() or ("import failed: " + out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "?")
                lines.append(f"  test env pytorch {version} {build} ({rnd} cache): {t:.1f} s for {len(recs)} packages, "
                             f"{gib(size)} apparent; import torch {imp:.1f} s -> {status}")
                shutil.rmtree(prefix, ignore_errors=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        os.environ.pop("RATTLER_CACHE_DIR", None)
    return lines


OVERHEAD_PACKAGES = ("einops", "captum")
OVERHEAD_RELEASE = "2.13.0"


def direct_loop(root: Path, names: tuple[str, ...], release: str) -> int:
    """What a person would write with py-rattler-build alone: render each recipe with the distribution's
    variant config, build it, test the artifact against each release view of ``release``."""
    from rattler_build import Package, Stage0Recipe, ToolConfiguration

    from conda_distro.distribution import load_distribution
    from conda_distro.engine.releases import build_release_views
    from conda_distro.util.rattler_env import rattler_env, scratch_dir

    dist = load_distribution(root)
    views = {t: v for t, v in build_release_views(dist.distro, root / "build" / "direct-views").items()
             if t.pytorch == release and v.url}
    staging = root / "build" / "direct-staging"
    (staging / "noarch").mkdir(parents=True, exist_ok=True)
    from conda_distro.util.rattler_env import index_channel

    index_channel(staging)
    minor = ".".join(release.split(".")[:2])
    n = 0
    for name in names:
        recipe = dist.recipes[name]
        vc = (recipe.settings or dist.settings).with_variants({"pytorch": [minor]}).to_config()
        with rattler_env(tmpdir=scratch_dir()):
            for v in Stage0Recipe.from_file(str(recipe.path)).render(vc):
                res = v.run_build(tool_config=ToolConfiguration(test_strategy="skip"), output_dir=str(staging),
                                  channels=[staging.as_uri(), *dist.distro.upstream_urls])
                pkg = Package.from_file(str(res.packages[0]))
                for view in views.values():
                    os.environ["CONDA_OVERRIDE_CUDA"] = view.cuda_override
                    pkg.run_tests(channel=[view.url, staging.as_uri(), *dist.distro.upstream_urls])
                    n += 1
    os.environ.pop("CONDA_OVERRIDE_CUDA", None)
    return n


def overhead(tmp: Path) -> str:
    """Step 5: fresh worlds (from the warm cache), ours first then direct, same packages and tests."""
    ours_root, direct_root = tmp / "overhead-ours", tmp / "overhead-direct"
    for d in (ours_root, direct_root):
        t, proc = cli("sandbox", str(d), "--real", "--force", cwd=REPO)
        if proc.returncode != 0:
            raise SystemExit(f"sandbox --real failed:\n{proc.stderr[-2000:]}")
    t_ours, proc = cli("build", *OVERHEAD_PACKAGES, "--pytorch", OVERHEAD_RELEASE, "--jobs", "1", "--format", "json",
                       cwd=ours_root)
    tests = (json.loads(proc.stdout).get("tests") or []) if proc.stdout.strip().startswith("{") else []
    mine = [x for x in tests if x.get("name") in OVERHEAD_PACKAGES]
    t0 = time.perf_counter()
    n = direct_loop(direct_root, OVERHEAD_PACKAGES, OVERHEAD_RELEASE)
    t_direct = time.perf_counter() - t0
    return (f"5. overhead: {', '.join(OVERHEAD_PACKAGES)} against pytorch {OVERHEAD_RELEASE} (cpu, cuda): conda-distro "
            f"build {t_ours:.0f} s ({len(mine)} tests, sandboxed workers) vs direct py-rattler-build loop "
            f"{t_direct:.0f} s ({n} tests, in-process, unsandboxed) -> ratio {t_ours / t_direct:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=Path, help="where to make the world (default: a temporary folder)")
    ap.add_argument("--reuse", type=Path, help="an existing real world: skip steps 1-2")
    ap.add_argument("--no-build", action="store_true", help="skip step 4")
    ap.add_argument("--overhead", action="store_true", help="run step 5")
    ap.add_argument("--only-overhead", action="store_true", help="run step 5 only")
    args = ap.parse_args()
    tmp = new_scratch("conda-distro-bench-real-")
    try:
        if args.only_overhead:
            print(overhead(tmp))
            return 0
        if args.reuse:
            world = args.reuse.resolve()
        else:
            world = (args.world or tmp / "real").resolve()
            t, doc, peak = sandbox_real(world)
            tm = doc["timings"]
            print(f"1. first sandbox --real: {t:.0f} s total ({'caches warm' if doc['cache_hit'] else 'cold'}); "
                  f"lock {doc['lock']['action']} ({doc['lock']['wheels']} wheels; resolve {tm.get('resolve', 0):.0f} s); "
                  f"downloaded {gib(doc['bytes_downloaded'])}; bridge: "
                  f"download {tm.get('bridge_download', 0):.0f} s, convert {tm.get('bridge_convert', 0):.0f} s, "
                  f"index {tm.get('bridge_index', 0):.0f} s; sources {tm.get('sources', 0):.0f} s; upstream channel "
                  f"{gib(doc['upstream_bytes'])}; peak disk growth {gib(peak)}")
            for u in doc["unavailable"]:
                print(f"   unavailable: {u['variant']} {u['release']}: {u['why']}")
            t2, doc2, _ = sandbox_real(tmp / "real-2")
            print(f"2. second sandbox --real: {t2:.1f} s (target < 30 s; cache hit: {doc2['cache_hit']})")
            shutil.rmtree(tmp / "real-2", ignore_errors=True)
        print("3. test environments (rattler solve + install, one package cache):")
        for line in test_env_times(world):
            print(line)
        if not args.no_build:
            with DiskPeak(world) as disk:
                t, proc = cli("build", "--all", "--jobs", "2", "--format", "json", cwd=world)
            report = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
            tests = report.get("tests") or []
            passed = sum(1 for x in tests if x.get("status") == "passed")
            print(f"4. build --all --jobs 2: {t / 60:.1f} min wall (exit {proc.returncode}), {len(tests)} tests "
                  f"({passed} passed), {t / max(len(tests), 1):.0f} s per test (build time included); "
                  f"peak disk growth {gib(disk.peak)}")
            tp, pp = cli("promote", "--format", "json", cwd=world)
            tv, pv = cli("verify-channel", "--format", "json", cwd=world)
            print(f"   promote {tp:.0f} s (exit {pp.returncode}); verify-channel {tv:.0f} s (exit {pv.returncode})")
        if args.overhead:
            print(overhead(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
