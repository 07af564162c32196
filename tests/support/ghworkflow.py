"""Run one of our workflows' jobs the way GitHub would, on this machine (the fan-out contract test and
bench/bench_scale.py): only what our workflows use, not a general GitHub Actions runner.

- jobs run in ``needs`` order; a job's ``if:`` is evaluated over ``needs.<job>.outputs.<key>``,
  ``needs.<job>.result``, ``needs.*.result``, ``!cancelled()`` / ``always()`` (the forms our workflows use);
  a skipped or failed job's dependents see its result as GitHub reports it;
- a job's ``strategy.matrix`` of the form ``${{ fromJSON(needs.X.outputs.Y) }}`` is expanded from the plan
  job's output: one run per ``include`` entry, ``matrix.<key>`` from it;
- every job run gets its own fresh clone of the world's repository at the workflow's ref (plus the
  world's upstream channel, which stands in for conda-forge), its own RUNNER_TEMP and HOME;
- ``actions/upload-artifact`` copies exactly the paths its ``path:`` names (globs; the root of the
  artifact is their least common ancestor, as upload-artifact does) into an artifact store, refusing a
  second artifact of the same name; ``actions/download-artifact`` gives one artifact (``name:``) into
  ``path``, or every artifact matching ``pattern:`` into ``path/<name>/`` (``merge-multiple: true``: into
  ``path`` itself); checkout and setup-python are the fresh clone and this interpreter;
- job outputs are the job's ``outputs:`` read from what its steps wrote to ``$GITHUB_OUTPUT``.
``run:`` steps run through :class:`ghrunner.Runner` (the shell GitHub would use, env, ``always()``).
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from support.ghrunner import EXPR, JobRun, Runner, load_workflow, python_shim, write_shim

BIN = Path(sys.executable).parent


def clone(world: Path, ref: str, dst: Path) -> Path:
    """A fresh clone of ``world`` at ``ref`` with its local channels (gitignored; conda-forge's stand-in:
    ``upstream/``, and the real world's compilers, ``toolchain/``), hard-linked."""
    subprocess.run(["git", "clone", "-q", "-b", ref, str(world), str(dst)], check=True, timeout=120)
    for channel in ("upstream", "toolchain"):
        if (world / channel).is_dir():
            subprocess.run(["cp", "-al", str(world / channel), str(dst / channel)], check=True, timeout=120)
    return dst


def _needs(job: dict) -> list[str]:
    n = job.get("needs") or []
    return [n] if isinstance(n, str) else list(n)


def evaluate(condition: str, needs: dict[str, dict]) -> bool:
    """A job's ``if:`` over ``needs`` ({job: {"result", "outputs"}}), for the forms our workflows use."""
    text = condition.strip()
    m = EXPR.fullmatch(text)
    text = m.group(1) if m else text
    results = [n["result"] for n in needs.values()]
    text = text.replace("!cancelled()", "True").replace("always()", "True")
    text = re.sub(r"!contains\(needs\.\*\.result, '(\w+)'\)", lambda mm: repr(mm.group(1) not in results), text)
    text = re.sub(r"needs\.([\w-]+)\.outputs\.([\w-]+)",
                  lambda mm: repr(needs.get(mm.group(1), {}).get("outputs", {}).get(mm.group(2), "")), text)
    text = re.sub(r"needs\.([\w-]+)\.result", lambda mm: repr(needs.get(mm.group(1), {}).get("result", "skipped")), text)
    text = text.replace("&&", " and ").replace("||", " or ").replace("!=", " __NE__ ").replace("!", " not ")
    text = text.replace(" __NE__ ", " != ")
    if re.search(r"[A-Za-z_]\w*\(", text):
        raise ValueError(f"an `if:` this emulator does not know: {condition}")
    return bool(eval(text, {"__builtins__": {}}, {}))  # noqa: S307 - our own workflow's condition, rewritten


def _lca(paths: list[Path]) -> Path:
    return Path(os.path.commonpath([str(p) for p in paths]))


@dataclass
class ArtifactStore:
    root: Path

    def upload(self, with_: dict, runner: Runner) -> None:
        name = with_["name"]
        dst = self.root / name
        if dst.exists():
            raise RuntimeError(f"an artifact named {name} was uploaded already in this run")
        found: list[Path] = []
        for line in str(with_["path"]).splitlines():
            line = line.strip()
            if line:
                found += [Path(p) for p in glob.glob(str(runner.workspace / line))]
        if not found:
            if with_.get("if-no-files-found", "warn") == "error":
                raise RuntimeError(f"no files for artifact {name}")
            return
        base = found[0] if len(found) == 1 and found[0].is_dir() else _lca([p if p.is_dir() else p.parent for p in found])
        for p in found:
            target = dst / p.relative_to(base) if p != base else dst
            if p.is_dir():
                shutil.copytree(p, target, dirs_exist_ok=True, symlinks=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, target, follow_symlinks=False)

    def download(self, with_: dict, runner: Runner) -> None:
        path = Path(with_.get("path") or runner.workspace)
        path = path if path.is_absolute() else runner.workspace / path
        names = sorted(p.name for p in self.root.iterdir()) if self.root.is_dir() else []
        if with_.get("name"):
            shutil.copytree(self.root / with_["name"], path, dirs_exist_ok=True, symlinks=True)
            return
        merge = str(with_.get("merge-multiple", "false")) == "true"
        m = re.fullmatch(r"(.*)\{([^{}]*)\}(.*)", with_["pattern"])  # one brace alternative, as minimatch expands it
        patterns = [m[1] + alt + m[3] for alt in m[2].split(",")] if m else [with_["pattern"]]
        for name in names:
            if with_["pattern"] and any(fnmatch.fnmatch(name, p) for p in patterns):
                shutil.copytree(self.root / name, path if merge else path / name, dirs_exist_ok=True, symlinks=True)


@dataclass
class JobResult:
    result: str  # success | failure | skipped
    outputs: dict[str, str] = field(default_factory=dict)
    runs: list[tuple[dict, JobRun, Path]] = field(default_factory=list)  # (matrix entry, run, workspace)
    seconds: float = 0.0


@dataclass
class WorkflowRun:
    """Run the jobs of one workflow file on the world (see the module docstring)."""

    workflow: Path
    world: Path
    ref: str
    work: Path
    expressions: dict[str, str]
    jobs: tuple[str, ...] | None = None  # only these (and what they need); None: every job
    skip_steps: frozenset[str] = frozenset()
    env: dict[str, str] = field(default_factory=dict)  # workflow `env:` values set as a repository would
    results: dict[str, JobResult] = field(default_factory=dict)
    timeline: list[tuple[str, float, float]] = field(default_factory=list)  # (job run, start, end) seconds

    def run(self) -> WorkflowRun:
        doc = load_workflow(self.workflow)
        doc["env"] = {**(doc.get("env") or {}), **self.env}
        g: nx.DiGraph[str] = nx.DiGraph()
        for job_id, job in doc["jobs"].items():
            g.add_node(job_id)
            for n in _needs(job):
                g.add_edge(n, job_id)
        wanted = set(doc["jobs"]) if self.jobs is None else set(self.jobs).union(*(nx.ancestors(g, j) for j in self.jobs))
        store = ArtifactStore(self.work / "artifacts")
        start = time.monotonic()
        for job_id in nx.lexicographical_topological_sort(g):
            if job_id not in wanted:
                continue
            job = doc["jobs"][job_id]
            needs = {n: {"result": self.results[n].result, "outputs": self.results[n].outputs} for n in _needs(job)}
            default = all(v["result"] == "success" for v in needs.values())
            cond = job.get("if")
            go = evaluate(str(cond), needs) if cond is not None else default
            if cond is not None and "always()" not in str(cond) and "cancelled()" not in str(cond):
                go = go and default
            if not go:
                self.results[job_id] = JobResult("skipped")
                continue
            self.results[job_id] = self._run_job(doc, job_id, job, needs, store, start)
        return self

    def _matrix(self, job: dict, needs: dict[str, dict]) -> list[dict]:
        matrix = (job.get("strategy") or {}).get("matrix")
        if matrix is None:
            return [{}]
        m = re.fullmatch(r"\$\{\{\s*fromJSON\(needs\.([\w-]+)\.outputs\.([\w-]+)\)\s*\}\}", str(matrix))
        if not m:
            raise ValueError(f"a matrix this emulator does not know: {matrix}")
        return list(json.loads(needs[m.group(1)]["outputs"][m.group(2)])["include"])

    def _run_job(self, doc: dict, job_id: str, job: dict, needs: dict[str, dict], store: ArtifactStore,
                 start: float) -> JobResult:
        res = JobResult("success")
        t0 = time.monotonic()
        for i, entry in enumerate(self._matrix(job, needs)):
            name = f"{job_id}-{i}"
            base = self.work / "jobs" / name
            ws = clone(self.world, self.ref, base / "ws")
            temp, shims = base / "temp", base / "shims"
            temp.mkdir(parents=True)
            write_shim(shims, "python", python_shim(sys.executable))
            write_shim(shims, "conda-distro", f'exec {shlex.quote(str(BIN / "conda-distro"))} "$@"\n')
            expressions = {**self.expressions, "runner.temp": str(temp),
                           **{f"matrix.{k}": str(v) for k, v in entry.items()},
                           **{f"needs.{n}.outputs.{k}": v for n, d in needs.items() for k, v in d["outputs"].items()},
                           **{f"needs.{n}.result": d["result"] for n, d in needs.items()}}
            runner = Runner(workspace=ws, shims=shims, temp=temp, expressions=_Lenient(expressions),
                            step_timeout=3600, skip_steps=self.skip_steps,
                            handlers={"actions/upload-artifact": store.upload, "actions/download-artifact": store.download})
            s0 = time.monotonic()
            run = runner.run_job(doc, job_id)
            self.timeline.append((name, s0 - start, time.monotonic() - start))
            res.runs.append((entry, run, ws))
            if not run.ok:
                res.result = "failure"
            if not entry:
                for key, value in (job.get("outputs") or {}).items():
                    m = re.fullmatch(r"\$\{\{\s*steps\.[\w-]+\.outputs\.([\w-]+)\s*\}\}", str(value))
                    res.outputs[str(key)] = run.outputs.get(m.group(1), "") if m else ""
        res.seconds = time.monotonic() - t0
        return res


class _Lenient(dict):
    """Expressions of a job: a ``needs.X.outputs.Y`` the needed job did not set is empty, as on GitHub."""

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key) or (isinstance(key, str) and key.startswith("needs."))

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key) if super().__contains__(key) else ""
