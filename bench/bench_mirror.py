"""Mirror benchmark: what a remote upstream channel costs sandboxed builds. Prints figures measured in one run.

    python bench/bench_mirror.py

The sandbox world's upstream channel is served over loopback HTTP (``tests/support/channel_server.py``, its own
process) and distro.yaml points at it; `build --all --jobs 2` then runs

1. on the file:// world (the baseline: no mirror);
2. on the HTTP world with an empty mirror store (first build: every needed file downloaded);
3. on the HTTP world again from a clean ``build/`` (second build: the store serves the files);

alternating the order over two rounds (the machine is shared). For the HTTP builds it also sums the time
spent before the sandboxes in the engines' solves (rattler-build's render-and-solve per package,
rattler's solves per test) and in making the mirror views, and counts the package files downloaded.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.channel_server import ChannelServer  # noqa: E402 - the tests' loopback server

import conda_distro.engine.phases as phases  # noqa: E402
from conda_distro.distribution import load_distribution  # noqa: E402
from conda_distro.engine.mirror import MirrorStore  # noqa: E402
from conda_distro.engine.run import BuildOptions, run_build  # noqa: E402
from conda_distro.sandbox.world import SandboxOptions, create_sandbox  # noqa: E402
from conda_distro.util.scratch import new_scratch

SPENT: dict[str, float] = {}


def timing(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[name] = SPENT.get(name, 0.0) + time.perf_counter() - t0
    return wrapped


def build(root: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    run = run_build(load_distribution(root), BuildOptions(all=True, jobs=2))
    assert run.report is not None and len(run.report.tests) > 50, run.report
    return time.perf_counter() - t0, sum(t.status == "passed" for t in run.report.tests)


def main() -> int:
    argparse.ArgumentParser(description=__doc__).parse_args()
    phases.build_needs = timing("build/host solves (rattler-build)", phases.build_needs)
    phases.test_needs = timing("test solves (rattler)", phases.test_needs)
    MirrorStore.views = timing("mirror views (download, link, index)", MirrorStore.views)  # type: ignore[method-assign]
    tmp = new_scratch("conda-distro-bench-mirror-")
    import os

    os.environ["CONDA_DISTRO_CACHE"] = str(tmp / "cache")
    try:
        template = create_sandbox(SandboxOptions(path=tmp / "template")).path
        server = ChannelServer(template, tmp / "requests.log", lifetime=3600)
        try:
            results: dict[str, list[float]] = {"file": [], "http-first": [], "http-second": []}
            spent: dict[str, list[dict[str, float]]] = {"http-first": [], "http-second": []}
            for rnd in range(2):
                shutil.rmtree(tmp / "cache" / "mirror", ignore_errors=True)
                http = tmp / f"http-{rnd}"
                shutil.copytree(template, http, symlinks=True)
                cfg = http / "distro.yaml"
                cfg.write_text(re.sub(r"upstream: \[\./upstream\][^\n]*", f'upstream: ["{server.url}/upstream"]',
                                      cfg.read_text()))
                order = ("file", "http") if rnd == 0 else ("http", "file")
                for kind in order:
                    if kind == "file":
                        root = tmp / f"file-{rnd}"
                        shutil.copytree(template, root, symlinks=True)
                        results["file"].append(build(root)[0])
                        continue
                    for which in ("http-first", "http-second"):
                        shutil.rmtree(http / "build", ignore_errors=True)
                        SPENT.clear()
                        before = len([r for r in server.requests() if ".conda " in r])
                        t, _ = build(http)
                        results[which].append(t)
                        spent[which].append({**SPENT, "files downloaded": float(
                            len([r for r in server.requests() if ".conda " in r]) - before)})
            for kind, ts in results.items():
                print(f"build --all --jobs 2, {kind:11}: " + ", ".join(f"{t:.1f} s" for t in ts)
                      + f" (best {min(ts):.1f} s)")
            for which, rows in spent.items():
                for key in rows[0]:
                    vals = [r.get(key, 0.0) for r in rows]
                    unit = "" if key == "files downloaded" else " s"
                    print(f"  {which}: {key}: " + ", ".join(f"{v:.1f}{unit}" for v in vals))
            size = sum(f.stat().st_size for f in (tmp / "cache" / "mirror").rglob("*") if f.is_file())
            print(f"mirror store after the runs: {size / 1e6:.1f} MB")
        finally:
            server.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
