"""Snapshots and rollback of an anaconda.org main, through anaconda-client against the fake server: the
snapshot is a label copied from main with the endpoint `anaconda label --copy` uses, then locked; rollback
copies files back from that label."""

from __future__ import annotations

import json

import pytest
from support.anaconda_server import FakeAnaconda
from test_channels import TOKEN, api_doc, by_name, staging_files, write_distro
from test_promote import run, write_results

from conda_distro.state.ledger import Ledger


@pytest.fixture()
def anaconda_world(template, tmp_path, monkeypatch):
    with FakeAnaconda(TOKEN, lifetime=120) as srv:
        root = write_distro(tmp_path / "distro", staging="anaconda://builds/staging", main="anaconda://distro")
        files = staging_files(template / "staging")
        srv.seed("builds", [api_doc(f) for f in files.values()], label="staging")
        write_results(root, files)
        monkeypatch.setenv("ANACONDA_API_URL", srv.url)
        monkeypatch.setenv("ANACONDA_API_TOKEN", TOKEN)
        yield root, srv, by_name(files)


def labelled(srv: FakeAnaconda, label: str) -> dict[str, str]:
    return {f["basename"]: f["sha256"] for f in srv.files() if f["owner"] == "distro" and label in f["labels"]}


def test_promotion_copies_main_to_a_locked_snapshot_label_and_rollback_copies_back(anaconda_world, capsys):
    root, srv, st = anaconda_world
    code, doc = run(root, "promote", capsys=capsys)
    snap = doc["snapshot"]
    assert snap and snap.startswith("snapshot-") and snap.endswith("-1")
    writes = [(r["method"], r["path"]) for r in srv.requests() if r["path"].startswith("/channels/")
              and r["method"] == "POST"]
    assert writes == [("POST", f"/channels/distro/main/copy/{snap}"), ("POST", f"/channels/distro/{snap}/lock")]
    assert labelled(srv, snap) == labelled(srv, "main") and len(labelled(srv, "main")) == 2
    record = json.loads((root / "channel_state" / "snapshots" / f"{snap}.json").read_text())
    assert record["url"] == f"https://conda.anaconda.org/distro/label/{snap}"
    assert record["artifacts"] == labelled(srv, "main") == {st[n].artifact: st[n].sha256 for n in ("alpha", "gamma")}
    assert (root / "build" / "snapshots" / snap / "sbom.cdx.json").is_file()
    # nothing more is written when main has not changed
    n = len(srv.requests())
    code, doc = run(root, "promote", capsys=capsys)
    assert doc["snapshot"] is None and all(r["method"] == "GET" for r in srv.requests()[n:])

    # gamma retired: main changed outside a promotion; rollback copies it back from the snapshot's label
    code, doc = run(root, "retire", "gamma", "--reason", "bad", capsys=capsys)
    assert code == 0 and st["gamma"].artifact not in labelled(srv, "main")
    code, doc = run(root, "rollback", "--to", snap, "--why", "gamma was fine", capsys=capsys)
    assert code == 0 and doc["restore"] == [st["gamma"].artifact] and doc["remove"] == []
    copies = [r for r in srv.requests() if r["path"].startswith("/copy/")][-1]
    assert copies["body"] == {"to_owner": "distro", "from_channel": snap, "to_channel": "main"}
    assert labelled(srv, "main") == labelled(srv, snap)
    assert Ledger(root / "channel_state").load("gamma").artifacts[0].retired is None
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err


def test_a_locked_snapshot_label_refuses_writes(anaconda_world, capsys):
    root, srv, st = anaconda_world
    code, doc = run(root, "promote", capsys=capsys)
    from conda_distro.channels import AnacondaChannel
    from conda_distro.errors import ChannelError

    snap = AnacondaChannel("distro", doc["snapshot"], api_url=srv.url, token=TOKEN)
    staging = AnacondaChannel("builds", "staging", api_url=srv.url, token=TOKEN)
    beta = st["beta"]
    with pytest.raises(ChannelError, match="is locked"):
        snap.receive(staging, [beta])


@pytest.mark.parametrize("step", ["snapshot-after-link", "snapshot-after-publish"])
def test_a_promotion_killed_while_snapshotting_gets_its_snapshot_on_the_rerun(anaconda_world, step, tmp_path):
    """... and the snapshot's scratch folder the kill left in the temp folder is removed by the rerun."""
    from test_promote import run_subprocess

    root, srv, st = anaconda_world
    tmp = tmp_path / "tmp"  # the commands' temp folder
    tmp.mkdir()
    killed = run_subprocess(root, "promote", env={"CONDA_DISTRO_TEST_CRASH_AT": step, "TMPDIR": str(tmp)})
    assert killed.returncode == -9
    assert len(labelled(srv, "main")) == 2 and not (root / "channel_state" / "snapshots").exists()
    [left] = [p for p in tmp.iterdir() if p.name.startswith("conda-distro-snapshot-")]
    assert (left / "index").is_dir()  # (what the killed snapshot was making)
    again = run_subprocess(root, "promote", env={"TMPDIR": str(tmp)})
    assert again.returncode == 1, again.stderr[-2000:]  # (beta's tests failed: held)
    assert sorted(p.name for p in tmp.iterdir()) == []  # the killed run's folders removed, the rerun's own too
    snap = json.loads(again.stdout)["snapshot"]
    assert snap and snap.endswith("-1")  # the label copied before the kill is adopted, not copied again (locked)
    assert labelled(srv, snap) == labelled(srv, "main")
    assert (root / "channel_state" / "snapshots" / f"{snap}.json").is_file()
