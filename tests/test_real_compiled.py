"""The real world's compiled extensions: a real sdist compiled with the machine's g++ against the headers of a
real torch wheel, bridged from PyPI, then tested (import and a compiled operator on CPU).

It needs the real world's inputs on this machine (the committed lock, its bridged upstream channel in the
cache, the recipes' sdists): CI has none of them, and getting them means downloading about 7 GB, so the
test skips, naming what is missing, when any is not here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.helpers import run_json_at

from conda_distro.sandbox.real import RealOptions, create_real_world, offline_gaps
from conda_distro.upstream.lock import LOCK_FILE

REPO = Path(__file__).resolve().parent.parent


def _real_world(tmp_path: Path) -> Path:
    gaps = offline_gaps(REPO)
    if gaps:
        pytest.skip("the real world's inputs are not on this machine (it needs the network and ~7 GB): "
                    + "; ".join(gaps[:3]))
    lock = tmp_path / LOCK_FILE
    shutil.copyfile(REPO / LOCK_FILE, lock)  # the repository's lock is never written by a test
    world = tmp_path / "world"
    create_real_world(RealOptions(path=world, repo=REPO, lock=lock))
    return world


@pytest.mark.slow
def test_a_real_compiled_extension_builds_against_real_torch_and_passes_its_test(tmp_path, capsys):
    """pytorch_scatter 2.1.2 (PyPI's torch-scatter sdist: seven C++ files) for PyTorch 2.13 (cpu): compiled by
    the toolchain channel's g++ wrapper in the build sandbox against torch 2.13.0+cpu's headers, bound to 2.13
    by pytorch's run_export, and its test (a compiled scatter_max and segment_csr) passes on 2.13.0 cpu."""
    world = _real_world(tmp_path)
    assert (world / "toolchain" / "linux-64" / "repodata.json").is_file()  # the machine's compilers, as packages
    code, doc = run_json_at(capsys, world, "build", "pytorch_scatter", "--pytorch", "2.13.0", "--variant", "cpu",
                            "--jobs", "1")
    assert code == 0, doc
    built = sorted((world / "build" / "channels" / "staging" / "linux-64").glob("pytorch_scatter-2.1.2-cpu_py311_*.conda"))
    assert len(built) == 1, built
    from rattler_build import Package

    pkg = Package.from_file(str(built[0]))
    depends = list(pkg.depends)
    assert any(d.startswith("pytorch >=2.13") and "<2.14" in d for d in depends), depends  # the run_export
    assert any(d.startswith("__glibc >=") for d in depends), depends  # the sysroot's strong run_export
    files = [str(p) for p in pkg.files]
    assert any(f.endswith(".so") and "torch_scatter/_scatter_cpu" in f for f in files), files
    assert [b["status"] for b in doc["builds"] if b["name"] == "pytorch_scatter"] == ["built"], doc["builds"]
    tests = [t for t in doc["tests"] if t["name"] == "pytorch_scatter"]
    assert [(t["pytorch"], t["variant"], t["status"]) for t in tests] == [("2.13.0", "cpu", "passed")], tests
