"""The plan job's renders handed to the other jobs (conda_distro.fanout.renders): written with a manifest,
checked by the taker (this run, this checkout's HEAD, only cache entries, each its sha256) and refused
otherwise, nothing taken."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conda_distro.errors import ShardError
from conda_distro.fanout.renders import RENDERS_MANIFEST, take_renders, write_renders
from conda_distro.recipe.model import pack_file

KEY = "ab" + "0" * 62


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    (root / "distro.yaml").write_text("name: t\n")
    for argv in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run(["git", *argv], cwd=root, check=True, env=env, timeout=60)
    return root


def _cache(tmp_path: Path, root: Path) -> Path:
    cache = tmp_path / "cache"
    (cache / "ab").mkdir(parents=True)
    (cache / "ab" / f"{KEY}.json").write_text('{"rendered": 1}')
    pack_file(cache, str(root)).parent.mkdir()
    pack_file(cache, str(root)).write_bytes(b"the packed models")
    (cache / "packs" / "x.pack").write_bytes(b"another distribution's")  # not carried
    return cache


def test_renders_round_trip(tmp_path):
    root = _repo(tmp_path)
    cache = _cache(tmp_path, root)
    out = tmp_path / "out"
    written = write_renders(out, "run-1", root, cache)
    assert written.entries == 2 and not (out / "packs").exists()
    # another job: the same commit checked out elsewhere; the pack is installed under its folder's name
    other = tmp_path / "other"
    shutil.copytree(root, other)
    taken_into = tmp_path / "job-cache"
    res = take_renders(out, "run-1", other, taken_into)
    assert res.taken and (taken_into / "ab" / f"{KEY}.json").read_text() == '{"rendered": 1}'
    assert pack_file(taken_into, str(other.resolve())).read_bytes() == b"the packed models"


@pytest.mark.parametrize("tamper", ["other run", "other head", "altered entry", "extra file", "symlink",
                                    "missing manifest", "altered pack"])
def test_renders_refused(tmp_path, tamper):
    root = _repo(tmp_path)
    cache = _cache(tmp_path, root)
    out = tmp_path / "out"
    write_renders(out, "run-1", root, cache)
    run = "run-1"
    if tamper == "other run":
        run = "run-2"
    elif tamper == "other head":
        manifest = json.loads((out / RENDERS_MANIFEST).read_text())
        (out / RENDERS_MANIFEST).write_text(json.dumps({**manifest, "head": "f" * 40}))
    elif tamper == "altered entry":
        (out / "ab" / f"{KEY}.json").unlink()
        (out / "ab" / f"{KEY}.json").write_text('{"rendered": 2}')
    elif tamper == "extra file":
        (out / "ab" / "evil.py").write_text("print(1)")
    elif tamper == "symlink":
        (out / "ab" / f"{KEY}.json").unlink()
        (out / "ab" / f"{KEY}.json").symlink_to(cache / "ab" / f"{KEY}.json")
    elif tamper == "altered pack":
        (out / "pack").unlink()
        (out / "pack").write_bytes(b"something else")
    else:
        (out / RENDERS_MANIFEST).unlink()
    taken_into = tmp_path / "job-cache"
    with pytest.raises(ShardError):
        take_renders(out, run, root, taken_into)
    assert not taken_into.exists()  # nothing taken
