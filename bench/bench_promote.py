"""Benchmark: promote 500 small artifacts from a local staging channel into an empty local main.

    /tmp/venv/bin/python bench/bench_promote.py [--n 500] [--target 10] [--keep]

Setup (not timed): a temp distribution repo whose staging channel holds N synthetic but valid
``.conda`` packages (100 names × N/100 versions, each depending on pytorch and on the previous name,
so the dependency pass has real work), indexed by rattler, with passing results for every
release × variant. Timed: one full ``promote`` (plan, copy + fsync + verify, index, ledger), then a
second no-op ``promote``. Exits 1 when the first run misses the target.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import io
import json
import shutil
import sys
import tarfile
import time
import zipfile
from pathlib import Path

from conda_distro.gate.promote import PromoteOptions, promote
from conda_distro.state.provenance import recipe_digest
from conda_distro.state.results import ArtifactResults, ResultsStore, TestRecord
from conda_distro.util.scratch import new_scratch

RELEASES = ["2.4.1", "2.5.1", "2.6.0"]
VARIANTS = ["cpu", "cuda"]
DISTRO = """\
name: bench
channels: {{upstream: [./upstream], staging: build/channels/staging, main: build/channels/main}}
pytorch: {{releases: {releases}, variants: {variants}}}
platforms: [linux-64]
"""


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 1700000000
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write_conda(folder: Path, name: str, version: str, depends: list[str]) -> Path:
    """A minimal valid ``.conda``: a stored zip of metadata.json + info/pkg tarballs (zstd)."""
    from backports import zstd  # shipped with conda-package-streaming (anaconda-client's dependency)

    build = "h0_0"
    stem = f"{name}-{version}-{build}"
    index = {"name": name, "version": version, "build": build, "build_number": 0, "depends": depends,
             "noarch": "generic", "subdir": "noarch", "license": "BSD-3-Clause", "timestamp": 1700000000000}
    payload = f"share/{name}/VERSION"
    paths = {"paths": [{"_path": payload, "path_type": "hardlink", "size_in_bytes": len(version)}],
             "paths_version": 1}
    info = _tar({"info/index.json": json.dumps(index).encode(), "info/paths.json": json.dumps(paths).encode(),
                 "info/files": payload.encode() + b"\n"})
    pkg = _tar({payload: version.encode()})
    path = folder / f"{stem}.conda"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
        z.writestr(f"pkg-{stem}.tar.zst", zstd.compress(pkg))
        z.writestr(f"info-{stem}.tar.zst", zstd.compress(info))
    return path


def make_world(root: Path, n: int) -> None:
    from rattler.index import index_fs

    root.mkdir(parents=True, exist_ok=True)
    (root / "distro.yaml").write_text(DISTRO.format(releases=json.dumps(RELEASES), variants=json.dumps(VARIANTS)))
    from conda_distro.channels import ChannelFile
    from conda_distro.gate.installability import write_channel

    write_channel([ChannelFile("linux-64", f"pytorch-{r}-{v}_0.conda", "pytorch", r, f"{v}_0", 0, "0" * 64,
                               ("__cuda",) if v == "cuda" else ()) for r in RELEASES for v in VARIANTS],
                  root / "upstream")  # the gate's installability solves read it
    staging = root / "build" / "channels" / "staging"
    (staging / "noarch").mkdir(parents=True)
    (staging / "linux-64").mkdir()
    names, per = 100, max(1, n // 100)
    for i in range(min(n, names * per)):
        idx, v = divmod(i, per)
        deps = ["pytorch >=2.4,<2.7"] + ([f"bench-{idx - 1:03d} >=1.0,<2"] if idx else [])
        write_conda(staging / "noarch", f"bench-{idx:03d}", f"1.0.{v}", deps)
    asyncio.run(index_fs(staging, force=True, write_zst=False, write_shards=False))
    store = ResultsStore(root / "build" / "results")
    date = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    repodata = json.loads((staging / "noarch" / "repodata.json").read_text())
    digests = {}  # provenance: each artifact's recipe folder and its recipe input hash (promote re-hashes them)
    for idx in range(names):
        folder = root / "recipes" / f"bench-{idx:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "recipe.yaml").write_text(f"# bench-{idx:03d} (promote benchmark; not rendered)\n")
        digests[f"bench-{idx:03d}"] = recipe_digest(folder)
    # what each test environment held, as a build records it: the newest build of every earlier name
    newest: dict[str, tuple] = {}
    for rec in repodata["packages.conda"].values():
        key = tuple(int(x) for x in rec["version"].split("."))
        if rec["name"] not in newest or key > newest[rec["name"]][0]:
            newest[rec["name"]] = (key, f"{rec['name']}-{rec['version']}-{rec['build']}")
    for fn, rec in repodata["packages.conda"].items():
        art = f"noarch/{fn}"
        own = {f"recipes/{rec['name']}": digests[rec["name"]]}
        idx = int(rec["name"].split("-")[1])
        against = {f"bench-{j:03d}": newest[f"bench-{j:03d}"][1] for j in range(idx) if f"bench-{j:03d}" in newest}
        tests = [TestRecord(name=rec["name"], artifact=art, pytorch=r, variant=v, status="passed", date=date,
                            recipes=own, against=against) for r in RELEASES for v in VARIANTS]
        store.put(ArtifactResults(artifact=art, name=rec["name"], version=rec["version"], sha256=rec["sha256"],
                                  depends=rec["depends"], tests=tests, recipe=f"recipes/{rec['name']}",
                                  recipe_hash=digests[rec["name"]]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--target", type=float, default=10.0)
    ap.add_argument("--keep", action="store_true", help="keep the temp repo and print its path")
    args = ap.parse_args()
    tmp = new_scratch("conda-distro-bench-promote-")
    try:
        t0 = time.perf_counter()
        make_world(tmp / "distro", args.n)
        print(f"setup: {args.n} artifacts in {time.perf_counter() - t0:.2f} s (not timed)")
        t0 = time.perf_counter()
        result = promote(PromoteOptions(root=tmp / "distro"))
        wall = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = promote(PromoteOptions(root=tmp / "distro"))
        noop = time.perf_counter() - t0
        ok = len(result.plan.promote) == args.n and not again.plan.promote and result.exit_code == 0
        print(f"promote {len(result.plan.promote)} artifacts: {wall:.2f} s "
              f"({wall / args.target:.2f} × the {args.target:g} s target)")
        print(f"no-op rerun: {noop:.2f} s; ledger files written: {len(result.ledger_written)}; "
              f"{'OK' if ok else 'UNEXPECTED RESULT'}")
        if args.keep:
            print(f"kept {tmp}")
        return 0 if ok and wall < args.target else 1
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
