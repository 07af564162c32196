"""The whole cycle on the sandbox world: build --all -> promote -> verify-channel.

"main holds exactly the artifacts whose tests all passed; the failing packages and their dependents are
held with reasons; verify-channel passes end to end."
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.helpers import run_cli_at, run_json_at, sha256, upstream_pytorch_builds

from conda_distro.gate.promote import PromoteOptions, promote
from conda_distro.state.ledger import Ledger
from conda_distro.util.gitutil import current_commit

MAIN = Path("build/channels/pytorch")
STAGING = Path("build/channels/staging")
# what the sandbox's roles leave for main: everything but fastquant (fails), hookprofiler (fails on
# 2.6.0) and quantserve (never built: fastquant failed)
EXPECTED_IN_MAIN = {"tensorutils", "layerkit", "trainloop", "metrickit", "visionmetrics", "textmetrics",
                    "evalsuite", "visionkit"}


def packages(channel: Path) -> dict[str, str]:
    """artifact -> sha256 of the package files in a local channel."""
    return {p.relative_to(channel).as_posix(): sha256(p) for p in channel.glob("*/*.conda")}


def indexed(channel: Path) -> dict[str, str]:
    """artifact -> sha256 as the channel's repodata lists them."""
    out = {}
    for rd in channel.glob("*/repodata.json"):
        data = json.loads(rd.read_text())
        for fn, rec in {**data.get("packages", {}), **data.get("packages.conda", {})}.items():
            out[f"{rd.parent.name}/{fn}"] = rec["sha256"]
    return out


def snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    if not folder.exists():
        return {}
    return {p.relative_to(folder).as_posix(): (p.stat().st_mtime_ns, sha256(p)) for p in sorted(folder.rglob("*")) if p.is_file()}


def name_of(artifact: str) -> str:
    return artifact.split("/")[-1].rsplit("-", 2)[0]


def all_passed(report: dict) -> set[str]:
    """Artifacts of the build report whose every test passed (and that had tests)."""
    tests: dict[str, list[str]] = {}
    for t in report["tests"]:
        tests.setdefault(t["artifact"], []).append(t["status"])
    return {b["artifact"] for b in report["builds"]
            if b["status"] == "built" and tests.get(b["artifact"]) and set(tests[b["artifact"]]) == {"passed"}}


@pytest.mark.slow
def test_promote_moves_exactly_the_fully_passing_artifacts(built_world, built_report, capsys):
    expected = all_passed(built_report)
    assert {name_of(a) for a in expected} == EXPECTED_IN_MAIN  # the scenario is meaningful
    main_dir, state = built_world / MAIN, built_world / "channel_state"

    # --dry-run: the same plan, nothing written
    code, dry = run_json_at(capsys, built_world, "promote", "--dry-run")
    assert code == 1 and dry["dry_run"] is True
    assert {p["artifact"] for p in dry["promoted"]} == expected
    assert not main_dir.exists() and not state.exists()

    code, doc = run_json_at(capsys, built_world, "promote")
    assert code == 1  # fastquant and hookprofiler are held: promotion found failures
    assert {p["artifact"] for p in doc["promoted"]} == expected
    staged = packages(built_world / STAGING)
    in_main = packages(main_dir)
    assert set(in_main) == expected
    assert indexed(main_dir) == in_main
    for p in doc["promoted"]:
        assert p["sha256"] == in_main[p["artifact"]] == staged[p["artifact"]]
    # dependencies first
    order = [name_of(p["artifact"]) for p in doc["promoted"]]
    for dep, dependent in [("tensorutils", "layerkit"), ("layerkit", "trainloop"), ("metrickit", "visionmetrics"),
                           ("metrickit", "textmetrics"), ("visionmetrics", "evalsuite"), ("textmetrics", "evalsuite")]:
        assert order.index(dep) < order.index(dependent)

    held = {name_of(h["artifact"]): h for h in doc["held"]}
    assert set(held) == {"fastquant", "hookprofiler"}  # quantserve has no artifact: it was never built
    assert {h["reason"] for h in held.values()} == {"test-failed"}
    assert "2.6.0" in held["hookprofiler"]["detail"] and "2.4.1" not in held["hookprofiler"]["detail"]
    assert all(r in held["fastquant"]["detail"] for r in ("2.4.1", "2.5.1", "2.6.0"))

    # channel_state/: one file per promoted package, matching main
    assert sorted(doc["ledger"]) == sorted(f"channel_state/{n}.json" for n in EXPECTED_IN_MAIN)
    assert {p.stem for p in state.glob("*.json")} == EXPECTED_IN_MAIN
    commit = current_commit(built_world)
    assert commit
    reported = {(t["artifact"], t["pytorch"], t["variant"]): t["status"] for t in built_report["tests"]}
    for name, pkg in Ledger(state).load_all().items():
        [entry] = pkg.artifacts
        assert entry.artifact in expected and name_of(entry.artifact) == name
        assert entry.sha256 == in_main[entry.artifact]
        assert entry.commit == commit and entry.promoted_at is not None and entry.retired is None
        assert {(entry.artifact, t.release, t.variant): t.status for t in entry.tests} == \
            {k: s for k, s in reported.items() if k[0] == entry.artifact}

    # a rerun is a no-op
    before = snapshot(main_dir), snapshot(state)
    code, again = run_json_at(capsys, built_world, "promote")
    assert code == 1 and again["promoted"] == [] and again["ledger"] == []
    assert {h["artifact"] for h in again["held"] if h["reason"] == "already-in-main"} == expected
    assert (snapshot(main_dir), snapshot(state)) == before


@pytest.mark.slow
def test_verify_channel_installs_what_users_get_and_finds_drift(built_world, capsys):
    result = promote(PromoteOptions(root=built_world))
    in_main = {name_of(f.artifact) for f in result.plan.promote}
    assert in_main == EXPECTED_IN_MAIN
    versions = {name_of(a): a.split("/")[-1].rsplit("-", 2)[1] for a in packages(built_world / MAIN)}
    builds = upstream_pytorch_builds(built_world)

    code, doc = run_json_at(capsys, built_world, "verify-channel")
    assert code == 0 and doc["ok"] is True and doc["drift"] == []
    assert [(r["pytorch"], r["variant"]) for r in doc["results"]] == [
        (r, v) for r in ("2.4.1", "2.5.1", "2.6.0") for v in ("cpu", "cuda")]
    for r in doc["results"]:
        assert r["ok"] is True and r["error"] is None, r
        installed = {p.split()[0]: p.split()[1:] for p in r["installed"]}
        assert installed["pytorch"] == [r["pytorch"], builds[(r["pytorch"], r["variant"])]]
        expect = EXPECTED_IN_MAIN if r["pytorch"] == "2.5.1" else EXPECTED_IN_MAIN - {"visionkit"}
        assert expect <= set(installed)
        for name in expect:
            assert installed[name][0] == versions[name]
        checks = {(c["package"], c["check"]): c for c in r["checks"]}
        record = checks[("pytorch", "variant")]  # the solved record: build string and __cuda
        assert record["ok"] and record["evidence"] == "record" and f": {r['variant']} (" in record["output"]
        probe = checks[("pytorch", "import torch")]  # a Python package: torch.version.cuda inside the env agrees
        assert probe["ok"] and probe["evidence"] == "import-probe" and probe["output"].split()[0] == r["variant"]
        assert {(n, f"import {n}") for n in expect} <= set(checks)
        assert all(c["ok"] for c in r["checks"])

    # tamper 1: a package in main that the ledger does not know about
    state = built_world / "channel_state" / "metrickit.json"
    saved = state.read_text()
    state.unlink()
    code, doc = run_json_at(capsys, built_world, "verify-channel", "--pytorch", "2.5.1")
    assert code == 1 and doc["ok"] is False
    assert [(d["kind"], name_of(d["artifact"])) for d in doc["drift"]] == [("not-in-ledger", "metrickit")]
    assert all(r["ok"] for r in doc["results"])  # installing still works: only the records are off
    state.write_text(saved)

    # tamper 2: a file copied into main by hand (and indexed), never promoted
    from conda_distro.util.rattler_env import index_channel

    [fastquant] = (built_world / STAGING / "noarch").glob("fastquant-*.conda")
    shutil.copy2(fastquant, built_world / MAIN / "noarch" / fastquant.name)
    index_channel(built_world / MAIN)
    code, out, _ = run_cli_at(capsys, built_world, "verify-channel", "--pytorch", "2.5.1")
    assert code == 1
    assert f"drift: not-in-ledger: noarch/{fastquant.name}" in out and out.rstrip().endswith("FAILED")


@pytest.mark.slow
def test_the_readme_chain_in_a_subprocess(tmp_path):
    """`sandbox DIR; cd DIR; build --all --jobs 2; promote; verify-channel` as CI runs it."""
    world = tmp_path / "world"
    env = {**os.environ, "CI": "true"}

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "conda_distro", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=600, check=False)

    made = run("sandbox", str(world), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    built = run("build", "--all", "--jobs", "2", cwd=world)
    assert built.returncode == 1, built.stderr  # fastquant and hookprofiler fail, quantserve is blocked
    assert "FAILED: 3 of 11 package(s) failed or blocked" in built.stdout
    # grouped per package (as check-pr's table): one row each, then each failure once with its releases and a log
    rows = {ln.split()[0]: ln.split()[2:] for ln in built.stdout.splitlines()[1:12]}
    assert rows["fastquant"] == ["built", *["FAIL"] * 6] and rows["quantserve"] == ["blocked", *["blocked"] * 6]
    assert rows["hookprofiler"] == ["built", *["pass"] * 4, "FAIL", "FAIL"] and len(rows) == 11
    assert "  hookprofiler 0.7.0: failed on pytorch 2.6.0 (cpu, cuda): test 0 failed" in built.stdout
    assert built.stdout.count("log: ") == 2 and len(built.stdout.splitlines()) <= 22
    assert "\r" not in built.stderr and "building and testing 11 package(s)" in built.stderr  # plain CI log lines
    promoted = run("promote", cwd=world)
    assert promoted.returncode == 1, promoted.stderr
    assert "8 promoted, 2 held" in promoted.stdout
    verified = run("verify-channel", cwd=world)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.rstrip().endswith("ok")
    assert {name_of(a) for a in packages(world / MAIN)} == EXPECTED_IN_MAIN
