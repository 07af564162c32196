"""The fan-out contract: pr.yml and promote.yml, run job by job the way GitHub would (tests/support/ghworkflow.py:
the plan job's matrices, `needs` order, a fresh clone per job, exactly the artifact paths the YAML
names), give the same PR comment, the same verdict and the same promoted set as one machine.

The world: the sandbox world cut to one release and one variant (a test per package, to keep the test
cheap), a change to two recipes (metrickit, fastquant) on a branch: six affected packages over three
dependency levels, fastquant failing its tests and quantserve blocked by it (a failure crosses shards),
cut into two shards per level (FANOUT_PER_SHARD=1, FANOUT_RUNNERS=2).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.ghworkflow import BIN, WorkflowRun, clone

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO / ".github" / "workflows"
LOG_URL = "https://github.com/owner/repo/actions/runs/99#artifacts"
CUT = {"FANOUT_RUNNERS": "2", "FANOUT_PER_SHARD": "1"}


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True, timeout=60).stdout.strip()


@pytest.fixture(scope="module")
def world(sandbox_template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The world (main: one release, one variant) and its branch `change` (metrickit and fastquant edited)."""
    from support.worlds import copy_world

    w = copy_world(sandbox_template, tmp_path_factory.mktemp("contract") / "world")
    text = (w / "distro.yaml").read_text()
    text = text.replace('releases: ["2.4.1", "2.5.1", "2.6.0"]', 'releases: ["2.5.1"]').replace("variants: [cpu, cuda]", "variants: [cpu]")
    assert 'releases: ["2.5.1"]' in text and "variants: [cpu]" in text
    (w / "distro.yaml").write_text(text)
    _git(w, "commit", "-qam", "one release, one variant")
    base = _git(w, "rev-parse", "HEAD")
    _git(w, "checkout", "-q", "-b", "change")
    for name in ("metrickit", "fastquant"):
        with (w / "recipes" / name / "recipe.yaml").open("a") as f:
            f.write("# changed\n")
    _git(w, "commit", "-qam", "change metrickit and fastquant")
    _git(w, "checkout", "-q", "main")
    return w, base


def _one_machine(world: Path, work: Path, *argvs: list[str]) -> list[subprocess.CompletedProcess]:
    ws = clone(world, "change", work)
    env = {**os.environ, "CONDA_DISTRO_LOG_URL": LOG_URL}
    return [subprocess.run([str(BIN / "conda-distro"), *argv], cwd=ws, env=env, capture_output=True, text=True,
                           timeout=3600, check=False) for argv in argvs]


EXPRESSIONS = {"github.base_ref": "main", "github.event.pull_request.number": "7",
               "github.event.pull_request.head.sha": "a" * 40, "github.server_url": "https://github.com",
               "github.repository": "owner/repo", "github.run_id": "99", "github.run_attempt": "1"}


@pytest.mark.slow
def test_pr_fan_out_gives_the_single_machine_comment_and_verdict(world, tmp_path):
    w, _ = world
    run = WorkflowRun(WORKFLOWS / "pr.yml", w, "change", tmp_path / "fan", EXPRESSIONS, env=CUT).run()
    assert run.results["plan"].result == "success"
    outputs = run.results["plan"].outputs
    stages = [json.loads(outputs[f"stage-{i}"])["include"] for i in range(8)]
    # two shards per level (the third level has one package), every affected package in exactly one
    assert [len(s) for s in stages] == [2, 2, 1, 0, 0, 0, 0, 0], stages
    assert sorted(p for s in stages for e in s for p in e["packages"].split()) == \
        ["evalsuite", "fastquant", "metrickit", "quantserve", "textmetrics", "visionmetrics"]
    for i in range(3):
        assert run.results[f"level-{i}"].result == "success", [(r.name, r.stdout[-2000:], r.stderr[-2000:])
                                                              for _, jr, _ in run.results[f"level-{i}"].runs for r in jr.steps]
    assert {run.results[f"level-{i}"].result for i in range(3, 8)} == {"skipped"}
    # rendered once: the plan job's renders (this run's, its packed models) were taken by every shard job,
    # which rendered nothing more (its packed cache is byte for byte the plan job's)
    carried = run.work / "artifacts" / "renders"
    assert json.loads((carried / "renders.json").read_text())["run"] == "99-1"
    for i in range(3):
        for _, _, ws in run.results[f"level-{i}"].runs:
            packs = (ws.parent / "temp" / "home" / ".cache" / "conda-distro" / "render" / "packs").glob("*.pack")
            [pack] = [p for p in packs if not p.name.startswith("lint")]  # (lint's own pack sits beside it)
            assert pack.read_bytes() == (carried / "pack").read_bytes()
    gate = run.results["check-pr"]
    [(_, gate_run, gate_ws)] = gate.runs
    fan_comment = (gate_ws / "comment" / "comment.md").read_text()
    [single] = _one_machine(w, tmp_path / "single", ["check-pr", "--base", "origin/main", "--format", "markdown"])
    assert fan_comment == single.stdout
    assert single.returncode == 1 and gate.result == "failure"  # fastquant fails, quantserve is blocked: changes needed
    assert "quantserve" in fan_comment and "fastquant" in fan_comment
    assert (run.work / "artifacts" / "check-pr-comment" / "comment.md").read_text() == fan_comment
    # nothing was built twice: every package was built by exactly one shard job, none by the fan-in
    built = [b["name"] for i in range(3) for _, _, ws in run.results[f"level-{i}"].runs
             for b in json.loads((ws / "shard-report.json").read_text())["builds"] if b["status"] == "built"]
    assert sorted(built) == sorted(set(built)) and set(built) == {"fastquant", "metrickit", "textmetrics", "visionmetrics",
                                                                   "evalsuite"}
    assert not list((gate_ws / "build").glob("work/*"))
    # a shard job that failed left no bundle: the fan-in fails closed, with a comment saying so
    partial = tmp_path / "partial"
    shutil.copytree(run.work / "artifacts", partial, ignore=shutil.ignore_patterns("shard-s1-1"))
    gone = subprocess.run([str(BIN / "conda-distro"), "check-pr", "--base", "origin/main", "--from-shards", str(partial),
                           "--runners", "2", "--per-shard", "1", "--stages", "8", "--run", "99-1", "--format", "markdown"],
                          cwd=gate_ws, capture_output=True, text=True, timeout=600, check=False)
    assert gone.returncode == 2 and "the bundle of shard s1-1" in gone.stdout + gone.stderr, (gone.stdout, gone.stderr)
    assert gone.stdout.startswith("### "), gone.stdout  # still a PR comment


@pytest.mark.slow
def test_promote_fan_out_promotes_what_the_single_machine_promotes(world, tmp_path):
    w, base = world
    skip = frozenset({"upload the builds to the staging label",  # anaconda.org: the sandbox's staging is local
                      "record the ledger"})  # git push to GitHub
    run = WorkflowRun(WORKFLOWS / "promote.yml", w, "change", tmp_path / "fan",
                      {**EXPRESSIONS, "github.event.before": base, "secrets.ANACONDA_API_TOKEN": ""}, skip_steps=skip, env=CUT).run()
    assert run.results["test"].result == "skipped"  # every variant on the build runner
    promote = run.results["promote"]
    [(_, promote_run, ws)] = promote.runs
    assert promote.result == "success", [(s.name, s.stdout[-2000:], s.stderr[-2000:]) for s in promote_run.steps]
    fan = json.loads((ws / "promote-report.json").read_text())
    build, single = _one_machine(w, tmp_path / "single", ["build", "--changed-since", base, "--format", "json"],
                                 ["promote", "--format", "json"])
    assert build.returncode == 1 and single.returncode == 1, single.stderr
    one = json.loads(single.stdout)

    def names(report: dict) -> list[str]:
        return sorted(p["artifact"] for p in report["promoted"])

    assert names(fan) == names(one) and names(one)
    assert sorted((h["artifact"], h.get("reason")) for h in fan["held"]) == \
        sorted((h["artifact"], h.get("reason")) for h in one["held"])
    assert sorted(p.name for p in (ws / "channel_state").glob("*")) == \
        sorted(p.name for p in (tmp_path / "single" / "channel_state").glob("*"))


@pytest.mark.slow
def test_release_sweep_fan_out_gives_the_single_machine_sweep(world, tmp_path):
    """release-sweep.yml fanned out (plan -> level shards -> the sweep's fan-in) on main of the world (it
    supports 2.5.1; 2.7.0 is published upstream): the same verdicts, PR bodies and tracking issue as `sweep
    --pytorch 2.7.0 --commit` on one machine, and the same sweep branches' trees."""
    from support.worlds import copy_world

    from conda_distro.sandbox import PublishOptions, publish_release

    w = copy_world(world[0], tmp_path / "world")
    publish_release(PublishOptions(world=w, version="2.7.0"))
    skip = frozenset({"bundle the sweep's branches", "hand the commits to the publish job"})  # publish's input (git bundle)
    run = WorkflowRun(WORKFLOWS / "release-sweep.yml", w, "main", tmp_path / "fan",
                      {**EXPRESSIONS, "inputs.pytorch_version": "2.7.0"}, jobs=("sweep",), skip_steps=skip, env=CUT).run()
    plan = run.results["plan"]
    assert plan.result == "success", [(s.name, s.stdout[-2000:], s.stderr[-2000:]) for _, jr, _ in plan.runs for s in jr.steps]
    stages = [json.loads(plan.outputs[f"stage-{i}"])["include"] for i in range(8)]
    assert [len(s) for s in stages][:3] == [2, 2, 2] and not any(stages[3:]), stages
    for i in range(3):
        assert run.results[f"level-{i}"].result == "success", [(r.name, r.stdout[-2000:], r.stderr[-2000:])
                                                              for _, jr, _ in run.results[f"level-{i}"].runs for r in jr.steps]
    fanin = run.results["sweep"]
    [(_, fanin_run, ws)] = fanin.runs
    assert fanin.result == "success", [(s.name, s.stdout[-2000:], s.stderr[-2000:]) for s in fanin_run.steps]
    fan = json.loads((ws / "sweep-report.json").read_text())
    single_ws = clone(w, "main", tmp_path / "single")
    _git(single_ws, "config", "user.name", "t")
    _git(single_ws, "config", "user.email", "t@t")
    one = subprocess.run([str(BIN / "conda-distro"), "sweep", "--pytorch", "2.7.0", "--commit", "--format", "json"],
                         cwd=single_ws, capture_output=True, text=True, timeout=3600, check=False)
    assert one.returncode == 0, one.stderr
    single = json.loads(one.stdout)

    def verdicts(doc: dict) -> list:
        return sorted((p["name"], p["status"], p.get("reason"), json.dumps(p.get("tests"), sort_keys=True))
                      for p in doc["packages"])

    assert verdicts(fan) == verdicts(single) and "bumped" in {p["status"] for p in single["packages"]}, \
        (verdicts(fan), verdicts(single))
    def prs(doc: dict) -> dict:  # (the commits' shas differ: commit times and committers)
        return {name: {k: v for k, v in pr.items() if k != "sha"} for name, pr in doc["pull_requests"].items()}

    assert prs(fan) == prs(single) and single["pull_requests"]
    def issue(doc: dict) -> str:
        # (a failing test's log excerpt names its environment as rattler-build shortened the path in that
        # run: `$PREFIX` or `$SRC_DIR_run_env`, the same folder)
        return doc["tracking_issue"].replace("$SRC_DIR_run_env", "$PREFIX")

    assert issue(fan) == issue(single) and single["tracking_issue"]
    branches = _git(single_ws, "for-each-ref", "--format=%(refname:short)", "refs/heads/sweep/")
    assert branches and _git(ws, "for-each-ref", "--format=%(refname:short)", "refs/heads/sweep/") == branches
    for branch in branches.split():  # the same edits committed (the trees; commit times differ)
        assert _git(ws, "rev-parse", f"{branch}^{{tree}}") == _git(single_ws, "rev-parse", f"{branch}^{{tree}}"), branch
    # nothing was built twice, and the fan-in built nothing
    built = [b["artifact"] for i in range(3) for _, _, sws in run.results[f"level-{i}"].runs
             for b in json.loads((sws / "shard-report.json").read_text())["builds"] if b["status"] == "built"]
    assert built and sorted(built) == sorted(set(built))
    assert not list((ws / "build").glob("work/*"))
