"""`conda-distro watch` against a remote main (``anaconda://OWNER``, as in production), served over HTTP on
loopback (tests/support/channel_server.py): main's repodata and the files re-tested are downloaded into
the mirror store and checked against the sha256 main's repodata gives; a file whose bytes differ is
refused (an `error`, never a verdict)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import git
import pytest
from support.channel_server import ChannelServer
from support.helpers import run_json_at
from support.worlds import own_copy
from test_verdicts import watch_until_broken

from conda_distro.config import load_config
from conda_distro.distribution import load_distribution
from conda_distro.errors import ChannelError
from conda_distro.reports.watch_main import MainFileError, open_main


def serve_main_remotely(world: Path, server: ChannelServer, owner: str = "pytorch") -> None:
    """distro.yaml's main becomes ``anaconda://OWNER``, read at ``anaconda.conda_url`` = the server, which
    serves the world's channel folders (``OWNER`` is the local main's folder)."""
    cfg = world / "distro.yaml"
    text, n = re.subn(r"\n  main: [^\n]*", f"\n  main: anaconda://{owner}", cfg.read_text())
    assert n == 1
    cfg.write_text(text + f"anaconda:\n  conda_url: {server.url}\n")
    git.Repo(world).git.commit("-am", "main is a remote anaconda channel", "--no-verify")


@pytest.mark.slow
def test_watch_against_a_remote_main_reuses_names_the_culprit_and_refuses_bytes_main_did_not_list(
        built_world: Path, capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CONDA_DISTRO_CACHE", str(tmp_path / "cache"))  # an empty mirror store of its own
    world = built_world
    server = ChannelServer(world / "build" / "channels", tmp_path / "requests.log", lifetime=1800)
    try:
        out, _ = watch_until_broken(world, tmp_path, capsys, promoted=lambda: serve_main_remotely(world, server))
        assert load_config(world).is_anaconda(load_config(world).config.channels.main)
        gets = [r.split()[1] for r in server.requests() if r.startswith("GET ")]
        # main's repodata and the arrayuser file (re-tested, bisected) came over HTTP
        assert "/pytorch/noarch/repodata.json" in gets, gets
        [artifact] = {b["artifact"] for b in out["broken"]}
        assert f"/pytorch/{artifact}" in gets, gets
        # the files a test environment installs from main come through the sandbox's mirror of main too
        # (arrayuser's test installs nothing else of main); nothing of main was read from its folder
        assert not (world / "build" / "watch" / "main").exists()
        assert not list((world / "build" / "work").glob("watch-*"))  # the private folder went with the watch

        # main now serves other bytes under the same name (its repodata unchanged): refused, never a verdict
        served = own_copy(world / "build" / "channels" / "pytorch" / artifact)
        served.write_bytes(served.read_bytes()[:-8] + b"tampered")  # (same size: the sha256 tells them apart)
        monkeypatch.setenv("CONDA_DISTRO_CACHE", str(tmp_path / "cache2"))  # (the checked copy is not in it)
        state_before = (world / "build" / "watch" / "state.json").read_text()
        code, bad = run_json_at(capsys, world, "watch", "arrayuser")
        assert code == 1 and not bad["broken"] and bad["tested"] == 0 and bad["reused"] == 0, bad
        assert {(e["pytorch"], e["variant"]) for e in bad["errors"]} == {("2.6.0", "cpu"), ("2.6.0", "cuda")}
        assert all("sha256" in e["reason"] and "but the channel says" in e["reason"] for e in bad["errors"]), bad
        assert (world / "build" / "watch" / "state.json").read_text() == state_before  # nothing kept from it
        assert not list((tmp_path / "cache2" / "mirror" / "pkgs").glob(f"*/{artifact.split('/')[1]}"))
    finally:
        server.close()


def _channel(folder: Path, files: dict[str, bytes], listed_sha: dict[str, str] | None = None) -> None:
    """A channel folder with noarch ``files`` and a repodata listing them (sha256 of the bytes, or
    ``listed_sha``'s)."""
    (folder / "noarch").mkdir(parents=True)
    packages = {}
    for fn, data in files.items():
        (folder / "noarch" / fn).write_bytes(data)
        name, version, build = fn.removesuffix(".conda").rsplit("-", 2)
        packages[fn] = {"name": name, "version": version, "build": build, "build_number": 0, "depends": [],
                        "subdir": "noarch", "size": len(data),
                        "sha256": (listed_sha or {}).get(fn) or hashlib.sha256(data).hexdigest()}
    (folder / "noarch" / "repodata.json").write_text(json.dumps({"info": {"subdir": "noarch"},
                                                                 "packages.conda": packages}))


def _distro(root: Path, url: str) -> None:
    root.mkdir()
    (root / "distro.yaml").write_text(
        "name: d\nchannels:\n  upstream: [conda-forge]\n  staging: build/channels/staging\n  main: anaconda://owner\n"
        f"pytorch:\n  name: pytorch\n  releases: ['2.6.0']\n  variants: [cpu]\nplatforms: [linux-64]\n"
        f"anaconda:\n  conda_url: {url}\n")
    (root / "recipes").mkdir()


def test_a_remote_main_file_is_used_only_with_the_bytes_its_repodata_names(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CONDA_DISTRO_CACHE", str(tmp_path / "cache"))
    good, bad = "good-1.0-h0_0.conda", "bad-1.0-h0_0.conda"
    _channel(tmp_path / "srv" / "owner", {good: b"good bytes", bad: b"other bytes"},
             listed_sha={bad: hashlib.sha256(b"the bytes main listed").hexdigest()})
    server = ChannelServer(tmp_path / "srv", tmp_path / "requests.log", lifetime=120)
    try:
        _distro(tmp_path / "d", server.url)
        main = open_main(load_distribution(tmp_path / "d", strict=False))
        assert main.url == f"{server.url}/owner" and set(main.files) == {f"noarch/{good}", f"noarch/{bad}"}
        main.folder = tmp_path / "work" / "main"
        path = main.path_of(main.files[f"noarch/{good}"])
        assert path.read_bytes() == b"good bytes" and path.parent.parent == main.folder
        with pytest.raises(MainFileError, match="sha256 .* but the channel says"):
            main.path_of(main.files[f"noarch/{bad}"])
        assert not (main.folder / "noarch" / bad).exists()
        assert not list((tmp_path / "cache" / "mirror" / "pkgs").glob(f"*/{bad}"))  # nothing of it was kept
        assert any(r.startswith("GET /owner/noarch/repodata.json 200") for r in server.requests())
        # a server sending more bytes than main's repodata says the file has: refused, read no further
        big = main.files[f"noarch/{good}"]
        (tmp_path / "srv" / "owner" / "noarch" / good).write_bytes(b"good bytes" + b"x" * (3 << 20))
        monkeypatch.setenv("CONDA_DISTRO_CACHE", str(tmp_path / "cache2"))
        main = open_main(load_distribution(tmp_path / "d", strict=False))
        main.folder = tmp_path / "work2" / "main"
        with pytest.raises(MainFileError, match=f"larger than the {big.size} bytes"):
            main.path_of(big)
        assert not list((tmp_path / "cache2" / "mirror" / "pkgs").glob(".part-*"))
    finally:
        server.close()


def test_a_remote_main_that_does_not_answer_is_a_clear_error(tmp_path: Path):
    (tmp_path / "srv").mkdir()
    server = ChannelServer(tmp_path / "srv", tmp_path / "requests.log", lifetime=120)
    try:
        _distro(tmp_path / "d", server.url)
        with pytest.raises(ChannelError, match="serves no repodata.json") as err:
            open_main(load_distribution(tmp_path / "d", strict=False))
        assert err.value.field == "channels.main" and "conda_url" in (err.value.hint or "")
        _channel(tmp_path / "srv" / "owner", {})
        (tmp_path / "srv" / "owner" / "noarch" / "repodata.json").write_text("{not json")
        with pytest.raises(ChannelError, match="not valid JSON: Expecting property name"):
            open_main(load_distribution(tmp_path / "d", strict=False))
    finally:
        server.close()


def test_the_nightly_keeps_the_issue_of_a_package_the_watch_got_no_verdict_for(tmp_path: Path):
    """A night whose watch could not test a broken package (its `errors`: a file main serves with other
    bytes, an infrastructure failure) proves nothing: its issue stays open, uncommented; the next night
    that passes it closes it."""
    from test_verdicts import NightlyIssues

    broken = {"name": "arrayuser", "artifact": "noarch/arrayuser-1.0-h0_0.conda", "pytorch": "2.6.0", "variant": "cpu",
              "culprit": ["arraylib arraylib-1.0.0-h_0 -> arraylib-1.1.0-h_0"],
              "changed": {"arraylib": ["arraylib-1.0.0-h_0", "arraylib-1.1.0-h_0"]}, "log": None, "reason": None,
              "maintainers": ["array-ann"]}
    error = {k: broken[k] for k in ("name", "artifact", "pytorch", "variant")} | {"reason": "main's bytes differ"}
    gh = NightlyIssues(tmp_path)
    gh.run({"broken": [broken], "errors": []})
    gh.run({"broken": [], "errors": [error]})
    (issue,) = gh.issues()
    assert issue["state"] == "open" and not issue.get("comments")
    gh.run({"broken": []})  # (a report of an older watch has no `errors`)
    (issue,) = gh.issues()
    assert issue["state"] == "closed"


def test_the_nightly_watch_runs_against_the_main_distro_yaml_configures():
    """The repository's main is the anaconda.org channel (read at anaconda.conda_url, no token); the nightly
    watch step runs `conda-distro watch` on the checkout as it is (no other root, no other channels, with
    the sandbox), which reads that main remotely (before, it exited 2: main had to be a local folder)."""
    from support.ghrunner import load_workflow

    root = Path(__file__).parent.parent
    distro = load_config(root)
    assert distro.is_anaconda(distro.config.channels.main)
    assert distro.channel_url(distro.config.channels.main).startswith(distro.config.anaconda.conda_url)
    job = load_workflow(root / ".github" / "workflows" / "nightly.yml")["jobs"]["watch"]
    [step] = [s for s in job["steps"] if s.get("id") == "watch"]
    assert re.match(r"conda-distro watch --format json > watch\.json\b", step["run"]), step["run"]
    assert not {"--root", "--no-sandbox"} & set(step["run"].split())
    assert not any("ANACONDA_API_TOKEN" in str(s.get("env", "")) for s in job["steps"])  # reading needs none
