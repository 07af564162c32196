"""The compiled path end to end on the sandbox world (`sandbox DIR --compiled`): stand-in compiler packages,
a stand-in libtorch whose ABI changes with the minor, and scatterkit <- sparsekit built per supported
minor × row (C++, and CUDA with nvcc where the machine has it), each tested on its own minor; promoted by
the gate on that evidence; built for the new minor on release day."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock
from rattler import Channel, RepoData

from conda_distro.sandbox.upstream import Toolchain

pytestmark = pytest.mark.slow
SANDBOX_FIXTURES = ("compiled_template", "compiled_world")  # tests/worlds.py: tests using them must be slow

COMPILED = ("scatterkit", "sparsekit")
STAGING = Path("build/channels/staging")


@pytest.fixture(scope="module")
def compiled_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A sandbox world with the compiled recipes, after `build scatterkit sparsekit --jobs 2` (its JSON
    report in build/report.json)."""
    from conda_distro.distribution import load_distribution
    from conda_distro.engine.run import BuildOptions, run_build
    from conda_distro.sandbox import SandboxOptions, create_sandbox

    path = tmp_path_factory.mktemp("compiled") / "world"
    with FileLock(str(path.parent / "lock")):
        create_sandbox(SandboxOptions(path=path, compiled=True))
        run = run_build(load_distribution(path), BuildOptions(names=COMPILED, jobs=2))
        (path / "build" / "report.json").write_text(json.dumps(run.to_dict(), indent=1))
    yield path


@pytest.fixture()
def compiled_world(compiled_template: Path, tmp_path: Path) -> Path:
    from support.worlds import copy_world

    return copy_world(compiled_template, tmp_path / "world")


def _records(channel: Path) -> list:
    out = []
    for subdir in ("linux-64", "noarch"):
        if (channel / subdir / "repodata.json").is_file():
            out += RepoData.from_path(str(channel / subdir / "repodata.json")).into_repo_data(Channel(channel.as_uri()))
    return out


def test_upstream_holds_compilers_like_conda_forge(compiled_template: Path):
    names = {r.name.normalized: r for r in _records(compiled_template / "upstream")}
    assert {"gcc_linux-64", "gxx_linux-64", "sysroot_linux-64"} <= set(names)
    toolchain = Toolchain.detect()
    assert str(names["gxx_linux-64"].version) == toolchain.gcc_version
    assert ("cuda-nvcc_linux-64" in names) == bool(toolchain.nvcc)
    text = (compiled_template / "variants.yaml").read_text()
    assert ('"None", "' + toolchain.nvcc_version + '"' in text) if toolchain.nvcc else "no nvcc" in text


def test_compiled_recipes_build_per_minor_and_row_and_pass_on_their_own_minor(compiled_template: Path):
    report = json.loads((compiled_template / "build" / "report.json").read_text())
    toolchain = Toolchain.detect()
    builds = report["builds"]
    assert {b["name"] for b in builds} == set(COMPILED) and all(b["status"] == "built" for b in builds), builds
    assert len([b for b in builds if b["name"] == "scatterkit"]) == 3 * (2 if toolchain.nvcc else 1)
    assert len([b for b in builds if b["name"] == "sparsekit"]) == 3  # C++ only: no CUDA row
    tests = report["tests"]
    assert tests and all(t["status"] == "passed" for t in tests), tests
    per_artifact: dict[str, set[str]] = {}
    for t in tests:
        per_artifact.setdefault(t["artifact"], set()).add(t["pytorch"])
    # each build is tested on its own minor only (pytorch's run_export binds it), a cuda build on cuda only
    assert len(per_artifact) == len(builds) and all(len(r) == 1 for r in per_artifact.values()), per_artifact
    assert all(t["variant"] == "cuda" for t in tests if "-cuda_" in t["artifact"])
    assert any(t["variant"] == "cuda" for t in tests if "-cpu_" in t["artifact"])  # a cpu build runs with cuda pytorch


def test_an_extension_built_for_one_minor_fails_to_load_against_another(compiled_template: Path, tmp_path: Path):
    """scatterkit built against 2.5 installed (dependencies ignored) next to pytorch 2.6: the loader
    refuses it, as libtorch's ABI refuses an extension of another minor; next to 2.5 it loads."""
    from rattler import install

    upstream = _records(compiled_template / "upstream")
    scatter = [r for r in _records(compiled_template / STAGING) if r.name.normalized == "scatterkit"
               and str(r.build).startswith("cpu")]
    built_for = next(r for r in scatter if any(d.startswith("pytorch >=2.5") for d in r.depends))
    python = next(r for r in upstream if r.name.normalized == "python")
    for release, ok in (("2.6.0", False), ("2.5.1", True)):
        torch = next(r for r in upstream if r.name.normalized == "pytorch" and str(r.version) == release
                     and str(r.build).startswith("cpu"))
        prefix = tmp_path / release
        asyncio.run(install([python, torch, built_for], target_prefix=str(prefix), show_progress=False))
        run = subprocess.run([str(prefix / "bin" / "python"), "-c", "import scatterkit; print(scatterkit.BUILT_FOR)"],
                             capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"}, check=False)
        if ok:
            assert run.returncode == 0 and run.stdout.strip() == "v2_5", run.stderr
        else:
            assert run.returncode != 0 and "undefined symbol: torch_standin_sum_v2_5" in run.stderr, run.stderr


def test_the_gate_promotes_each_build_on_its_own_minors_evidence(compiled_world: Path, capsys):
    from conda_distro.cli import main

    code = main(["promote", "--root", str(compiled_world), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    promoted = {p["artifact"].split("/")[-1] for p in doc["promoted"]}
    staged = {f"{r.name.normalized}-{r.version}-{r.build}.conda" for r in _records(compiled_world / STAGING)}
    assert promoted == staged and len(promoted) == 3 * (2 if Toolchain.detect().nvcc else 1) + 3


def test_release_day_builds_the_compiled_packages_for_the_new_minor(compiled_world: Path, capsys):
    """A new minor upstream: the compiled packages have no pin to widen (status unchanged, "build for the
    new minor"); the sweep builds them for it and tests those builds on it."""
    from conda_distro.cli import main

    assert main(["sandbox", "publish-release", str(compiled_world), "2.7.0"]) == 0
    capsys.readouterr()
    code = main(["sweep", "--pytorch", "2.7.0", "--jobs", "2", "--root", str(compiled_world), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    pkgs = {p["name"]: p for p in doc["packages"]}
    for name in COMPILED:
        assert pkgs[name]["status"] == "unchanged" and pkgs[name]["action"] == "build for the new minor", pkgs[name]
        assert pkgs[name]["tests"] and all(t["pytorch"] == "2.7.0" and t["status"] == "passed" for t in pkgs[name]["tests"])
    assert {p["action"] for p in doc["packages"] if p["status"] == "bumped"} == {"widen the pins"}
    new = {str(r.build) for r in _records(compiled_world / STAGING) if any(d.startswith("pytorch >=2.7") for d in r.depends)}
    assert len(new) == (2 if Toolchain.detect().nvcc else 1) + 1
    shutil.rmtree(compiled_world / "build" / "sweep", ignore_errors=True)
