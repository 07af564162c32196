"""The real world's lock (conda_distro.upstream.lock, .closures, the download passes of .resolve) and how
`sandbox --real` uses it.

The network tests (marked slow) resolve and download real small wheels from PyPI: two "releases" stand for
two pytorch builds (a :class:`TorchBuild` whose pip requirement is ``flake8==6.0.0`` or ``flake8==7.0.0``),
whose closures need two different versions of pyflakes and pycodestyle, as two torch builds need two
nvidia-cudnn versions. The fast tests read and check locks written as documents.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.helpers import run_cli

from conda_distro.errors import BridgeError
from conda_distro.upstream import BridgeOptions, TargetPython, TorchBuild, bridge_locked
from conda_distro.upstream.closures import LockRequest, resolve_lock
from conda_distro.upstream.lock import (
    LOCK_FILE,
    RealLock,
    Wanted,
    lock_changes,
    read_lock,
    stale_reasons,
    write_lock,
)
from conda_distro.upstream.resolve import Wheel, download, download_passes, resolve

PY = TargetPython(".".join(str(x) for x in sys.version_info[:3]))
SHORT = PY.short
OLD, NEW = TorchBuild("1.0.0", "cpu", requirement="flake8==6.0.0"), TorchBuild("2.0.0", "cpu", requirement="flake8==7.0.0")
HEX = "0123456789abcdef" * 4
EINOPS_081 = "de5d960a7a761225532e0f1959e5315ebeafc0cd43394732f103ca44b9837e84"  # PyPI's einops-0.8.1.tar.gz


def _doc(**over) -> dict:
    """A valid lock document (file names and hashes made up: the fast tests only read it)."""
    doc = {
        "schema_version": 1, "python": SHORT, "platform": "linux-64", "lockstep": [], "requirements": ["einops<1"],
        "excluded": [],
        "closures": [{"release": "2.13.0", "variant": "cpu", "request": ["torch==2.13.0+cpu"], "unavailable": [],
                      "wheels": {"einops": "einops-0.8.1-py3-none-any.whl", "torch": "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"}}],
        "wheels": {
            "einops-0.8.1-py3-none-any.whl": {"name": "einops", "version": "0.8.1", "sha256": HEX, "url": None},
            "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl": {"name": "torch", "version": "2.13.0+cpu", "sha256": HEX,
                                                              "url": "file:///opt/wheels/torch.whl"},
        },
        "sources": [],
    }
    doc.update(over)
    return doc


# ------------------------------------------------------------------------------------- the document


def test_a_lock_is_written_in_one_stable_order_and_read_back(tmp_path):
    lock = RealLock.model_validate(_doc())
    path = tmp_path / LOCK_FILE
    write_lock(path, lock)
    text = path.read_text()
    again = read_lock(path)
    assert again == lock and again.text() == text
    doc = json.loads(text)
    assert list(doc) == ["schema_version", "python", "platform", "lockstep", "requirements", "excluded", "closures",
                         "wheels", "sources"]
    assert list(doc["wheels"]) == sorted(doc["wheels"]) and list(doc["closures"][0]["wheels"]) == ["einops", "torch"]
    # one value per line: a moved version is a one-line diff
    assert '      "einops": "einops-0.8.1-py3-none-any.whl",\n' in text


@pytest.mark.parametrize("change, field, message", [
    (lambda d: d["wheels"]["einops-0.8.1-py3-none-any.whl"].update(sha256="abc"), "wheels.einops-0.8.1-py3-none-any.whl.sha256",
     "should match pattern"),
    (lambda d: d["closures"][0].update(variant="rocm"), "closures.0.variant", "'cpu' or 'cuda'"),
    (lambda d: d.update(schema_version=2), "schema_version", "is not one this conda-distro reads"),
    (lambda d: d.update(pyhton="3.11"), "pyhton", "unknown key"),
    (lambda d: d["closures"][0]["wheels"].update(numpy="numpy-2.0-cp311-cp311-linux_x86_64.whl"), "closures.0.wheels.numpy",
     "is not listed in wheels"),
    (lambda d: d.pop("closures"), "closures", "required key is missing"),
    (lambda d: d["closures"].append(dict(d["closures"][0])), "closures.1", "a second closure for 2.13.0 cpu"),
])
def test_a_lock_that_breaks_the_schema_is_refused_naming_the_field(tmp_path, change, field, message):
    doc = _doc()
    change(doc)
    path = tmp_path / LOCK_FILE
    path.write_text(json.dumps(doc))
    with pytest.raises(BridgeError) as info:
        read_lock(path)
    assert info.value.field == field and message in info.value.message, info.value.to_dict()
    assert info.value.path == str(path) and info.value.hint


def test_a_lock_that_is_not_json_names_the_line(tmp_path):
    path = tmp_path / LOCK_FILE
    path.write_text('{\n  "schema_version": 1,\n  "python": "3.11",\n  "python": "3.12"\n}\n')
    with pytest.raises(BridgeError, match="duplicate key"):
        read_lock(path)
    path.write_text('{\n  "schema_version": 1,\n  oops\n}\n')
    with pytest.raises(BridgeError, match="not valid JSON") as info:
        read_lock(path)
    assert info.value.line == 3


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


def _tiny_repo(root: Path) -> Path:
    """A one-recipe repository (this repository's einops recipe) for `sandbox --real`."""
    import shutil

    shutil.copytree(Path(__file__).resolve().parent.parent / "recipes" / "einops", root / "recipes" / "einops")
    (root / "distro.yaml").write_text(TINY_DISTRO)
    return root


def test_sandbox_real_with_a_schema_invalid_lock_is_exit_2_naming_the_field(tmp_path, capsys, monkeypatch):
    repo = _tiny_repo(tmp_path / "repo")
    doc = _doc()
    doc["closures"][0]["variant"] = "gpu"
    (repo / LOCK_FILE).write_text(json.dumps(doc))
    before = (repo / LOCK_FILE).read_text()
    monkeypatch.chdir(repo)
    code, out, err = run_cli(capsys, "sandbox", str(tmp_path / "world"), "--real", "--format", "json")
    assert code == 2 and not out, err
    assert f"{repo / LOCK_FILE}, field 'closures.0.variant': Input should be 'cpu' or 'cuda'" in err, err
    assert not (tmp_path / "world").exists() and (repo / LOCK_FILE).read_text() == before


def test_sandbox_real_with_a_lock_that_no_longer_fits_says_to_refresh(tmp_path, capsys, monkeypatch):
    """einops' recipe needs (among others) torch and its run requirements; a lock whose closure lacks them, or
    that has no closure for a release distro.yaml lists, is stale: exit 2, naming what is missing."""
    repo = _tiny_repo(tmp_path / "repo")
    (repo / "distro.yaml").write_text(TINY_DISTRO.replace('["2.13.0"]', '["2.13.0", "2.14.1"]'))
    (repo / LOCK_FILE).write_text(json.dumps(_doc()))
    monkeypatch.chdir(repo)
    code, out, err = run_cli(capsys, "sandbox", str(tmp_path / "world"), "--real")
    assert code == 2
    assert "no longer fits" in err and "no closure for PyTorch 2.14.1 cpu" in err and "--refresh" in err, err
    assert not (tmp_path / "world").exists()


def test_a_lock_serves_while_its_closures_satisfy_the_requirements():
    lock = RealLock.model_validate(_doc())
    wanted = Wanted(python=SHORT, targets=(("2.13.0", "cpu"),), lockstep=(), requirements=("einops<1", "torch>=2.13"))
    assert stale_reasons(lock, wanted) == []
    assert stale_reasons(lock, Wanted(SHORT, (("2.13.0", "cpu"),), (), ("einops>=0.9",))) == [
        "the recipes require einops>=0.9; its closure for 2.13.0 cpu holds einops 0.8.1"]
    assert stale_reasons(lock, Wanted(SHORT, (("2.13.0", "cpu"),), (), ("numpy<3",))) == [
        "the recipes require numpy<3, which its closure for 2.13.0 cpu lacks"]
    assert stale_reasons(lock, Wanted("3.99", (("2.13.0", "cpu"),), ("torchvision",), ())) == [
        f"it was resolved for python {SHORT}; this python is 3.99",
        "its lockstep packages are []; distro.yaml's are [torchvision]"]


def test_refresh_is_refused_without_real(tmp_path, capsys):
    code, out, err = run_cli(capsys, "sandbox", str(tmp_path / "w"), "--refresh")
    assert code == 2 and "--refresh" in err and "--real" in err
    assert not (tmp_path / "w").exists()


def test_download_passes_hold_one_version_of_each_project():
    def w(name, version):
        return Wheel(name, version, f"{name}-{version}-py3-none-any.whl", "", HEX)

    wheels = [w("pyflakes", "3.0.1"), w("pyflakes", "3.2.0"), w("mccabe", "0.7.0"), w("pycodestyle", "2.10.0"),
              w("pycodestyle", "2.11.1"), w("pyflakes", "3.2.0"), w("pyflakes", "3.4.0")]
    passes = download_passes(wheels)
    assert [sorted(x.filename for x in p) for p in passes] == [
        ["mccabe-0.7.0-py3-none-any.whl", "pycodestyle-2.10.0-py3-none-any.whl", "pyflakes-3.0.1-py3-none-any.whl"],
        ["pycodestyle-2.11.1-py3-none-any.whl", "pyflakes-3.2.0-py3-none-any.whl"],
        ["pyflakes-3.4.0-py3-none-any.whl"]]


# ------------------------------------------------------------------------------------- real wheels from PyPI


@pytest.fixture(scope="module")
def two_releases() -> RealLock:
    """A lock of two "releases" whose closures need two versions of pyflakes and pycodestyle (PyPI)."""
    return resolve_lock(LockRequest(python=SHORT, torch=(OLD, NEW)))


@pytest.mark.slow
def test_a_lock_records_each_release_with_its_own_closure(two_releases):
    lock = two_releases
    old, new = lock.closure("1.0.0", "cpu"), lock.closure("2.0.0", "cpu")
    assert old and new and old.request == ["flake8==6.0.0"]
    assert {n: lock.wheels[f].version for n, f in old.wheels.items()} == {
        "flake8": "6.0.0", "mccabe": "0.7.0", "pycodestyle": "2.10.0", "pyflakes": "3.0.1"}
    assert {n: lock.wheels[f].version for n, f in new.wheels.items()} == {
        "flake8": "7.0.0", "mccabe": "0.7.0", "pycodestyle": "2.11.1", "pyflakes": "3.2.0"}
    # every file with its sha256 and its public URL (pip may take mccabe from this machine's local mirror)
    assert all(len(w.sha256) == 64 and (w.url or "").startswith("https://files.pythonhosted.org/")
               for w in lock.wheels.values()), lock.wheels
    assert read_lock_roundtrip(lock) == lock


def read_lock_roundtrip(lock: RealLock) -> RealLock:
    return RealLock.model_validate_json(lock.text())


@pytest.mark.slow
def test_one_pip_call_refuses_two_versions_of_a_project_and_passes_download_both(two_releases, tmp_path):
    """The failure seen on a fresh machine ("Cannot install nvidia-cudnn-cu13===9.20.0.48 and
    nvidia-cudnn-cu13===9.24.0.43"), on small wheels: one pip download of both closures fails; the passes
    download every locked file, each checked against its sha256."""
    lock = two_releases
    wheels = [Wheel(w.name, w.version, fn, w.url or "", w.sha256) for fn, w in lock.wheels.items()]
    reqs = tmp_path / "all.txt"
    reqs.write_text("".join(w.requirement_line + "\n" for w in wheels))
    one = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--require-hashes",
                          "-d", str(tmp_path / "one"), "-r", str(reqs)], capture_output=True, text=True, check=False,
                         env={**os.environ, "PIP_CONSTRAINT": os.devnull}, timeout=900)
    assert one.returncode != 0 and "Cannot install" in one.stderr + one.stdout
    dl = download(wheels, tmp_path / "cache")
    assert dl.passes == 2 and sorted(dl.fetched) == sorted(lock.wheels)
    from conda_distro.upstream.resolve import sha256_of

    assert all(sha256_of(dl.files[fn]) == w.sha256 for fn, w in lock.wheels.items())
    again = download(wheels, tmp_path / "cache")  # everything is there with its sha256: no pip call
    assert again.passes == 0 and again.fetched == ()


@pytest.mark.slow
def test_the_channel_is_made_of_exactly_the_locked_files(two_releases, tmp_path):
    """bridge_locked downloads (two passes), converts and indexes both closures: the channel holds both
    pyflakes, though PyPI has newer ones (newer releases change nothing: nothing is resolved)."""
    lock = two_releases
    res = bridge_locked(BridgeOptions(channel=tmp_path / "ch", wheel_cache=tmp_path / "wheels", python=PY,
                                      torch=(OLD, NEW), jobs=1), lock)
    noarch = json.loads((tmp_path / "ch" / "noarch" / "repodata.json").read_text())["packages.conda"]
    got = sorted((r["name"], r["version"]) for r in noarch.values())
    assert ("pyflakes", "3.0.1") in got and ("pyflakes", "3.2.0") in got and ("pycodestyle", "2.10.0") in got
    assert len(got) == len(lock.wheels) and res.download_passes == 2 and res.not_converted == ()


@pytest.mark.slow
def test_require_hashes_refuses_a_tampered_lock_entry(two_releases, tmp_path):
    """A lock entry whose sha256 was changed: the cached file no longer counts, and pip refuses what it finds
    on the index; the cached file is left as it was."""
    lock = two_releases
    fn = next(f for f, w in lock.wheels.items() if w.name == "pyflakes" and w.version == "3.2.0")
    good = Wheel("pyflakes", "3.2.0", fn, "", lock.wheels[fn].sha256)
    download([good], tmp_path / "cache")
    cached = (tmp_path / "cache" / fn).read_bytes()
    tampered = Wheel("pyflakes", "3.2.0", fn, "", "f" * 64)
    with pytest.raises(BridgeError, match="pip refused pyflakes===3.2.0") as info:
        download([tampered], tmp_path / "cache")
    assert "restore the lock" in (info.value.hint or "")
    assert (tmp_path / "cache" / fn).read_bytes() == cached
    assert not list((tmp_path / "cache").glob(".download-*"))


@pytest.mark.slow
def test_refresh_reports_what_moved(two_releases):
    """The change between two locks, per release × variant: here "release" 2.0.0 moved from flake8 6 to 7."""
    lock = two_releases
    before = lock.model_copy(update={"closures": [
        c if c.release == "1.0.0" else c.model_copy(update={"wheels": lock.closure("1.0.0", "cpu").wheels,  # type: ignore[union-attr]
                                                          "request": ["flake8==6.0.0"]})
        for c in lock.closures]})
    changes = lock_changes(before, lock)
    assert [c.target for c in changes.closures] == ["2.0.0 cpu"]
    assert changes.closures[0].changed == ("flake8 6.0.0 -> 7.0.0", "pycodestyle 2.10.0 -> 2.11.1",
                                           "pyflakes 3.0.1 -> 3.2.0")
    assert "    ~ pyflakes 3.0.1 -> 3.2.0" in changes.lines()
    assert lock_changes(lock, lock).empty


@pytest.mark.slow
def test_a_build_upstream_cannot_serve_is_recorded_and_a_conflict_names_the_builds():
    lock = resolve_lock(LockRequest(python=SHORT, torch=(TorchBuild("9.0.0", "cpu", requirement="flake8==99.0.0"), NEW)))
    gone = lock.closure("9.0.0", "cpu")
    assert gone is not None and gone.wheels == {} and "flake8==99.0.0" in gone.unavailable[0]
    with pytest.raises(BridgeError) as info:
        resolve_lock(LockRequest(python=SHORT, torch=(OLD, NEW), requirements=("pyflakes>=3.2",)))
    msg = info.value.message
    assert "1.0.0 cpu" in msg and "builds that resolve: 2.0.0 cpu" in msg and "pyflakes" in msg, msg
    assert "The conflict is caused by" in msg and "--refresh" in (info.value.hint or "")


@pytest.mark.slow
def test_resolution_ignores_a_configured_constraints_file(tmp_path):
    """A pip configuration naming a constraints file (this kind of machine caps torch in /etc/xdg/pip) does
    not change what the bridge resolves."""
    conf = tmp_path / "pip.conf"
    cons = tmp_path / "constraints.txt"
    cons.write_text("jinja2<3\n")
    conf.write_text(f"[global]\nconstraint = {cons}\n")
    from conda_distro.upstream.resolve import PipOptions

    capped = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps",
                             "--quiet", "jinja2==3.1.6"], capture_output=True, text=True, check=False,
                            env={**os.environ, "PIP_CONFIG_FILE": str(conf)}, timeout=600)
    assert capped.returncode != 0  # the configured cap is real
    closure = resolve(["jinja2==3.1.6"], PipOptions(env={"PIP_CONFIG_FILE": str(conf)}))
    assert {w.name: w.version for w in closure.wheels}["jinja2"] == "3.1.6"


def _offline(monkeypatch, tmp_path: Path) -> None:
    """pip with no index, no find-links, no configuration, and no way out (an unreachable proxy)."""
    for key, value in {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "no-links"),
                       "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "HTTPS_PROXY": "http://127.0.0.1:9",
                       "HTTP_PROXY": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
                       "http_proxy": "http://127.0.0.1:9"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)


@pytest.mark.slow
def test_sandbox_real_rebuilds_from_its_lock_offline_and_refresh_prints_what_changed(tmp_path, capsys, monkeypatch):
    """A one-recipe repository against real torch 2.13.0 (CPU): the first run resolves and writes the lock; a
    second run with pip cut off from every index makes the same world from the lock and the cache; a lock
    that PyPI has moved past (here: one project fewer) is re-resolved by --refresh, which prints the change."""
    repo = _tiny_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    code, out, err = run_cli(capsys, "sandbox", str(tmp_path / "w1"), "--real", "--format", "json")
    assert code == 0, err
    first = json.loads(out)
    assert first["lock"]["action"] == "resolved" and first["lock"]["changes"]["closures"][0]["status"] == "added"
    text = (repo / LOCK_FILE).read_text()
    lock = read_lock(repo / LOCK_FILE)
    closure = lock.closure("2.13.0", "cpu")
    assert closure is not None and lock.wheels[closure.wheels["torch"]].version == "2.13.0+cpu"
    assert {"hatchling", "pip", "mpmath"} <= set(closure.wheels) and "einops" not in closure.wheels
    assert [(s.recipe, s.version) for s in lock.sources] == [("einops", "0.8.2")]

    with monkeypatch.context() as m:
        _offline(m, tmp_path)
        blocked = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(tmp_path / "x"),
                                  "einops==0.8.2"], capture_output=True, text=True, check=False, timeout=600)
        assert blocked.returncode != 0  # pip really cannot reach anything
        code, out, err = run_cli(capsys, "sandbox", str(tmp_path / "w2"), "--real", "--format", "json")
    assert code == 0, err
    second = json.loads(out)
    assert second["cache_hit"] and second["lock"]["action"] == "read" and second["lock"]["changes"] is None
    assert (repo / LOCK_FILE).read_text() == text and (tmp_path / "w2" / LOCK_FILE).read_text() == text
    assert second["pytorch"] == first["pytorch"]

    # the recipe moves to another sdist: the lock's sources follow (no resolution), the channel is the same
    recipe = repo / "recipes" / "einops" / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace('version: "0.8.2"', 'version: "0.8.1"').replace(
        "609da665570e5e265e27283aab09e7f279ade90c4f01bcfca111f3d3e13f2827", EINOPS_081))
    code, out, err = run_cli(capsys, "sandbox", str(tmp_path / "w4"), "--real", "--format", "json")
    assert code == 0, err
    moved = json.loads(out)
    assert moved["cache_hit"] and moved["lock"]["action"] == "sources-updated"
    assert moved["lock"]["changes"]["sources"] == ["+ einops: einops 0.8.1", "- einops: einops 0.8.2"]
    updated = read_lock(repo / LOCK_FILE)
    assert updated.closures == lock.closures and updated.wheels == lock.wheels
    assert [(s.version, s.sha256, s.filename) for s in updated.sources] == [("0.8.1", EINOPS_081, "einops-0.8.1.tar.gz")]
    text = (repo / LOCK_FILE).read_text()

    doc = json.loads(text)  # the lock as an older PyPI had it: no mpmath
    fn = doc["closures"][0]["wheels"].pop("mpmath")
    del doc["wheels"][fn]
    (repo / LOCK_FILE).write_text(json.dumps(doc))
    code, out, err = run_cli(capsys, "sandbox", str(tmp_path / "w3"), "--real", "--refresh", "--force")
    assert code == 0, err
    assert "re-resolved and rewritten" in out and "  2.13.0 cpu (changed):" in out and "      + mpmath " in out, out
    refreshed = read_lock(repo / LOCK_FILE)
    assert "mpmath" in refreshed.closure("2.13.0", "cpu").wheels  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------- the nightly workflow


def _summary_step(committed: dict, refreshed: dict, tmp_path: Path):
    """Run nightly.yml's "what moved since the committed lock" step (bash with pipefail, as GitHub would) in a
    checkout whose lock was re-resolved, with the sandbox's JSON made from the two locks."""
    from support.ghrunner import Runner, git, load_workflow, step_name

    work, temp = tmp_path / "work", tmp_path / "runner-temp"
    for d in (work, temp, tmp_path / "shims"):
        d.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    (work / LOCK_FILE).write_text(RealLock.model_validate(committed).text())
    git(work, "add", "-A")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "lock")
    new = RealLock.model_validate(refreshed)
    write_lock(work / LOCK_FILE, new)
    changes = lock_changes(RealLock.model_validate(committed), new)
    (work / "real-world.json").write_text(json.dumps({"ok": True, "lock": {"changes": changes.to_dict()}}))
    doc = load_workflow(Path(__file__).resolve().parents[1] / ".github" / "workflows" / "nightly.yml")
    job = doc["jobs"]["real-world"]
    [step] = [s for s in job["steps"] if step_name(s) == "what moved since the committed lock"]
    runner = Runner(workspace=work, shims=tmp_path / "shims", temp=temp, expressions={"github.run_id": "99", "github.run_attempt": "1"})
    run = runner.run_step(doc, job, step)
    summary = (temp / "step_summary.md").read_text() if (temp / "step_summary.md").exists() else ""
    return run, summary, work


def test_the_nightly_summary_shows_what_moved_in_the_lock(tmp_path):
    committed = _doc()
    refreshed = _doc()
    refreshed["wheels"]["einops-0.8.2-py3-none-any.whl"] = {"name": "einops", "version": "0.8.2", "sha256": "f" * 64,
                                                            "url": "https://files.pythonhosted.org/e/einops-0.8.2.whl"}
    del refreshed["wheels"]["einops-0.8.1-py3-none-any.whl"]
    refreshed["closures"][0]["wheels"]["einops"] = "einops-0.8.2-py3-none-any.whl"
    refreshed["closures"].append({"release": "2.14.1", "variant": "cpu", "request": ["torch==2.14.1+cpu"],
                                  "unavailable": ["torch==2.14.1+cpu: ERROR: no `torch` here"], "wheels": {}})
    run, summary, work = _summary_step(committed, refreshed, tmp_path)
    assert run.returncode == 0, run
    text = summary.split("```text\n", 1)[1].split("```", 1)[0]
    assert text.splitlines() == ["2.13.0 cpu (changed)", "  ~ einops 0.8.1 -> 0.8.2", "2.14.1 cpu (added)",
                                 "  ! torch==2.14.1+cpu: ERROR: no 'torch' here"]
    assert '-        "einops": "einops-0.8.1-py3-none-any.whl",\n+        "einops": "einops-0.8.2' in summary  # the git diff
    assert (work / "real-world-lock.diff").read_text().count("\n") > 5


def test_the_nightly_summary_says_when_nothing_moved(tmp_path):
    run, summary, _ = _summary_step(_doc(), _doc(), tmp_path)
    assert run.returncode == 0 and "```text\nnothing changed\n```" in summary


def test_an_index_out_of_reach_is_an_error_never_an_unavailable_build(tmp_path):
    """A build pip cannot resolve is recorded in the lock as something upstream cannot serve; pip failing to
    reach its index is not that (the lock would keep it): it is an error, and nothing is recorded."""
    from conda_distro.upstream.resolve import PipOptions

    pip = PipOptions(env={"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
                          "PIP_FIND_LINKS": str(tmp_path / "none"), "PIP_RETRIES": "1", "PIP_TIMEOUT": "5"})
    with pytest.raises(BridgeError, match="could not reach an index") as info:
        resolve_lock(LockRequest(python=SHORT, torch=(OLD,), pip=pip))
    assert "Connection refused" in info.value.message and "the lock was not changed" in (info.value.hint or "")


@pytest.mark.slow
def test_a_locked_file_pip_cannot_find_says_where_it_came_from(tmp_path):
    """torch 2.13.0+cpu comes from this machine's find-links: on a machine whose pip cannot find a locked file,
    the error says how to make it reachable (or to re-resolve)."""
    gone = Wheel("flake8", "99.0.0", "flake8-99.0.0-py2.py3-none-any.whl", "", HEX)
    with pytest.raises(BridgeError, match="flake8===99.0.0") as info:
        download([gone], tmp_path / "cache")
    assert "PIP_FIND_LINKS" in (info.value.hint or "") and "--refresh" in (info.value.hint or "")
    assert not list((tmp_path / "cache").iterdir())
