"""verify-channel can fail: every file of main is checked against main's index and the ledger before
solving, the install uses a package cache of the run's own (a deleted file cannot come from a warm
cache), and an ``anaconda://`` main is read through ``ANACONDA_API_URL``, not conda.anaconda.org.

Repros (issue 11): delete an artifact from main / append a byte to one -> "ok"; ``--keep FILE`` ->
traceback; an anaconda:// main ignored ANACONDA_API_URL.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from anaconda_server import FakeAnaconda
from conda_distro.channels import LocalChannel
from conda_distro.promote import PromoteOptions, promote
from helpers import run_cli_at, run_json_at
from worlds import own_copy

MAIN = Path("build/channels/pytorch")
STAGING = Path("build/channels/staging")


def name_of(artifact: str) -> str:
    return artifact.split("/")[-1].rsplit("-", 2)[0]


def drift_of(doc: dict) -> list[tuple[str, str]]:
    return [(d["kind"], name_of(d["artifact"])) for d in doc["drift"]]


def test_keep_onto_a_file_is_exit_2(tmp_path, capsys, make_distro):
    root = make_distro({})
    (root / "envs").write_text("not a folder")
    code, out, err = run_cli_at(capsys, root, "verify-channel", "--keep", str(root / "envs"))
    assert code == 2 and out == "" and "Traceback" not in err
    assert "--keep" in err and "not a folder" in err
    assert (root / "envs").read_text() == "not a folder"


@pytest.fixture()
def promoted(built_world: Path) -> Path:
    promote(PromoteOptions(root=built_world))
    return built_world


@pytest.mark.slow
def test_verify_checks_every_file_of_main_before_solving(promoted, capsys):
    root, main = promoted, promoted / MAIN
    code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
    assert code == 0 and doc["drift"] == [], doc
    files = LocalChannel(main).list_files()
    metrickit = next(f for f in files.values() if f.name == "metrickit")
    layerkit = next(f for f in files.values() if f.name == "layerkit")
    path = own_copy(main / metrickit.artifact)  # (written in place below: not through the template's inode)
    saved = path.read_bytes()

    # a deleted artifact: drift, and (fresh cache) the install fails instead of using a cached copy
    path.unlink()
    code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
    assert code == 1 and doc["ok"] is False
    assert drift_of(doc) == [("file-missing", "metrickit")]
    assert doc["drift"][0]["artifact"] == metrickit.artifact
    assert all(not r["ok"] and "install failed" in r["error"] for r in doc["results"]), doc["results"]

    # one byte appended: the sha256 no longer matches the index
    path.write_bytes(saved + b"\0")
    code, out, _ = run_cli_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
    assert code == 1 and out.rstrip().endswith("FAILED")
    assert f"drift: file-sha256-differs: {metrickit.artifact}" in out
    path.write_bytes(saved)

    # a package file in main that the index does not name
    [fastquant] = (root / STAGING / "noarch").glob("fastquant-*.conda")
    shutil.copy2(fastquant, main / "noarch" / fastquant.name)
    code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
    assert code == 1 and drift_of(doc) == [("not-indexed", "fastquant")]
    (main / "noarch" / fastquant.name).unlink()

    # the ledger records another sha256 than the index
    ledger = root / "channel_state" / "layerkit.json"
    text = ledger.read_text()
    ledger.write_text(text.replace(layerkit.sha256, "f" * 64))
    code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
    assert code == 1 and drift_of(doc) == [("sha256-differs", "layerkit")]
    ledger.write_text(text)

    code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
    assert code == 0 and doc["drift"] == []


@pytest.mark.slow
def test_verify_reads_an_anaconda_main_through_the_api_url(promoted, capsys, monkeypatch):
    root, main = promoted, promoted / MAIN
    files = LocalChannel(main).list_files()
    docs = [{"name": f.name, "version": f.version, "basename": f.artifact, "sha256": f.sha256, "size": f.size,
             "attrs": {"subdir": f.subdir, "build": f.build, "build_number": f.build_number,
                       "depends": list(f.depends)},
             "content_b64": base64.b64encode((main / f.artifact).read_bytes()).decode()} for f in files.values()]
    distro_yaml = root / "distro.yaml"
    distro_yaml.write_text(distro_yaml.read_text().replace("main: build/channels/pytorch", "main: anaconda://distro"))
    shutil.rmtree(main)  # nothing local to fall back on
    with FakeAnaconda("tok-VERIFY-1234567", lifetime=180) as srv:
        srv.seed("distro", docs, label="main")
        monkeypatch.setenv("ANACONDA_API_URL", srv.url)
        monkeypatch.delenv("ANACONDA_API_TOKEN", raising=False)  # reading needs no token
        code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
        assert code == 0 and doc["drift"] == [], doc
        assert {p.split()[0] for r in doc["results"] for p in r["installed"]} >= {f.name for f in files.values()}
        downloads = {r["path"].split("/", 5)[5] for r in srv.requests() if r["path"].startswith("/download/")}
        assert downloads == set(files)

        # the server serves other bytes than its listing's sha256 says
        metrickit = next(f for f in files.values() if f.name == "metrickit")
        tampered = next(d for d in docs if d["basename"] == metrickit.artifact)
        srv.seed("distro", [{**tampered, "content_b64": base64.b64encode(b"not a package").decode()}], label="main")
        code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
        assert code == 1 and drift_of(doc) == [("file-sha256-differs", "metrickit")]
        assert json.dumps(doc).count(metrickit.artifact) >= 1


@pytest.mark.slow
def test_verify_text_shows_the_failing_checks_last_lines(promoted, capsys):
    """Text mode names the failing check and shows the end of its output (the exception), not only
    "import layerkit failed"."""
    recipe = promoted / "recipes" / "layerkit" / "recipe.yaml"
    text = recipe.read_text()
    assert "      imports:\n" in text
    recipe.write_text(text.replace("      imports:\n", "      imports:\n        - layerkit.gone_missing\n", 1))
    code, out, _ = run_cli_at(capsys, promoted, "verify-channel", "--pytorch", "2.5.1")
    assert code == 1 and out.rstrip().endswith("FAILED")
    lines = out.splitlines()
    i = lines.index("    layerkit: import layerkit.gone_missing failed")
    shown = [ln for ln in lines[i + 1:] if ln.startswith("      | ")]
    assert shown and shown[-1] == "      | ModuleNotFoundError: No module named 'layerkit.gone_missing'"
    assert any("Traceback" in ln for ln in shown)
    assert out.count("import layerkit.gone_missing failed") == 2  # once per variant, not repeated as the error
