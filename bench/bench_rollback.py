"""Benchmark: `rollback` of a generated 1,000-artifact main (target < 5 minutes).

    .venv/bin/python bench/bench_rollback.py [--n 1000] [--retire 20] [--target 300] [--keep]

Setup (not timed): N small but valid ``.conda`` packages of N names (bench_promote.py's writer; each
depends on pytorch only), with passing results, promoted into an empty local main; the promotion takes
the first snapshot (its lockfiles and SBOM included: that time is reported too). Then ``--retire``
packages are retired and a no-op promote takes the second snapshot.
Timed, each as ``python -m conda_distro rollback … --format json`` (the CLI's start-up included): rollback
to the first snapshot (restores the retired artifacts), then back to the second (removes them again).
After each, main's index must equal the snapshot's byte for byte. Exits 1 when a rollback misses the
target or an index differs.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_promote import DISTRO, RELEASES, VARIANTS, write_conda  # noqa: E402

from conda_distro.enduser.snapshots import SnapshotStore  # noqa: E402
from conda_distro.gate.promote import PromoteOptions, promote  # noqa: E402
from conda_distro.gate.retire import RetireOptions, retire  # noqa: E402
from conda_distro.util.scratch import new_scratch


def make_world(root: Path, n: int) -> None:
    import asyncio
    import datetime as dt
    import json

    from rattler.index import index_fs

    from conda_distro.channels import ChannelFile
    from conda_distro.gate.installability import write_channel
    from conda_distro.state.provenance import recipe_digest
    from conda_distro.state.results import ArtifactResults, ResultsStore, TestRecord

    root.mkdir(parents=True, exist_ok=True)
    (root / "distro.yaml").write_text(DISTRO.format(releases=json.dumps(RELEASES), variants=json.dumps(VARIANTS)))
    write_channel([ChannelFile("linux-64", f"pytorch-{r}-{v}_0.conda", "pytorch", r, f"{v}_0", 0, "0" * 64,
                               ("__cuda",) if v == "cuda" else ()) for r in RELEASES for v in VARIANTS],
                  root / "upstream")
    staging = root / "build" / "channels" / "staging"
    (staging / "noarch").mkdir(parents=True)
    (staging / "linux-64").mkdir()
    for i in range(n):
        write_conda(staging / "noarch", f"bench-{i:04d}", "1.0.0", ["pytorch >=2.4,<2.7"])
    asyncio.run(index_fs(staging, force=True, write_zst=False, write_shards=False))
    store = ResultsStore(root / "build" / "results")
    date = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    repodata = json.loads((staging / "noarch" / "repodata.json").read_text())
    for fn, rec in repodata["packages.conda"].items():
        folder = root / "recipes" / rec["name"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "recipe.yaml").write_text(f"# {rec['name']} (rollback benchmark; not rendered)\n")
        digest = recipe_digest(folder)
        own = {f"recipes/{rec['name']}": digest}
        tests = [TestRecord(name=rec["name"], artifact=f"noarch/{fn}", pytorch=r, variant=v, status="passed", date=date,
                            recipes=own, against={}) for r in RELEASES for v in VARIANTS]
        store.put(ArtifactResults(artifact=f"noarch/{fn}", name=rec["name"], version=rec["version"],
                                  sha256=rec["sha256"], depends=rec["depends"], tests=tests,
                                  recipe=f"recipes/{rec['name']}", recipe_hash=digest))


def index_bytes(channel: Path) -> dict[str, bytes]:
    return {p.relative_to(channel).as_posix(): p.read_bytes() for p in sorted(channel.glob("*/repodata.json"))}


def rollback(root: Path, to: str) -> tuple[float, dict]:
    import json

    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "conda_distro", "rollback", "--to", to, "--why", "bench",
                          "--root", str(root), "--format", "json"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"rollback --to {to} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return wall, json.loads(res.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--retire", type=int, default=20)
    ap.add_argument("--target", type=float, default=300.0)
    ap.add_argument("--keep", action="store_true", help="keep the temp repo and print its path")
    args = ap.parse_args()
    tmp = new_scratch("conda-distro-bench-rollback-")
    root = tmp / "distro"
    main_dir = root / "build" / "channels" / "main"
    try:
        t0 = time.perf_counter()
        make_world(root, args.n)
        print(f"setup: {args.n} artifacts in {time.perf_counter() - t0:.1f} s (not timed)")
        t0 = time.perf_counter()
        first = promote(PromoteOptions(root=root))
        print(f"promote {len(first.plan.promote)} artifacts with its snapshot {first.snapshot}: "
              f"{time.perf_counter() - t0:.1f} s (not timed)")
        t0 = time.perf_counter()
        for i in range(args.retire):
            retire(RetireOptions(name=f"bench-{args.n - 1 - i:04d}", reason="bench", root=root))
        second = promote(PromoteOptions(root=root))
        print(f"retire {args.retire} packages, then the second snapshot {second.snapshot}: "
              f"{time.perf_counter() - t0:.1f} s (not timed)")
        snaps = SnapshotStore(root / "channel_state").all()
        assert [s.name for s in snaps] == [first.snapshot, second.snapshot], snaps
        ok = True
        for snap in snaps:
            wall, doc = rollback(root, snap.name)
            same = index_bytes(main_dir) == index_bytes(main_dir / "label" / snap.name)
            ok &= same and wall < args.target
            print(f"rollback to {snap.name} ({len(snap.artifacts)} artifacts; removed {len(doc['remove'])}, "
                  f"restored {len(doc['restore'])}): {wall:.2f} s ({wall / args.target:.3f} × the {args.target:g} s "
                  f"target); index equals the snapshot's: {same}")
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
