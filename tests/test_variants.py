"""Variant runners and "cuda (no GPU)" (issue 16): distro.yaml's `ci:` section, `build --variant`, and cuda
tests that say whether a GPU was there — in build's output, the results store, the ledger, the status page
and verify-channel. Real builds and tests on the sandbox world; the only stand-in is `nvidia-smi` itself
(a script on PATH) where a test needs a machine that has one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.helpers import run_cli_at, run_json_at

from conda_distro.config import load_config
from conda_distro.engine.gpu import probe_gpu
from conda_distro.state.ledger import TestEvidence, parse_state
from conda_distro.state.results import ResultsStore

BASE = 'name: t\npytorch:\n  releases: ["2.5.1"]\n'


def _write(tmp_path: Path, extra: str) -> Path:
    (tmp_path / "distro.yaml").write_text(BASE + extra)
    return tmp_path


# --- distro.yaml `ci:`


def test_ci_defaults_and_values(tmp_path):
    ci = load_config(_write(tmp_path, "")).config.ci
    assert (ci.runners.cpu, ci.runners.cuda, ci.automerge) == ("ubuntu-latest", "ubuntu-latest", True)
    ci = load_config(_write(tmp_path, "ci:\n  runners: {cpu: ubuntu-24.04, cuda: linux-gpu-t4}\n  automerge: false\n")).config.ci
    assert (ci.runners.cpu, ci.runners.cuda, ci.automerge) == ("ubuntu-24.04", "linux-gpu-t4", False)


@pytest.mark.parametrize(("extra", "field", "message"), [
    ("ci:\n  runners: {cpu: ubuntu-latest, cudaa: gpu}\n", "ci.runners.cudaa", "did you mean 'cuda'?"),
    ("ci:\n  automerg: false\n", "ci.automerg", "did you mean 'automerge'?"),
    ("ci:\n  runners: {cuda: 'gpu runner; rm -rf /'}\n", "ci.runners.cuda", "is not a runner label"),
    ("ci:\n  automerge: sometimes\n", "ci.automerge", "bool"),
])
def test_ci_bad_input_is_exit_2_naming_the_field(tmp_path, capsys, extra, field, message):
    root = _write(tmp_path, extra)
    code, out, err = run_cli_at(capsys, root, "graph")
    assert code == 2 and out == ""
    assert f"distro.yaml:5, field '{field}'" in err and message in err
    assert sorted(p.name for p in root.iterdir()) == ["distro.yaml"]  # nothing written


def test_graph_github_runners_splits_the_test_matrix(tmp_path, capsys):
    """What the workflows read: the build job's runner and the variants it tests (those on its runner),
    and one test job per variant that has a runner of its own."""
    root = _write(tmp_path, "ci:\n  runners: {cpu: ubuntu-latest, cuda: linux-gpu-t4}\n")
    code, out, _ = run_cli_at(capsys, root, "graph", "--format", "github-runners")
    assert code == 0
    assert json.loads(out) == {"build": {"runner": "ubuntu-latest", "variants": "cpu"},
                               "tests": {"include": [{"variant": "cuda", "runner": "linux-gpu-t4"}]},
                               "count": 1, "automerge": True}
    root = _write(tmp_path, "ci:\n  automerge: false\n")  # both on ubuntu-latest: one job does everything
    code, out, _ = run_cli_at(capsys, root, "graph", "--format", "github-runners")
    assert json.loads(out) == {"build": {"runner": "ubuntu-latest", "variants": "cpu cuda"},
                               "tests": {"include": []}, "count": 0, "automerge": False}


# --- build --variant, and cuda without a GPU said as such


def _fake_nvidia_smi(folder: Path, ok: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + ('echo "GPU 0: NVIDIA A10G (UUID: GPU-1234)"\n' if ok else
                                    'echo "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2\nexit 9\n'))
    exe.chmod(0o755)
    return folder


def test_probe_gpu_says_why_there_is_none(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert probe_gpu().available is False and probe_gpu().detail == "nvidia-smi not found"
    monkeypatch.setenv("PATH", str(_fake_nvidia_smi(tmp_path / "bad", ok=False)))
    p = probe_gpu()
    assert not p.available and "exited 9" in p.detail and "could not communicate" in p.detail
    monkeypatch.setenv("PATH", str(_fake_nvidia_smi(tmp_path / "good", ok=True)))
    assert probe_gpu().available and probe_gpu().detail.startswith("GPU 0: NVIDIA A10G")


@pytest.mark.slow
@pytest.mark.skipif(probe_gpu().available, reason="this machine has a working GPU: the no-GPU labels do not apply")
def test_build_variant_cuda_runs_only_cuda_tests_and_says_no_gpu(sandbox_world: Path, capsys):
    root = sandbox_world
    code, doc = run_json_at(capsys, root, "build", "tensorutils", "--variant", "cuda")
    assert code == 0, doc
    assert {t["variant"] for t in doc["tests"]} == {"cuda"} and len(doc["tests"]) == 9  # 3 packages × 3 releases
    assert all(t["gpu"] is False for t in doc["tests"])
    assert doc["gpu"] == {"available": False, "detail": "nvidia-smi not found"}
    store = ResultsStore(root / "build" / "results")
    assert {(t.variant, t.gpu) for r in store.all() for t in r.tests} == {("cuda", False)}

    # the cpu runner's half: the artifacts are reused (not rebuilt), the cuda results stay
    code, out, err = run_cli_at(capsys, root, "build", "tensorutils", "--variant", "cpu")
    assert code == 0, err
    head = out.splitlines()[0]
    assert "2.4.1 cpu" in head and "cuda" not in head
    assert {b for r in store.all() for b in [r.artifact]} and all(
        {(t.variant, t.gpu) for t in r.tests} == {("cpu", None), ("cuda", False)} for r in store.all())
    assert "skipped" in out and "built" not in out.split("\n", 1)[1]

    # both halves together make the artifacts promotable; the ledger and the status page say "no GPU"
    code, out, err = run_cli_at(capsys, root, "promote")
    assert code == 0, out + err
    state = parse_state((root / "channel_state/tensorutils.json").read_text(), root / "channel_state/tensorutils.json")
    tests = state.artifacts[0].tests
    assert {(t.variant, t.gpu) for t in tests} == {("cpu", None), ("cuda", False)}
    text = (root / "channel_state/tensorutils.json").read_text()
    assert text.count('"gpu": false') == 3 and '"gpu": null' not in text
    code, _, err = run_cli_at(capsys, root, "status", "--out", str(root / "site"))
    assert code == 0, err
    page = (root / "site/index.html").read_text()
    assert 'data-package="tensorutils" data-release="2.4.1" data-variant="cuda" data-status="passed" ' \
           'data-source="main" data-gpu="no"' in page
    assert "(cuda (no GPU), main)" in page and ">pass (no GPU)<" in page

    # the text table of a cuda run says it too
    code, out, _ = run_cli_at(capsys, root, "build", "tensorutils", "--variant", "cuda", "--variant", "cpu")
    assert code == 0 and "2.4.1 cuda (no GPU)" in out.splitlines()[0] and "2.4.1 cpu" in out.splitlines()[0]


@pytest.mark.slow
def test_build_bad_variant_is_exit_2_and_writes_nothing(sandbox_world: Path, capsys):
    before = sorted(p.relative_to(sandbox_world) for p in sandbox_world.rglob("*"))
    code, out, err = run_cli_at(capsys, sandbox_world, "build", "--all", "--variant", "gpu")
    assert code == 2 and "'gpu' is not a variant of this distribution" in err and "choose from: cpu, cuda" in err
    assert sorted(p.relative_to(sandbox_world) for p in sandbox_world.rglob("*")) == before


@pytest.mark.slow
def test_a_gpu_machine_reruns_cuda_tests_and_records_gpu_true(sandbox_world: Path, capsys, tmp_path, monkeypatch):
    """A cuda result obtained without a GPU is not reused on a machine with one: the test runs again there
    and records gpu: true (nvidia-smi stands in for the driver; the builds and tests are real)."""
    root = sandbox_world
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    code, doc = run_json_at(capsys, root, "build", "tensorutils", "--variant", "cuda")
    assert code == 0 and all(t["gpu"] is False and not t.get("cached") for t in doc["tests"]), doc
    code, doc = run_json_at(capsys, root, "build", "tensorutils", "--variant", "cuda")
    assert all(t.get("cached") for t in doc["tests"])  # no change, no GPU: reused
    monkeypatch.setenv("PATH", f"{_fake_nvidia_smi(tmp_path / 'smi', ok=True)}:/usr/bin:/bin")
    code, doc = run_json_at(capsys, root, "build", "tensorutils", "--variant", "cuda")
    assert code == 0, doc
    assert doc["gpu"]["available"] is True
    assert all(t["gpu"] is True and not t.get("cached") for t in doc["tests"])
    code, out, _ = run_cli_at(capsys, root, "build", "tensorutils", "--variant", "cuda")
    assert "2.4.1 cuda " in out.splitlines()[0] + " " and "no GPU" not in out


def test_ledger_evidence_without_gpu_reads_as_unknown_and_is_written_as_before():
    old = {"release": "2.5.1", "variant": "cuda", "status": "passed", "date": "2025-01-01T00:00:00Z"}
    ev = TestEvidence.model_validate(old)
    assert ev.gpu is None
    assert json.loads(ev.model_dump_json()) == old  # no "gpu": null added to older ledgers
    assert json.loads(TestEvidence.model_validate({**old, "gpu": False}).model_dump_json())["gpu"] is False


# --- verify-channel's GPU probe


@pytest.mark.slow
def test_verify_channel_says_cuda_ran_without_a_gpu(built_world: Path, capsys):
    if probe_gpu().available:
        pytest.skip("this machine has a working GPU")
    code, _ = run_json_at(capsys, built_world, "promote")
    code, doc = run_json_at(capsys, built_world, "verify-channel", "--pytorch", "2.5.1")
    assert code == 0, doc
    by = {r["variant"]: r for r in doc["results"]}
    assert by["cuda"]["gpu"] is False and "gpu" not in by["cpu"]
    assert not any(c["evidence"] == "gpu-probe" for r in doc["results"] for c in r["checks"])
    code, out, _ = run_cli_at(capsys, built_world, "verify-channel", "--pytorch", "2.5.1")
    assert "pytorch 2.5.1 (cuda (no GPU)): ok" in out and "pytorch 2.5.1 (cpu): ok" in out


_GPU = probe_gpu()


@pytest.mark.skipif(not _GPU.available, reason=f"needs a working GPU (nvidia-smi -L): {_GPU.detail}")
def test_cuda_probe_runs_a_cuda_op_on_the_gpu(tmp_path):
    """On a GPU machine: the probe verify-channel runs in a cuda environment asserts
    torch.cuda.is_available() and runs a tiny op on the device (here with the torch of this interpreter)."""
    pytest.importorskip("torch", reason="needs PyTorch with CUDA in this interpreter to run the probe")
    from conda_distro.verify import cuda_probe

    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    check = cuda_probe(prefix)
    assert check.ok, check.output
    assert "(ran: true)" in check.output
