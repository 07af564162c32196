"""The sandbox world: `create_sandbox`, its upstream channel, cache and CLI.

The module fixture creates one world through the machine-wide cache ($CONDA_DISTRO_CACHE or
~/.cache/conda-distro): the first run on a machine builds python + 6 stand-ins (about 15 s; parallel
workers wait on the cache's file lock), later ones copy it. One test builds without the cache.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conda_distro.errors import ChannelError, UsageError
from conda_distro.sandbox import (
    DEFAULT_RELEASES,
    SandboxOptions,
    build_pytorch_standins,
    create_sandbox,
    default_cache_dir,
    pytorch_packages,
)
from conda_distro.util.rattler_env import SAFE_PATH, assert_no_colon, rattler_env

SANDBOX_FIXTURES = ("world",)  # tests/support/worlds.py: tests using it must be marked slow
RECIPES = {"tensorutils", "layerkit", "trainloop", "metrickit", "visionmetrics", "textmetrics", "evalsuite",
           "visionkit", "hookprofiler", "fastquant", "quantserve"}


# ------------------------------------------------------------------------------------------ helpers


def _repodata(channel: Path, subdir: str = "linux-64") -> dict:
    return json.loads((channel / subdir / "repodata.json").read_text())


def _records(channel: Path) -> dict[str, dict]:
    rd = _repodata(channel)
    return {**rd.get("packages", {}), **rd.get("packages.conda", {})}


def _solve(channel: Path, specs: list[str], cuda: bool):
    from rattler import BuildString, Gateway, GenericVirtualPackage, PackageName, Version, VirtualPackage, solve

    vps = [v.into_generic() for v in VirtualPackage.detect()]
    vps = [v for v in vps if v.name.normalized != "__cuda"]  # cpu-only view, even on a GPU machine
    if cuda:
        vps.append(GenericVirtualPackage(PackageName("__cuda"), Version("12.4"), BuildString("0")))
    recs = asyncio.run(solve([channel.as_uri()], specs, gateway=Gateway(), platforms=["linux-64", "noarch"],
                             virtual_packages=vps))
    return {r.name.normalized: r for r in recs}


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def cache_dir() -> Path:
    return default_cache_dir()


@pytest.fixture(scope="module")
def world(tmp_path_factory, cache_dir):
    """A sandbox made through the machine-wide cache (built there if missing)."""
    return create_sandbox(SandboxOptions(path=tmp_path_factory.mktemp("world") / "sbx", cache_dir=cache_dir))


# ------------------------------------------------------------------------------------------ fast tests


def test_rattler_env_sets_and_restores_path(monkeypatch):
    monkeypatch.setenv("PATH", "/somewhere/bin:/usr/bin")
    monkeypatch.delenv("CONDA_OVERRIDE_CUDA", raising=False)
    with rattler_env(cuda="12.4"):
        assert os.environ["PATH"] == SAFE_PATH
        assert os.environ["CONDA_OVERRIDE_CUDA"] == "12.4"
        with rattler_env():
            assert os.environ["PATH"] == SAFE_PATH
            assert os.environ["CONDA_OVERRIDE_CUDA"] == "12.4"
    assert os.environ["PATH"] == "/somewhere/bin:/usr/bin"
    assert "CONDA_OVERRIDE_CUDA" not in os.environ
    with pytest.raises(RuntimeError), rattler_env():
        raise RuntimeError("boom")
    assert os.environ["PATH"] == "/somewhere/bin:/usr/bin"


def test_colon_in_output_dir_is_refused(tmp_path):
    assert assert_no_colon(tmp_path) == tmp_path
    with pytest.raises(ChannelError) as e:
        assert_no_colon(tmp_path / "a:b")
    assert e.value.hint


def test_non_empty_dir_is_refused_without_force(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(UsageError) as e:
        create_sandbox(SandboxOptions(path=tmp_path, cache_dir=tmp_path / "never-used"))
    assert "--force" in e.value.hint
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]  # nothing written


def test_cli_non_empty_dir_exits_2(tmp_path, capsys):
    from conda_distro.cli import main

    (tmp_path / "keep.txt").write_text("mine")
    assert main(["sandbox", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not empty" in err and "hint:" in err


def test_colon_in_sandbox_dir_is_refused(tmp_path):
    with pytest.raises(ChannelError):
        create_sandbox(SandboxOptions(path=tmp_path / "a:b", cache_dir=tmp_path / "c"))
    assert not (tmp_path / "a:b").exists()


def test_data_files_are_packaged():
    """pyproject's package-data must cover the sandbox data (recipes, sources, stand-in torch)."""
    import tomllib

    from conda_distro.sandbox.upstream import data_dir

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    globs = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]["conda_distro"]
    pkg = data_dir().parents[1]  # .../conda_distro
    covered = {p for g in globs for p in pkg.glob(g) if p.is_file()}
    data = {p for p in data_dir().rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert data and data <= covered


def test_concurrent_cache_fill_builds_once(tmp_path, monkeypatch):
    """Two workers asking for the same cache entry at once: one builds, the other waits and reuses."""
    from types import SimpleNamespace

    import conda_distro.sandbox.cache as cache

    calls = []

    def fake_build(channel_dir, releases, host=None, toolchain=None):
        calls.append(channel_dir)
        time.sleep(0.5)
        for sub in ("linux-64", "noarch"):
            (Path(channel_dir) / sub).mkdir(parents=True)
            (Path(channel_dir) / sub / "repodata.json").write_text(json.dumps({"info": {"subdir": sub}, "packages": {}}))
        return SimpleNamespace(python=Path(channel_dir) / "linux-64" / "python-0-h0_0.conda", pytorch={})

    monkeypatch.setattr(cache, "build_upstream_channel", fake_build)
    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.ensure_upstream_cached(DEFAULT_RELEASES, cache_dir=tmp_path)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread is still waiting for the cache's lock"
    assert len(calls) == 1
    assert sorted(r.built for r in results) == [False, True]
    assert results[0].path == results[1].path and (results[0].path / "cache-entry.json").is_file()
    assert not list(results[0].path.parent.glob("*.tmp-*"))


def test_stand_in_upstream_entries_unused_for_long_and_killed_builders_folders_are_pruned(tmp_path, monkeypatch):
    """Each new set of inputs (releases, python, rattler-build) makes another stand-in upstream entry and a
    builder killed with -9 leaves its temp folder: using the cache removes entries unused for 14 days and the
    folders of builders that are gone (before, only the real world's cache was pruned)."""
    import os
    import time as _time
    from types import SimpleNamespace

    import conda_distro.sandbox.cache as cache

    def fake_build(channel_dir, releases, host=None, toolchain=None):
        for sub in ("linux-64", "noarch"):
            (Path(channel_dir) / sub).mkdir(parents=True)
            (Path(channel_dir) / sub / "repodata.json").write_text(json.dumps({"info": {"subdir": sub}, "packages": {}}))
        return SimpleNamespace(python=Path(channel_dir) / "linux-64" / "python-0-h0_0.conda", pytorch={})

    monkeypatch.setattr(cache, "build_upstream_channel", fake_build)
    root = tmp_path / cache.UPSTREAM_KIND
    for key in ("old", "recent"):
        (root / key).mkdir(parents=True)
        (root / key / cache.ENTRY_FILE).write_text("{}")
    month_ago = _time.time() - 30 * 86400
    os.utime(root / "old" / cache.ENTRY_FILE, (month_ago, month_ago))
    (root / "gone.tmp-999999999-abcd").mkdir()  # (no such process)
    entry = cache.ensure_upstream_cached(DEFAULT_RELEASES, cache_dir=tmp_path)
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == sorted([entry.path.name, "recent"])


def test_cache_key_depends_on_inputs():
    from conda_distro.sandbox.cache import cache_inputs, cache_key
    from conda_distro.sandbox.upstream import HostPython

    host = HostPython.current()
    a = cache_inputs(DEFAULT_RELEASES, host)
    assert {"python_version", "python_prefix", "rattler_build", "data_sha256", "releases"} <= set(a)
    assert cache_key(a) == cache_key(cache_inputs(DEFAULT_RELEASES, host))
    assert cache_key(a) != cache_key(cache_inputs(("2.5.1",), host))
    assert cache_key(a) != cache_key({**a, "python_prefix": "/elsewhere"})


# ------------------------------------------------------------------------------------------ slow tests


@pytest.mark.slow
def test_world_comes_from_a_complete_cache_entry(world, cache_dir):
    assert world.cache_entry is not None and world.cache_entry.parent.parent == cache_dir.absolute()
    entry = json.loads((world.cache_entry / "cache-entry.json").read_text())
    assert entry["releases"] == list(DEFAULT_RELEASES) and entry["python"] == world.python.name
    assert world.releases == DEFAULT_RELEASES
    assert set(world.recipes) == RECIPES
    assert not (world.upstream / "cache-entry.json").exists()


@pytest.mark.slow
def test_uncached_build_gives_the_same_packages(world, tmp_path):
    """use_cache=False builds everything (the cache-miss path) and yields the same filenames:
    build strings depend only on the recipes' variants, so a rebuilt world is interchangeable."""
    fresh = create_sandbox(SandboxOptions(path=tmp_path / "fresh", use_cache=False, git=False))
    assert not fresh.cache_hit and fresh.cache_entry is None and fresh.commit is None
    names = lambda ch: sorted(p.name for p in (ch / "linux-64").glob("*.conda"))  # noqa: E731
    assert names(fresh.upstream) == names(world.upstream)
    assert not (fresh.path / ".git").exists()
    assert sorted(p.name for p in fresh.upstream.iterdir()) == ["linux-64", "noarch"]


@pytest.mark.slow
def test_upstream_holds_python_and_six_standins(world):
    up = world.upstream
    files = sorted(p.name for p in (up / "linux-64").glob("*.conda") if p.name.startswith(("python-", "pytorch-")))
    assert len(files) == 7  # (besides the stand-in compilers: tests/test_compiled_sandbox.py)
    assert [f for f in files if f.startswith("python-")] == [world.python.name]
    recs = _records(up)
    torch = {fn: r for fn, r in recs.items() if r["name"] == "pytorch"}
    cpu = {fn: r for fn, r in torch.items() if "__cuda" not in [d.split()[0] for d in r["depends"]]}
    cuda = {fn: r for fn, r in torch.items() if fn not in cpu}
    assert len(cpu) == 3 and len(cuda) == 3
    assert sorted(r["version"] for r in cpu.values()) == sorted(r["version"] for r in cuda.values()) == list(DEFAULT_RELEASES)
    for r in cuda.values():
        assert "__cuda" in r["depends"]
        assert r["build"].startswith("cuda") and re.fullmatch(r"cuda\d+_h[0-9a-f]{7}_\d+", r["build"])
        twin = next(c for c in cpu.values() if c["version"] == r["version"])
        assert r["build_number"] > twin["build_number"]
        assert re.fullmatch(r"cpu_h[0-9a-f]{7}_\d+", twin["build"])
    for r in torch.values():
        major, minor, _ = r["version"].split(".")
        assert r["run_exports"] == {"weak": [f"pytorch >={r['version']},<{major}.{int(minor) + 1}.0a0"]}
        assert any(d.startswith("python >=3.") and "<" in d for d in r["depends"])  # python's run_export
        assert r["subdir"] == "linux-64" and not r.get("noarch")
    py = recs[world.python.name]
    assert py["run_exports"]["weak"][0].startswith("python >=")


@pytest.mark.slow
def test_standins_say_what_they_are(world):
    from rattler.package_streaming import PackageArchive

    async def read(f: Path):
        pkg = await PackageArchive.from_path(f)
        py = f"python{sys.version_info.major}.{sys.version_info.minor}"
        return (await pkg.about_json()).summary, await pkg.read_file(f"lib/{py}/site-packages/torch/_build_info.py")

    for (release, variant), f in world.pytorch.items():
        summary, build_info = asyncio.run(read(f))
        assert summary.startswith(f"STAND-IN for pytorch {release}, sandbox world only, not PyTorch")
        assert f"VERSION = '{release}'" in build_info.decode()
        assert ("CUDA = None" in build_info.decode()) is (variant == "cpu")


@pytest.mark.slow
def test_repodata_is_valid_and_matches_files(world):
    from rattler import Channel, RepoData

    for subdir in ("linux-64", "noarch"):
        path = world.upstream / subdir / "repodata.json"
        records = RepoData.from_path(str(path)).into_repo_data(Channel(world.upstream.as_uri()))
        assert _repodata(world.upstream, subdir)["info"]["subdir"] == subdir
        for rec in records:
            f = world.upstream / subdir / rec.file_name
            assert hashlib.sha256(f.read_bytes()).hexdigest() == rec.sha256.hex()
        assert not (world.upstream / subdir / "repodata.json.zst").exists()
        assert not (world.upstream / subdir / "shards").exists()
    linux = RepoData.from_path(str(world.upstream / "linux-64" / "repodata.json")).into_repo_data(Channel(world.upstream.as_uri()))
    assert len([r for r in linux if r.name.normalized in ("python", "pytorch")]) == 7


@pytest.mark.slow
def test_run_exports_json_in_conda_forge_format(world):
    for subdir in ("linux-64", "noarch"):
        doc = json.loads((world.upstream / subdir / "run_exports.json").read_text())
        assert doc["info"] == {"subdir": subdir}
        assert set(doc) == {"info", "packages", "packages.conda"}
    doc = json.loads((world.upstream / "linux-64" / "run_exports.json").read_text())
    for (release, _), f in world.pytorch.items():
        weak = doc["packages.conda"][f.name]["run_exports"]["weak"]
        assert weak == [f"pytorch >={release},<{'.'.join(release.split('.')[:1])}.{int(release.split('.')[1]) + 1}.0a0"]


@pytest.mark.slow
def test_solver_picks_cpu_or_cuda_build(world):
    up = world.upstream
    cpu = _solve(up, ["pytorch"], cuda=False)["pytorch"]
    assert str(cpu.version) == DEFAULT_RELEASES[-1] and str(cpu.build).startswith("cpu_")
    gpu = _solve(up, ["pytorch"], cuda=True)["pytorch"]
    assert str(gpu.version) == DEFAULT_RELEASES[-1] and str(gpu.build).startswith("cuda")
    pinned = _solve(up, ["pytorch 2.5.*"], cuda=False)
    assert str(pinned["pytorch"].version) == "2.5.1" and str(pinned["python"].version).count(".") == 2
    assert str(_solve(up, ["pytorch 2.5.*"], cuda=True)["pytorch"].build).startswith("cuda")
    from rattler.exceptions import SolverError

    with pytest.raises(SolverError):  # without __cuda only the cpu build is installable
        _solve(up, ["pytorch * cuda*"], cuda=False)


@pytest.mark.slow
def test_distro_yaml_loads(world):
    from conda_distro.config import load_config

    distro = load_config(world.path)
    cfg = distro.config
    assert cfg.name == "sandbox-distro"
    assert cfg.channels.upstream == ["./upstream"]
    assert cfg.channels.staging == "build/channels/staging" and cfg.channels.main == "build/channels/pytorch"
    assert cfg.pytorch.releases == list(DEFAULT_RELEASES)
    assert cfg.pytorch.variants == ["cpu", "cuda"] and cfg.platforms == ["linux-64"]
    assert distro.upstream_urls == [world.upstream.resolve().as_uri()]
    assert "sandbox" in world.distro_file.read_text().splitlines()[0].lower()


@pytest.mark.slow
def test_recipes_lint_clean(world):
    from conda_distro.distribution import load_distribution
    from conda_distro.lint import LintOptions, lint_distribution

    dist = load_distribution(world.path, strict=False)
    assert not dist.errors
    result = lint_distribution(dist, LintOptions())
    assert [(f.recipe, f.check, f.message) for f in result.findings] == []


@pytest.mark.slow
def test_recipe_roles(world):
    from conda_distro.distribution import load_distribution

    dist = load_distribution(world.path)
    r = dist.recipes
    run = {n: rec.dep_names("run") for n, rec in r.items()}
    assert "tensorutils" in run["layerkit"] and "layerkit" in run["trainloop"]  # chain
    assert "metrickit" in run["visionmetrics"] and "metrickit" in run["textmetrics"]  # diamond
    assert {"visionmetrics", "textmetrics"} <= run["evalsuite"]
    assert "fastquant" in run["quantserve"]
    assert r["visionkit"].lockstep and not any(rec.lockstep for n, rec in r.items() if n != "visionkit")
    for n, rec in r.items():
        assert rec.noarch == "python"
        assert "sandbox stand-in" in rec.about["summary"]
        assert (world.path / "recipes" / n / "src" / n / "__init__.py").is_file()
    hook = (world.path / "recipes" / "hookprofiler" / "src" / "hookprofiler" / "__init__.py").read_text()
    assert "legacy_autograd_hook" in hook


@pytest.mark.slow
def test_git_repo_has_one_commit(world):
    import git

    repo = git.Repo(world.path)
    commits = list(repo.iter_commits())
    assert len(commits) == 1 and commits[0].hexsha == world.commit
    assert commits[0].author.name == "conda-distro sandbox"
    assert commits[0].author.email == "sandbox@conda-distro.invalid"
    assert not repo.is_dirty(untracked_files=True)
    tracked = set(repo.git.ls_files().splitlines())
    assert {"distro.yaml", ".gitignore", "recipes/layerkit/recipe.yaml"} <= tracked
    assert "build/" in (world.path / ".gitignore").read_text().splitlines()
    assert repo.config_reader().get_value("user", "email") == "sandbox@conda-distro.invalid"


@pytest.mark.slow
def test_second_creation_reuses_the_cache(world, cache_dir, tmp_path):
    again = create_sandbox(SandboxOptions(path=tmp_path / "again", cache_dir=cache_dir))
    assert again.cache_hit and again.cache_entry == world.cache_entry
    assert again.python.name == world.python.name
    # package files are hardlinks of the cache entry's, metadata is a private copy
    cached = world.cache_entry / "linux-64" / again.python.name
    assert os.stat(again.python).st_ino == os.stat(cached).st_ino
    meta = again.upstream / "linux-64" / "repodata.json"
    assert os.stat(meta).st_ino != os.stat(world.cache_entry / "linux-64" / "repodata.json").st_ino


@pytest.mark.slow
def test_force_overwrites(world, cache_dir, tmp_path):
    target = tmp_path / "forced"
    target.mkdir()
    (target / "old.txt").write_text("old")
    when = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)
    res = create_sandbox(SandboxOptions(path=target, cache_dir=cache_dir, force=True, git_date=when))
    assert res.cache_hit and not (target / "old.txt").exists()
    assert (target / "distro.yaml").is_file()
    import git

    commit = git.Repo(target).head.commit
    assert commit.authored_datetime == when and commit.committed_datetime == when


@pytest.mark.slow
def test_cli_json(world, cache_dir, tmp_path, monkeypatch, capsys):
    from conda_distro.cli import main

    monkeypatch.setenv("CONDA_DISTRO_CACHE", str(cache_dir))
    assert main(["sandbox", str(tmp_path / "cli"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["path"] == str(tmp_path / "cli")
    assert doc["upstream"] == str(tmp_path / "cli" / "upstream")
    assert set(doc["recipes"]) == RECIPES
    assert doc["cache_hit"] is True


@pytest.mark.slow
def test_build_pytorch_standins_publishes_a_new_release(world, tmp_path):
    up = tmp_path / "upstream"
    shutil.copytree(world.upstream, up)
    added = build_pytorch_standins(up, ["2.7.0"])
    assert sorted(p.name.split("-")[2].split("_")[0] for p in added) == ["cpu", "cuda128"]
    assert set(pytorch_packages(up)) == {(r, v) for r in (*DEFAULT_RELEASES, "2.7.0") for v in ("cpu", "cuda")}
    assert str(_solve(up, ["pytorch"], cuda=False)["pytorch"].version) == "2.7.0"
    doc = json.loads((up / "linux-64" / "run_exports.json").read_text())
    assert {doc["packages.conda"][p.name]["run_exports"]["weak"][0] for p in added} == {"pytorch >=2.7.0,<2.8.0a0"}
    assert build_pytorch_standins(up, ["2.7.0"]) == []  # idempotent
    # the cache entry the world came from is untouched
    assert not any(r["version"] == "2.7.0" for r in _records(world.cache_entry).values())


def _pyc_valid(pyc: Path, source: Path) -> bool:
    """Whether the interpreter accepts ``pyc`` for ``source`` as it is on disk: its magic number, and the
    source's hash (hash-based .pyc) or mtime and size (timestamp .pyc) in the header (PEP 552)."""
    import importlib.util

    head, st = pyc.read_bytes()[:16], source.stat()
    if head[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(head[4:8], "little")
    if flags & 1:
        return head[8:16] == importlib.util.source_hash(source.read_bytes())
    return (int.from_bytes(head[8:12], "little"), int.from_bytes(head[12:16], "little")) == \
        (int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)


@pytest.mark.slow
def test_installed_python_and_torch_ship_valid_bytecode(world, tmp_path):
    """The repackaged python ships the commonly imported part of its stdlib byte-compiled (checked-hash)
    and the stand-in torch its .pyc, valid once installed, so a test interpreter imports them without
    compiling or writing anything."""
    import subprocess

    from rattler import install

    recs = _solve(world.upstream, ["python", "pytorch 2.6.*"], cuda=False)
    prefix = tmp_path / "env"
    asyncio.run(install(list(recs.values()), target_prefix=prefix))
    stdlib = prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    tag = sys.implementation.cache_tag
    sources = [p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts]
    compiled = {p: p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc" for p in sources}
    shipped = {p: c for p, c in compiled.items() if c.is_file()}
    # what an interpreter start and common imports load (about 180 modules), not the whole stdlib
    assert 150 < len(shipped) < len(sources) and (stdlib / "typing.py") in shipped
    invalid = [c for p, c in shipped.items() if not _pyc_valid(c, p)]
    assert not invalid
    assert not any(str(prefix) in p.read_text(errors="replace") for p in shipped)  # rewritten at install
    assert not list(stdlib.glob("*/test"))  # the stdlib's own test suites are left out
    torch_py = sorted((stdlib / "site-packages" / "torch").glob("*.py"))
    assert torch_py and all(_pyc_valid(p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc", p) for p in torch_py)

    before = {p: p.stat().st_mtime_ns for p in prefix.rglob("*.pyc")}
    env = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": str(tmp_path)}  # bytecode writing allowed
    proc = subprocess.run([str(prefix / "bin" / "python"), "-v", "-c",
                           "import torch, torch.nn, json, re, contextlib, unittest, asyncio, subprocess, typing, "
                           "dataclasses, logging, argparse, pathlib, tempfile"],
                          capture_output=True, text=True, env=env, timeout=120, check=True)
    from_source = re.findall(r"^# code object from (\S+\.py)$", proc.stderr, re.M)
    assert not from_source, from_source[:5]
    assert "# created" not in proc.stderr
    assert {p: p.stat().st_mtime_ns for p in prefix.rglob("*.pyc")} == before


@pytest.mark.slow
@pytest.mark.parametrize(("name", "release", "passes"), [
    ("hookprofiler", "2.5.1", True),
    ("hookprofiler", "2.6.0", False),  # calls an API removed in 2.6.0
    ("fastquant", "2.4.1", False),  # a real bug in the package
    ("visionkit", "2.5.1", True),  # lockstep: 2.5 only
    ("visionkit", "2.6.0", False),
])
def test_recipe_behaviour_against_a_release(world, tmp_path, name, release, passes):
    """Build one sandbox recipe and test its artifact in an env forced to one stand-in release."""
    from rattler_build import Stage0Recipe, VariantConfig

    from conda_distro.util.rattler_env import index_channel, native_tool_config, run_build, run_tests

    staging, pin = tmp_path / "staging", tmp_path / f"pin-{release}"
    (pin / "linux-64").mkdir(parents=True)
    shutil.copy(world.pytorch[(release, "cpu")], pin / "linux-64")
    index_channel(pin)
    recipe = Stage0Recipe.from_file(str(world.path / "recipes" / name / "recipe.yaml"))
    (variant,) = recipe.render(VariantConfig())
    built = run_build(variant, output_dir=staging, channels=[staging, world.upstream],
                      tool_config=native_tool_config(test_strategy="skip"))
    results = run_tests(built.packages[0], channels=[pin, staging, world.upstream])
    assert all(r.success for r in results) is passes, [line for r in results for line in r.output][-5:]


# ---------------------------------------------------------------------------------------------
# `conda-distro sandbox publish-release DIR VERSION`: the sandbox's "PyTorch X.Y.Z is out"


@pytest.mark.slow
def test_cli_publish_release_adds_a_stand_in_and_the_sweep_accepts_it(sandbox_world: Path, capsys):
    from support.helpers import run_cli

    before = set(pytorch_packages(sandbox_world / "upstream"))
    code, out, err = run_cli(capsys, "sandbox", "publish-release", str(sandbox_world), "2.7.0", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ok"] is True and doc["version"] == "2.7.0"
    assert sorted(a.split("/")[1].split("-")[2].split("_")[0] for a in doc["added"]) == ["cpu", "cuda128"]
    assert set(pytorch_packages(sandbox_world / "upstream")) == before | {("2.7.0", "cpu"), ("2.7.0", "cuda")}
    # the release is now "published upstream": the sweep's dry run accepts it
    code, out, err = run_cli(capsys, "sweep", "--pytorch", "2.7.0", "--dry-run", "--root", str(sandbox_world))
    assert code == 0, err
    assert out.startswith("dry run: nothing edited, built or committed")
    # publishing it again is refused, nothing written
    listing = sorted(p.name for p in (sandbox_world / "upstream" / "linux-64").iterdir())
    code, out, err = run_cli(capsys, "sandbox", "publish-release", str(sandbox_world), "2.7.0")
    assert code == 2 and out == "" and "pytorch 2.7.0 (cpu, cuda) is already published" in err and "hint:" in err
    assert sorted(p.name for p in (sandbox_world / "upstream" / "linux-64").iterdir()) == listing


@pytest.mark.slow
@pytest.mark.parametrize("case", ["not a world", "bad version", "missing folder"])
def test_cli_publish_release_refuses_bad_input(tmp_path: Path, capsys, case, sandbox_world: Path):
    from support.helpers import run_cli

    target, version = sandbox_world, "2.7.0"
    if case == "not a world":
        target = tmp_path / "plain"
        target.mkdir()
        (target / "README.md").write_text("just a folder\n")
    elif case == "bad version":
        version = "2.7"
    else:
        target = tmp_path / "nowhere"
    listing = sorted(p.name for p in (sandbox_world / "upstream" / "linux-64").iterdir())
    code, out, err = run_cli(capsys, "sandbox", "publish-release", str(target), version)
    assert code == 2 and out == ""
    if case == "bad version":
        assert "field 'VERSION'" in err and "'2.7' is not a release version" in err
    else:
        assert "not a sandbox world" in err and "conda-distro sandbox DIR" in err
    assert sorted(p.name for p in (sandbox_world / "upstream" / "linux-64").iterdir()) == listing
    if case == "not a world":
        assert sorted(p.name for p in target.iterdir()) == ["README.md"]


# ---------------------------------------------------------------------------------------------
# `conda-distro sandbox publish-package DIR NAME VERSION --source FOLDER`: conda-forge published a package


@pytest.mark.slow
def test_cli_publish_package_then_a_second_build_of_the_version_is_the_one_installed(sandbox_world: Path, capsys,
                                                                                      tmp_path: Path):
    from support.helpers import run_cli

    src = tmp_path / "src" / "arraylib"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("def old_api(x):\n    return list(x)\n")
    argv = ["sandbox", "publish-package", str(sandbox_world), "arraylib", "1.0.0", "--source", str(src.parent)]
    code, out, err = run_cli(capsys, *argv, "--depends", "pytorch >=2.4,<3", "--format", "json")
    assert code == 0, err
    first = json.loads(out)["added"]
    assert len(first) == 1 and first[0].startswith("noarch/arraylib-1.0.0-h") and first[0].endswith("_0.conda")
    solved = _solve(sandbox_world / "upstream", ["arraylib"], cuda=False)
    assert solved["arraylib"].file_name == first[0].split("/")[1] and "pytorch" in solved  # its depends came along
    # the same files again: the same file name, refused, nothing written
    listing = sorted(p.name for p in (sandbox_world / "upstream" / "noarch").iterdir())
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == "" and "is already published" in err and "hint:" in err
    assert sorted(p.name for p in (sandbox_world / "upstream" / "noarch").iterdir()) == listing
    # a second build of 1.0.0 (other files, same build number): another build string, a newer timestamp, and
    # the solver takes it
    (src / "__init__.py").write_text("def old_api(x):\n    return list(x)\n\nREBUILT = True\n")
    code, out, err = run_cli(capsys, *argv, "--format", "json")
    assert code == 0, err
    second = json.loads(out)["added"]
    assert second != first and second[0].endswith("_0.conda")
    records = json.loads((sandbox_world / "upstream" / "noarch" / "repodata.json").read_text())["packages.conda"]
    stamp = {fn: r["timestamp"] for fn, r in records.items() if r["name"] == "arraylib"}
    assert stamp[second[0].split("/")[1]] > stamp[first[0].split("/")[1]]
    assert _solve(sandbox_world / "upstream", ["arraylib"], cuda=False)["arraylib"].file_name == second[0].split("/")[1]


@pytest.mark.slow
def test_cli_publish_package_killed_before_its_index_is_published_by_the_rerun(sandbox_world: Path, capsys,
                                                                               tmp_path: Path):
    """A publish killed mid-copy, before its re-index, leaves a truncated package file its index does not name.
    Before, every later index of the channel died on it (a panic, exit 1) and the rerun refused it as "already
    published"; now an index names the unreadable file (exit 2, what to do), and the rerun publishes it."""
    from support.helpers import run_cli

    from conda_distro.errors import ChannelError
    from conda_distro.sandbox.upstream import reindex

    src = tmp_path / "src" / "arraylib"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("X = 1\n")
    argv = ["sandbox", "publish-package", str(sandbox_world), "arraylib", "1.0.0", "--source", str(src.parent)]
    code, out, err = run_cli(capsys, *argv, "--format", "json")
    assert code == 0, err
    [added] = json.loads(out)["added"]
    upstream = sandbox_world / "upstream"
    whole = (upstream / added).read_bytes()
    (upstream / added).unlink()
    reindex(upstream)  # (the channel as it was before that publish)
    (upstream / added).write_bytes(whole[: len(whole) // 2])  # (what a kill mid-copy left)
    with pytest.raises(ChannelError, match="is not a readable package") as info:
        reindex(upstream)
    assert Path(str(info.value.path)).name == Path(added).name and "move" in (info.value.hint or "")
    code, out, err = run_cli(capsys, *argv, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["added"] == [added] and len((upstream / added).read_bytes()) > len(whole) // 2
    assert _solve(upstream, ["arraylib"], cuda=False)["arraylib"].file_name == Path(added).name


@pytest.mark.slow
@pytest.mark.parametrize(("args", "field"), [
    (["python", "1.0"], "NAME"), (["pytorch", "2.9.0"], "NAME"), (["Bad Name", "1.0"], "NAME"),
    (["arraylib", "1 .0"], "VERSION"), (["arraylib", "1.0", "--depends", "arraylib 1.0"], "--depends"),
    (["arraylib", "1.0", "--build-number", "-1"], "--build-number"), (["arraylib", "1.0", "empty"], "--source"),
])
def test_cli_publish_package_refuses_bad_input(sandbox_world: Path, capsys, tmp_path: Path, args, field):
    from support.helpers import run_cli

    src = tmp_path / "src"
    (src / "m").mkdir(parents=True)
    if args[-1] == "empty":
        args = args[:-1]
    else:
        (src / "m" / "__init__.py").write_text("X = 1\n")
    listing = sorted(p.name for p in (sandbox_world / "upstream").rglob("*"))
    code, out, err = run_cli(capsys, "sandbox", "publish-package", str(sandbox_world), *args, "--source", str(src))
    assert code == 2 and out == "" and f"field '{field}'" in err and "hint:" in err, err
    assert sorted(p.name for p in (sandbox_world / "upstream").rglob("*")) == listing


def test_sandbox_dir_still_creates_a_world_and_lists_publish_release(capsys):
    from support.helpers import run_cli

    code, out, _ = run_cli(capsys, "sandbox", "--help")
    assert code == 0 and "publish-release" in out and "publish-package" in out and "create" in out
    code, out, _ = run_cli(capsys, "sandbox", "publish-release", "--help")
    assert code == 0 and "DIR" in out and "VERSION" in out
