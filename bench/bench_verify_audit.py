"""What verify-channel's file audit costs: every file of main is read and hashed before solving.

    python bench/bench_verify_audit.py [--files 2000] [--size-kib 512]

Makes a local channel of N package-sized files with a hand-written repodata.json (the audit only reads
the index and the bytes; the files need not be real packages), then times ``LocalChannel.audit`` and
``secret.mask`` (run on every line the CLI prints once a token is read). Targets: the audit hashes at
>= 300 MB/s on this machine (a 5 GB channel in under 20 s); masking a 200-character line < 50 µs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path

from conda_distro.channels import LocalChannel
from conda_distro.util.scratch import ScratchDir
from conda_distro.util.secret import Secret, mask, register


def make_channel(root: Path, n: int, size: int) -> int:
    sub = root / "noarch"
    sub.mkdir(parents=True)
    packages, total = {}, 0
    for i in range(n):
        name = f"pkg{i:05d}-1.0-h0_0.conda"
        data = os.urandom(size)
        (sub / name).write_bytes(data)
        total += len(data)
        packages[name] = {"name": f"pkg{i:05d}", "version": "1.0", "build": "h0_0", "build_number": 0,
                          "depends": [], "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                          "subdir": "noarch"}
    (sub / "repodata.json").write_text(json.dumps({"info": {"subdir": "noarch"}, "packages": {},
                                                   "packages.conda": packages}))
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--size-kib", type=int, default=512)
    args = ap.parse_args()
    with ScratchDir("conda-distro-bench-audit-") as tmp:
        total = make_channel(Path(tmp) / "main", args.files, args.size_kib * 1024)
        ch = LocalChannel(Path(tmp) / "main")
        t0 = time.perf_counter()
        audit = ch.audit()
        dt = time.perf_counter() - t0
        assert audit.problems == []
        print(f"audit: {args.files} files, {total / 1e6:.0f} MB in {dt:.2f} s = {total / 1e6 / dt:.0f} MB/s "
              f"(page cache warm; target >= 300 MB/s)")
    register(Secret("tok-BENCH-0123456789abcdef", name="bench"))
    line = "x" * 180 + " tok-BENCH-0123456789abcdef"
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        mask(line)
    per = (time.perf_counter() - t0) / n * 1e6
    print(f"mask: {per:.1f} µs per 200-character line with one registered token (target < 50 µs)")


if __name__ == "__main__":
    main()
