"""The fan-out's cost model (bench/bench_scale.py) checked against a run of the REAL world at K = 1
(docs/scale-out.md, "Checked against the real world").

    python bench/bench_scale_real.py WORLD --work DIR [--change NAME] [--step costs|predict|run|all]

WORLD is a world of `conda-distro sandbox DIR --real` (this repository's recipes against PyTorch from
PyPI); it is only cloned, never changed, except that a branch ``change-NAME`` is made in it once
(NAME's recipe with one line appended: a pull request changing NAME).

1. **costs** (timed; run it under the bench lock): the per-unit costs the model needs, measured on the
   real world, each command in a fresh clone (the clone not counted: the emulator does not count a job's
   checkout), after a warm-up build of the probe package (``--probe``, not NAME and not one of its
   dependents): ``job`` (`--version`), ``render`` (`fanout plan --all`, less a process start, per recipe),
   and the probe built and tested on all its targets with ``--jobs 1`` (one sandbox at a time, as a shard
   job builds): ``build`` (from the command's start to its build log's last write), ``target`` (a cuda
   target: the mean time between one test log's last write and the next) and ``target_cpu``. Written to
   DIR/costs.json.
2. **predict**: the PR gate of the change at K = 1 by bench_scale's model (:func:`bench_scale.timeline`
   with no GitHub overheads: plan job, one shard per stage, fan-in) from those costs, each package
   tested on its targets (`build NAME --dry-run`'s list; how many of them cpu). Written to
   DIR/prediction.json BEFORE the run.
3. **run** (timed; under the bench lock): pr.yml through the workflow emulator (tests/support/ghworkflow.py)
   at FANOUT_RUNNERS=1, each job in a fresh clone; the wall time is the needs graph's critical path
   over the measured job times (bench_scale.measured_wall). Written to DIR/measured.json with the load.
Then predicted vs measured, per job and in all, and the error (target: within 25 %).

    python bench/bench_scale_real.py --blind --costs-from LOGS[:sequential] ... --runs RUN[:KEEP] ...

4. **blind** (nothing run, nothing timed): each package's own costs (its build; one cpu and one cuda test
   target) read from the logs of an earlier run (:func:`log_costs`: ``build/logs/<package>/`` of a world,
   each log from its creation to its last write; ``:sequential`` for copied logs of a run with one sandbox
   at a time: from the previous log's last write), predicting each measured run RUN (a ``--work`` folder
   of step 3: measured.json and the shard reports, which say what each shard built and tested) that the
   costs did not come from. KEEP: that run's own shard logs (copied as it ran), for the not-blind row and
   to predict the other runs with the same packages.

    python bench/bench_scale_real.py --release-day KEEP --out FILE [--compare MEASURED]

5. **release day** (nothing run, nothing timed): bench_release_day.py --real's stages and headline on the
   day-before world its ``--setup-only`` left in KEEP, predicted from that world's own logs, the sweep's
   plan of it and the ``--jobs 2`` schedule (:func:`predict_day`), written to FILE before the timed run;
   ``--compare`` reads what bench_release_day.py printed (docs/scale-out.md, "Release day, predicted
   before it is run").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_scale import CD, LOCAL, Costs, Run, _git, _raw_run, measured_wall, schedule, timeline  # noqa: E402

from conda_distro.graph import RecipeGraph  # noqa: E402


def _load() -> float:
    return os.getloadavg()[0]


def _timed(world: Path, work: Path, name: str, *argv: str) -> tuple[float, list[tuple[str, float]]]:
    """``conda-distro ARGV`` in a fresh clone of ``world`` (main): its seconds (the clone not counted) and
    the logs it wrote (``build/logs/<package>/<file>``, seconds from the command's start to the log's last
    write: with one sandbox at a time, a test's log is written when it ends), in that order."""
    from support.ghworkflow import clone

    shutil.rmtree(work / name, ignore_errors=True)
    ws = clone(world, "main", work / name)
    t, wall = time.monotonic(), time.time()
    proc = subprocess.run([str(CD), *argv], cwd=ws, capture_output=True, text=True, timeout=3600, check=False)
    took = time.monotonic() - t
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    (work / f"{name}.out").write_text(proc.stdout + proc.stderr)
    logs = sorted(((str(p.relative_to(ws / "build" / "logs")), p.stat().st_mtime - wall)
                   for p in (ws / "build" / "logs").rglob("*.log")), key=lambda x: x[1]) if (ws / "build" / "logs").is_dir() else []
    shutil.rmtree(ws, ignore_errors=True)
    print(f"  {' '.join(argv)}: {took:.1f} s (load {_load():.1f})", flush=True)
    return took, logs


def targets_of(world: Path, name: str) -> list[str]:
    """The targets ``build NAME --dry-run`` tests NAME on (``release/variant``)."""
    out = subprocess.run([str(CD), "build", name, "--dry-run"], cwd=world, capture_output=True, text=True,
                         timeout=600, check=True).stdout
    line = next(x for x in out.splitlines() if x.strip().startswith("test against:"))
    return [t.strip() for t in line.split(":", 1)[1].split(",")]


def torch_envs(world: Path) -> dict[str, int]:
    """Per package, the test environments holding pytorch it creates per target: rattler-build makes one
    environment per entry of the recipe's ``tests:``; an entry's environment holds pytorch when the
    package's own run requirements name it, or the entry's requirements do (read from the rendered
    recipe: no recipe code runs). Printed for the record: the model does not count them (a target's later
    environments link from the package cache its first one filled; docs/scale-out.md)."""
    from conda_distro.distribution import load_distribution

    out = {}
    for name, rec in load_distribution(world).readable().recipes.items():
        runs = {r.split()[0] for v in rec.variants for r in v.requirements.get("run", ())}
        n = sum(1 for t in rec.tests if "pytorch" in runs or any(
            str(r).split()[0] == "pytorch" for r in ((t.get("requirements") or {}).get("run") or [])))
        out[name] = max(1, n)
    return out


def measure(world: Path, work: Path, probe: str, jobs_n: int = 1) -> dict:
    """Step 1 (module docstring): the probe built and tested on all its targets with one sandbox at a time
    (as a shard job runs), its build and each test timed by its log; a test target's cost, cpu and cuda
    apart (a cuda torch with its nvidia runtime is ~15 times the bytes of a cpu one)."""
    n = len([p for p in (world / "recipes").iterdir() if (p / "recipe.yaml").is_file()])
    targets = targets_of(world, probe)
    release, variant = targets[0].split("/")
    load0 = _load()
    print(f"costs on the real world ({n} recipes; probe {probe}, {len(targets)} targets), load {load0:.1f}")
    # --jobs 1, as a shard job builds (`fanout shard` runs one sandbox at a time; `build`'s default, one
    # per core, tests a package's targets side by side, so a target costs less than in a shard job)
    jobs = ("--jobs", str(jobs_n))
    _timed(world, work, "warm", "build", probe, "--pytorch", release, "--variant", variant, *jobs)
    t_start, _ = _timed(world, work, "start", "--version")
    t_plan, _ = _timed(world, work, "plan", "fanout", "plan", "--all")
    t_dry, _ = _timed(world, work, "dry", "build", probe, "--dry-run")
    t_all, logs = _timed(world, work, "all", "build", probe, *jobs)
    build_end = next(t for f, t in logs if f.endswith(".build.log"))
    tests, prev = [], build_end
    for f, t in logs:
        if f.endswith(".test.log"):
            tests.append((f, t - prev))
            prev = t
    cpu = [d for f, d in tests if "-cpu." in f]
    cuda = [d for f, d in tests if "-cuda." in f]
    costs = Costs(render=max(0.0, t_plan - t_start) / n, build=max(0.1, build_end - t_start),
                  target=sum(cuda) / len(cuda) if cuda else sum(cpu) / max(1, len(cpu)),
                  target_cpu=sum(cpu) / len(cpu) if cpu else None, job=t_start, build_fixed=0.0)
    raw = {"start": t_start, "plan": t_plan, "dry": t_dry, "all": t_all, "targets": targets, "jobs": jobs_n,
           "logs": logs, "tests": tests}
    return {"costs": asdict(costs), "raw": raw, "probe": probe, "n_recipes": n, "load_before": load0,
            "load_after": _load()}


TEST_LOG = re.compile(r"^(?P<build>[^.]+)\.(?P<release>\d[\w.]*)-(?P<variant>cpu|cuda)\.test\.log$")
BUILD_LOG = re.compile(r"^(?P<build>[^.]+)\.build\.log$")
#: a shard job's cost besides its packages' logged steps (PARAMETER, estimated on the 2026-11-27 runs): the
#: command's setup before its first build's log is written (planning, release views, staging, the
#: sandbox) and taking and writing bundles; a build log written one sandbox at a time and read
#: ``sequential`` holds the setup already (its start is the job's)
SHARD_SETUP = 25.0


def log_steps(logs: Path, sequential: float | None = None, until: float | None = None) -> list[dict]:
    """Each build and test log under ``logs`` (``<package>/<build string>.build.log``,
    ``<build string>.<release>-<variant>.test.log``; confirmation runs left out): package, kind (build,
    build_cpu, build_cuda, cpu, cuda), seconds; a test's ``release``; a compiled build's PyTorch ``minor``
    (the one minor of the releases its build string was tested on; its log does not name it). A step
    lasts from its log's creation (its first line) to its last write; ``sequential`` (copied logs, whose
    creation time is the copy's; one sandbox at a time): from the previous log's last write, the first
    from ``sequential`` (the job's start, epoch seconds). ``until``: logs last written later are left out
    (another command's)."""
    files = sorted(f for f in logs.glob("*/*.log") if TEST_LOG.match(f.name) or BUILD_LOG.match(f.name))
    if not files:
        return []
    out = subprocess.run(["stat", "-c", "%W %.9Y", *map(str, files)], capture_output=True, text=True, check=True,
                         timeout=120).stdout.split("\n")
    steps = []
    for f, line in zip(files, out, strict=False):
        born, end = (float(x) for x in line.split())
        m = TEST_LOG.match(f.name)
        kind = m["variant"] if m else "build_cuda" if f.name.startswith("cuda") else \
            "build_cpu" if f.name.startswith("cpu") else "build"
        if until is None or end <= until:
            steps.append({"package": f.parent.name, "kind": kind, "start": born, "end": end, "log": f.name,
                          **({"release": m["release"]} if m else {})})
    minors: dict[tuple[str, str], set[str]] = {}
    for st in steps:
        if m := TEST_LOG.match(st["log"]):
            minors.setdefault((st["package"], m["build"]), set()).add(".".join(m["release"].split(".")[:2]))
    for st in steps:
        if st["kind"] != "build" and (m := BUILD_LOG.match(st["log"])) and len(mm := minors.get((st["package"], m["build"]), set())) == 1:
            st["minor"] = next(iter(mm))
    steps.sort(key=lambda x: x["end"])
    prev = sequential
    for st in steps:
        if sequential is not None:
            st["start"], prev = prev, st["end"]
        st["seconds"] = st["end"] - st["start"] if 0 < st["start"] <= st["end"] else None
    return [st for st in steps if st["seconds"] is not None]


def day_before_cut(logs: Path) -> float | None:
    """For the logs of a release day's world (``KEEP/world/build/logs``, bench_release_day.py's ``--keep``):
    the time its ``--setup-only`` run wrote ``KEEP/setup-build.json``; logs last written later are release
    day's own, not the day before's (``log_steps``'s ``until``). None for logs anywhere else."""
    parents = logs.resolve().parents
    marker = parents[2] / "setup-build.json" if len(parents) > 2 else None
    return marker.stat().st_mtime if marker is not None and marker.is_file() else None


def log_costs(steps: list[dict]) -> dict[str, dict[str, float]]:
    """Per package, the mean seconds of each kind of step (``Costs.packages``); a compiled build's also
    per minor (``build_cuda 2.14``)."""
    acc: dict[str, dict[str, list[float]]] = {}
    for st in steps:
        for kind in (st["kind"], *([f"{st['kind']} {st['minor']}"] if "minor" in st else [])):
            acc.setdefault(st["package"], {}).setdefault(kind, []).append(st["seconds"])
    return {p: {k: sum(v) / len(v) for k, v in kinds.items()} for p, kinds in acc.items()}


def table_costs(steps: list[dict]) -> dict[str, float]:
    """The generic costs bench_scale.py's table takes (``--real-costs FILE``) from a run's logged steps: the
    median noarch build and cuda / cpu test target, and a compiled build per row as long as the slowest
    compiled package's mean for that row (the table's compiled packages are all built like it); a shard's
    setup is :data:`SHARD_SETUP` (not in the logs)."""
    def median(kind: str) -> float:
        return statistics.median(st["seconds"] for st in steps if st["kind"] == kind)

    per_package = log_costs(steps)
    slowest = {row: max((k[row] for k in per_package.values() if row in k), default=0.0) for row in ("build_cpu", "build_cuda")}
    return {"build": round(median("build"), 1), "target": round(median("cuda"), 1), "target_cpu": round(median("cpu"), 1),
            "build_fixed": SHARD_SETUP, "compiled_build": round(slowest["build_cpu"], 1),
            "compiled_build_cuda": round(slowest["build_cuda"], 1)}


def measured_run(folder: Path) -> dict:
    """A run of step 3 (``--work`` folder): its measured.json and, per stage, the packages the shard built
    and their test targets (cpu, cuda), from the shard reports."""
    meas = json.loads((folder / "measured.json").read_text())
    stages = []
    for job in meas["jobs"]:
        if not job["job"].startswith("level-"):
            continue
        report = json.loads((folder / f"{job['job']}-{job['i']}-shard-report.json").read_text())
        own = set(report["packages"])
        split = {p: (sum(1 for t in report["tests"] if t["name"] == p and t["variant"] == "cpu"),
                     sum(1 for t in report["tests"] if t["name"] == p and t["variant"] == "cuda")) for p in own}
        stages.append({"job": job["job"], "seconds": job["seconds"], "packages": sorted(own), "split": split})
    return {"wall": meas["wall"], "stages": stages, "load": (meas["load_before"], meas["load_after"]),
            "plan": next(j["seconds"] for j in meas["jobs"] if j["job"] == "plan"),
            "fanin": next(j["seconds"] for j in meas["jobs"] if j["job"] == "check-pr")}


def blind_predict(run: dict, costs: dict[str, dict[str, float]], others: list[dict], setup: float,
                  cores: int = 1) -> tuple[float, list]:
    """``run`` at K = 1 (one shard per stage) from per-package ``costs``: the plan job and the fan-in as the
    mean of ``others`` (runs the costs did not come from; a few seconds), each stage ``setup`` plus its
    packages' steps on ``cores`` sandboxes (the shard's `fanout shard --jobs "$(nproc)"`; a package's tests
    after its build, :func:`bench_scale.schedule`; a step with no measured cost: none, said in the result)."""
    missing = []
    total = statistics.mean(o["plan"] for o in others) + statistics.mean(o["fanin"] for o in others)
    per_stage = []
    for st in run["stages"]:
        units = []
        for p in st["packages"]:
            own = costs.get(p, {})
            cpu, cuda = st["split"][p]
            missing += [f"{p} {kind}" for kind, n in (("build", 1), ("cpu", cpu), ("cuda", cuda)) if n and kind not in own]
            units.append((own.get("build", 0.0), [own.get("cpu", 0.0)] * cpu + [own.get("cuda", 0.0)] * cuda))
        t = setup + schedule(units, cores)
        per_stage.append((st["job"], t, st["seconds"]))
        total += t
    return total, [per_stage, missing]


def blind(sources: list[str], runs: list[str], cores: int = 1) -> list[str]:
    """Step 4 (module docstring): every cost source against every measured run it did not come from, each
    shard's steps on ``cores`` sandboxes (its own shard logs, read one after another: on one)."""
    measured = {}
    own = {}
    for spec in runs:
        folder, _, keep = spec.partition(":")
        run = measured_run(Path(folder))
        measured[folder] = run
        if keep:  # the run's own shard logs, one sandbox at a time: each shard's steps from its job's start
            steps = []
            for st in run["stages"]:
                logs = Path(keep) / f"{st['job']}-0"
                mine = [x for x in log_steps(logs) if x["package"] in st["packages"]]
                end = max(x["end"] for x in mine)
                steps += [x for x in log_steps(logs, sequential=end - st["seconds"]) if x["package"] in st["packages"]]
            own[folder] = log_costs(steps)
    srcs = []
    for spec in sources:  # A+B: B's costs where it has them, else A's
        merged: dict[str, dict[str, float]] = {}
        for part in spec.split("+"):
            path, _, mode = part.partition(":")
            for pkg, kinds in log_costs(log_steps(Path(path)) if mode != "sequential" else []).items():
                merged.setdefault(pkg, {}).update(kinds)
        srcs.append((spec, merged, SHARD_SETUP))
    srcs += [(f"{f} (its own shard logs)", c, 0.0) for f, c in own.items()]
    rows = ["| costs from | run | predicted | measured | error | per stage (predicted / measured) | no cost for |",
            "|---|---|---|---|---|---|---|"]
    for name, costs, setup in srcs:
        for folder, run in measured.items():
            if not all(p in costs for st in run["stages"] for p in st["packages"]):
                continue
            others = [r for f, r in measured.items() if f != folder] or [run]
            pred, (stages, missing) = blind_predict(run, costs, others, setup, cores if setup else 1)
            blindness = "not blind" if name.startswith(folder + " ") else "blind"
            rows.append(f"| {name} | {folder} ({blindness}) | {pred:.0f} s | {run['wall']:.0f} s | "
                        f"{(pred - run['wall']) / run['wall']:+.0%} | "
                        + ", ".join(f"{j} {p:.0f} / {m:.0f} s" for j, p, m in stages) + f" | {', '.join(missing)} |")
    return rows


# --- release day, predicted (nothing run): bench_release_day.py --real from the world's day-before logs

#: bench_release_day.py's stage lines (``  <name>  <seconds> s``), told apart by their first word
DAY_STAGES = ("release", "sweep", "automerge", "build", "promote")
#: each stage's seconds besides its logged builds and tests (PARAMETERS, not measured here): the release's
#: files moved back and the upstream channel (6 GB) re-indexed; the sweep's edits, renders, solve and
#: commits on top of a build command's setup (``SHARD_SETUP``); a merge per bumped package (7 took 0.1 s
#: on the sandbox); the build on main's setup; the promotion gate (3.6 s on the noarch-only real release
#: day of 2026-11-23)
DAY_FIXED = {"release": 30.0, "sweep": SHARD_SETUP + 30.0, "automerge": 0.1, "build": SHARD_SETUP, "promote": 10.0}
NEW_RELEASE = "2.15.0"  # bench_release_day.py --real's (REAL_RELEASES[-1])
NEW_VARIANTS = ("cuda",)  # its targets when the world does not say: PyPI has no cpu torch 2.15.0


@dataclass
class Day:
    """A release day's work as the world says it will be: which packages the sweep builds or tests against
    the new release, and which the build on main tests on the older releases."""

    graph: RecipeGraph
    compiled: set[str]  # built per pytorch minor: new builds for the new minor's rows
    bumped: set[str]  # pins widened (the release not admitted): built again
    swept: list[str]  # what the sweep builds and tests against the release
    new_variants: tuple[str, ...]  # the release's targets (the rows upstream has a pytorch build of)
    before: dict[str, list[tuple[str, str]]]  # per package, the targets (release, variant) it was tested on

    def main(self) -> list[str]:
        """The build on main's packages: the merged (bumped) ones and their dependents."""
        return self.graph.affected(self.bumped)


def new_variants_of(keep: Path, world: Path, release: str) -> tuple[str, ...]:
    """The release's rows: those of its pytorch builds in the folder bench_release_day.py holds them in
    until it appears (``held-release/``) or in the upstream channel once it has; else NEW_VARIANTS."""
    files = [*(keep / "held-release").glob(f"pytorch-{release}-*.conda"),
             *(world / "upstream" / "linux-64").glob(f"pytorch-{release}-*.conda")]
    found = {"cuda" if "cuda" in f.name[len(f"pytorch-{release}-"):] else "cpu" for f in files}
    return tuple(v for v in ("cpu", "cuda") if v in found) or NEW_VARIANTS


def day_of(world: Path, release: str, new_variants: tuple[str, ...], steps: list[dict]) -> Day:
    """The day's structure from the sweep's own plan of the world (conda_distro.sweep.plan: which packages
    get their pins widened, which new builds for the new minor, which are built and tested against it)
    and from what the day before tested (``steps``, its logs)."""
    from conda_distro.distribution import load_distribution
    from conda_distro.sweep.model import NEW_BUILD, WIDEN
    from conda_distro.sweep.plan import is_new_minor, plan_sweep, to_test

    dist = load_distribution(world)
    plan = plan_sweep(dist, release)
    graph = RecipeGraph.from_recipes(dist.readable().recipes)
    swept = to_test(plan, graph, is_new_minor(dist, release))
    before: dict[str, list[tuple[str, str]]] = {}
    for st in steps:
        if st["kind"] in ("cpu", "cuda") and st["release"] != release \
                and (st["release"], st["kind"]) not in before.setdefault(st["package"], []):
            before[st["package"]].append((st["release"], st["kind"]))
    return Day(graph, {d.name for d in plan.decisions if d.action == NEW_BUILD},
               {d.name for d in plan.decisions if d.action == WIDEN}, swept, new_variants, before)


def day_units(day: Day, costs: dict[str, dict[str, float]]) -> tuple[dict, dict, list[str]]:
    """Each stage's units (package -> (its build's seconds, its tests' seconds)) and the costs taken from
    other packages: a package's own cost from the logs, else the median of that kind over the packages
    that have one. The sweep: a bumped package's build, a compiled package's builds of the new rows (a
    minor not built the day before: the mean of its row's builds of the earlier minors), each tested on
    the new targets. The build on main: the sweep's builds and tests reused (same inputs), each package
    tested on the older targets it was tested on the day before."""
    missing: list[str] = []

    def cost(pkg: str, kind: str) -> float:
        if kind in costs.get(pkg, {}):
            return costs[pkg][kind]
        missing.append(f"{pkg} {kind}")
        return statistics.median([c[kind] for c in costs.values() if kind in c] or [0.0])

    sweep = {}
    for n in day.swept:
        build = cost(n, "build") if n in day.bumped else \
            sum(cost(n, f"build_{v}") for v in day.new_variants) if n in day.compiled else 0.0
        sweep[n] = (build, [cost(n, v) for v in day.new_variants])
    old = {n: (0.0, [cost(n, v) for _, v in day.before.get(n, [])]) for n in day.main()}
    return sweep, old, missing


def day_stage(units: dict[str, tuple[float, list[float]]], graph: RecipeGraph, slots: int) -> float:
    """A build command's units on ``slots`` job slots (bench_scale.schedule): a package waits for its
    dependencies in the command to be built and tested; the longest chain of dependents first."""
    names = list(units)
    chain: dict[str, int] = {}
    for n in reversed(graph.order(names)):
        chain[n] = 1 + max((chain[d] for d in graph.dependents(n) if d in chain), default=0)
    waits = [{names.index(d) for d in graph.ancestors(n) if d in units} for n in names]
    return schedule([units[n] for n in names], slots, waits, [chain[n] for n in names])


def predict_day(where: Path, logs: Path | None, release: str, variants: tuple[str, ...] | None, slots: int) -> dict:
    """bench_release_day.py --real's stages and headline on the world ``where`` (its --keep folder, or
    the world in it), from the logs of the day before (``logs``; default the world's own
    ``build/logs``, as its ``build --all`` left them: logs written after ``setup-build.json`` left out)."""
    keep = where if (where / "world" / "distro.yaml").is_file() else where.parent
    world = keep / "world" if (keep / "world" / "distro.yaml").is_file() else where
    logs = logs or world / "build" / "logs"
    steps = log_steps(logs, until=day_before_cut(logs))
    costs = log_costs(steps)
    day = day_of(world, release, variants or new_variants_of(keep, world, release), steps)
    sweep, old, missing = day_units(day, costs)
    stages = dict(DAY_FIXED)
    stages["sweep"] += day_stage(sweep, day.graph, slots)
    stages["automerge"] *= len(day.bumped)
    stages["build"] += day_stage(old, day.graph, slots)
    return {"made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "world": str(world), "logs": str(logs),
            "release": release, "new_targets": list(day.new_variants), "slots": slots, "stages": stages,
            "headline": sum(stages.values()), "compiled": sorted(day.compiled), "bumped": sorted(day.bumped),
            "sweep": {n: {"build": b, "tests": t} for n, (b, t) in sweep.items()},
            "build_on_main": {n: {"tests": t, "targets": [f"{r}/{v}" for r, v in day.before.get(n, [])]}
                              for n, (_, t) in old.items()},
            "costs": costs, "fixed": DAY_FIXED, "steps": len(steps), "no_cost_for": sorted(set(missing))}


def day_lines(pred: dict) -> list[str]:
    s = pred["stages"]
    return [f"release day predicted ({pred['made']}, nothing run): {pred['world']}, {pred['release']} appearing "
            f"(targets: {', '.join(pred['new_targets'])}), {pred['slots']} job slots; costs from {pred['logs']} "
            f"({pred['steps']} logged steps)",
            f"  release appears upstream {s['release']:8.1f} s",
            f"  sweep                    {s['sweep']:8.1f} s   ({len(pred['sweep'])} packages; compiled, built for the new "
            f"minor: {', '.join(pred['compiled']) or 'none'})",
            f"  automerge                {s['automerge']:8.1f} s   ({len(pred['bumped'])} bumped)",
            f"  build on main            {s['build']:8.1f} s   ({len(pred['build_on_main'])} packages, "
            f"{sum(len(x['tests']) for x in pred['build_on_main'].values())} tests on the older releases)",
            f"  promote                  {s['promote']:8.1f} s",
            f"headline: release appearing -> last passing package promoted: {pred['headline']:.1f} s"
            + (f"; no cost of their own for: {', '.join(pred['no_cost_for'])}" if pred["no_cost_for"] else "")]


STAGE_LINE = re.compile(r"^  (?P<name>\S.*?)\s+(?P<s>\d+(?:\.\d+)?) s$")
HEADLINE = re.compile(r"^headline: .*?(?P<s>\d+(?:\.\d+)?) s\b")


def parse_measured(text: str) -> dict:
    """A measured release day: bench_release_day.py's printed output (its stage lines and headline) or a
    JSON of the prediction's shape (``stages``, ``headline``)."""
    if text.lstrip().startswith("{"):
        doc = json.loads(text)
        return {"stages": doc["stages"], "headline": doc["headline"]}
    stages: dict[str, float] = {}
    headline = None
    for line in text.splitlines():
        if (m := STAGE_LINE.match(line)) and (key := m["name"].split()[0]) in DAY_STAGES:
            stages[key] = float(m["s"])
        elif m := HEADLINE.match(line):
            headline = float(m["s"])
    if headline is None:
        raise SystemExit("no 'headline: ... <seconds> s' line in the measured output")
    return {"stages": stages, "headline": headline}


def compare_day(pred: dict, meas: dict) -> tuple[list[str], float]:
    """Predicted vs measured per stage and the headline; the headline's error."""
    rows = ["| stage | predicted | measured | error |", "|---|---|---|---|"]
    for key in DAY_STAGES:
        p, m = pred["stages"].get(key), meas["stages"].get(key)
        err = f"{(p - m) / m:+.0%}" if p is not None and m else ""
        rows.append(f"| {key} | {'—' if p is None else f'{p:.1f} s'} | {'—' if m is None else f'{m:.1f} s'} | {err} |")
    err = (pred["headline"] - meas["headline"]) / meas["headline"]
    rows.append(f"| **headline** | **{pred['headline']:.1f} s** | **{meas['headline']:.1f} s** | **{err:+.0%}** |")
    return rows, err


def make_change(world: Path, name: str) -> str:
    """The branch ``change`` (``change-NAME`` for any package but accelerate, the first one measured):
    ``name``'s recipe with one comment line appended (made once)."""
    branch = "change" if name == "accelerate" else f"change-{name}"
    if not _git(world, "branch", "--list", branch):
        _git(world, "checkout", "-q", "-b", branch)
        with (world / "recipes" / name / "recipe.yaml").open("a") as f:
            f.write("# changed\n")
        _git(world, "commit", "-qam", f"change {name}")
        _git(world, "checkout", "-q", "main")
    return branch


def the_run(world: Path, name: str) -> Run:
    """The PR gate of a change to ``name`` as the model sees it: the affected packages and their targets
    (the mean over them; how many of them cpu)."""
    from conda_distro.distribution import load_distribution

    dist = load_distribution(world).readable()
    graph = RecipeGraph.from_recipes(dist.recipes)
    affected = graph.affected([name])
    per = {a: targets_of(world, a) for a in affected}
    envs = torch_envs(world)
    mean = sum(len(t) for t in per.values()) / len(per)
    cpu = sum(sum(1 for x in t if x.endswith("/cpu")) for t in per.values()) / len(per)
    return Run(graph, affected, set(), targets=round(mean), compiled_builds=1, n_recipes=len(dist.recipes),
               cpu_targets=round(cpu),
               notes=[f"{a}: {len(t)} targets, {envs[a]} test environment(s) with pytorch each" for a, t in per.items()])


def predict(world: Path, name: str, costs: Costs) -> dict:
    run = the_run(world, name)
    tl = timeline(run, 1, costs, LOCAL)
    return {"affected": run.affected, "targets": run.targets, "cpu_targets": run.cpu_targets, "notes": run.notes,
            "timeline": tl, "total": sum(t for _, t in tl), "costs": asdict(costs)}


def run_pr(world: Path, work: Path, ref: str) -> dict:
    from support.ghworkflow import WorkflowRun

    expressions = {"github.base_ref": "main", "github.event.pull_request.number": "7",
                   "github.event.pull_request.head.sha": "a" * 40, "github.server_url": "https://github.com",
                   "github.repository": "owner/repo", "github.run_id": "99", "github.run_attempt": "1"}
    load = _load()
    shutil.rmtree(work / "k1", ignore_errors=True)
    wf = WorkflowRun(ROOT / ".github/workflows/pr.yml", world, ref, work / "k1", expressions,
                     env={"FANOUT_RUNNERS": "1", "FANOUT_PER_SHARD": "1"}).run()
    raw = _raw_run(1, wf, measured_wall(wf), load)
    raw["results"] = {j: r.result for j, r in wf.results.items()}
    for job_id, res in wf.results.items():  # what the shards and the fan-in said, for the record
        for i, (_entry, run, ws) in enumerate(res.runs):
            for f in ("shard-report.json", "comment/comment.md"):
                if (ws / f).is_file():
                    shutil.copy(ws / f, work / f"{job_id}-{i}-{Path(f).name}")
            (work / f"{job_id}-{i}.log").write_text("\n".join(f"{s.name}: exit {s.returncode}\n{s.stdout[-3000:]}\n"
                                                              f"{s.stderr[-3000:]}" for s in run.steps))
    shutil.rmtree(work / "k1", ignore_errors=True)
    return raw


def compare(pred: dict, meas: dict) -> list[str]:
    jobs = {}
    for j in meas["jobs"]:
        key = "plan" if j["job"] == "plan" else "fan-in" if j["job"] == "check-pr" else f"stage {j['job'].split('-')[1]}"
        jobs[key] = max(jobs.get(key, 0.0), j["seconds"])
    rows = ["| job | predicted | measured | error |", "|---|---|---|---|"]
    for key, t in pred["timeline"]:
        m = jobs.get(key, 0.0)
        rows.append(f"| {key} | {t:.1f} s | {m:.1f} s | {(t - m) / m:+.0%} |" if m else f"| {key} | {t:.1f} s | — | |")
    err = (pred["total"] - meas["wall"]) / meas["wall"]
    rows.append(f"| **run (critical path)** | **{pred['total']:.1f} s** | **{meas['wall']:.1f} s** | **{err:+.0%}** |")
    return rows


def release_day_main(args: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    """--release-day (the prediction, written to --out) and --compare (it against a measured run)."""
    if args.release_day:
        logs = Path(args.costs_from[0]) if args.costs_from else None
        variants = tuple(args.new_targets.split(",")) if args.new_targets else None
        pred = predict_day(args.release_day.resolve(), logs, args.release, variants, args.slots)
        if args.out:
            args.out.write_text(json.dumps(pred, indent=1))
    elif args.out and args.out.is_file():
        pred = json.loads(args.out.read_text())
    else:
        ap.error("--compare needs --release-day WORLD or --out FILE (a prediction written before)")
    for line in day_lines(pred):
        print(line)
    if not args.compare:
        return 0
    rows, err = compare_day(pred, parse_measured(args.compare.read_text()))
    print(f"against {args.compare}:")
    for line in rows:
        print(line)
    return 0 if abs(err) <= 0.25 else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("world", type=Path, nargs="?", help="a world of `conda-distro sandbox DIR --real`")
    ap.add_argument("--work", type=Path, help="scratch folder (kept: costs, prediction, measured run)")
    ap.add_argument("--blind", action="store_true", help="step 4: --costs-from sources against --runs, nothing run")
    ap.add_argument("--costs-from", nargs="*", default=[], help="logs folders (LOGS or LOGS:sequential)")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="--blind: a shard's sandboxes side by side "
                    "(pr.yml's `fanout shard --jobs \"$(nproc)\"`; default: this machine's cores)")
    ap.add_argument("--runs", nargs="*", default=[], help="measured runs (a --work folder, or FOLDER:KEEP with "
                    "its shard logs)")
    ap.add_argument("--change", default="accelerate", help="the package the pull request changes (default accelerate)")
    ap.add_argument("--probe", default="einops", help="the package the per-unit costs are measured on (default einops)")
    ap.add_argument("--step", choices=("costs", "predict", "run", "all"), default="all")
    ap.add_argument("--jobs", type=int, default=1, help="the probe's `build --jobs` (default 1: as a shard job runs)")
    ap.add_argument("--release-day", type=Path, metavar="WORLD", help="predict bench_release_day.py --real on this "
                    "world (its --keep folder, or the world in it) from its day-before logs, nothing run; with --out")
    ap.add_argument("--release", default=NEW_RELEASE, help=f"--release-day: the release appearing (default {NEW_RELEASE})")
    ap.add_argument("--new-targets", help="--release-day: the release's rows, comma-separated (default: those of its "
                    "pytorch builds held beside the world or upstream, else " + ",".join(NEW_VARIANTS) + ")")
    ap.add_argument("--slots", type=int, default=2, help="--release-day: job slots (bench_release_day's --jobs 2)")
    ap.add_argument("--out", type=Path, help="--release-day: the prediction's JSON (read back by --compare alone)")
    ap.add_argument("--table-costs", type=Path, metavar="LOGS", help="write bench_scale.py's --real-costs FILE (to "
                    "--out) from a run's logs (a world's build/logs: medians; a compiled build: the slowest package's; in a "
                    "release day's --keep folder, the day before's logs only)")
    ap.add_argument("--compare", type=Path, metavar="MEASURED", help="bench_release_day.py's printed output (or a "
                    "JSON with stages and headline): predicted vs measured per stage (target: within 25 %%)")
    args = ap.parse_args(argv)
    if args.table_costs:
        if args.out is None:
            ap.error("--table-costs needs --out FILE")
        steps = log_steps(args.table_costs, until=day_before_cut(args.table_costs))
        if not any(st["kind"] == "build" for st in steps) or not any(st["kind"] in ("cpu", "cuda") for st in steps):
            ap.error(f"--table-costs {args.table_costs}: no noarch build or no test logs there "
                     "(<package>/<build>.build.log, <build>.<release>-<variant>.test.log): give a world's build/logs")
        costs = table_costs(steps)
        args.out.write_text(json.dumps({"costs": costs, "from": str(args.table_costs), "load": _load()}, indent=1))
        print(f"{args.out}: " + ", ".join(f"{k} {v:.1f} s" for k, v in costs.items()))
        return 0
    if args.release_day or args.compare:
        return release_day_main(args, ap)
    if args.blind:
        for line in blind(args.costs_from, args.runs, args.cores):
            print(line)
        return 0
    if args.world is None or args.work is None:
        ap.error("WORLD and --work are needed (or --blind)")
    world, work = args.world.resolve(), args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.step in ("costs", "all"):
        (work / "costs.json").write_text(json.dumps(measure(world, work / "costs", args.probe, args.jobs), indent=1))
    measured_costs = json.loads((work / "costs.json").read_text())
    costs = replace(Costs(**measured_costs["costs"]))
    print(f"per-unit costs (real world, load {measured_costs['load_before']:.1f} -> {measured_costs['load_after']:.1f}): "
          f"render {costs.render:.2f} s/recipe, build {costs.build:.1f} s, a test target {costs.target:.1f} s (cuda), "
          f"{costs.target_cpu or costs.target:.1f} s (cpu); job {costs.job:.1f} s")
    ref = make_change(world, args.change)
    if args.step in ("predict", "all") or not (work / "prediction.json").is_file():
        (work / "prediction.json").write_text(json.dumps(predict(world, args.change, costs), indent=1))
    pred = json.loads((work / "prediction.json").read_text())
    print(f"predicted PR gate of a change to {args.change} at K = 1: {pred['total']:.1f} s "
          f"({', '.join(f'{k} {t:.0f} s' for k, t in pred['timeline'])}); affected {pred['affected']}, {pred['notes']}")
    if args.step in ("run", "all"):
        (work / "measured.json").write_text(json.dumps(run_pr(world, work, ref), indent=1))
    if (work / "measured.json").is_file():
        meas = json.loads((work / "measured.json").read_text())
        print(f"measured (load {meas['load_before']:.1f} -> {meas['load_after']:.1f}; jobs {meas['results']}):")
        for line in compare(pred, meas):
            print(line)
        return 0 if abs(pred["total"] - meas["wall"]) / meas["wall"] <= 0.25 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
