"""Run a GitHub Actions job's `run:` steps on this machine, the way the runner does (for tests/test_workflows.py).

What is emulated, and nothing more:
- each `run:` step is written to a file and run with the shell GitHub would use: the step's `shell:`,
  else the job's / workflow's `defaults.run.shell`, else GitHub's default `bash -e {0}`; `bash` means
  `bash --noprofile --norc -eo pipefail {0}` (docs: "Workflow syntax", `jobs.<job_id>.steps[*].shell`);
- env = workflow env + job env + step env, `${{ … }}` expressions replaced from a table the test gives
  (an expression the table lacks is an error, so nothing is silently blank), plus GITHUB_OUTPUT,
  GITHUB_STEP_SUMMARY, GITHUB_ENV, RUNNER_TEMP and the test's GITHUB_* values;
- steps run in order and the job stops at the first failing step, except steps whose `if:` says
  `always()` (GitHub's default `if: success()`);
- `uses:` steps are handed to the test's handlers by action name (`actions/upload-artifact`, …); an
  action without a handler is skipped;
- tools are replaced by shims: PATH starts with a folder of scripts the test writes (then the folders
  steps added to `$GITHUB_PATH`, last added first, as the runner does);
- a step may take ``step_timeout`` seconds.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
GITHUB_DEFAULT_SHELL = "bash -e {0}"  # no shell anywhere: what GitHub runs on Linux
SHELLS = {"bash": "bash --noprofile --norc -eo pipefail {0}", "sh": "sh -e {0}"}


def load_workflow(path: Path) -> dict:
    """The workflow as plain data; every scalar a string (YAML 1.1 would turn the `on:` key into True)."""
    doc = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    assert isinstance(doc, dict), path
    return doc


def declared_shell(doc: dict, job: dict, step: dict) -> str | None:
    """The `shell:` that applies to a step (step, then job defaults, then workflow defaults), or None."""
    for where in (step, (job.get("defaults") or {}).get("run") or {}, (doc.get("defaults") or {}).get("run") or {}):
        if where.get("shell"):
            return str(where["shell"])
    return None


def shell_template(shell: str | None) -> str:
    """The command line GitHub runs for a `shell:` value, with {0} standing for the script file."""
    if shell is None:
        return GITHUB_DEFAULT_SHELL
    return SHELLS.get(shell, shell if "{0}" in shell else f"{shell} {{0}}")


def has_pipefail(shell: str | None) -> bool:
    """Whether that shell is bash started with `-o pipefail` (alone or in a cluster such as `-eo pipefail`)."""
    argv = shlex.split(shell_template(shell))
    if not argv or Path(argv[0]).name != "bash":
        return False
    return any(nxt == "pipefail" and re.fullmatch(r"-[A-Za-z]*o", opt) for opt, nxt in itertools.pairwise(argv))


def substitute(text: str, expressions: dict[str, str]) -> str:
    def repl(m: re.Match) -> str:
        if m.group(1) not in expressions:
            raise KeyError(f"the test gives no value for ${{{{ {m.group(1)} }}}}")
        return expressions[m.group(1)]

    return EXPR.sub(repl, text)


@dataclass
class StepRun:
    name: str
    returncode: int
    stdout: str = ""
    stderr: str = ""


@dataclass
class JobRun:
    steps: list[StepRun] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)  # what the steps wrote to GITHUB_OUTPUT

    @property
    def ok(self) -> bool:
        return all(s.returncode == 0 for s in self.steps)

    def ran(self, name: str) -> bool:
        return any(s.name == name for s in self.steps)

    def step(self, name: str) -> StepRun:
        return next(s for s in self.steps if s.name == name)


def step_name(step: dict) -> str:
    return str(step.get("name") or step.get("uses") or step.get("run", "").splitlines()[0])


def _read_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _read_kv_file(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out[key] = value
    return out


@dataclass
class Runner:
    """One job's environment: a workspace, a shims folder and the values of the expressions it uses."""

    workspace: Path
    shims: Path
    temp: Path
    expressions: dict[str, str]
    github_env: dict[str, str] = field(default_factory=dict)
    handlers: dict[str, Callable[[dict, Runner], None]] = field(default_factory=dict)
    shell_override: str | None = None  # e.g. "bash -e {0}": what the job did before it declared a shell
    step_timeout: float = 120  # seconds a step may take (a shard's build takes minutes)
    skip_steps: frozenset[str] = frozenset()  # step names not run (publishing that needs the real GitHub/anaconda.org)

    def env_for(self, doc: dict, job: dict, step: dict) -> dict[str, str]:
        added = [line for line in _read_lines(self.temp / "github_path")][::-1]  # GITHUB_PATH: last added first
        env = {"PATH": os.pathsep.join([str(self.shims), *added, os.environ["PATH"]]), "HOME": str(self.temp / "home"),
               "LANG": "C.UTF-8", "RUNNER_TEMP": str(self.temp), "GITHUB_WORKSPACE": str(self.workspace),
               "GITHUB_OUTPUT": str(self.temp / "github_output"), "GITHUB_ENV": str(self.temp / "github_env"),
               "GITHUB_PATH": str(self.temp / "github_path"),
               "GITHUB_STEP_SUMMARY": str(self.temp / "step_summary.md"), "CI": "true", **self.github_env}
        for scope in (doc, job, step):
            for key, value in (scope.get("env") or {}).items():
                env[str(key)] = substitute(str(value), self.expressions)
        return env

    def run_step(self, doc: dict, job: dict, step: dict) -> StepRun:
        script = self.temp / "step.sh"
        script.write_text(str(step["run"]))
        template = self.shell_override or shell_template(declared_shell(doc, job, step))
        argv = [a.replace("{0}", str(script)) for a in shlex.split(template)]
        proc = subprocess.run(argv, cwd=self.workspace, env=self.env_for(doc, job, step), capture_output=True,
                              text=True, timeout=self.step_timeout, check=False)
        return StepRun(step_name(step), proc.returncode, proc.stdout, proc.stderr)

    def run_job(self, doc: dict, job_id: str) -> JobRun:
        job = doc["jobs"][job_id]
        (self.temp / "home").mkdir(parents=True, exist_ok=True)
        (self.temp / "github_output").write_text("")
        (self.temp / "github_path").write_text("")
        result = JobRun()
        failed = False
        for step in job.get("steps", []):
            if failed and "always()" not in str(step.get("if", "")):
                continue
            if step_name(step) in self.skip_steps:
                continue
            if "run" in step:
                run = self.run_step(doc, job, step)
            else:
                action = str(step["uses"]).split("@")[0]
                handler = self.handlers.get(action)
                if handler is not None:
                    with_ = {k: substitute(str(v), self.expressions) for k, v in (step.get("with") or {}).items()}
                    handler(with_, self)
                run = StepRun(step_name(step), 0)
            result.steps.append(run)
            failed = failed or run.returncode != 0
        result.outputs = _read_kv_file(self.temp / "github_output")
        return result


def python_shim(python: str) -> str:
    """The body of the ``python`` shim: ``python -m pip …`` succeeds without installing; ``python -m venv
    DIR`` makes DIR/bin with this shim as its python and the shims' conda-distro (what .ci/install-venv
    needs); anything else is ``python`` itself."""
    return ('if [[ "$1 $2" == "-m pip" ]]; then echo "pip: skipped (test)"; exit 0; fi\n'
            'if [[ "$1 $2" == "-m venv" ]]; then mkdir -p "$3/bin" && ln -sf "$0" "$3/bin/python" && '
            'ln -sf "$(dirname "$0")/conda-distro" "$3/bin/conda-distro"; exit 0; fi\n'
            f'exec {shlex.quote(python)} "$@"\n')


def write_shim(shims: Path, name: str, body: str) -> Path:
    shims.mkdir(parents=True, exist_ok=True)
    path = shims / name
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)
    return path


def git(cwd: Path, *args: str, env: dict[str, Any] | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=60,
                          env={**os.environ, **(env or {})})
    return proc.stdout.strip()
