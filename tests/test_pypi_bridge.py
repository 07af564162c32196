"""The PyPI bridge (conda_distro.upstream) and the pieces of `sandbox --real` that run without torch.

Real wheels from PyPI (a pure one and a platform one, downloaded once into a cache shared by runs),
converted, indexed with rattler, solved and installed with rattler, and imported by the installed
python. Names, markers and extras are checked on real ``packaging`` requirement strings.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from conda_distro.errors import BridgeError
from conda_distro.upstream import BridgeOptions, TargetPython, TorchBuild, bridge, conda_name, pypi_name
from conda_distro.upstream.convert import conda_depends, public_version
from conda_distro.upstream.pypi import cuda_tag, lockstep_requirement
from conda_distro.upstream.resolve import Wheel, resolve

PY = TargetPython("3.11.7")
# fixtures that take the sandbox upstream channel from its cache (built there on a miss): tests using them
# are marked slow (tests/support/worlds.py)
SANDBOX_FIXTURES = ("python_channel", "bridged")
# small real wheels: jinja2 (pure python), markupsafe (a cp311 manylinux wheel with a C extension) and
# psutil (an abi3 wheel: rattler does not relocate CEP-20 packages, so it must land in lib/python3.11)
PURE, PLATFORM, ABI3 = "jinja2==3.1.6", "markupsafe==3.0.3", "psutil==7.2.2"


def _wheel(name: str, *requires: str, filename: str | None = None, requires_python: str | None = None) -> Wheel:
    return Wheel(name, "1.0", filename or f"{name}-1.0-py3-none-any.whl", "", None, tuple(requires), requires_python)


# ------------------------------------------------------------------------------------- names


@pytest.mark.parametrize("pypi,conda", [
    ("torch", "pytorch"), ("huggingface-hub", "huggingface_hub"), ("huggingface_hub", "huggingface_hub"),
    ("typing-extensions", "typing_extensions"), ("matplotlib", "matplotlib-base"), ("PyYAML", "pyyaml"),
    ("Jinja2", "jinja2"), ("scikit_learn", "scikit-learn"), ("pyro.ppl", "pyro-ppl"), ("msgpack", "msgpack-python"),
])
def test_conda_names(pypi, conda):
    assert conda_name(pypi) == conda


@pytest.mark.parametrize("conda,pypi", [("pytorch", "torch"), ("huggingface_hub", "huggingface-hub"),
                                        ("matplotlib-base", "matplotlib"), ("numpy", "numpy")])
def test_pypi_names(conda, pypi):
    assert pypi_name(conda) == pypi


# ------------------------------------------------------------------------------------- depends


def test_markers_are_evaluated_for_the_target_python_and_linux():
    w = _wheel("demo", "tomli>=1.1; python_version < '3.11'", "typing-extensions>=4.6; python_version < '3.13'",
               "colorama; sys_platform == 'win32'", "nvidia-nccl-cu13==2.28.9; platform_system == 'Linux' and platform_machine == 'x86_64'",
               "pytest; extra == 'test'", "huggingface-hub>=0.21,<2", requires_python=">=3.9")
    deps = conda_depends(w, PY)
    assert deps == ["python >=3.9", "typing_extensions >=4.6", "nvidia-nccl-cu13 ==2.28.9", "huggingface_hub <2,>=0.21"]
    # the same wheel for python 3.10 keeps tomli
    assert "tomli >=1.1" in conda_depends(w, TargetPython("3.10.13"))


def test_extras_of_a_dependency_are_expanded_through_the_closure():
    toolkit = Wheel("cuda-toolkit", "13.2.2", "cuda_toolkit-13.2.2-py2.py3-none-any.whl", "", None,
                    ("nvidia-cublas==13.1.*; extra == 'cublas'", "nvidia-cufft==12.*; extra == 'cufft'",
                     "nvidia-cuda-runtime==13.2.*; extra == 'cudart'"))
    torch = _wheel("torch", "cuda-toolkit[cublas,cudart]==13.2.2; platform_system == 'Linux'", "filelock",
                   filename="torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl")
    deps = conda_depends(torch, PY, {"cuda-toolkit": toolkit})
    assert deps == ["cuda-toolkit ==13.2.2", "nvidia-cublas 13.1.*", "nvidia-cuda-runtime 13.2.*", "filelock"]
    assert not any(d.startswith("nvidia-cufft") for d in deps)  # an extra nobody asked for


def test_local_labels_leave_the_version():
    assert public_version("2.13.0+cpu") == ("2.13.0", "cpu")
    assert public_version("2.15.0") == ("2.15.0", "")


def test_torch_builds_and_lockstep_requirements():
    assert TorchBuild("2.13.0", "cpu").pip_requirement == "torch==2.13.0+cpu"
    assert TorchBuild("2.15.0", "cuda").pip_requirement == "torch===2.15.0"  # exactly: not 2.15.0+cpu
    assert lockstep_requirement("torchvision", "2.15.0") == "torchvision==0.30.*"
    with pytest.raises(BridgeError, match="unknown pytorch variant"):
        TorchBuild("2.13.0", "rocm")
    with pytest.raises(BridgeError, match="not a release"):
        TorchBuild("2.13", "cpu")


def test_cuda_tag_reads_the_wheels_version_file(tmp_path):
    cuda = tmp_path / "torch-9.9.9-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(cuda, "w") as zf:
        zf.writestr("torch/version.py", "__version__ = '9.9.9+cu130'\ncuda: Optional[str] = '13.0'\n")
    cpu = tmp_path / "torch-9.9.9+cpu-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(cpu, "w") as zf:
        zf.writestr("torch/version.py", "__version__ = '9.9.9+cpu'\ncuda: Optional[str] = None\n")
    assert cuda_tag(cuda) == "130"
    assert cuda_tag(cpu) is None


# ------------------------------------------------------------------------------------- real wheels


@pytest.fixture(scope="module")
def wheel_cache(tmp_path_factory):
    from conda_distro.util.cachedir import default_cache_dir

    d = default_cache_dir() / "pypi" / "wheels"  # shared with `sandbox --real`: downloaded once
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="module")
def python_channel(tmp_path_factory):
    """A channel holding the host python, taken from the sandbox's upstream cache entry."""
    from conda_distro.sandbox import DEFAULT_RELEASES, ensure_upstream_cached

    entry = ensure_upstream_cached(DEFAULT_RELEASES).path
    ch = tmp_path_factory.mktemp("bridge") / "channel"
    (ch / "linux-64").mkdir(parents=True)
    py = next((entry / "linux-64").glob("python-*.conda"))
    (ch / "linux-64" / py.name).write_bytes(py.read_bytes())
    return ch


@pytest.fixture(scope="module")
def bridged(python_channel, wheel_cache):
    result = bridge(BridgeOptions(channel=python_channel, wheel_cache=wheel_cache, python=PY,
                                  requirements=(PURE, PLATFORM, ABI3), exclude=frozenset({"not-there"})))
    return result


def _repodata(ch: Path, subdir: str) -> dict:
    return json.loads((ch / subdir / "repodata.json").read_text())["packages.conda"]


def test_resolve_reports_the_closure_with_metadata():
    closure = resolve([PURE])
    names = {w.name: w for w in closure.wheels}
    assert set(names) == {"jinja2", "markupsafe"}
    assert names["jinja2"].requested and not names["markupsafe"].requested
    assert any(r.startswith("MarkupSafe") for r in names["jinja2"].requires_dist)
    assert names["jinja2"].sha256 and len(names["jinja2"].sha256) == 64


@pytest.mark.slow
def test_bridge_writes_noarch_and_platform_packages(bridged):
    ch = bridged.channel
    noarch, linux = _repodata(ch, "noarch"), _repodata(ch, "linux-64")
    jinja = next(r for r in noarch.values() if r["name"] == "jinja2")
    assert jinja["version"] == "3.1.6" and jinja.get("noarch") == "python"
    assert "markupsafe >=2.0" in jinja["depends"]
    ms = next(r for r in linux.values() if r["name"] == "markupsafe")
    assert ms["subdir"] == "linux-64"
    assert "python_abi 3.11.* *_cp311" in ms["depends"] and "python >=3.11,<3.12.0a0" in ms["depends"]
    abi = next(r for r in linux.values() if r["name"] == "python_abi")
    assert abi["version"] == "3.11"
    ps = next(r for r in linux.values() if r["name"] == "psutil")
    assert ps["build"] == "py311_0" and "noarch" not in ps and "python_abi 3.11.* *_cp311" in ps["depends"]
    assert bridged.wheels == 3 and bridged.pytorch == {} and bridged.not_converted == ()


@pytest.mark.slow
def test_bridged_packages_install_and_import(bridged, tmp_path):
    """Solve and install with rattler, as conda would, then import the C extension and the pure package."""
    from rattler import Channel, Subdir, VirtualPackage, install, solve

    async def go():
        recs = await solve([Channel(bridged.channel.as_uri())], ["jinja2", "psutil", "python 3.11.*"],
                           platforms=[Subdir("linux-64"), Subdir("noarch")],
                           virtual_packages=[v.into_generic() for v in VirtualPackage.detect()])
        await install(recs, target_prefix=str(tmp_path / "env"), show_progress=False)
        return recs

    recs = asyncio.run(go())
    assert {r.name.normalized for r in recs} >= {"jinja2", "markupsafe", "psutil", "python", "python_abi"}
    out = subprocess.run([str(tmp_path / "env" / "bin" / "python"), "-c",
                          "import jinja2, psutil, markupsafe._speedups as s; assert psutil.cpu_count() >= 1; "
                          "print(jinja2.__version__, s.__file__)"], timeout=120,
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith("3.1.6 ") and str(tmp_path / "env" / "lib" / "python3.11" / "site-packages") in out
    # the platform packages ship checked-hash .pyc the interpreter takes: importing them compiles and writes
    # nothing (bytecode writing allowed); the noarch jinja2 ships none
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    shipped = sorted(site.glob("psutil/__pycache__/*.pyc"))
    assert shipped and all(p.read_bytes()[4:8] == b"\x03\0\0\0" for p in shipped)  # PEP 552: checked hash
    assert not list(site.glob("jinja2/__pycache__/*.pyc"))
    verbose = subprocess.run([str(tmp_path / "env" / "bin" / "python"), "-v", "-c", "import psutil, markupsafe"],
                             timeout=120, capture_output=True, text=True, check=True,
                             env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}).stderr
    assert not re.findall(r"^# code object from \S+/site-packages/\S+\.py$", verbose, re.M)
    assert sorted(site.glob("psutil/__pycache__/*.pyc")) == shipped and "# created" not in verbose
    # the installed METADATA is the wheel's own, byte for byte (whl2conda folds long lines; pip cannot read those)
    from conda_distro.util.cachedir import default_cache_dir

    wheel = next((default_cache_dir() / "pypi" / "wheels").glob("psutil-7.2.2-*.whl"))
    installed = tmp_path / "env" / "lib" / "python3.11" / "site-packages" / "psutil-7.2.2.dist-info" / "METADATA"
    assert installed.read_bytes() == zipfile.ZipFile(wheel).read("psutil-7.2.2.dist-info/METADATA")


@pytest.mark.slow
def test_excluded_names_are_not_converted(python_channel, wheel_cache, tmp_path):
    ch = tmp_path / "ch"
    res = bridge(BridgeOptions(channel=ch, wheel_cache=wheel_cache, python=PY, requirements=(PURE,),
                               exclude=frozenset({"markupsafe"})))
    assert res.excluded == ("markupsafe",)
    assert not any(r["name"] == "markupsafe" for r in _repodata(ch, "linux-64").values())


def test_an_unknown_project_is_a_bridge_error(tmp_path, wheel_cache):
    with pytest.raises(BridgeError, match="pip could not resolve") as info:
        bridge(BridgeOptions(channel=tmp_path / "ch", wheel_cache=wheel_cache, python=PY,
                             requirements=("conda-distro-no-such-project-4242==1.0",)))
    assert info.value.hint
    assert not (tmp_path / "ch").exists()


# ------------------------------------------------------------------------------------- sandbox --real


def _lock_of(sha: str, *, sources: list | None = None):
    from conda_distro.upstream.lock import RealLock

    fn = "einops-0.8.1-py3-none-any.whl"
    return RealLock.model_validate({
        "schema_version": 1, "python": "3.11", "platform": "linux-64",
        "closures": [{"release": "2.13.0", "variant": "cpu", "request": ["torch==2.13.0+cpu"],
                      "wheels": {"einops": fn}}],
        "wheels": {fn: {"name": "einops", "version": "0.8.1", "sha256": sha}}, "sources": sources or []})


def test_the_real_upstream_cache_is_keyed_by_the_lock(tmp_path, monkeypatch):
    """`sandbox --real`'s cache entry is keyed by the lock's content for the builds made: the same lock is a
    hit, a changed file in it builds a new entry, a changed sdist (not part of the channel) does not; the
    entry's marker is one typed document (the bridge's summary), and an unreadable one is a clear error."""
    import conda_distro.sandbox.real as real
    from conda_distro.sandbox.upstream import HostPython
    from conda_distro.upstream import BridgeResult

    made = []

    def fake_build(tmp, req, say):
        made.append(req.lock)
        (tmp / "noarch").mkdir(parents=True)
        return BridgeResult(tmp, (), {}, ("kornia",), (("2.13.0", "cpu", "no matching distribution"),),
                            (("odd-1.0-py3-none-any.whl", "no METADATA"),), 3, 1234, 2, 1.0, 2.0, 3.0, 0.5).summary()

    monkeypatch.setattr(real, "_build_upstream", fake_build)
    needs = real.RealWorldNeeds(("einops>=0.8",), frozenset({"kornia"}), ())
    builds = (TorchBuild("2.13.0", "cpu"),)
    host = HostPython.current()
    lock = _lock_of("a" * 64)

    def ensure(lk):
        return real.ensure_real_upstream(real.UpstreamRequest(lk, needs, builds, host, tmp_path), lambda m: None)

    entry, first, built = ensure(lock)
    assert built and len(made) == 1
    assert [(u.release, u.variant, u.why) for u in first.unavailable] == [("2.13.0", "cpu", "no matching distribution")]
    assert [(n.wheel, n.why) for n in first.not_converted] == [("odd-1.0-py3-none-any.whl", "no METADATA")]
    doc = json.loads((entry / real.ENTRY_FILE).read_text())
    assert doc["lock"] == lock.channel_key(lock.closures, needs.exclude) and doc["bridge"]["seconds"] == {
        "resolve": 1.0, "download": 2.0, "convert": 3.0, "index": 0.5} and doc["bridge"]["download_passes"] == 2
    again, second, built = ensure(lock)
    assert (again, second, built) == (entry, first, False) and len(made) == 1
    src = [{"recipe": "einops", "name": "einops", "version": "0.8.2", "filename": "einops-0.8.2.tar.gz",
            "sha256": "b" * 64, "url": "https://pypi.org/packages/source/e/einops/einops-0.8.2.tar.gz"}]
    assert ensure(_lock_of("a" * 64, sources=src))[0] == entry and len(made) == 1
    other, _, built = ensure(_lock_of("c" * 64))
    assert built and other != entry and len(made) == 2
    data = tmp_path / "data"  # the recipe the host python is repackaged with is part of the key
    shutil.copytree(real.data_dir() / "upstream" / "python", data / "upstream" / "python")
    monkeypatch.setattr(real, "data_dir", lambda: data)
    assert ensure(lock)[0] == entry and len(made) == 2
    with (data / "upstream" / "python" / "recipe.yaml").open("a") as f:
        f.write("# changed\n")
    changed, _, built = ensure(lock)
    assert built and changed not in (entry, other) and len(made) == 3
    monkeypatch.undo()
    monkeypatch.setattr(real, "_build_upstream", fake_build)
    (entry / real.ENTRY_FILE).write_text(json.dumps({**doc, "bridge": {"packages": []}}))  # no channel
    with pytest.raises(BridgeError, match="cache entry cannot be read") as exc:
        ensure(lock)
    assert str(entry) in exc.value.hint


def test_real_upstream_entries_left_unused_are_removed(tmp_path):
    """Each refreshed lock makes a new (6 GB) entry: entries unused for a while go, the one in use stays, and so
    does one being built (its builder holds the lock)."""
    import os
    import time as _time

    from filelock import FileLock

    from conda_distro.sandbox.cache import ENTRY_FILE, prune_entries

    root = tmp_path / "real-upstream"
    for key in ("old", "busy", "current", "recent"):
        (root / key).mkdir(parents=True)
        (root / key / ENTRY_FILE).write_text("{}")
    month_ago = _time.time() - 30 * 86400
    for key in ("old", "busy", "current"):
        os.utime(root / key / ENTRY_FILE, (month_ago, month_ago))
    (root / "gone.tmp-999999999-abcd").mkdir()  # a builder killed mid-way (no such process)
    with FileLock(str(root / "busy.lock")):
        removed = prune_entries("real-upstream", keep=["current"], max_idle_days=14, cache_dir=tmp_path)
    assert sorted(p.name for p in removed) == ["gone.tmp-999999999-abcd", "old"]
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ["busy", "current", "recent"]


def test_world_distro_yaml_points_at_local_channels():
    from conda_distro.sandbox.real import _distro_yaml

    text = ("name: d\nchannels:\n  upstream: [conda-forge]\n  staging: anaconda://pytorch-staging\n"
            "  main: anaconda://pytorch\npytorch:\n  name: pytorch\n")
    out = _distro_yaml(text)
    assert "conda-forge" not in out and "anaconda://" not in out
    assert "  upstream: [./upstream, ./toolchain]" in out and "  staging: build/channels/staging\n" in out
    assert out.endswith("pytorch:\n  name: pytorch\n")


@pytest.mark.parametrize("name,version,pip", [
    ("numpy", ">=1.17,<3", "numpy>=1.17,<3"), ("huggingface_hub", "<2,>=0.21", "huggingface-hub<2,>=0.21"),
    ("pytorch", ">=2.13,<2.16.0a0", "torch>=2.13,<2.16.0"), ("scipy", "1.6.*", "scipy==1.6.*"),
    ("pyyaml", None, "pyyaml"), ("six", ">=1|<0.5", "six"),
])
def test_recipe_requirements_become_pip_requirements(name, version, pip):
    from conda_distro.sandbox.real import _pip_spec

    assert _pip_spec(name, version) == pip


def test_a_recipe_url_is_pointed_at_the_cached_file():
    from conda_distro.sandbox.sources import point_recipe_at

    text = "source:\n  url: https://pypi.org/packages/source/e/einops/einops-${{ version }}.tar.gz\n  sha256: ab\n"
    out = point_recipe_at(text, 2, "file:///c/einops-0.8.2.tar.gz")
    assert out.splitlines()[1].startswith("  url: file:///c/einops-0.8.2.tar.gz  # sandbox --real: the cached file of https://")
    assert out.splitlines()[2] == "  sha256: ab"
    with pytest.raises(BridgeError, match="not a `url:` line"):
        point_recipe_at(text, 3, "file:///x")


@pytest.mark.slow
def test_a_source_whose_sha256_differs_is_refused(tmp_path):
    from conda_distro.sandbox.sources import SourceRequest, fetch_sources

    recipe = tmp_path / "recipes" / "einops" / "recipe.yaml"
    req = SourceRequest(recipe, 9, "https://pypi.org/packages/source/e/einops/einops-0.8.2.tar.gz", "0" * 64, "0.8.2")
    with pytest.raises(BridgeError, match="with the recipe's sha256") as info:
        fetch_sources([req], tmp_path / "cache")
    assert info.value.path == str(recipe) and info.value.field == "source.sha256"
    assert "einops-0.8.2.tar.gz" in info.value.message  # what PyPI does have
    good = SourceRequest(recipe, 9, req.url, "609da665570e5e265e27283aab09e7f279ade90c4f01bcfca111f3d3e13f2827", "0.8.2")
    files, _ = fetch_sources([good], tmp_path / "cache")
    assert files[0].fetched and files[0].path.name == "einops-0.8.2.tar.gz"
    assert files[0].url.startswith("https://files.pythonhosted.org/") and files[0].url.endswith("/einops-0.8.2.tar.gz")
    again, _ = fetch_sources([good], tmp_path / "cache", known={good.sha256: files[0].url})
    assert not again[0].fetched and again[0].path == files[0].path and again[0].url == files[0].url


@pytest.mark.slow
def test_a_source_url_whose_bytes_differ_is_refused_and_nothing_is_kept(tmp_path):
    """A recorded URL (the lock's) whose file does not have the recipe's sha256: refused, the cache stays empty."""
    from conda_distro.sandbox.sources import SourceRequest, fetch_sources, locate

    recipe = tmp_path / "recipes" / "einops" / "recipe.yaml"
    good = SourceRequest(recipe, 9, "https://pypi.org/packages/source/e/einops/einops-0.8.2.tar.gz",
                         "609da665570e5e265e27283aab09e7f279ade90c4f01bcfca111f3d3e13f2827", "0.8.2")
    url, _ = locate(good)
    older = SourceRequest(recipe, 9, good.url, "f" * 64, "0.8.2")
    with pytest.raises(BridgeError, match="does not have the sha256"):
        fetch_sources([older], tmp_path / "cache", known={older.sha256: url})
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


TINY_DISTRO = """name: tiny-real
channels:
  upstream: [conda-forge]
  staging: anaconda://tiny-staging
  main: anaconda://tiny
pytorch:
  name: pytorch
  releases: ["2.13.0"]
  variants: [cpu]
platforms: [linux-64]
policy:
  upper_bounds: required
  unbounded_allowed: [python]
"""


@pytest.mark.slow
def test_real_world_builds_einops_from_its_sdist_and_tests_it_on_real_torch(tmp_path, capsys):
    """A one-recipe repository (this repository's einops recipe) as a real world: torch 2.13.0 (CPU
    wheel) and the recipe's dependencies bridged from PyPI, the sdist fetched with pip; then `build`
    builds einops from its sdist and runs its real tests (imports, pip check, torch.compile) on torch."""
    from support.helpers import run_json_at

    from conda_distro.sandbox.real import RealOptions, create_real_world

    repo = tmp_path / "repo"
    shutil_copy = __import__("shutil").copytree
    shutil_copy(Path(__file__).resolve().parent.parent / "recipes" / "einops", repo / "recipes" / "einops")
    (repo / "distro.yaml").write_text(TINY_DISTRO)
    res = create_real_world(RealOptions(path=tmp_path / "world", repo=repo, cuda=False, git=True))
    assert res.pytorch == {("2.13.0", "cpu"): "pytorch-2.13.0-cpu_py311_0.conda"}
    assert res.recipes == ["einops"]
    recipe = (res.path / "recipes" / "einops" / "recipe.yaml").read_text()
    assert "url: file://" in recipe and "sha256: 609da665570e5e265e27283aab09e7f279ade90c4f01bcfca111f3d3e13f2827" in recipe
    assert res.lock.action == "resolved" and (repo / "real-world.lock.json").is_file()
    assert (res.path / "real-world.lock.json").read_text() == (repo / "real-world.lock.json").read_text()
    again = create_real_world(RealOptions(path=tmp_path / "world2", repo=repo, cuda=False, git=False))
    assert again.cache_hit and again.seconds < 30 and again.lock.action == "read"

    code, report = run_json_at(capsys, res.path, "build", "--all")
    tests = report["tests"]
    assert code == 0 and tests and all(t["status"] == "passed" for t in tests), tests
    assert {(t["pytorch"], t["variant"]) for t in tests} == {("2.13.0", "cpu")}
    assert list((res.path / "build" / "channels" / "staging" / "noarch").glob("einops-0.8.2-*.conda"))


@pytest.mark.parametrize("pip_spec, version, ok", [
    ("~=0.1", "0.1.2", True),  # markdown-it-py's mdurl~=0.1 (fastai -> spacy/plum-dispatch -> rich)
    ("~=0.1", "1.0", False),
    ("~=3.8.0", "3.8.1", True),  # torch 2.14's triton~=3.8.0
    ("~=3.8.0", "3.9.0", False),
    ("==1.2.*", "1.2.7", True),
    ("==2.16.2", "2.16.2", True),
])
def test_compatible_release_specs_keep_their_meaning_in_conda(pip_spec, version, ok):
    """whl2conda writes ``~=0.1`` as ``>=0.1,==0.*``, which rattler reads (and indexes) as ``==0``: the
    real world's fastai test environment did not solve ("no candidates for mdurl >=0.1,==0")."""
    from rattler import Version, VersionSpec

    from conda_distro.upstream.convert import _spec

    spec = _spec(pip_spec)
    assert VersionSpec(spec).matches(Version(version)) is ok, spec
    assert not VersionSpec(">=0.1,==0.*").matches(Version("0.1.2"))  # why: rattler's reading of the old form


def test_sandbox_real_names_the_extra_it_needs_when_the_bridge_is_missing(tmp_path: Path, monkeypatch):
    """whl2conda and conda-package-handling are the `real` extra: without them `sandbox --real` exits 2 naming
    the extra to install, and writes nothing."""
    import importlib.util

    from conda_distro.errors import UsageError
    from conda_distro.sandbox.real import RealOptions, create_real_world

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "whl2conda" else real_find_spec(name, *a))
    with pytest.raises(UsageError) as err:
        create_real_world(RealOptions(path=tmp_path / "world", repo=Path(__file__).parents[1], cuda=False))
    assert "whl2conda" in err.value.message and "conda-distro[real]" in (err.value.hint or "")
    assert err.value.exit_code == 2 and not (tmp_path / "world").exists()
