"""Benchmark and end-to-end check: a life of the channel, months of a sandbox world played through the CLI.

    python bench/bench_lifecycle.py [--minors 3] [--keep DIR]

It makes a sandbox world (`conda-distro sandbox DIR`) and plays, day by day on the test clock
(``CONDA_DISTRO_TEST_TODAY``; git commits are dated the same day), what happens to a distribution:

* PyTorch minors arriving (2.6.0 — published upstream since day 0, supported from its release day —,
  then 2.7.0, 2.8.0, … by `sandbox publish-release`) and bugfix releases (2.6.1, 2.7.1): each time the
  release-day sweep (`sweep --pytorch VER --commit`), automerge of the passing packages' branches, the
  build on main, promote; the support window (the two newest minors, a bugfix replacing its .0) kept by a PR;
* a package broken by a release and fixed after release day, then admitted late: the script follows
  `sweep report --pytorch VER`'s ``next_command`` (`sweep --pytorch VER --package NAME`);
* PRs on git branches, each gated by `check-pr --base main` and merged, then `build --changed-since` and
  `promote`, as CI does: a new package (proposal and recipe), a change that breaks a dependent (check-pr must
  fail it) fixed in the same PR with a version bump of both, a fix of a package broken since day 0, a
  version bump of the lockstep package for each new minor, a version bump held by a `block` hint that
  expires (the clock moves past it; lint then reports it and a PR removes it), dropping old releases;
* upstream publishing a second build of a package (`sandbox publish-package`) and then a version that breaks
  a package in main (verify-channel must catch it; a PR bounds the pin);
* a package lagging for months, reported by `report unmaintained` as `retire`, retired (`retire`) and its
  recipe removed.

After every step it checks the invariants, each counted once per check:

* main installable on every supported target: `verify-channel` exits 0 (run again whenever main's index
  or the supported releases changed; only the step that breaks main upstream expects exit 1);
* the ledger equals main: every file main's index names is in `channel_state/` (not retired) and back;
* staging: every candidate is in main, pruned (`prune` removes each stale build) or held; a hold that a
  build decides (class ``waiting``) has its advice followed (each `conda-distro …` command in it run), and
  must be gone after that; a ``failure`` or ``permanent`` hold must be one the life expects (a person's
  fix, a hint) and is gone once the life made the fix — else it is a **stuck** candidate;
* `promote --dry-run`, `excuses` and the status page agree on every package (verdict per name);
* the repository is clean (on main, nothing modified or untracked, no branch left) after every step;
* the temp folder (``TMPDIR`` of every command: a private folder; with ``--test-tmpdir-on-disk`` also
  ``CONDA_DISTRO_TEST_TMPDIR``) holds nothing after a command, and the world's ``build/`` stays under a bound.

Test environments go where the tool puts them for every user: the test sandbox's own /tmp, in memory while
memory has room, gone with the sandbox (nothing of it can be left on the host). ``--test-tmpdir-on-disk``
points ``CONDA_DISTRO_TEST_TMPDIR`` at a private folder on disk instead and checks that it is left empty
too: the slow test ``tests/test_lifecycle.py`` plays its life that way, so that path's hygiene stays
checked; it costs about 3x the test time on this machine's disk, so it is not the timed default.

It prints days simulated, steps, commands run, invariant checks, findings (each failed invariant), wall
time and stuck candidates. Exit 1 when an invariant failed or a candidate is stuck. Target: < 600 s on
2 cores (``--minors 3``). The slow test ``tests/test_lifecycle.py`` plays a shortened life (one minor).
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from conda_distro.util.scratch import new_scratch

TARGET_S = 600.0
COMMAND_TIMEOUT = 1800  # seconds one command may take (a hung command is a finding, never a hung bench)
BUILD_BOUND = 400 * 1024 * 1024  # bytes the world's build/ may hold
BOT = "conda-distro bot <bot@example.invalid>"
ALL_MINORS = ("2.6.0", "2.7.0", "2.8.0", "2.9.0")
BUGFIX = {"2.6.0": "2.6.1", "2.7.0": "2.7.1"}
ADVICE_CMD = re.compile(r"`conda-distro ([^`]+)`")
CLASS_VERDICT = {"failure": "held-temporarily", "waiting": "waiting", "permanent": "held-permanently"}


class Finding(Exception):
    """An invariant that does not hold (reported, counted; the life goes on where it can)."""


@dataclass
class Running:
    """A CLI command started by :meth:`Life.launch`."""

    args: tuple[str, ...]
    fmt: bool
    proc: subprocess.Popen
    began: float


class Life:
    def __init__(self, base: Path, minors: int, say: Callable[[str], None] = print,
                 test_tmpdir_on_disk: bool = False) -> None:
        self.base = base
        self.root = base / "world"
        self.tmp = base / "tmp"
        self.testtmp = base / "testtmp"
        self.test_tmpdir_on_disk = test_tmpdir_on_disk
        self.page = base / "page"
        self.src = base / "src"
        for d in (self.tmp, self.testtmp, self.src):
            d.mkdir(parents=True, exist_ok=True)
        self.minors = ALL_MINORS[:minors]
        self.say = say
        self.start = dt.date.today()
        self.day = self.start
        self.steps = 0
        self.commands = 0
        self.checks = 0
        self.findings: list[str] = []
        self.stuck: list[str] = []
        self.expected: dict[str, str] = {}  # package -> why a failure/permanent hold is expected (a person acts later)
        self.broken_main: str | None = None  # the step that broke main upstream, until its fix
        self.verified: tuple | None = None
        self.timings: list[tuple[int, str, float]] = []  # (step, command, seconds): where the time goes
        self.max_build = 0
        self.max_tmp = 0
        self.sequence = 0

    # ------------------------------------------------------------------ running things
    def env(self, author: str | None = None) -> dict[str, str]:
        noon = dt.datetime.combine(self.day, dt.time(12), dt.UTC)
        stamp = f"{int(noon.timestamp()) + self.sequence} +0000"  # git's raw date form (GitPython reads it too)
        self.sequence += 1
        env = {**os.environ, "CI": "true", "CONDA_DISTRO_TEST_TODAY": self.day.isoformat(), "TMPDIR": str(self.tmp),
               "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        env.pop("CONDA_DISTRO_TEST_TMPDIR", None)  # never inherited: the default place, or the life's own
        if self.test_tmpdir_on_disk:
            env["CONDA_DISTRO_TEST_TMPDIR"] = str(self.testtmp)
        if author:
            name, email = author.rsplit(" <", 1)
            env.update(GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email.rstrip(">"),
                       GIT_COMMITTER_NAME=name, GIT_COMMITTER_EMAIL=email.rstrip(">"))
        return env

    def cli(self, *args: str, ok: tuple[int, ...] = (0, 1), fmt: bool = True) -> tuple[int, dict]:
        return self.finish(self.launch(*args, fmt=fmt), ok=ok)

    def launch(self, *args: str, fmt: bool = True) -> Running:
        """A command started in the background: commands that only read (promote --dry-run, excuses, the
        status page, verify-channel) run side by side on the machine's cores; :meth:`finish` waits for it."""
        self.commands += 1
        cmd = [sys.executable, "-m", "conda_distro", *args]
        if fmt:
            cmd += ["--format", "json"]
        proc = subprocess.Popen(cmd, cwd=self.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env(BOT))
        return Running(args, fmt, proc, time.perf_counter())

    def finish(self, run: Running, ok: tuple[int, ...] = (0, 1)) -> tuple[int, dict]:
        args, fmt = run.args, run.fmt
        try:
            out, err = run.proc.communicate(timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            run.proc.kill()
            run.proc.communicate(timeout=60)
            raise Finding(f"`conda-distro {' '.join(args)}` did not finish within {COMMAND_TIMEOUT} s") from None
        proc = subprocess.CompletedProcess(run.proc.args, run.proc.returncode, out, err)
        self.timings.append((self.steps, " ".join(args), time.perf_counter() - run.began))
        if proc.returncode not in ok:
            raise Finding(f"`conda-distro {' '.join(args)}` exited {proc.returncode}: {proc.stderr.strip()[-1500:]}")
        if "Traceback (most recent call last)" in proc.stderr:
            raise Finding(f"`conda-distro {' '.join(args)}` printed a traceback: {proc.stderr[-1500:]}")
        try:
            doc = json.loads(proc.stdout) if fmt else {}
        except json.JSONDecodeError:
            doc = {}
        return proc.returncode, doc

    def git(self, *args: str, author: str = BOT, check: bool = True) -> str:
        proc = subprocess.run(["git", *args], cwd=self.root, capture_output=True, text=True, check=False,
                              env=self.env(author))
        if check and proc.returncode != 0:
            raise Finding(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def edit(self, rel: str, old: str, new: str) -> None:
        path = self.root / rel
        text = path.read_text()
        if old not in text:
            raise Finding(f"the life's own edit of {rel} did not apply: {old!r} not found")
        path.write_text(text.replace(old, new, 1))

    def write(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def move_to(self, days: int) -> None:
        self.day = self.start + dt.timedelta(days=days)

    # ------------------------------------------------------------------ steps
    def step(self, day: int, name: str, fn: Callable[[], None]) -> None:
        self.move_to(day)
        self.steps += 1
        t = time.perf_counter()
        try:
            fn()
        except Finding as f:
            self.findings.append(f"day {day} {name}: {f}")
            self.say(f"           FINDING: {f}")
        self.invariants(name)
        self.say(f"  day {day:3} {name:58} {time.perf_counter() - t:6.1f} s"
                 f"  (checks {self.checks}, findings {len(self.findings)})")

    def tend(self) -> None:
        """What CI and the release managers do after every change on main: promote, following every hold's
        advice a build decides, prune what can never be promoted, and commit the ledger."""
        followed: dict[str, str] = {}
        for _round in range(4):
            _, plan = self.cli("promote", "--dry-run")
            self.agree(plan)
            actions: list[str] = []
            stale = []
            for h in plan.get("held", []):
                cls, name = h.get("class"), h["name"]
                if not h.get("advice"):
                    self.stuck_candidate(h, "held without advice")
                if cls == "stale":
                    stale.append(h["artifact"])
                elif cls == "waiting":
                    key = f"{h['artifact']}:{h['reason']}"
                    if key in followed:
                        self.stuck_candidate(h, f"still {h['reason']} after following its advice ({followed[key]})")
                        continue
                    cmds = ADVICE_CMD.findall(h["advice"])
                    if not cmds:
                        self.stuck_candidate(h, "waiting, and its advice names no command")
                        continue
                    followed[key] = "; ".join(cmds)
                    actions.extend(c for c in cmds if c not in actions)
                elif cls in ("failure", "permanent") and name not in self.expected:
                    self.stuck_candidate(h, "held, and nothing the life does will fix it")
            if stale:
                self.checks += 1
                self.cli("prune")
                _, again = self.cli("promote", "--dry-run")
                left = sorted(set(stale) & {h["artifact"] for h in again.get("held", [])})
                if left:
                    raise Finding(f"prune left stale builds in staging: {left}")
            for c in actions:
                args = c.split()
                if args[0] == "promote":
                    continue
                self.cli(*args)
            code, done = self.cli("promote")
            if done.get("promoted"):
                self.say(f"           promoted {', '.join(sorted(p['artifact'].split('/')[-1] for p in done['promoted']))}")
            self.commit_ledger()
            if not actions:
                break

    def stuck_candidate(self, held: dict, why: str) -> None:
        line = f"day {(self.day - self.start).days}: {held['artifact']} ({held['reason']}): {why}; advice: {held.get('advice')}"
        if line not in self.stuck:
            self.stuck.append(line)

    def commit_ledger(self) -> None:
        self.git("add", "-A", "channel_state")
        if self.git("status", "--porcelain", "channel_state"):
            self.git("commit", "-qm", "channel_state: promote")

    # ------------------------------------------------------------------ invariants
    def invariants(self, name: str) -> None:
        # verify-channel and promote --dry-run run side by side with the other checks (all of them only read)
        verify, dry = self.start_verify(), self.launch("promote", "--dry-run")
        for check in (self.check_repo_clean, self.check_ledger, lambda: self.check_main_installable(verify),
                      lambda: self.check_staging(dry), self.check_bounded):
            self.checks += 1
            try:
                check()
            except Finding as f:
                self.findings.append(f"day {(self.day - self.start).days} after {name}: {f}")
                self.say(f"           FINDING: {f}")

    def check_repo_clean(self) -> None:
        branch = self.git("rev-parse", "--abbrev-ref", "HEAD")
        dirty = self.git("status", "--porcelain")
        others = [b for b in self.git("branch", "--format=%(refname:short)").split() if b != "main"]
        if branch != "main" or dirty or others:
            raise Finding(f"repository not clean: on {branch}, {dirty[:300]!r}, branches {others}")

    def main_files(self) -> set[str]:
        files = set()
        main = self.root / "build" / "channels" / "pytorch"
        for sub in ("noarch", "linux-64"):
            rd = main / sub / "repodata.json"
            if rd.is_file():
                doc = json.loads(rd.read_text())
                files |= {f"{sub}/{f}" for key in ("packages", "packages.conda") for f in doc.get(key, {})}
        return files

    def check_ledger(self) -> None:
        ledger = set()
        for f in (self.root / "channel_state").glob("*.json"):
            for a in json.loads(f.read_text()).get("artifacts", []):
                if not a.get("retired"):
                    ledger.add(a["artifact"])
        main = self.main_files()
        if ledger != main:
            raise Finding(f"ledger != main: only in the ledger {sorted(ledger - main)}, only in main {sorted(main - ledger)}")

    def start_verify(self) -> tuple[tuple, Running] | None:
        """verify-channel, started, when main's index or the supported releases changed since its last run."""
        distro = (self.root / "distro.yaml").read_text()
        releases = re.search(r"releases: \[([^\]]*)\]", distro)
        key = (tuple(sorted(self.main_files())), releases.group(1) if releases else distro, self.broken_main)
        return None if key == self.verified else (key, self.launch("verify-channel"))

    def check_main_installable(self, started: tuple[tuple, Running] | None) -> None:
        if started is None:
            return
        key, run = started
        code, doc = self.finish(run)
        self.verified = key
        failing = [f"{r.get('pytorch')}/{r.get('variant')}: {str(r.get('error') or r.get('failures') or '')[:200]}"
                   for r in doc.get("results", doc.get("targets", [])) if not r.get("ok", True)]
        if self.broken_main:
            if code != 1:
                raise Finding(f"verify-channel exited {code} although {self.broken_main} broke main")
            self.say(f"           verify-channel caught it: {failing[:2] or 'exit 1'}")
        elif code != 0:
            raise Finding(f"verify-channel exited {code}: {failing or json.dumps(doc)[:600]}")

    def check_staging(self, dry: Running) -> None:
        _, plan = self.finish(dry)
        for h in plan.get("held", []):
            if h.get("class") == "stale":
                raise Finding(f"a stale build stayed in staging after prune: {h['artifact']}")
            if h.get("class") == "waiting":
                self.stuck_candidate(h, "waiting after the step was tended")
            if h.get("class") in ("failure", "permanent") and h["name"] not in self.expected:
                self.stuck_candidate(h, "held, and nothing the life does will fix it")
        if plan.get("promoted"):
            raise Finding(f"promotable yet not promoted: {[p['artifact'] for p in plan['promoted']]}")

    def check_bounded(self) -> None:
        left = [p.name for d in (self.tmp, self.testtmp) for p in d.iterdir()]
        size = sum(p.stat().st_size for p in (self.root / "build").rglob("*") if p.is_file() and not p.is_symlink())
        self.max_build = max(self.max_build, size)
        self.max_tmp = max(self.max_tmp, len(left))
        if left:
            for d in (self.tmp, self.testtmp):  # counted once; cleared so the next step's leftovers show
                for p in d.iterdir():
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
            raise Finding(f"temp folder left behind: {sorted(left)[:8]}")
        if size > BUILD_BOUND:
            raise Finding(f"build/ holds {size / 2**20:.0f} MiB (bound {BUILD_BOUND / 2**20:.0f} MiB)")

    def agree(self, plan: dict) -> None:
        """promote --dry-run, `excuses` and the status page say the same about every package."""
        self.checks += 1
        said: dict[str, set[str]] = {}
        for p in plan.get("promoted", []):
            said.setdefault(_name(p["artifact"]), set()).add("promote")
        for h in plan.get("held", []):
            if h.get("class") in CLASS_VERDICT:
                said.setdefault(h["name"], set()).add(CLASS_VERDICT[h["class"]])
        promote = {n: _worst(v) for n, v in said.items()}
        shutil.rmtree(self.page, ignore_errors=True)
        # side by side: both only read (the page reads build/excuses.json, which promote --dry-run wrote)
        excuses_run, status_run = self.launch("excuses"), self.launch("status", "--out", str(self.page))
        _, exc = self.finish(excuses_run)
        self.finish(status_run)
        excuses = {c["name"]: c["verdict"] for c in exc.get("candidates", [])}
        text = (self.page / "index.html").read_text()
        page = {m.group(1): html.unescape(m.group(3)) for m in re.finditer(
            r'<tr data-package="([^"]+)" data-source="staging" class="row staging (\w+)">.*?data-verdict="([^"]*)"', text, re.S)}
        page = {n: v for n, v in page.items() if v}
        if not (promote == excuses == page):
            raise Finding(f"promote, excuses and the status page disagree: promote {promote}, excuses {excuses}, page {page}")

    # ------------------------------------------------------------------ flows
    def pr(self, branch: str, title: str, author: str, change: Callable[[], None], *, expect: int = 0,
           fixup: tuple[str, Callable[[], None]] | None = None, must_fail: tuple[str, ...] = ()) -> None:
        """A pull request: a branch with the change, gated by check-pr (exit ``expect``; ``must_fail`` names
        packages the gate must fail), an optional fix-up commit that makes the gate pass, then the merge and
        what CI does on main."""
        before = self.git("rev-parse", "HEAD")
        self.git("checkout", "-q", "-b", branch)
        change()
        self.git("add", "-A")
        self.git("commit", "-qm", title, author=author)
        code, doc = self.cli("check-pr", "--base", "main")
        self.checks += 1
        # packages already failing on main (a distro.yaml change affects every package) are check-pr's to
        # tell apart: it lists them as already failing on the base and does not fail the PR for them
        on_base = sorted({c["name"] for c in doc.get("on_base") or []})
        if on_base:
            self.say(f"           check-pr: already failing on the base, not the PR's: {', '.join(on_base)}")
        if [n for n in on_base if n not in self.expected]:  # only packages the life knows broken on main
            self.findings.append(f"check-pr on {branch} calls packages already failing on main that the life does "
                                 f"not know broken: {[n for n in on_base if n not in self.expected]}")
        if code != expect:
            self.git("checkout", "-q", "-f", "main")
            self.git("branch", "-D", branch)
            raise Finding(f"check-pr on {branch} exited {code}, expected {expect}: {_failing(doc)}")
        failing = _failing(doc)
        if any(n not in failing for n in must_fail):
            self.findings.append(f"check-pr on {branch} did not fail {must_fail}: {failing}")
        if fixup:
            msg, fix = fixup
            fix()
            self.git("add", "-A")
            self.git("commit", "-qm", msg, author=author)
            code, doc = self.cli("check-pr", "--base", "main")
            self.checks += 1
            if code != 0:
                self.git("checkout", "-q", "-f", "main")
                self.git("branch", "-D", branch)
                raise Finding(f"check-pr on {branch} after its fix exited {code}: {_failing(doc)}")
        self.git("checkout", "-q", "main")
        self.git("merge", "-q", "--no-ff", "-m", f"Merge {branch}: {title}", branch)
        self.git("branch", "-D", branch)
        shutil.rmtree(self.root / "build" / "pr", ignore_errors=True)  # CI's scope lives in the PR's runner
        self.cli("build", "--changed-since", before, "--jobs", "2")
        self.tend()

    def release_day(self, version: str, publish: bool = True) -> dict:
        if publish:
            self.cli("sandbox", "publish-release", ".", version, fmt=False, ok=(0,))
        before = self.git("rev-parse", "HEAD")
        _, report = self.cli("sweep", "--pytorch", version, "--commit", "--jobs", "2", "--author", BOT)
        merged = self.merge_sweep(version, report)
        self.say(f"           sweep {version}: {_statuses(report)}; merged {', '.join(merged) or 'the release commit'}")
        self.cli("build", "--changed-since", before, "--jobs", "2")
        self.tend()
        return report

    def merge_sweep(self, version: str, report: dict) -> list[str]:
        merged = []
        for pkg in report.get("packages", []):
            branch = f"sweep/pytorch-{version}-{pkg['name']}"
            tests = [t for t in pkg.get("tests") or [] if t.get("pytorch") == version]
            ok = pkg.get("status") == "bumped" and tests and all(t.get("status") == "passed" for t in tests)
            if ok and self.git("branch", "--list", branch):
                self.git("merge", "-q", "--no-ff", "--no-edit", "-m", f"Merge {branch} (automerge)", branch)
                merged.append(pkg["name"])
        release_branch = f"sweep/pytorch-{version}"
        if self.git("branch", "--list", release_branch) and version not in self.supported():
            first = self.git("rev-list", "--reverse", f"main..{release_branch}").split()[0]
            self.git("merge", "-q", "--no-ff", "--no-edit", "-m", f"Merge {version}: release commit", first)
        for b in self.git("branch", "--format=%(refname:short)", "--list", f"sweep/pytorch-{version}*").split():
            if b.removeprefix(f"sweep/pytorch-{version}-") in merged or b == release_branch:
                self.git("branch", "-D", b)
            else:  # a branch nobody will merge (its PR is closed): the life deletes it as GitHub would
                self.git("branch", "-D", b)
        return merged

    def supported(self) -> list[str]:
        m = re.search(r"releases: \[([^\]]*)\]", (self.root / "distro.yaml").read_text())
        return [r.strip().strip("\"'") for r in m.group(1).split(",")] if m else []

    def set_window(self, releases: list[str]) -> None:
        text = (self.root / "distro.yaml").read_text()
        new = "releases: [" + ", ".join(f'"{r}"' for r in releases) + "]"
        (self.root / "distro.yaml").write_text(re.sub(r"releases: \[[^\]]*\]", new, text, count=1))

    def window_pr(self, keep: int = 2) -> None:
        now = self.supported()
        newest: dict[str, str] = {}
        for r in now:  # a bugfix replaces its minor's older releases
            newest[".".join(r.split(".")[:2])] = r
        wanted = list(newest.values())[-keep:]
        if wanted == now:
            return
        self.pr("window", f"distro.yaml: support {', '.join(wanted)}", MAINTAINER, lambda: self.set_window(wanted))

    def upstream(self, name: str, version: str, files: dict[str, str], *depends: str) -> None:
        folder = self.src / f"{name}-{version}-{len(list(self.src.iterdir()))}"
        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
        args = ["sandbox", "publish-package", ".", name, version, "--source", str(folder)]
        for d in depends:
            args += ["--depends", d]
        self.cli(*args, fmt=False, ok=(0,))


MAINTAINER = "Rosa K <rosa-k@example.invalid>"


def _name(artifact: str) -> str:
    return artifact.split("/")[-1].rsplit("-", 2)[0]


def _find(pattern: str, text: str) -> re.Match[str]:
    m = re.search(pattern, text)
    if m is None:
        raise Finding(f"the life's own edit found no {pattern!r}")
    return m


def _worst(verdicts: set[str]) -> str:
    for v in ("held-permanently", "held-temporarily", "waiting", "promote"):
        if v in verdicts:
            return v
    return sorted(verdicts)[0]


def _failing(doc: dict) -> list[str]:
    """check-pr's failing packages (builds and tests that did not pass, except those already failing on the
    base) and its lint/proposal errors."""
    out = {r.get("name") for key in ("builds", "tests") for r in doc.get(key) or []
           if r.get("status") in ("failed", "blocked", "error") and not r.get("on_base")}
    out |= {f"lint:{f.get('check')}:{f.get('message', '')[:120]}" for key in ("lint", "proposals")
            for f in doc.get(key) or [] if f.get("severity") == "error"}
    return sorted(str(n) for n in out)


def _statuses(report: dict) -> str:
    counts: dict[str, int] = {}
    for p in report.get("packages", []):
        counts[p["status"]] = counts.get(p["status"], 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "nothing to do"


# ---------------------------------------------------------------------------- the life's own packages

GRADCLIP_RECIPE = """\
context:
  name: gradclip
  version: "{version}"

package:
  name: ${{{{ name }}}}
  version: ${{{{ version }}}}

source:
  path: src

build:
  number: {number}
  noarch: python
  script:
    - mkdir -p $SP_DIR
    - cp -r $SRC_DIR/gradclip $SP_DIR/

requirements:
  host:
    - python >=3.10
  run:
    - python >=3.10
    - pytorch >=2.5,<{upper}
    - tensorutils >=0.3,<0.4
    - tinyjson {tinyjson}

tests:
  - python:
      imports:
        - gradclip
      pip_check: false
  - script:
      - python -c "import torch, gradclip; assert gradclip.clip([3.0, -4.0], 2.0) == [2.0, -2.0]"

about:
  homepage: https://github.com/torch-sandbox/gradclip
  summary: Gradient clipping helpers (sandbox stand-in, made by the life-cycle bench)
  license: MIT
  license_file: LICENSE

extra:
  recipe-maintainers:
    - rosa-k
"""

GRADCLIP_SRC = '''\
"""gradclip: clip values to a bound (a stand-in package of the life-cycle bench)."""

import torch
from tinyjson import dumps

__version__ = "{version}"
{guard}

def clip(values, bound):
    return [max(-bound, min(bound, v)) for v in torch.tensor(list(values)).tolist()]


def to_json(values):
    return dumps(clip(values, 1.0))
'''

GUARD_27 = '''
if tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 7):
    raise ImportError("gradclip {version} does not support torch " + torch.__version__ + " yet")
'''

PROPOSAL = """\
schema_version: 1
name: gradclip
version: "0.1.0"
summary: Gradient clipping helpers for torch
homepage: https://github.com/torch-sandbox/gradclip
repository: https://github.com/torch-sandbox/gradclip
license: MIT
maintainers:
  - handle: rosa-k
    consent: true
pytorch_dependency: clips tensors and gradients with torch's tensor API
focus_area: deep learning
downstream_users: training loops in this distribution
test_plan: a script test clips a tensor on every release and variant
"""


def play(life: Life, short: bool = False) -> None:
    """The life, day by day (days from the start; the test clock and git dates follow). ``short``: the slow
    test's life: no second upstream build, hint, bugfix release, support window nor retirement."""
    root = life.root
    minors = life.minors

    def setup() -> None:
        proc = subprocess.run([sys.executable, "-m", "conda_distro", "sandbox", str(root)], capture_output=True,
                              text=True, check=False, env=life.env(BOT))
        if proc.returncode != 0:
            raise SystemExit(f"sandbox failed: {proc.stderr[-2000:]}")
        life.git("config", "user.name", "conda-distro bot")
        life.git("config", "user.email", "bot@example.invalid")
        # the day before 2.6.0: the distribution supports 2.4 and 2.5 (2.6.0 is upstream already)
        life.set_window(["2.4.1", "2.5.1"])
        life.git("commit", "-qam", "Support 2.4.1 and 2.5.1 (the day before 2.6.0)")
        life.upstream("tinyjson", "1.0.0", {"tinyjson/__init__.py": "import json\n\ndef dumps(v):\n    return json.dumps(v)\n"})
        life.expected["fastquant"] = "broken since day 0: fixed by a PR on day 10"
        life.cli("build", "--all", "--jobs", "2")
        life.tend()

    life.step(0, "setup: sandbox, build --all, promote", setup)

    def add_gradclip() -> None:
        life.write("proposals/gradclip.yaml", PROPOSAL)
        life.write("recipes/gradclip/recipe.yaml",
                   GRADCLIP_RECIPE.format(version="0.1.0", number=0, upper="2.6", tinyjson=">=1.0,<2"))
        life.write("recipes/gradclip/src/LICENSE", "MIT License (sandbox stand-in)\n")
        life.write("recipes/gradclip/src/gradclip/__init__.py",
                   GRADCLIP_SRC.format(version="0.1.0", guard=GUARD_27.format(version="0.1.0")))

    life.step(3, "PR: add a package (gradclip, needs tinyjson upstream)",
              lambda: life.pr("add-gradclip", "Add gradclip", MAINTAINER, add_gradclip))

    def break_layerkit() -> None:
        life.edit("recipes/tensorutils/recipe.yaml", 'version: "0.3.2"', 'version: "0.3.3"')
        life.edit("recipes/tensorutils/src/tensorutils/__init__.py", "    return t - t.mean().item()",
                  "    return (t - t.mean().item()).tolist()  # 0.3.3: a list")
        life.edit("recipes/tensorutils/recipe.yaml", "tensorutils.center(torch.tensor([1.0, 3.0])).tolist()",
                  "tensorutils.center(torch.tensor([1.0, 3.0]))")

    def fix_layerkit() -> None:
        life.edit("recipes/layerkit/recipe.yaml", 'version: "1.1.0"', 'version: "1.1.1"')
        life.edit("recipes/layerkit/src/layerkit/__init__.py", "        return center(self.linear(x))",
                  "        return torch.tensor(center(self.linear(x)))")

    life.step(7, "PR: tensorutils 0.3.3 breaks layerkit; fixed (1.1.1)", lambda: life.pr(
        "tensorutils-0.3.3", "tensorutils 0.3.3: center returns a list", MAINTAINER, break_layerkit, expect=1,
        must_fail=("layerkit",), fixup=("layerkit 1.1.1: works with tensorutils 0.3.3", fix_layerkit)))

    def fix_fastquant() -> None:
        life.edit("recipes/fastquant/recipe.yaml", 'version: "0.2.1"', 'version: "0.2.2"')
        life.edit("recipes/fastquant/src/fastquant/__init__.py", "scale = (2 ** bits) /", "scale = (2 ** bits - 1) /")
        del life.expected["fastquant"]

    life.step(10, "PR: fastquant 0.2.2 fixed (quantserve unblocked)",
              lambda: life.pr("fastquant-0.2.2", "fastquant 0.2.2: fix quantize", MAINTAINER, fix_fastquant))

    def new_build() -> None:
        second = "import json\n\n\ndef dumps(v):\n    return json.dumps(v, sort_keys=True)\n"
        life.upstream("tinyjson", "1.0.0", {"tinyjson/__init__.py": second})
        life.cli("build", "--all", "--jobs", "2")  # nightly
        life.tend()

    if not short:
        life.step(12, "upstream: a second build of tinyjson 1.0.0; nightly build", new_build)

    day = 14
    for i, minor in enumerate(minors):
        def lockstep(minor: str = minor) -> None:
            mm = minor.rsplit(".", 1)[0]
            nxt = f"{mm.split('.')[0]}.{int(mm.split('.')[1]) + 1}"
            text = (root / "recipes/visionkit/recipe.yaml").read_text()
            minor_no = int(_find(r'version: "0\.(\d+)\.\d+"', text).group(1))
            text = re.sub(r'version: "0\.\d+\.\d+"', f'version: "0.{minor_no + 1}.0"', text, count=1)
            text = re.sub(r"pytorch >=\S+,<\S+", f"pytorch >={mm},<{nxt}", text, count=1)
            text = re.sub(r"startswith\('[\d.]+'\)", f"startswith('{mm}.')", text, count=1)
            life.write("recipes/visionkit/recipe.yaml", text)
            src = (root / "recipes/visionkit/src/visionkit/__init__.py").read_text()
            src = re.sub(r'__version__ = "[\d.]+"', f'__version__ = "0.{minor_no + 1}.0"', src, count=1)
            src = re.sub(r'__torch_minor__ = "[\d.]+"', f'__torch_minor__ = "{mm}"', src, count=1)
            life.write("recipes/visionkit/src/visionkit/__init__.py", src)

        def release(minor: str = minor, i: int = i) -> None:
            if minor == "2.6.0" and not short:
                life.expected["hookprofiler"] = "fails on 2.6: goes unmaintained, retired"
            if minor == "2.7.0":
                life.expected["gradclip"] = "fails on 2.7: fixed after release day, admitted late"
            report = life.release_day(minor, publish=minor != "2.6.0")
            statuses = {p["name"]: p["status"] for p in report.get("packages", [])}
            if statuses.get("visionkit") != "needs-new-version":
                raise Finding(f"the lockstep package's sweep status is {statuses.get('visionkit')}")

        life.step(day, f"release day: pytorch {minor} (sweep, automerge, build, promote)", release)

        def lockstep_pr(minor: str = minor, lockstep: Callable[[], None] = lockstep) -> None:
            life.pr(f"visionkit-{minor}", f"visionkit for pytorch {minor}", MAINTAINER, lockstep)

        life.step(day + 1, f"PR: visionkit lockstep version for {minor}", lockstep_pr)
        if short:
            continue
        life.step(day + 2, "PR: support window (drop the oldest minor)", life.window_pr)
        if minor == "2.6.0":
            def bump_metrickit() -> None:
                life.edit("recipes/metrickit/recipe.yaml", 'version: "0.5.1"', 'version: "0.5.2"')
                expires = (life.day + dt.timedelta(days=7)).isoformat()
                life.write("hints.yaml", "hints:\n  - action: block\n    package: metrickit\n    version: \"0.5.2\"\n"
                           "    by: release-manager\n    reason: wait a week for the diamond's maintainers\n"
                           f"    expires: {expires}\n")
                life.expected["metrickit"] = f"blocked by a hint until {expires}"

            life.step(day + 6, "PR: metrickit 0.5.2, held a week by a block hint",
                      lambda: life.pr("metrickit-0.5.2", "metrickit 0.5.2", MAINTAINER, bump_metrickit))

            def hint_expires() -> None:
                del life.expected["metrickit"]
                life.tend()
                code, lint = life.cli("lint")
                if "hint-expired" not in json.dumps(lint):
                    raise Finding("lint does not report the expired hint")
                life.pr("drop-hint", "hints.yaml: drop the expired block", MAINTAINER,
                        lambda: life.write("hints.yaml", "hints: []\n"))

            life.step(day + 14, "the hint expires: metrickit promoted; a PR removes the hint", hint_expires)
        if minor == "2.7.0":
            def fix_gradclip() -> None:
                life.write("recipes/gradclip/recipe.yaml",
                           GRADCLIP_RECIPE.format(version="0.2.0", number=0, upper="2.7", tinyjson=">=1.0,<2"))
                life.write("recipes/gradclip/src/gradclip/__init__.py", GRADCLIP_SRC.format(version="0.2.0", guard=""))

            life.step(day + 5, "PR: gradclip 0.2.0 fixed after release day", lambda: life.pr(
                "gradclip-0.2.0", "gradclip 0.2.0: supports torch 2.7", MAINTAINER, fix_gradclip))

            def late(minor: str = minor) -> None:
                _, rep = life.cli("sweep", "report", "--pytorch", minor)
                cmd = rep.get("next_command") or ""
                if "gradclip" not in cmd and "sweep" not in cmd:
                    raise Finding(f"sweep report names no command to admit gradclip: {rep.get('waiting')}")
                args = cmd.split()[1:] if cmd.startswith("conda-distro") else cmd.split()
                if "--commit" not in args:
                    args.append("--commit")
                before = life.git("rev-parse", "HEAD")
                _, report = life.cli(*args)
                merged = life.merge_sweep(minor, report)
                if "gradclip" not in merged:
                    raise Finding(f"late admission did not admit gradclip: {_statuses(report)}")
                del life.expected["gradclip"]
                life.cli("build", "--changed-since", before, "--jobs", "2")
                life.tend()

            life.step(day + 6, f"late admission of gradclip to {minor} (sweep report's next command)", late)

            def break_upstream() -> None:
                renamed = "import json\n\n\ndef encode(v):\n    return json.dumps(v)\n"  # dumps is gone
                life.upstream("tinyjson", "1.1.0", {"tinyjson/__init__.py": renamed})
                life.broken_main = "tinyjson 1.1.0 (upstream)"

            life.step(day + 8, "upstream: tinyjson 1.1.0 breaks gradclip in main", break_upstream)

            def bound_pin() -> None:
                life.edit("recipes/gradclip/recipe.yaml", "tinyjson >=1.0,<2", "tinyjson >=1.0,<1.1")
                text = (root / "recipes/gradclip/recipe.yaml").read_text()
                number = int(_find(r"number: (\d+)", text).group(1))
                life.edit("recipes/gradclip/recipe.yaml", f"number: {number}", f"number: {number + 1}")

            def pin_pr() -> None:
                life.broken_main = None
                life.pr("gradclip-pin", "gradclip: tinyjson <1.1", MAINTAINER, bound_pin)

            life.step(day + 9, "PR: gradclip bounds tinyjson <1.1 (main works again)", pin_pr)
        if minor in BUGFIX:
            def bugfix(minor: str = minor) -> None:
                life.release_day(BUGFIX[minor])
                # the nightly `build --all` on main: a bugfix release's sweep tests no package its pins already
                # admit, so without it main has no record on the bugfix release, and check-pr (fail closed)
                # counts a package failing there as the next PR's failure, not as already failing on main
                life.cli("build", "--all", "--jobs", "2")
                life.tend()

            life.step(day + 20, f"release day: bugfix {BUGFIX[minor]}; nightly build", bugfix)
            life.step(day + 21, "PR: support window (the bugfix replaces its .0)", life.window_pr)
        day += 56 if i == 0 else 50

    def unmaintained() -> None:
        _, rep = life.cli("report", "unmaintained")
        actions = {p["name"]: p["action"] for p in rep.get("packages", [])}
        if actions.get("hookprofiler") != "retire":
            raise Finding(f"report unmaintained: hookprofiler is {actions.get('hookprofiler')}, expected retire ({actions})")
        life.cli("retire", "hookprofiler", "--reason", "unmaintained: fails on pytorch 2.6 for months")
        life.commit_ledger()
        life.pr("remove-hookprofiler", "Remove hookprofiler (retired)", BOT,
                lambda: (shutil.rmtree(root / "recipes/hookprofiler")))
        del life.expected["hookprofiler"]
        life.cli("prune")
        life.tend()

    if "2.6.0" in minors and not short:
        life.step(max(day, 14 + 125), "report unmaintained: hookprofiler retired, recipe removed", unmaintained)
        day = max(day, 14 + 125)
    life.move_to(day)

    def the_end() -> None:
        if not short:
            life.cli("build", "--all", "--jobs", "2")
        life.tend()
        for name, why in life.expected.items():
            life.stuck.append(f"{name}: still expected to be fixed at the end ({why})")

    life.step(day + 1, "the end: nightly build --all, promote", the_end)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minors", type=int, default=3, help="how many PyTorch minors arrive (1-4; default 3)")
    ap.add_argument("--keep", type=Path, help="keep the world in this folder (default: a temporary one, removed)")
    ap.add_argument("--timings", type=Path, help="write every command's wall time to this JSON file")
    ap.add_argument("--test-tmpdir-on-disk", action="store_true",
                    help="test environments in a private folder on disk (CONDA_DISTRO_TEST_TMPDIR), checked to be "
                         "left empty; default: where the tool puts them (the sandbox's own /tmp)")
    args = ap.parse_args(argv)
    base = args.keep or new_scratch("conda-distro-bench-lifecycle-")
    life = Life(base, args.minors, test_tmpdir_on_disk=args.test_tmpdir_on_disk)
    t = time.perf_counter()
    where = "on disk (CONDA_DISTRO_TEST_TMPDIR)" if args.test_tmpdir_on_disk else "where the tool puts them"
    print(f"a life of the channel: {args.minors} minor(s), world in {base}, test environments {where}")
    compile_tool()
    play(life)
    wall = time.perf_counter() - t
    print(summary(life, wall))
    print(by_command(life))
    if args.timings:
        args.timings.write_text(json.dumps([{"step": n, "command": c, "seconds": round(s, 2)}
                                            for n, c, s in life.timings], indent=1))
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if not life.findings and not life.stuck and wall < TARGET_S else 1


def compile_tool() -> None:
    """The tool's bytecode, compiled once before the life (in its wall time), as `pip install` does: from an
    editable install under ``PYTHONDONTWRITEBYTECODE=1`` (this machine's shells set it) every command, and
    every sandboxed runner (``python -I -B``), would otherwise compile the tool from source again."""
    import compileall

    import conda_distro

    compileall.compile_dir(str(Path(conda_distro.__file__).parent), quiet=1)


def _children_cpu() -> float:
    import resource

    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def by_command(life: Life) -> str:
    """Where the time went: the CLI's wall time summed per command (its first two words)."""
    total: dict[str, list[float]] = {}
    for _n, cmd, secs in life.timings:
        words = cmd.split()
        key = " ".join(words[:2]) if len(words) > 1 and not words[1].startswith("-") else words[0]
        total.setdefault(key, []).append(secs)
    rows = sorted(total.items(), key=lambda kv: -sum(kv[1]))
    return "time per command (sum, count):\n" + "\n".join(
        f"  {k:28} {sum(v):7.1f} s  {len(v):4}" for k, v in rows)


def summary(life: Life, wall: float) -> str:
    lines = [f"days simulated: {(life.day - life.start).days}", f"steps: {life.steps}", f"commands run: {life.commands}",
             f"invariant checks: {life.checks}", f"findings (failed invariants): {len(life.findings)}",
             *(f"  {f}" for f in life.findings),
             f"largest build/: {life.max_build / 2**20:.0f} MiB; most temp entries left after a step: {life.max_tmp}",
             f"wall time: {wall:.0f} s (target < {TARGET_S:.0f} s: {'ok' if wall < TARGET_S else 'MISSED'})",
             f"CPU time of the commands: {_children_cpu():.0f} s (user + system of every process they ran: "
             "what the load of a shared machine does not change)",
             f"stuck candidates: {len(life.stuck)}", *(f"  {s}" for s in life.stuck)]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
