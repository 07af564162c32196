"""The real world's compiled extensions: a real sdist compiled with the machine's g++ (and nvcc, on the CUDA
row) against the headers of a real torch wheel, bridged from PyPI, then tested (import and a compiled
operator on CPU).

It needs the real world's inputs on this machine (the committed lock, its bridged upstream channel in the
cache, the recipes' sdists; getting them means downloading about 7 GB) and several minutes of two cores, so
it runs only when asked (``CONDA_DISTRO_REAL_TESTS=1``, as the nightly's real-world job does after making
the real world), and then skips, naming what is missing, when any input is not here. Whether the suite
compiles real torch extensions never depends on what a machine's cache happens to hold.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.helpers import run_json_at

from conda_distro.sandbox.real import RealOptions, create_real_world, offline_gaps
from conda_distro.upstream.lock import LOCK_FILE

REPO = Path(__file__).resolve().parent.parent


REAL_TESTS_ENV = "CONDA_DISTRO_REAL_TESTS"


def _real_world(tmp_path: Path) -> Path:
    if os.environ.get(REAL_TESTS_ENV) != "1":
        pytest.skip(f"compiles real torch extensions for minutes: set {REAL_TESTS_ENV}=1 to run it (the nightly does)")
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


@pytest.mark.slow
@pytest.mark.timeout(2700)  # ten compiles (three by nvcc) in one job: 28 min measured on 2 loaded cores, at nice 19
def test_a_real_cuda_extension_is_compiled_by_nvcc_against_real_cuda_torch_and_passes_its_test(tmp_path, capsys):
    """pytorch_scatter 2.1.2's CUDA row for PyTorch 2.15 (PyPI has only a CUDA torch 2.15.0, so the CPU row is
    not built): its three .cu files compiled by the machine's nvcc (the toolchain channel's cuda-nvcc wrapper)
    for one GPU architecture against torch 2.15.0's headers and the cuBLAS/cuSPARSE headers of the host's
    nvidia runtime packages; the artifact needs `__cuda`, is bound to 2.15 and holds the `_<name>_cuda`
    extensions only, and its test passes on 2.15.0 cuda (`cuda (no GPU)` here: import and the CPU ops)."""
    world = _real_world(tmp_path)
    if not list((world / "toolchain" / "linux-64").glob("cuda-nvcc_linux-64-*.conda")):
        pytest.skip("this machine has no nvcc, so the real world has no CUDA row")
    code, doc = run_json_at(capsys, world, "build", "pytorch_scatter", "--pytorch", "2.15.0", "--jobs", "1")
    assert code == 0, doc
    statuses = {b["artifact"].split("/")[-1].split("_h")[0]: b["status"] for b in doc["builds"] if b["name"] == "pytorch_scatter"}
    assert statuses == {"pytorch_scatter-2.1.2-cuda_py311": "built"}, doc["builds"]
    built = sorted((world / "build" / "channels" / "staging" / "linux-64").glob("pytorch_scatter-2.1.2-cuda_py311_*_200.conda"))
    assert len(built) == 1, built
    from rattler_build import Package

    pkg = Package.from_file(str(built[0]))
    depends = list(pkg.depends)
    assert any(d.startswith("pytorch >=2.15") and "<2.16" in d for d in depends), depends
    assert "__cuda" in [d.split()[0] for d in depends], depends
    files = [str(p) for p in pkg.files]
    assert any(f.endswith(".so") and "torch_scatter/_scatter_cuda" in f for f in files), files
    assert not any("_cpu" in f for f in files if f.endswith(".so")), files
    tests = [t for t in doc["tests"] if t["name"] == "pytorch_scatter"]
    assert [(t["pytorch"], t["variant"], t["status"]) for t in tests] == [("2.15.0", "cuda", "passed")], tests


def test_a_cpu_row_build_of_a_minor_without_a_cpu_pytorch_upstream_is_not_built():
    """PyPI has a CPU torch for 2.13.0 only: the CPU-row builds of 2.14 and 2.15 could only fail to set up their
    host, so the plan leaves them out (saying why); CUDA-row builds and noarch builds are kept, and nothing is
    left out while upstream is unknown."""
    from conda_distro.engine.backends import VariantSpec
    from conda_distro.engine.plan import _unservable
    from conda_distro.engine.releases import Availability
    from conda_distro.vocab import Release, Target, Variant

    def spec(minor: str, cuda: str) -> VariantSpec:
        return VariantSpec("torchsort", "0.1.10", f"{'cpu' if cuda == 'None' else 'cuda'}_{minor}", 0, "linux-64",
                           {"pytorch": minor, "cuda_compiler_version": cuda})

    specs = [spec(m, c) for m in ("2.13", "2.14", "2.15") for c in ("None", "13.0")]
    specs.append(VariantSpec("einops", "0.8.2", "pyhd8ed1ab_0", 0, "noarch", {}))
    releases = [Release(r) for r in ("2.13.0", "2.14.1", "2.15.0")]
    missing = {Target(r, Variant("cpu")): f"no cpu build of pytorch {r}" for r in ("2.14.1", "2.15.0")}
    out = _unservable(specs, "pytorch", releases, Availability(missing))
    assert [a for a, _ in out] == ["linux-64/torchsort-0.1.10-cpu_2.14.conda", "linux-64/torchsort-0.1.10-cpu_2.15.conda"]
    assert out[0][1] == "no cpu build of pytorch 2.14 in the upstream channels"
    assert _unservable(specs, "pytorch", releases, None) == []
    assert _unservable(specs, "pytorch", releases, Availability({})) == []


def test_the_real_worlds_variant_rows_name_the_machines_compilers_and_the_host_python(tmp_path):
    """The repository's variants.yaml (conda-forge's gcc 14/15, CUDA 12.9, four pythons) becomes rows this world
    can build with, read back by rattler-build's own loader: the machine's gcc, glibc and nvcc, python 3.11,
    every zip still consistent; without nvcc there is no CUDA row."""
    import dataclasses
    import sys

    from rattler_build import VariantConfig

    from conda_distro.sandbox.real_toolchain import real_variants
    from conda_distro.sandbox.upstream import HostPython, Toolchain

    host = HostPython.current()
    tc = Toolchain("/usr/bin/gcc-12", "/usr/bin/g++-12", "12", "2.36", "/usr/local/cuda-13.0/bin/nvcc", "13.0")
    for toolchain, rows in ((tc, ["None", "13.0"]), (dataclasses.replace(tc, nvcc="", nvcc_version=""), ["None"])):
        text = real_variants((REPO / "variants.yaml").read_text(), toolchain, host, REPO / "variants.yaml")
        (tmp_path / "variants.yaml").write_text(text)
        vc = VariantConfig.from_file(str(tmp_path / "variants.yaml"))
        assert [str(v) for v in vc.get_values("cuda_compiler_version")] == rows
        assert [str(v) for v in vc.get_values("cxx_compiler_version")] == ["12"] * len(rows)
        assert [str(v) for v in vc.get_values("c_stdlib_version")] == ["2.36"] * len(rows)
        assert [str(v) for v in vc.get_values("python")] == [f"{sys.version_info[0]}.{sys.version_info[1]}.*"]
        assert [str(v) for v in vc.get_values("blas_impl")] == ["openblas", "mkl", "blis"]  # the rest is kept
