"""Snapshots, lockfiles, SBOMs and rollback on the sandbox world (real builds, real solves, real installs).

Bars: promote twice, rollback to the first snapshot: main's index equals the first snapshot's;
a lockfile of each snapshot installs and gives the environment verify-channel checked; a rollback killed
at any point is completed by running it again; every bad input is exit 2 with nothing written.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import git
import pytest
from support.helpers import run_cli_at, run_json_at

from conda_distro.channels import LocalChannel
from conda_distro.enduser.lockfiles import locked_records

MAIN = Path("build/channels/pytorch")


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def index_bytes(channel: Path) -> dict[str, bytes]:
    return {p.relative_to(channel).as_posix(): p.read_bytes() for p in sorted(channel.glob("*/repodata.json"))}


def tree_digest(root: Path, sub: str) -> dict[str, str]:
    base = root / sub
    if not base.exists():
        return {}
    return {p.relative_to(base).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(base.rglob("*")) if p.is_file()}


@pytest.fixture()
def twice(built_world: Path, capsys) -> Path:
    """The built world promoted, then trainloop rebuilt (build number 1) and promoted again."""
    world = built_world
    code, doc = run_json_at(capsys, world, "promote")
    assert doc["snapshot"], doc
    repo = git.Repo(world)
    edit(world / "recipes/trainloop/recipe.yaml", "number: 0", "number: 1")
    repo.git.add("-A")
    repo.index.commit("trainloop: rebuild")
    code, _ = run_json_at(capsys, world, "build", "trainloop")
    assert code == 0
    code, doc2 = run_json_at(capsys, world, "promote")
    assert doc2["snapshot"] and doc2["snapshot"] != doc["snapshot"], doc2
    return world


@pytest.mark.slow
def test_promote_twice_snapshots_lockfiles_sbom_then_rollback(twice: Path, capsys, tmp_path):
    world = twice
    main = world / MAIN
    code, listing = run_json_at(capsys, world, "snapshots")
    assert code == 0
    first, second = listing["snapshots"]
    assert listing["current"] == second["name"]
    assert first["name"].startswith("snapshot-") and first["name"].endswith("-1") and second["name"].endswith("-2")
    assert first["commit"] and first["commit"] != second["commit"]
    snap1 = main / "label" / first["name"]
    # the snapshot's files are main's (hard links, no copies) and its index is main's at that moment
    for artifact in first["artifacts"]:
        if (main / artifact).exists():
            assert os.path.samefile(snap1 / artifact, main / artifact)
    added = sorted(set(second["artifacts"]) - set(first["artifacts"]))
    assert len(added) == 1 and "trainloop" in added[0] and added[0].endswith("_1.conda")

    # a lockfile per release × variant; installing one gives the environment verify-channel checks
    assert set(first["lockfiles"]) == {f"{r}-{v}" for r in ("2.4.1", "2.5.1", "2.6.0") for v in ("cpu", "cuda")}
    lock = snap1 / first["lockfiles"]["2.5.1-cpu"]
    records = locked_records(lock, "linux-64")
    names = {r.name.normalized for r in records}
    assert {"pytorch", "python", "pip", "metrickit", "trainloop", "evalsuite"} <= names, names
    assert all(str(r.url).startswith(snap1.as_uri()) for r in records if r.name.normalized == "trainloop")
    from rattler import install

    prefix = tmp_path / "env"
    asyncio.run(install(records, target_prefix=str(prefix), cache_dir=tmp_path / "pkgs", show_progress=False))
    out = subprocess.run([str(prefix / "bin" / "python"), "-c", "import trainloop, metrickit, torch; print(torch.version.cuda)"],
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "None", out.stderr
    code, verified = run_json_at(capsys, world, "verify-channel", "--pytorch", "2.5.1")
    assert verified["conda"] == {"channel_priority": "strict", "add_pip_as_python_dependency": True}
    cpu = next(r for r in verified["results"] if r["variant"] == "cpu")
    # verify-channel checked main, which is the second snapshot: the second snapshot's lockfile is the same set
    snap2 = main / "label" / second["name"]
    locked2 = sorted(f"{r.name.normalized} {r.version} {r.build}" for r in
                     locked_records(snap2 / second["lockfiles"]["2.5.1-cpu"], "linux-64"))
    assert locked2 == cpu["installed"], (locked2, cpu["installed"])
    cuda_lock = locked_records(snap1 / first["lockfiles"]["2.5.1-cuda"], "linux-64")
    assert str(next(r for r in cuda_lock if r.name.normalized == "pytorch").build).startswith("cuda")

    # the SBOM: every package with version, build, sha256, license and where it comes from
    sbom = json.loads((snap1 / first["sbom"]).read_text())
    assert sbom["bomFormat"] == "CycloneDX" and sbom["specVersion"] == "1.6"
    comps = {c["name"]: c for c in sbom["components"]}
    ours = {a.split("/")[1].rsplit("-", 2)[0] for a in first["artifacts"]}
    assert ours <= set(comps) and {"python", "pytorch", "pip"} <= set(comps)
    for c in sbom["components"]:
        props = {p["name"]: p["value"] for p in c["properties"]}
        assert c["version"] and props["conda:build"] and len(c["hashes"][0]["content"]) == 64
        refs = {r["type"]: r["url"] for r in c["externalReferences"]}
        assert refs["distribution"].endswith(".conda")
        if c["name"] in ours:
            assert c["licenses"], c
            assert "source-distribution" in refs, c
        else:
            assert c["licenses"] or props.get("conda-distro:license") == "unknown"
    trainloop = comps["trainloop"]
    assert trainloop["hashes"][0]["content"] == first["artifacts"][next(a for a in first["artifacts"] if "trainloop" in a)]

    # the status page links each snapshot's lockfiles and SBOM, copied beside it
    site = tmp_path / "site"
    code, _, _ = run_cli_at(capsys, world, "status", "--out", str(site))
    html = (site / "index.html").read_text()
    for snap in (first, second):
        for rel in [*snap["lockfiles"].values(), snap["sbom"]]:
            assert f'href="snapshots/{snap["name"]}/{rel}"' in html
            assert (site / "snapshots" / snap["name"] / rel).read_bytes() == (main / "label" / snap["name"] / rel).read_bytes()

    # rollback: the plan first; --dry-run changes nothing
    before = index_bytes(main), tree_digest(world, "channel_state")
    code, out, err = run_cli_at(capsys, world, "rollback", "--to", first["name"], "--dry-run")
    assert code == 0 and f"rollback of {MAIN} to {first['name']}" in out.replace(str(main), str(MAIN))
    assert f"remove  {added[0]}" in out and "dry run" in out
    assert (index_bytes(main), tree_digest(world, "channel_state")) == before

    code, doc = run_json_at(capsys, world, "rollback", "--to", first["name"], "--why", "trainloop 1 breaks training")
    assert code == 0 and doc["remove"] == added and doc["restore"] == []
    assert index_bytes(main) == index_bytes(snap1)  # main's index equals the first snapshot's
    assert not (main / added[0]).exists() and (snap1.parent / second["name"] / added[0]).exists()  # snapshots stay
    ledger = json.loads((world / "channel_state" / "trainloop.json").read_text())
    gone = next(a for a in ledger["artifacts"] if a["artifact"] == added[0])
    assert gone["retired"]["reason"] == f"rolled back to {first['name']}: trainloop 1 breaks training"
    [record] = (world / "channel_state" / "rollbacks").glob("*.json")
    rec = json.loads(record.read_text())
    assert rec["to"] == first["name"] and rec["removed"] == added and rec["why"] == "trainloop 1 breaks training"
    code, listing = run_json_at(capsys, world, "snapshots")
    assert listing["current"] == first["name"] and len(listing["snapshots"]) == 2  # no new snapshot: main is captured
    code, verified = run_json_at(capsys, world, "verify-channel", "--pytorch", "2.5.1")
    assert code == 0 and verified["drift"] == [], verified["drift"]
    # the gate keeps its word: the rolled-back build is never promoted again
    code, plan = run_json_at(capsys, world, "promote", "--dry-run")
    held = {h["artifact"]: h["reason"] for h in plan["held"]}
    assert held.get(added[0]) == "retired" and added[0] not in {p["artifact"] for p in plan["promoted"]}

    # back to the second snapshot: the file is restored from it (the same inode), its retirement lifted
    code, doc = run_json_at(capsys, world, "rollback", "--to", second["name"], "--why", "false alarm")
    assert code == 0 and doc["restore"] == added
    assert index_bytes(main) == index_bytes(snap2) and os.path.samefile(main / added[0], snap2 / added[0])
    ledger = json.loads((world / "channel_state" / "trainloop.json").read_text())
    assert next(a for a in ledger["artifacts"] if a["artifact"] == added[0])["retired"] is None


@pytest.mark.slow
def test_rollback_killed_anywhere_is_completed_by_running_it_again(twice: Path, capsys):
    world = twice
    main = world / MAIN
    code, listing = run_json_at(capsys, world, "snapshots")
    first = listing["snapshots"][0]
    snap1 = main / "label" / first["name"]
    for step in ("rollback-locked", "rollback-after-index", "rollback-after-channel"):
        env = {**os.environ, "CONDA_DISTRO_TEST_CRASH_AT": step}
        killed = subprocess.run([sys.executable, "-m", "conda_distro", "rollback", "--to", first["name"], "--why", "x",
                                 "--root", str(world)], env=env, capture_output=True, text=True, timeout=600)
        assert killed.returncode == -9, (step, killed.stderr[-2000:])
        # main's index never names a missing file or another sha256
        assert LocalChannel(main).audit().problems == [] or step == "rollback-after-index"
        code, doc = run_json_at(capsys, world, "rollback", "--to", first["name"], "--why", "x")
        assert code == 0, doc
        assert index_bytes(main) == index_bytes(snap1)
        assert [p for p in LocalChannel(main).audit().problems] == []
        code, verified = run_json_at(capsys, world, "verify-channel", "--pytorch", "2.5.1")
        assert verified["drift"] == [], (step, verified["drift"])
        # put main back for the next kill
        code, _ = run_json_at(capsys, world, "rollback", "--to", listing["snapshots"][1]["name"], "--why", "again")
        assert code == 0


@pytest.mark.slow
def test_rollback_bad_inputs_exit_2_and_write_nothing(twice: Path, capsys):
    world = twice
    main = world / MAIN
    code, listing = run_json_at(capsys, world, "snapshots")
    first = listing["snapshots"][0]["name"]
    before = index_bytes(main), tree_digest(world, "channel_state")
    cases = [
        (["--to", "yesterday", "--why", "x"], "not a snapshot name"),
        (["--to", "snapshot-19990101-1", "--why", "x"], "there is no snapshot"),
        (["--to", first], "needs a reason"),
        (["--to", first, "--why", "   "], "needs a reason"),
        (["--to", first, "--why", "x" * 1001], "at most"),
    ]
    for args, words in cases:
        code, out, err = run_cli_at(capsys, world, "rollback", *args)
        assert code == 2 and out == "" and "Traceback" not in err and words in err, (args, err)
    # a damaged snapshot (a file gone) is refused before anything is written
    victim = next((main / "label" / first).glob("noarch/*.conda"))
    os.unlink(victim)
    code, out, err = run_cli_at(capsys, world, "rollback", "--to", first, "--why", "x")
    assert code == 2 and "lacks" in err and "Traceback" not in err
    assert (index_bytes(main), tree_digest(world, "channel_state")) == before
