"""Crash safety: kill -9 at random moments of promote, retire, rollback, build, prune and sweep --commit; reruns converge.

    python bench/bench_kill9.py [--runs N] [--commit-runs N] [--seed S]
                                [--only promote,retire,rollback,rollback-locked,build,prune,prune-remove,sweep,sweep-commit] [--sweep-build]
                                [--workdir DIR]

Setup (not counted): the offline sandbox world, built once (``build --all --jobs 2``), promoted once
(for retire), and a copy whose upstream also holds a stand-in pytorch 2.7.0 (for the sweep). Each
command is first run once uninterrupted on a fresh copy: that is the reference outcome and its
duration ``d``. Then, ``--runs`` times per command, on a fresh copy: start the command in its own
process group, SIGKILL the whole group after a random delay in [0, d] (seeded; the processes that
rattler-build's workers run in die with it, as in a cancelled CI job or a power cut), then rerun the
same command without interruption, and check:

``sweep-commit`` is ``sweep --commit`` killed within its commit phase (commit objects, branches, the
work tree put back as it was), which is short and which random kills over the whole run seldom hit:
the sweep marks the phase's start (``sweep-before-commits``, through the test trace of
``channels/hooks.py``), the bench waits for that mark and kills after a random delay within the
phase's duration in the uninterrupted run (``--commit-runs`` of them, default ``--runs``). git holds its
lock files (``index.lock``, ``refs/heads/….lock``) for well under a millisecond, so in those worlds git's
windows are widened without changing what git does: a ``reference-transaction`` hook sleeps 20 ms in its
``prepared`` state (the ref's lock file exists) and a smudge filter sleeps 20 ms per file a checkout
writes (``index.lock`` held, the work tree half switched): most kills land inside a git command.

* main's repodata names only files that exist with its sha256, right after the kill and after the
  rerun (promote, retire);
* after the rerun: the ledger (``channel_state/``) agrees with main (no drift), main holds exactly what
  the reference run left there; retire: the package is out of main and recorded as retired;
* rollback (on a world promoted, then RETIRED retired and promoted again: two snapshots): right after the
  kill, main's repodata names only files that exist with its sha256; after the rerun main's index equals
  the first snapshot's byte for byte, RETIRED is back, the ledger agrees (``rollback-locked``: killed
  within the part that holds main's lock, where every write happens);
* build: staging's repodata names exactly the package files on disk with their sha256, every result
  in ``build/results`` is for the file that is there, the reference run's artifacts are all built and
  tested, and ``promote --dry-run`` holds nothing because results are "for another build of this file";
* prune (on the built world after three recipes were removed and committed: their builds are stale):
  right after the kill, staging's repodata names only files that exist with its sha256; after the
  rerun, staging holds exactly what the uninterrupted run left, its repodata names exactly its files,
  no results file is left for a file in neither staging nor main, and no journal is left
  (``prune-remove``: killed within the removal phase, which starts once the journal is written);
* sweep --commit: the branch sweep/pytorch-2.7.0 is complete (distro.yaml commit, then one per bumped
  package with the same file contents as the reference run), main checked out again, clean, no journal left,
  no git lock file left in ``.git/``, and the rerun never said "nothing to do" unless the killed run had
  already finished the sweep;
* every rerun: no traceback on stderr.

Prints one line per run and a summary; exit 1 when any invariant is violated (or a rerun fails).
The sweep runs with ``--no-build`` unless ``--sweep-build`` (then it builds and tests 10 packages
against 2.7.0 each time: minutes per run).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.worlds import copy_world  # noqa: E402 - the tests' world copy (package files hard-linked)

from conda_distro.util.scratch import new_scratch

SWEEP_RELEASE = "2.7.0"
SWEEP_BRANCH = f"sweep/pytorch-{SWEEP_RELEASE}"
BUILD_NAMES = ("tensorutils", "layerkit")  # built and tested in the build scenario (their tests pass)
RETIRED = "trainloop"  # a leaf of the graph: retire needs no --force
DROPPED = ("fastquant", "quantserve", "hookprofiler")  # recipes removed in the prune scenario's world


# ---------------------------------------------------------------------------------------------
# worlds


def cli(world: Path, *argv: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conda_distro", *argv, "--root", str(world), "--format", "json"],
                          capture_output=True, text=True, timeout=timeout)


@dataclass(frozen=True)
class Templates:
    sandbox: Path  # fresh sandbox world (git repository, nothing built)
    built: Path  # after build --all
    promoted: Path  # after build --all and promote
    sweep: Path  # fresh sandbox world whose upstream also holds pytorch 2.7.0
    stale: Path  # after build --all, then DROPPED's recipes removed and committed (their builds are stale)
    rolled: Path  # promoted (snapshot 1), RETIRED retired, promoted again (snapshot 2: main without RETIRED)


def make_templates(workdir: Path, *, sandbox: Path | None = None, built: Path | None = None,
                   sweep: Path | None = None) -> Templates:
    """Worlds to copy per run (given ones are reused: the tests pass their session templates)."""
    ready = ".kill9-ready"  # a template made by an earlier run in the same --workdir is reused

    def fresh(path: Path) -> bool:
        if (path / ready).is_file():
            return False
        shutil.rmtree(path, ignore_errors=True)
        return True

    if sandbox is None:
        from conda_distro.sandbox.world import SandboxOptions, create_sandbox

        sandbox = workdir / "t-sandbox"
        if fresh(sandbox):
            create_sandbox(SandboxOptions(path=sandbox, force=True))
            (sandbox / ".git" / "info" / "exclude").write_text(f"{ready}\n")
            (sandbox / ready).write_text("")
    if built is None:
        built = workdir / "t-built"
        if fresh(built):
            copy_world(sandbox, built)
            res = cli(built, "build", "--all", "--jobs", "2")
            if res.returncode not in (0, 1):
                raise SystemExit(f"setup: build --all failed ({res.returncode}):\n{res.stderr[-3000:]}")
            (built / ready).write_text("")
    promoted = workdir / "t-promoted"
    if fresh(promoted):
        copy_world(built, promoted)
        res = cli(promoted, "promote")
        if res.returncode not in (0, 1):
            raise SystemExit(f"setup: promote failed ({res.returncode}):\n{res.stderr[-3000:]}")
        (promoted / ready).write_text("")
    stale = workdir / "t-stale"
    if fresh(stale):
        copy_world(built, stale)
        subprocess.run(["git", "-C", str(stale), "rm", "-r", "-q", *(f"recipes/{n}" for n in DROPPED)], check=True)
        subprocess.run(["git", "-C", str(stale), "-c", "user.name=bench", "-c", "user.email=bench@invalid", "commit",
                        "-q", "-m", "drop recipes"], check=True)
        (stale / ready).write_text("")
    if sweep is None:
        from conda_distro.sandbox import PublishOptions, publish_release

        sweep = workdir / "t-sweep"
        if fresh(sweep):
            copy_world(sandbox, sweep)
            publish_release(PublishOptions(world=sweep, version=SWEEP_RELEASE))
            (sweep / ready).write_text("")
    rolled = workdir / "t-rolled"
    if fresh(rolled):
        copy_world(promoted, rolled)
        for argv in (("retire", RETIRED, "--reason", "kill -9 bench"), ("promote",)):
            res = cli(rolled, *argv)
            if res.returncode not in (0, 1):
                raise SystemExit(f"setup: {' '.join(argv)} failed ({res.returncode}):\n{res.stderr[-3000:]}")
        (rolled / ready).write_text("")
    return Templates(sandbox=sandbox, built=built, promoted=promoted, sweep=sweep, stale=stale, rolled=rolled)


# ---------------------------------------------------------------------------------------------
# invariants (each returns a list of violations, empty when it holds)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def indexed_files(channel: Path) -> tuple[dict[str, str], list[str]]:
    """artifact -> sha256 named by the channel's repodata, and the violations: names of missing files
    or files whose sha256 differs, and unreadable repodata."""
    named: dict[str, str] = {}
    bad: list[str] = []
    for rd in sorted(channel.glob("*/repodata.json")):
        try:
            doc = json.loads(rd.read_text())
        except ValueError as exc:
            bad.append(f"{rd} does not parse: {exc}")
            continue
        for key in ("packages", "packages.conda"):
            for fn, rec in (doc.get(key) or {}).items():
                art, path = f"{rd.parent.name}/{fn}", rd.parent / fn
                named[art] = rec.get("sha256", "")
                if not path.is_file():
                    bad.append(f"{channel.name}'s repodata names {art}, which does not exist")
                elif _sha256(path) != rec.get("sha256"):
                    bad.append(f"{channel.name}'s repodata has another sha256 for {art} than the file")
    return named, bad


def main_dir(world: Path) -> Path:
    return world / "build" / "channels" / "pytorch"


def check_main(world: Path) -> list[str]:
    return indexed_files(main_dir(world))[1]


def check_ledger(world: Path) -> list[str]:
    from conda_distro.state.ledger import Ledger, compare_with_channel

    named, bad = indexed_files(main_dir(world))
    if bad:
        return bad

    @dataclass(frozen=True)
    class F:
        sha256: str

    drift = compare_with_channel(Ledger(world / "channel_state").load_all(), {a: F(s) for a, s in named.items()})
    return [f"ledger drift: {d.artifact} {d.kind} ({d.detail})" for d in drift]


def check_staging(world: Path) -> list[str]:
    from conda_distro.state.results import ResultsStore

    staging = world / "build" / "channels" / "staging"
    named, bad = indexed_files(staging)
    on_disk = {f"{p.parent.name}/{p.name}" for p in staging.glob("*/*.conda")}
    bad += [f"staging holds {a}, which its repodata does not name" for a in sorted(on_disk - set(named))]
    store = ResultsStore(world / "build" / "results")
    for art, digest in named.items():
        res = store.get(art)
        if res is not None and res.sha256 != digest:
            bad.append(f"the results of {art} are for another build of it")
    return bad


def _names(artifacts) -> set[str]:
    return {a.split("/", 1)[1].rsplit("-", 2)[0] for a in artifacts}


# ---------------------------------------------------------------------------------------------
# scenarios


@dataclass
class Scenario:
    name: str
    template: Path
    argv: tuple[str, ...]
    ok_codes: tuple[int, ...]  # exit codes of a complete run
    after_kill: Callable[[Path], list[str]]  # must hold right after the kill
    after_rerun: Callable[[Path, Reference], list[str]]  # must hold after the rerun
    phase: str | None = None  # kill within the phase that starts at this crash_point (else within the whole run)


@dataclass
class Reference:
    seconds: float  # the whole run, or (a phased scenario) from the phase's start to the end
    outcome: dict = field(default_factory=dict)


WIDEN_HOOK = """#!/bin/sh
# bench_kill9: hold the ref lock files a little longer, so that a kill can land while git holds them
[ "$1" = prepared ] && sleep 0.02
cat >/dev/null
exit 0
"""


def widen_git_windows(world: Path) -> None:
    """Make git hold its lock files longer in ``world`` (see the module docstring); nothing else changes."""
    hook = world / ".git" / "hooks" / "reference-transaction"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(WIDEN_HOOK)
    hook.chmod(0o755)
    (world / ".git" / "info").mkdir(exist_ok=True)
    (world / ".git" / "info" / "attributes").write_text("recipes/** filter=kill9slow\ndistro.yaml filter=kill9slow\n")
    for key, value in (("smudge", "sleep 0.02; cat"), ("clean", "cat")):
        subprocess.run(["git", "-C", str(world), "config", f"filter.kill9slow.{key}", value], check=True)


def _start(sc: Scenario, world: Path) -> tuple[subprocess.Popen, Path | None]:
    """Start the command in its own process group; a phased scenario traces its steps to a file."""
    cmd = [sys.executable, "-m", "conda_distro", *sc.argv, "--root", str(world), "--format", "json"]
    trace = world.parent / f"{world.name}.trace" if sc.phase else None
    env = dict(os.environ)
    if trace is not None:
        widen_git_windows(world)
        trace.unlink(missing_ok=True)
        env["CONDA_DISTRO_TEST_TRACE"] = str(trace)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    return proc, trace


def _phase_start(proc: subprocess.Popen, trace: Path, step: str) -> float | None:
    """Wait (polling every millisecond) until the command passes ``step``; its time.monotonic() then, or
    None when the command ended without passing it."""
    while True:
        try:
            for line in trace.read_text().splitlines():
                name, _, stamp = line.partition(" ")
                if name == step:
                    return float(stamp)
        except (OSError, ValueError):
            pass
        if proc.poll() is not None:
            return None
        time.sleep(0.001)


def _promote_final(world: Path, ref: Reference) -> list[str]:
    bad = check_ledger(world)
    named, _ = indexed_files(main_dir(world))
    if set(named) != set(ref.outcome["main"]):
        bad.append(f"main holds {sorted(set(named) ^ set(ref.outcome['main']))} unlike the uninterrupted run")
    return bad


def _retire_final(world: Path, ref: Reference) -> list[str]:
    from conda_distro.state.ledger import Ledger

    bad = check_ledger(world)
    named, _ = indexed_files(main_dir(world))
    if RETIRED in _names(named):
        bad.append(f"{RETIRED} is still in main")
    state = Ledger(world / "channel_state").load(RETIRED)
    if state is None or not state.artifacts or any(a.retired is None for a in state.artifacts):
        bad.append(f"the ledger does not record every {RETIRED} artifact as retired")
    return bad


def _build_final(world: Path, ref: Reference) -> list[str]:
    bad = check_staging(world)
    named, _ = indexed_files(world / "build" / "channels" / "staging")
    missing = set(ref.outcome["staging"]) - set(named)
    if missing:
        bad.append(f"artifacts of the uninterrupted run missing from staging: {sorted(missing)}")
    res = cli(world, "promote", "--dry-run")
    try:
        held = json.loads(res.stdout).get("held", [])
    except ValueError:
        return bad + [f"promote --dry-run gave no JSON (exit {res.returncode}): {res.stderr[-500:]}"]
    bad += [f"promote holds {h['artifact']}: {h.get('detail')}" for h in held
            if "another build of this file" in (h.get("detail") or "")]
    return bad


def check_staging_index(world: Path) -> list[str]:
    return indexed_files(world / "build" / "channels" / "staging")[1]


def _prune_final(world: Path, ref: Reference) -> list[str]:
    bad = check_staging(world)
    named, _ = indexed_files(world / "build" / "channels" / "staging")
    if set(named) != set(ref.outcome["staging"]):
        bad.append(f"staging holds {sorted(set(named) ^ set(ref.outcome['staging']))} unlike the uninterrupted run")
    main, _ = indexed_files(main_dir(world))
    left = [p.name for p in (world / "build" / "results").glob("*.json")
            if p.name[:-5].replace("__", "/", 1) not in named and p.name[:-5].replace("__", "/", 1) not in main]
    if left:
        bad.append(f"results left for files in neither staging nor main: {sorted(left)}")
    if (world / "build" / "prune.journal.json").exists():
        bad.append("a prune journal is left behind")
    return bad


def _sweep_branch(world: Path) -> dict[str, str]:
    """path -> content, one entry per commit of the sweep branch after its base (in order)."""
    out = subprocess.run(["git", "-C", str(world), "log", "--reverse", "--format=%H", f"main..{SWEEP_BRANCH}"],
                         capture_output=True, text=True)
    commits = {}
    for sha in out.stdout.split():
        files = subprocess.run(["git", "-C", str(world), "show", "--name-only", "--format=", sha],
                               capture_output=True, text=True).stdout.split()
        for f in files:
            commits[f"{len(commits)}:{f}"] = subprocess.run(["git", "-C", str(world), "show", f"{sha}:{f}"],
                                                            capture_output=True, text=True).stdout
    return commits


def _sweep_final(world: Path, ref: Reference) -> list[str]:
    bad = []
    locks = sorted(p.relative_to(world).as_posix() for p in (world / ".git").rglob("*.lock"))
    if locks:
        bad.append(f"git lock files left: {locks}")
    head = subprocess.run(["git", "-C", str(world), "symbolic-ref", "--short", "HEAD"], capture_output=True, text=True)
    if head.stdout.strip() != "main":  # the sweep returns to the branch it started from
        bad.append(f"HEAD is {head.stdout.strip() or head.stderr.strip()}, not main")
    status = subprocess.run(["git", "-C", str(world), "status", "--porcelain", "--", "recipes", "distro.yaml"],
                            capture_output=True, text=True).stdout
    if status.strip():
        bad.append(f"uncommitted changes after the rerun: {status.strip().splitlines()[:3]}")
    branch = _sweep_branch(world)
    if list(branch) != list(ref.outcome["branch"]):
        bad.append(f"the branch has commits {list(branch)}, the uninterrupted run {list(ref.outcome['branch'])}")
    elif branch != ref.outcome["branch"]:
        bad.append("the branch's files differ from the uninterrupted run's")
    if list((world / "build" / "sweep").glob("*.journal.json")):
        bad.append("a sweep journal is left behind")
    return bad


def first_snapshot(world: Path) -> str:
    from conda_distro.enduser.snapshots import SnapshotStore

    snaps = SnapshotStore(world / "channel_state").all()
    if len(snaps) < 2:
        raise SystemExit(f"setup: {world} should hold two snapshots, not {len(snaps)}")
    return snaps[0].name


def _rollback_final(world: Path, ref: Reference) -> list[str]:
    """Main is exactly the first snapshot (its index byte for byte, RETIRED back in), no ledger drift."""
    bad = check_ledger(world)
    main = main_dir(world)
    snap = main / "label" / first_snapshot(world)
    for rd in sorted(snap.glob("*/repodata.json")):
        mine = main / rd.parent.name / "repodata.json"
        if not mine.is_file() or mine.read_bytes() != rd.read_bytes():
            bad.append(f"main's {rd.parent.name}/repodata.json differs from {snap.name}'s")
    named, _ = indexed_files(main)
    if RETIRED not in _names(named):
        bad.append(f"{RETIRED} was not restored")
    return bad


def scenarios(t: Templates, sweep_build: bool) -> dict[str, Scenario]:
    none = lambda world: []  # noqa: E731
    sweep_argv = ("sweep", "--pytorch", SWEEP_RELEASE, "--commit", *(() if sweep_build else ("--no-build",)))
    return {
        "promote": Scenario("promote", t.built, ("promote",), (0, 1), check_main, _promote_final),
        "retire": Scenario("retire", t.promoted, ("retire", RETIRED, "--reason", "kill -9 bench"), (0,), check_main,
                           _retire_final),
        "build": Scenario("build", t.sandbox, ("build", *BUILD_NAMES), (0,), none, _build_final),
        "prune": Scenario("prune", t.stale, ("prune",), (0,), check_staging_index, _prune_final),
        "prune-remove": Scenario("prune-remove", t.stale, ("prune",), (0,), check_staging_index, _prune_final,
                                 phase="prune-after-journal"),
        "rollback": Scenario("rollback", t.rolled, ("rollback", "--to", first_snapshot(t.rolled), "--why", "kill -9 bench"),
                             (0,), check_main, _rollback_final),
        "rollback-locked": Scenario("rollback-locked", t.rolled, ("rollback", "--to", first_snapshot(t.rolled), "--why",
                                                                  "kill -9 bench"), (0,), check_main, _rollback_final,
                                    phase="rollback-locked"),
        "sweep": Scenario("sweep", t.sweep, sweep_argv, (0,), none, _sweep_final),
        "sweep-commit": Scenario("sweep-commit", t.sweep, sweep_argv, (0,), none, _sweep_final,
                                 phase="sweep-before-commits"),
    }


def reference(sc: Scenario, world: Path) -> Reference:
    t0 = time.monotonic()
    proc, trace = _start(sc, world)
    started = _phase_start(proc, trace, sc.phase) if trace is not None and sc.phase else t0
    _, err = proc.communicate()
    if started is None:
        raise SystemExit(f"reference run of {sc.name} never reached {sc.phase}:\n{err[-3000:]}")
    ref = Reference(time.monotonic() - started)
    if proc.returncode not in sc.ok_codes:
        raise SystemExit(f"reference run of {sc.name} exited {proc.returncode}:\n{err[-3000:]}")
    ref.outcome = {"main": dict(indexed_files(main_dir(world))[0]),
                   "staging": dict(indexed_files(world / "build" / "channels" / "staging")[0]),
                   "branch": _sweep_branch(world) if sc.name.startswith("sweep") else {}}
    return ref


@dataclass
class RunResult:
    scenario: str
    delay: float
    killed: bool
    rerun_code: int
    violations: list[str]
    git_leftovers: list[str] = field(default_factory=list)  # git lock files (and the private index) the kill left


def run_once(sc: Scenario, world: Path, delay: float, ref: Reference) -> RunResult:
    proc, trace = _start(sc, world)
    if trace is not None and sc.phase and _phase_start(proc, trace, sc.phase) is None:
        delay = 0.0  # ended (or failed) before the phase: nothing to kill
    try:
        proc.communicate(timeout=delay)
        killed = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the command and every process it started
        proc.communicate()
        killed = True
    violations = [f"after the kill: {v}" for v in sc.after_kill(world)]
    leftovers = sorted(p.relative_to(world).as_posix() for p in (world / ".git").rglob("*")
                       if p.name.endswith(".lock") or p.name.startswith("conda-distro-sweep.index"))
    complete = not sc.after_rerun(world, ref) if sc.name.startswith("sweep") else True  # did the kill come too late?
    rerun = cli(world, *sc.argv)
    if "Traceback" in rerun.stderr:
        violations.append(f"the rerun printed a traceback: {rerun.stderr.strip()[-800:]}")
    # a sweep the kill came too late for has finished: a second sweep of the release refuses (exit 2) naming the
    # read-only `sweep report`
    refused = complete and sc.name.startswith("sweep") and rerun.returncode == 2 and "sweep report" in rerun.stderr
    if rerun.returncode not in sc.ok_codes and not refused:
        violations.append(f"the rerun exited {rerun.returncode}: {rerun.stderr.strip()[-800:]}")
    elif not complete and "nothing to do" in (json.loads(rerun.stdout).get("message") or ""):
        violations.append("the rerun said 'nothing to do' over an unfinished sweep")
    violations += sc.after_rerun(world, ref)
    return RunResult(sc.name, delay, killed, rerun.returncode, violations, leftovers)


def run_bench(templates: Templates, workdir: Path, *, runs: int, seed: int, only: tuple[str, ...],
              sweep_build: bool = False, commit_runs: int | None = None,
              log: Callable[[str], None] = lambda line: print(line, flush=True)) -> list[RunResult]:
    rng = random.Random(seed)
    results: list[RunResult] = []
    for name, sc in scenarios(templates, sweep_build).items():
        if name not in only:
            continue
        shutil.rmtree(workdir / f"{name}-reference", ignore_errors=True)
        ref = reference(sc, copy_world(sc.template, workdir / f"{name}-reference"))
        (workdir / f"{name}-reference.trace").unlink(missing_ok=True)
        log(f"{name}: uninterrupted run {ref.seconds:.2f} s" + (f" from {sc.phase}" if sc.phase else ""))
        for i in range(commit_runs if sc.phase and commit_runs is not None else runs):
            shutil.rmtree(workdir / f"{name}-{i}", ignore_errors=True)
            world = copy_world(sc.template, workdir / f"{name}-{i}")
            delay = rng.uniform(0.0, ref.seconds)
            r = run_once(sc, world, delay, ref)
            results.append(r)
            if sc.phase:
                (world.parent / f"{world.name}.trace").unlink(missing_ok=True)
            when = f"{delay:5.3f} s{' into the phase' if sc.phase else ''}"
            left = f", left {', '.join(r.git_leftovers)}" if r.git_leftovers else ""
            log(f"  {name} #{i}: kill after {when} ({'killed' if r.killed else 'had finished'}{left}), rerun exit "
                f"{r.rerun_code}, {len(r.violations)} violation(s)" + "".join(f"\n      - {v}" for v in r.violations))
            shutil.rmtree(world, ignore_errors=True)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="killed runs per command")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--commit-runs", type=int, default=None,
                    help="killed runs of sweep-commit (kills within the sweep's commit phase); default --runs")
    ap.add_argument("--only", default="promote,retire,rollback,rollback-locked,build,prune,prune-remove,sweep,sweep-commit")
    ap.add_argument("--sweep-build", action="store_true", help="sweep with builds and tests (slow)")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the worlds here (default: a temp folder)")
    args = ap.parse_args()
    workdir = args.workdir or new_scratch("conda-distro-bench-kill-")
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RATTLER_CACHE_DIR", str(workdir / "rattler-cache"))
    t0 = time.monotonic()
    templates = make_templates(workdir)
    print(f"setup {time.monotonic() - t0:.0f} s", flush=True)
    results = run_bench(templates, workdir, runs=args.runs, seed=args.seed, only=tuple(args.only.split(",")),
                        sweep_build=args.sweep_build, commit_runs=args.commit_runs)
    bad = [r for r in results if r.violations]
    by = {}
    for r in results:
        by.setdefault(r.scenario, []).append(r)
    for name, rs in by.items():
        left = sum(bool(r.git_leftovers) for r in rs)
        print(f"{name:8} {len(rs)} runs, {sum(r.killed for r in rs)} killed mid-run"
              + (f", {left} leaving git lock files behind" if left else "")
              + f", {sum(bool(r.violations) for r in rs)} with violations")
    print(f"total: {len(results)} runs, {len(bad)} with violations ({time.monotonic() - t0:.0f} s)")
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
