"""Channel backends: LocalChannel on real rattler-build artifacts, AnacondaChannel through the real
anaconda-client code against the fake server (tests/support/anaconda_server.py), and open_channel.

The helpers at the top (writing a distro.yaml, copying channels) are shared with test_promote.py; the tiny
packages and the session's ``template`` channel come from tests/support/channel_builds.py.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from support.anaconda_server import FakeAnaconda
from support.channel_builds import PACKAGES

from conda_distro.channels import AnacondaChannel, ChannelFile, LocalChannel, mask_secret, open_channel, parse_anaconda_ref, sha256_of
from conda_distro.config import load_config
from conda_distro.errors import ChannelError, LockTimeoutError
from conda_distro.util.secret import Secret

TOKEN = "tok-SECRET-0123456789"


def copy_channel(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("bld", ".tmp", "src_cache", "test", "broken"))
    return dest


DISTRO_YAML = """\
name: test-distro
channels:
  upstream: [./upstream]
  staging: {staging}
  main: {main}
pytorch:
  releases: ["2.4.1", "2.5.1", "2.6.0"]
  variants: [cpu, cuda]
platforms: [linux-64]
{extra}"""


def write_distro(root: Path, *, staging: str = "build/channels/staging", main: str = "build/channels/main",
                 extra: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "distro.yaml").write_text(DISTRO_YAML.format(staging=staging, main=main, extra=extra))
    write_upstream(root / "upstream")
    return root


def write_upstream(folder: Path) -> Path:
    """The upstream the promotion gate solves installability against: repodata of a cpu and a cuda
    pytorch per release (records only: solving needs no package files)."""
    from conda_distro.gate.installability import write_channel

    files = [ChannelFile("linux-64", f"pytorch-{r}-{v}_0.conda", "pytorch", r, f"{v}_0", 0, "0" * 64,
                         ("__cuda",) if v == "cuda" else ())
             for r in ("2.4.1", "2.5.1", "2.6.0") for v in ("cpu", "cuda")]
    return write_channel(files, folder)


def staging_files(channel: Path) -> dict[str, ChannelFile]:
    return LocalChannel(channel).list_files()


def by_name(files: dict[str, ChannelFile]) -> dict[str, ChannelFile]:
    return {f.name: f for f in files.values()}


def api_doc(f: ChannelFile) -> dict:
    """The anaconda.org file dict for a ChannelFile (what an upload would have recorded)."""
    return {"name": f.name, "version": f.version, "basename": f.artifact, "sha256": f.sha256, "size": f.size,
            "attrs": {"subdir": f.subdir, "build": f.build, "build_number": f.build_number,
                      "depends": list(f.depends)}}


# ---------------------------------------------------------------------------------------------
# LocalChannel


def test_local_list_files_reads_repodata(template):
    files = staging_files(template / "staging")
    alpha = by_name(files)["alpha"]
    assert alpha.artifact.startswith("noarch/alpha-1.0-h") and alpha.artifact.endswith("_0.conda")
    assert alpha.depends == ("pytorch >=2.4,<2.6",)
    assert alpha.sha256 == sha256_of(template / "staging" / alpha.artifact)
    assert set(by_name(files)) == set(PACKAGES)


def test_local_missing_channel_is_empty(tmp_path):
    assert LocalChannel(tmp_path / "nope").list_files() == {}


def test_local_receive_publish_and_never_overwrite(template, tmp_path):
    staging = LocalChannel(copy_channel(template / "staging", tmp_path / "staging"))
    main = LocalChannel(tmp_path / "main", subdirs=["linux-64"])
    alpha = by_name(staging.list_files())["alpha"]
    main.receive(staging, [alpha])
    assert main.list_files() == {}  # placed, not yet published
    main.publish()
    assert main.list_files()[alpha.artifact].sha256 == alpha.sha256
    placed = main.path / alpha.artifact
    assert sha256_of(placed) == alpha.sha256 and oct(placed.stat().st_mode & 0o777) == "0o644"
    assert (main.path / "linux-64" / "repodata.json").is_file()
    assert not list(main.path.glob("*/.*.part"))
    main.receive(staging, [alpha])  # already there with the same sha256: a no-op
    other = LocalChannel(template / "other")
    other_alpha = by_name(other.list_files())["alpha"]
    assert other_alpha.filename == alpha.filename and other_alpha.sha256 != alpha.sha256
    (main.path / alpha.artifact).unlink()
    shutil.copy(template / "other" / alpha.artifact, main.path / alpha.artifact)
    with pytest.raises(ChannelError, match="never overwritten"):
        main.receive(staging, [alpha])
    assert sha256_of(main.path / alpha.artifact) == other_alpha.sha256


def test_local_receive_rejects_corrupt_source_and_places_nothing(template, tmp_path):
    staging = LocalChannel(copy_channel(template / "staging", tmp_path / "staging"))
    files = by_name(staging.list_files())
    (staging.path / files["beta"].artifact).write_bytes(b"corrupted")
    main = LocalChannel(tmp_path / "main")
    with pytest.raises(ChannelError, match="does not match the sha256"):
        main.receive(staging, [files["alpha"], files["beta"]])
    assert not [p for p in (main.path / "noarch").iterdir()]  # no file, no part


def test_local_recover_moves_unplanned_unindexed_files_out(template, tmp_path):
    staging = LocalChannel(copy_channel(template / "staging", tmp_path / "staging"))
    main = LocalChannel(tmp_path / "channels" / "main")
    f = by_name(staging.list_files())
    main.receive(staging, [f["alpha"], f["beta"]])
    (main.path / "noarch" / ".x.conda.123.part").write_bytes(b"partial")
    main.recover(staging, keep={f["alpha"].artifact})
    assert (main.path / f["alpha"].artifact).exists()
    assert not (main.path / f["beta"].artifact).exists()
    assert (tmp_path / "channels" / "retired" / f["beta"].artifact).exists()
    assert not (main.path / "noarch" / ".x.conda.123.part").exists()


def test_temps_of_killed_writers_do_not_pile_up_in_main_or_channel_state(template, tmp_path):
    """A write or an index killed with -9 leaves its temp beside the file (``.<name>.*.tmp``) or in the
    indexer's ``.tmp/``: the next write of that file removes its day-old temps (a younger one may be a
    writer at work), and the next index of main removes ``.tmp/``. Before, they stayed for good (in
    channel_state/, tracked by git, as untracked files)."""
    import os
    import time

    from conda_distro.util.fsutil import atomic_write_text

    state = tmp_path / "channel_state"
    state.mkdir()
    old, young = state / ".alpha.json.k1ll3d.tmp", state / ".alpha.json.w0rk1n.tmp"
    for t in (old, young):
        t.write_text("{")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    atomic_write_text(state / "alpha.json", "{}")
    assert sorted(p.name for p in state.iterdir()) == [young.name, "alpha.json"]

    staging = LocalChannel(copy_channel(template / "staging", tmp_path / "staging"))
    main = LocalChannel(tmp_path / "channels" / "main")
    main.receive(staging, [by_name(staging.list_files())["alpha"]])
    (main.path / ".tmp").mkdir()
    (main.path / ".tmp" / "repodata.json.x7q").write_text("{")
    main.publish()
    assert not (main.path / ".tmp").exists() and set(main.list_files()) == {by_name(staging.list_files())["alpha"].artifact}


def test_local_withdraw_unlists_then_moves(template, tmp_path):
    staging = LocalChannel(copy_channel(template / "staging", tmp_path / "staging"))
    main = LocalChannel(tmp_path / "channels" / "main")
    f = by_name(staging.list_files())
    main.receive(staging, [f["alpha"], f["beta"]])
    main.publish()
    (main.path / "noarch" / "repodata.json.zst").write_bytes(b"stale")
    moved = main.withdraw([f["alpha"]])
    assert set(main.list_files()) == {f["beta"].artifact}
    assert moved == [str(tmp_path / "channels" / "retired" / f["alpha"].artifact)]
    assert not (main.path / "noarch" / "repodata.json.zst").exists()


def test_local_lock_times_out(tmp_path):
    ch = LocalChannel(tmp_path / "main")
    with ch.lock(5), pytest.raises(LockTimeoutError, match="another conda-distro process") as exc, \
            LocalChannel(tmp_path / "main").lock(0.2):
        pass
    assert exc.value.exit_code == 2
    with ch.lock(0.2):  # released
        pass


def test_local_rejects_anaconda_source(tmp_path):
    ch = LocalChannel(tmp_path / "main")
    with pytest.raises(ChannelError, match="cannot copy from anaconda.org") as exc:
        ch.check_source(AnacondaChannel("o", api_url="http://127.0.0.1:9", token=None))
    assert "both local folders or both anaconda" in exc.value.hint


# ---------------------------------------------------------------------------------------------
# open_channel, refs and secrets


def test_open_channel_picks_backend_and_api_url(tmp_path):
    root = write_distro(tmp_path, staging="anaconda://stage-owner/staging", main="anaconda://main-owner",
                        extra="anaconda:\n  api_url: http://127.0.0.1:1/from-yaml\n")
    distro = load_config(root)
    st = open_channel(distro, distro.config.channels.staging, env={"ANACONDA_API_TOKEN": TOKEN})
    assert isinstance(st, AnacondaChannel)
    assert (st.owner, st.label, st.api_url) == ("stage-owner", "staging", "http://127.0.0.1:1/from-yaml")
    main = open_channel(distro, distro.config.channels.main, env={"ANACONDA_API_URL": "http://127.0.0.1:2"})
    assert (main.owner, main.label, main.api_url) == ("main-owner", "main", "http://127.0.0.1:2")
    assert TOKEN not in repr(st) and TOKEN not in st.describe()
    local = open_channel(distro, "build/channels/x", env={})
    assert isinstance(local, LocalChannel) and local.path == tmp_path / "build" / "channels" / "x"


def test_parse_anaconda_ref():
    assert parse_anaconda_ref("anaconda://own").label == "main"
    assert parse_anaconda_ref("anaconda://own/staging").label == "staging"
    with pytest.raises(ChannelError):
        parse_anaconda_ref("anaconda://own/a/b")


def test_mask_secret():
    assert mask_secret(f"bad token {TOKEN}!", Secret(TOKEN, name="ANACONDA_API_TOKEN")) == "bad token ***!"
    assert mask_secret("x", None) == "x"


# ---------------------------------------------------------------------------------------------
# AnacondaChannel against the fake server (real binstar_client code path)


@pytest.fixture()
def server():
    with FakeAnaconda(TOKEN, lifetime=120) as srv:
        yield srv


def test_anaconda_list_copy_verify(template, server):
    files = by_name(staging_files(template / "staging"))
    server.seed("distro", [api_doc(files["alpha"]), api_doc(files["beta"])], label="staging")
    staging = AnacondaChannel("distro", "staging", api_url=server.url, token=TOKEN)
    main = AnacondaChannel("distro", "main", api_url=server.url, token=TOKEN)
    assert main.list_files() == {}  # unknown label: empty
    listed = staging.list_files()
    assert listed[files["alpha"].artifact] == files["alpha"]  # same fields as the local repodata
    main.receive(staging, [files["alpha"]])
    assert set(main.list_files()) == {files["alpha"].artifact}
    copy = [r for r in server.requests() if r["method"] == "POST" and r["path"].startswith("/copy/")]
    assert copy == [{"method": "POST", "auth": "valid",
                     "path": f"/copy/package/distro/alpha/1.0/{files['alpha'].artifact}",
                     "body": {"to_owner": "distro", "from_channel": "staging", "to_channel": "main"}}]
    with pytest.raises(ChannelError, match="never overwritten"):  # 409 from the server
        main.receive(staging, [files["alpha"]])


def test_anaconda_copy_to_other_owner_and_sha_check(template, server):
    files = by_name(staging_files(template / "staging"))
    doc = api_doc(files["beta"])
    server.seed("builds", [{**doc, "sha256": "0" * 64}], label="staging")  # the server holds another file
    staging = AnacondaChannel("builds", "staging", api_url=server.url, token=TOKEN)
    main = AnacondaChannel("distro", "main", api_url=server.url, token=TOKEN)
    with pytest.raises(ChannelError, match="server reports sha256 0000"):
        main.receive(staging, [files["beta"]])


def test_anaconda_withdraw_labels_broken(template, server):
    files = by_name(staging_files(template / "staging"))
    server.seed("distro", [api_doc(files["alpha"])], label="main")
    main = AnacondaChannel("distro", "main", api_url=server.url, token=TOKEN)
    main.withdraw([files["alpha"]])
    assert main.list_files() == {}
    (state,) = server.files()
    assert state["labels"] == ["broken"]
    writes = [(r["method"], r["path"], r["body"]) for r in server.requests() if r["method"] != "GET"]
    body = {"package": "alpha", "version": "1.0", "basename": files["alpha"].artifact}
    assert writes == [("POST", "/channels/distro/broken", body), ("DELETE", "/channels/distro/main", body)]


def test_anaconda_bad_token_is_masked(template, server, caplog):
    caplog.set_level(logging.DEBUG)
    bad = "tok-WRONG-9876543210"
    ch = AnacondaChannel("distro", "main", api_url=server.url, token=bad)
    with pytest.raises(ChannelError) as exc:
        ch.list_files()
    text = str(exc.value) + str(exc.value.hint) + repr(exc.value.to_dict())
    assert bad not in text and "***" in text and "ANACONDA_API_TOKEN" in text
    assert bad not in caplog.text
    assert server.requests()[-1]["auth"] == "invalid"
    assert bad not in json.dumps(server.requests())  # the fake never records the token itself


def test_anaconda_write_without_token(server):
    ch = AnacondaChannel("distro", "main", api_url=server.url, token=None)
    with pytest.raises(ChannelError, match="needs a token"):
        ch.check_source(AnacondaChannel("distro", "staging", api_url=server.url, token=None))


def test_anaconda_unreachable_server():
    ch = AnacondaChannel("distro", "main", api_url="http://127.0.0.1:9", token=TOKEN)
    with pytest.raises(ChannelError, match="failed") as exc:
        ch.list_files()
    assert TOKEN not in str(exc.value)


# ---------------------------------------------------------------------------------------------
# AnacondaChannel.upload (build -> anaconda.org staging label) through the real binstar_client upload


def test_anaconda_upload_lists_is_idempotent_and_promotes(template, server):
    files = by_name(staging_files(template / "staging"))
    paths = [template / "staging" / files[n].artifact for n in ("alpha", "beta")]
    staging = AnacondaChannel("distro", "staging", api_url=server.url, token=TOKEN)
    lines: list[str] = []
    out = staging.upload(paths, progress=lines.append)
    expected = {files[n].artifact: files[n] for n in ("alpha", "beta")}
    assert {f.artifact: f for f in out} == expected  # same fields as the local repodata, incl. sha256
    assert staging.list_files() == expected
    assert any("uploaded 2 file(s)" in line for line in lines)
    reqs = server.requests()
    alpha = files["alpha"].artifact
    seq = [(r["method"], r["path"]) for r in reqs if alpha in r["path"] or "/alpha" in r["path"]
           or r["path"].startswith(("/user/", "/_fake/s3/"))][:9]
    s3 = [r for r in reqs if r["path"].startswith("/_fake/s3/")]
    assert seq == [("GET", "/user/distro"), ("GET", f"/dist/distro/alpha/1.0/{alpha}"),
                   ("GET", "/package/distro/alpha"), ("POST", "/package/distro/alpha"),
                   ("GET", "/release/distro/alpha/1.0"), ("POST", "/release/distro/alpha/1.0"),
                   ("POST", f"/stage/distro/alpha/1.0/{alpha}"), ("POST", s3[0]["path"]),
                   ("POST", f"/commit/distro/alpha/1.0/{alpha}")]
    stage = next(r for r in reqs if r["path"] == f"/stage/distro/alpha/1.0/{alpha}")
    assert stage["body"]["channels"] == ["staging"] and stage["body"]["distribution_type"] == "conda"
    assert stage["body"]["sha256"] == files["alpha"].sha256
    assert stage["body"]["attrs"]["depends"] == ["pytorch >=2.4,<2.6"]
    assert {r["auth"] for r in reqs if not r["path"].startswith("/_fake/")} == {"valid"}
    assert {r["auth"] for r in s3} == {"none"} and len(s3) == 2  # the storage POST never carries the token

    n = len(reqs)  # re-upload: reads only, nothing written
    again = staging.upload(paths)
    assert {f.artifact: f for f in again} == expected
    assert [r for r in server.requests()[n:] if r["method"] != "GET"] == []

    dev = AnacondaChannel("distro", "dev", api_url=server.url, token=TOKEN)  # same file, another label
    dev.upload(paths[:1])
    assert set(dev.list_files()) == {alpha} and not [r for r in server.requests() if "/stage/" in r["path"]][2:]

    main = AnacondaChannel("distro", "main", api_url=server.url, token=TOKEN)  # then promotion copies it
    main.receive(staging, [files["alpha"]])
    assert main.list_files() == {alpha: files["alpha"]}


def test_anaconda_upload_never_overwrites(template, server):
    files = by_name(staging_files(template / "staging"))
    other = by_name(staging_files(template / "other"))["alpha"]
    assert other.filename == files["alpha"].filename and other.sha256 != files["alpha"].sha256
    staging = AnacondaChannel("distro", "staging", api_url=server.url, token=TOKEN)
    staging.upload([template / "staging" / files["alpha"].artifact])
    n = len(server.requests())
    with pytest.raises(ChannelError, match="never overwritten") as exc:  # checked before anything is written
        staging.upload([template / "staging" / files["beta"].artifact, template / "other" / other.artifact])
    assert "build number" in exc.value.hint
    assert [r for r in server.requests()[n:] if r["method"] != "GET"] == []
    (state,) = server.files()
    assert state["sha256"] == files["alpha"].sha256 and state["labels"] == ["staging"]
    with pytest.raises(ChannelError, match="not a .conda"):
        staging.upload([template / "staging" / "noarch" / "repodata.json"])


def test_anaconda_upload_bad_or_missing_token(template, server, caplog):
    caplog.set_level(logging.DEBUG)
    alpha = template / "staging" / by_name(staging_files(template / "staging"))["alpha"].artifact
    bad = "tok-WRONG-9876543210"
    with pytest.raises(ChannelError) as exc:
        AnacondaChannel("distro", "staging", api_url=server.url, token=bad).upload([alpha])
    text = str(exc.value) + str(exc.value.hint) + repr(exc.value.to_dict())
    assert bad not in text and "ANACONDA_API_TOKEN" in text and bad not in caplog.text
    assert [r for r in server.requests() if r["method"] != "GET"] == [] and server.files() == []
    with pytest.raises(ChannelError, match="needs a token"):
        AnacondaChannel("distro", "staging", api_url=server.url, token=None).upload([alpha])


def test_anaconda_404_for_owner_is_an_error_not_an_empty_label(server):
    """Repro: a 404-ing ANACONDA_API_URL was read as an empty label, so promote exited 0."""
    ch = AnacondaChannel("distro", "main", api_url=server.url, token=TOKEN)
    assert ch.list_files() == {}  # the owner answers: its label just has no files yet
    server.fail(404)
    with pytest.raises(ChannelError, match="404 for owner 'distro'") as exc:
        ch.list_files()
    assert "ANACONDA_API_URL" in exc.value.hint
    server.fail(0)
    nowhere = AnacondaChannel("distro", "main", api_url=server.url + "/not-the-api", token=TOKEN)
    with pytest.raises(ChannelError, match="404 for owner"):
        nowhere.list_files()
