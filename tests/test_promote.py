"""`promote` and `retire` end to end on real rattler-build artifacts, local and anaconda.org channels.

Scenario (tests/test_channels.py PACKAGES), releases 2.4.1/2.5.1/2.6.0 × cpu/cuda:
alpha (pytorch >=2.4,<2.6) all passed -> promoted; gamma (alpha) passed -> promoted with alpha;
beta failed on 2.6.0 cuda -> test-failed; delta (beta) -> dependency-not-in-main;
eps tested only on 2.5.1 cpu -> not-tested; zeta has no results -> untracked.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.anaconda_server import FakeAnaconda
from support.helpers import recorded_env, with_provenance
from test_channels import TOKEN, api_doc, by_name, copy_channel, staging_files, write_distro

from conda_distro.channels import ChannelFile, LocalChannel, sha256_of
from conda_distro.cli import main as cli_main
from conda_distro.gate.promote import HoldReason, PlanInputs, PromoteOptions, TestMatrix, plan_gate, promote
from conda_distro.state.ledger import Ledger, Retirement
from conda_distro.state.results import ArtifactResults, ResultsStore
from conda_distro.state.results import TestRecord as Run

RELEASES = ("2.4.1", "2.5.1", "2.6.0")
VARIANTS = ("cpu", "cuda")
DATE = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


def record(f: ChannelFile, pairs, status="passed") -> ArtifactResults:
    tests = [Run(name=f.name, artifact=f.artifact, pytorch=r, variant=v, status=status, date=DATE)
             for r, v in pairs]
    return ArtifactResults(artifact=f.artifact, name=f.name, version=f.version, sha256=f.sha256,
                           depends=list(f.depends), tests=tests)


def admitted(f: ChannelFile) -> list[tuple[str, str]]:
    return TestMatrix("pytorch", RELEASES, VARIANTS).required(f) or [("2.5.1", "cpu")]


def write_results(root: Path, files: dict[str, ChannelFile], *, scenario: bool = True, commit: str | None = None) -> None:
    """Results the way the build engine writes them: one ArtifactResults per staging artifact."""
    store = ResultsStore(root / "build" / "results")
    for name, f in by_name(files).items():
        if name == "zeta" and scenario:
            continue
        res = record(f, admitted(f))
        if name == "beta" and scenario:
            res.record(Run(name=name, artifact=f.artifact, pytorch="2.6.0", variant="cuda",
                                  status="failed", date=DATE + dt.timedelta(hours=1)))
        if name == "eps" and scenario:
            res = record(f, [("2.5.1", "cpu")])
        store.put(with_provenance(root, recorded_env(res, files.values()), commit=commit))


def make_root(template: Path, tmp_path: Path) -> Path:
    """A distribution repo with the scenario's staging channel and results (main empty)."""
    r = write_distro(tmp_path / "distro")
    copy_channel(template / "staging", r / "build" / "channels" / "staging")
    write_results(r, staging_files(r / "build" / "channels" / "staging"))
    return r


@pytest.fixture()
def root(template, tmp_path) -> Path:
    """A distribution repo with the scenario's staging channel and results (main empty)."""
    return make_root(template, tmp_path)


def run(root: Path, *args: str, capsys) -> tuple[int, dict]:
    code = cli_main([*args, "--root", str(root), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def run_subprocess(root: Path, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conda_distro", *args, "--root", str(root), "--format", "json"],
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout)


def names(items) -> set[str]:
    return {i["artifact"].split("/")[1].split("-")[0] for i in items}


def reasons(doc: dict) -> dict[str, str]:
    return {i["artifact"].split("/")[1].split("-")[0]: i["reason"] for i in doc["held"]}


def main_dir(root: Path) -> Path:
    return root / "build" / "channels" / "main"


def assert_main_consistent(root: Path) -> dict[str, str]:
    """Every file main's repodata names exists with the recorded sha256; returns artifact -> sha256."""
    seen = {}
    for repodata in main_dir(root).glob("*/repodata.json"):
        doc = json.loads(repodata.read_text())
        for key in ("packages", "packages.conda"):
            for fn, rec in doc.get(key, {}).items():
                path = repodata.parent / fn
                assert path.is_file(), f"repodata names missing {path}"
                assert sha256_of(path) == rec["sha256"], f"repodata sha256 differs for {path}"
                seen[f"{repodata.parent.name}/{fn}"] = rec["sha256"]
    return seen


# ---------------------------------------------------------------------------------------------
# the plan (pure)


def test_dry_run_prints_the_plan_and_writes_nothing(root, capsys):
    code, doc = run(root, "promote", "--dry-run", capsys=capsys)
    assert code == 1 and doc["dry_run"] is True
    assert names(doc["promoted"]) == {"alpha", "gamma"}
    assert reasons(doc) == {"beta": "test-failed", "delta": "dependency-not-in-main", "eps": "not-tested"}
    held = {i["artifact"].split("/")[1].split("-")[0]: i["detail"] for i in doc["held"]}
    assert held["beta"] == "failed against pytorch 2.6.0 cuda"
    assert "needs 'beta >=1.0,<2'" in held["delta"] and "test-failed" in held["delta"]
    assert held["eps"] == "not tested against pytorch 2.5.1 cuda, pytorch 2.6.0 cpu, pytorch 2.6.0 cuda"
    assert names([{"artifact": a} for a in doc["untracked"]]) == {"zeta"}
    assert [p["artifact"] for p in doc["promoted"]][0].startswith("noarch/alpha")  # dependencies first
    assert not main_dir(root).exists() and not (root / "channel_state").exists()
    assert cli_main(["promote", "--dry-run", "--root", str(root)]) == 1
    text = capsys.readouterr().out
    assert "promote  noarch/alpha-1.0" in text and "dry run: nothing was written to main or channel_state/" in text


def cf(name, version="1.0", depends=(), subdir="noarch", sha="1", build="h0_0") -> ChannelFile:
    return ChannelFile(subdir, f"{name}-{version}-{build}.conda", name, version, build, 0, sha * 64, tuple(depends))


def plan_of(staging, main=(), results=None, retired=None):
    st = {f.artifact: f for f in staging}
    res = results if results is not None else {f.artifact: recorded_env(record(f, admitted(f)), staging)
                                               for f in staging}
    return plan_gate(PlanInputs(st, {f.artifact: f for f in main}, res, retired or {},
                                TestMatrix("pytorch", RELEASES, VARIANTS)))


def test_dependency_chain_is_promoted_in_dependency_order():
    chain = [cf("c", depends=["b >=1,<2"]), cf("b", depends=["a >=1,<2", "pytorch >=2.4,<2.7"]), cf("a")]
    plan = plan_of(chain)
    assert [f.name for f in plan.promote] == ["a", "b", "c"] and plan.held == []
    assert plan.exit_code == 0


def test_dependency_rules():
    a = cf("a", "1.0")
    staging = [a, cf("b", depends=["a >=1,<2"]), cf("x", depends=["y"]), cf("y", depends=["x"]),
               cf("m", depends=["a 0.9.*"]), cf("lin", depends=["k"], subdir="linux-64"), cf("k", subdir="osx-64")]
    results = {f.artifact: recorded_env(record(f, admitted(f)), staging) for f in staging}
    results[a.artifact] = record(a, [("2.5.1", "cpu")], status="failed")
    m = results[staging[4].artifact]  # tested with main's a 0.9 (its pin), as a build would have
    results[m.artifact] = m.model_copy(update={"tests": [t.model_copy(update={"against": {"a": "a-0.9-h0_0"}})
                                                         for t in m.tests]})
    plan = plan_of(staging, main=[cf("a", "0.9")], results=results)
    assert {f.name for f in plan.promote} == {"m", "k"}  # m's dependency is met by main
    held = {h.file.name: h for h in plan.held}
    assert held.pop("a").reason is HoldReason.TEST_FAILED
    assert {n: h.reason for n, h in held.items()} == dict.fromkeys(["b", "x", "y", "lin"], HoldReason.DEPENDENCY_NOT_IN_MAIN)
    assert "a-1.0-h0_0.conda is held (test-failed)" in held["b"].detail
    plan = plan_of([cf("b", depends=["a >=1,<2"]), cf("a", "1.2", sha="2")], main=[cf("a", "1.2", sha="2")])
    assert [f.name for f in plan.promote] == ["b"]  # a is already in main


def test_test_gates():
    a = cf("a", depends=["pytorch >=2.5,<2.7"])
    cuda = cf("c", depends=["pytorch >=2.4,<2.5", "__cuda"])
    nopin = cf("n", depends=["zlib"])
    old = cf("o", depends=["pytorch >=1.0,<2.0"])
    results = {
        a.artifact: record(a, [("2.5.1", "cpu"), ("2.5.1", "cuda"), ("2.6.0", "cpu"), ("2.6.0", "cuda")]),
        cuda.artifact: record(cuda, [("2.4.1", "cuda")]),
        nopin.artifact: record(nopin, []),
        old.artifact: record(old, []),
    }
    plan = plan_of([a, cuda, nopin, old], results=results)
    assert {f.name for f in plan.promote} == {"a", "c"}
    detail = {h.file.name: (h.reason, h.detail) for h in plan.held}
    assert detail["n"] == (HoldReason.NOT_TESTED, "no test results recorded")
    assert detail["o"] == (HoldReason.NOT_TESTED, "its pytorch pin admits no supported release")
    results[a.artifact] = record(a, [("2.5.1", "cpu")], status="blocked")
    results[cuda.artifact] = results[cuda.artifact].model_copy(update={"sha256": "9" * 64})
    plan = plan_of([a, cuda], results=results)
    detail = {h.file.name: h.detail for h in plan.held}
    assert detail["a"].startswith("blocked") and "another build" in detail["c"]


def test_main_gates_and_retired():
    a, b = cf("a"), cf("b")
    r = Retirement(at=DATE, reason="broken upstream", by="ci")
    plan = plan_of([a, b, cf("c")], main=[a, cf("b", sha="2")], retired={"noarch/c-1.0-h0_0.conda": r})
    got = {h.file.name: h.reason for h in plan.held}
    assert got == {"a": HoldReason.ALREADY_IN_MAIN, "b": HoldReason.SHA256_MISMATCH, "c": HoldReason.RETIRED}
    assert plan.exit_code == 1  # for the sha256 mismatch
    assert plan_of([a, cf("c")], main=[a], retired={"noarch/c-1.0-h0_0.conda": r}).exit_code == 0


# ---------------------------------------------------------------------------------------------
# local execution


def test_promote_local_end_to_end_and_idempotent_rerun(root, capsys):
    code, doc = run(root, "promote", capsys=capsys)
    assert code == 1 and doc["dry_run"] is False
    assert names(doc["promoted"]) == {"alpha", "gamma"}
    st = by_name(staging_files(root / "build" / "channels" / "staging"))
    in_main = assert_main_consistent(root)
    assert in_main == {st[n].artifact: st[n].sha256 for n in ("alpha", "gamma")}
    assert {p["artifact"]: p["sha256"] for p in doc["promoted"]} == in_main
    assert (main_dir(root) / "linux-64" / "repodata.json").is_file()
    assert doc["ledger"] == ["channel_state/alpha.json", "channel_state/gamma.json"]
    alpha = json.loads((root / "channel_state" / "alpha.json").read_text())
    (entry,) = alpha["artifacts"]
    assert entry["artifact"] == st["alpha"].artifact and entry["sha256"] == st["alpha"].sha256
    assert entry["build"] == st["alpha"].build and entry["depends"] == ["pytorch >=2.4,<2.6"]
    assert entry["commit"] is None and entry["retired"] is None and entry["channel"] == "build/channels/main"
    assert [(t["release"], t["variant"], t["status"]) for t in entry["tests"]] == [
        ("2.4.1", "cpu", "passed"), ("2.4.1", "cuda", "passed"), ("2.5.1", "cpu", "passed"), ("2.5.1", "cuda", "passed")]
    assert entry["tests"][0]["date"] == "2025-03-01T12:00:00Z"
    assert dt.datetime.fromisoformat(entry["promoted_at"]).tzinfo is not None
    before = {p: p.read_bytes() for p in [*main_dir(root).rglob("repodata.json"), *(root / "channel_state").rglob("*.json")]}

    code, doc = run(root, "promote", capsys=capsys)
    assert code == 1 and doc["promoted"] == [] and doc["ledger"] == []
    assert reasons(doc)["alpha"] == reasons(doc)["gamma"] == "already-in-main"
    assert {p: p.read_bytes() for p in before} == before  # nothing rewritten


def test_all_passing_exits_zero_and_records_the_commit_that_built_it(template, tmp_path, capsys):
    """The ledger's commit is the one the results name (the commit whose recipe produced the artifact),
    not the commit promote runs at."""
    import git

    root = write_distro(tmp_path / "d")
    copy_channel(template / "staging", root / "build" / "channels" / "staging")
    repo = git.Repo.init(root)
    actor = git.Actor("t", "t@x")
    repo.index.add(["distro.yaml"])
    built_at = repo.index.commit("init", author=actor, committer=actor).hexsha
    write_results(root, staging_files(root / "build" / "channels" / "staging"), scenario=False, commit=built_at)
    later = repo.index.commit("a later merge", author=actor, committer=actor).hexsha
    code, doc = run(root, "promote", capsys=capsys)
    assert code == 0 and doc["held"] == [] and len(doc["promoted"]) == 6
    assert repo.head.commit.hexsha == later != built_at
    assert {a.commit for s in Ledger(root / "channel_state").load_all().values() for a in s.artifacts} == {built_at}
    code, doc = run(root, "promote", capsys=capsys)
    assert code == 0 and doc["promoted"] == [] and set(reasons(doc).values()) == {"already-in-main"}


def test_sha256_mismatch_never_overwrites(root, template, capsys):
    other = LocalChannel(template / "other")
    (alpha,) = other.list_files().values()
    main = LocalChannel(main_dir(root))
    main.receive(other, [alpha])
    main.publish()
    code, doc = run(root, "promote", capsys=capsys)
    assert code == 1 and reasons(doc)["alpha"] == "sha256-mismatch"
    assert sha256_of(main_dir(root) / alpha.artifact) == alpha.sha256
    assert not (root / "channel_state" / "alpha.json").exists()


def test_bad_config_exits_2_and_writes_nothing(root, capsys):
    (root / "distro.yaml").write_text((root / "distro.yaml").read_text() + "colour: red\n")
    assert cli_main(["promote", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "distro.yaml" in err and "colour" in err
    assert not main_dir(root).exists()


def test_corrupt_staging_file_is_held_and_never_placed(root, capsys):
    """The sealed sha256 of the results is re-checked against the file's bytes: a staging file
    that is not the one tested is held, the rest is promoted."""
    st = by_name(staging_files(root / "build" / "channels" / "staging"))
    (root / "build" / "channels" / "staging" / st["gamma"].artifact).write_bytes(b"garbage")
    assert cli_main(["promote", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"held     {st['gamma'].artifact}  not-tested: the test results are for another build" in out
    assert "the staging file on disk has" in out
    published = assert_main_consistent(root)
    assert st["gamma"].artifact not in published and st["alpha"].artifact in published
    assert not (main_dir(root) / st["gamma"].artifact).exists()


# ---------------------------------------------------------------------------------------------
# crash safety: SIGKILL at named steps, then a rerun completes the promotion

CRASH_STEPS = ["promote-after-first-file", "promote-after-copy", "promote-after-index",
               "promote-after-first-ledger-file"]


@pytest.mark.slow
@pytest.mark.parametrize("step", CRASH_STEPS)
def test_crash_then_rerun_completes(root, step):
    st = by_name(staging_files(root / "build" / "channels" / "staging"))
    crashed = run_subprocess(root, "promote", env={"CONDA_DISTRO_TEST_CRASH_AT": step})
    assert crashed.returncode == -9, crashed.stderr
    published = assert_main_consistent(root)
    assert set(published) <= {st["alpha"].artifact, st["gamma"].artifact}
    rerun = run_subprocess(root, "promote")
    assert rerun.returncode == 1, rerun.stderr
    doc = json.loads(rerun.stdout)
    assert reasons(doc)["beta"] == "test-failed"
    assert assert_main_consistent(root) == {st[n].artifact: st[n].sha256 for n in ("alpha", "gamma")}
    ledger = Ledger(root / "channel_state")
    for n, n_tests in (("alpha", 4), ("gamma", 1)):
        (entry,) = ledger.load(n).artifacts
        assert entry.sha256 == st[n].sha256 and len(entry.tests) == n_tests
    assert not list(main_dir(root).glob("*/.*.part"))
    assert not (root / "build" / "channels" / "retired").exists()
    again = promote(PromoteOptions(root=root))
    assert again.plan.promote == [] and again.ledger_written == []


def test_unindexed_copy_that_is_no_longer_promotable_is_moved_out(root):
    crashed = run_subprocess(root, "promote", env={"CONDA_DISTRO_TEST_CRASH_AT": "promote-after-copy"})
    assert crashed.returncode == -9
    st = by_name(staging_files(root / "build" / "channels" / "staging"))
    ResultsStore(root / "build" / "results").put(with_provenance(root, record(st["gamma"], [("2.4.1", "cpu")], status="failed")))
    doc = json.loads(run_subprocess(root, "promote").stdout)
    assert reasons(doc)["gamma"] == "test-failed" and names(doc["promoted"]) == {"alpha"}
    assert set(assert_main_consistent(root)) == {st["alpha"].artifact}
    assert not (main_dir(root) / st["gamma"].artifact).exists()
    assert (root / "build" / "channels" / "retired" / st["gamma"].artifact).exists()


def test_a_deleted_main_index_is_rebuilt_by_promote_and_no_recorded_file_leaves_main(root, capsys):
    """What a damaged index's advice says (delete it, run promote) never costs main a file: promote indexes
    main again from its files, keeping every file channel_state/ records in main, even one its plan leaves
    out; retire keeps them too. Before, every file of main not in the plan (for retire: every file) was
    moved out to retired/."""
    run(root, "promote", capsys=capsys)
    st = by_name(staging_files(root / "build" / "channels" / "staging"))
    before = assert_main_consistent(root)
    assert set(before) == {st["alpha"].artifact, st["gamma"].artifact}
    for index in main_dir(root).glob("*/repodata.json"):
        index.unlink()
    retired = root / "build" / "channels" / "retired"
    assert cli_main(["retire", "alpha", "--reason", "x", "--root", str(root)]) == 2  # (nothing indexed to retire)
    capsys.readouterr()
    assert not any(retired.rglob("*.conda")) and all((main_dir(root) / a).is_file() for a in before)
    # gamma is no longer promotable (a failed test recorded since), so promote's plan leaves it out
    ResultsStore(root / "build" / "results").put(with_provenance(root, record(st["gamma"], [("2.4.1", "cpu")], status="failed")))
    code, doc = run(root, "promote", capsys=capsys)
    assert assert_main_consistent(root) == before
    assert not any(retired.rglob("*.conda"))
    assert Ledger(root / "channel_state").load("gamma").artifacts[0].retired is None


def _size(path: Path) -> int | None:
    """The file's size, or None when it is not there (now: a retirement may move it at any moment)."""
    try:
        return path.stat().st_size if path.is_file() else None
    except FileNotFoundError:
        return None


def _watch_main(root: Path, stop: threading.Event, problems: list[str], seen: list[int]) -> None:
    """A reader polling main like an installer would: every repodata it reads must parse and name only
    files that exist with the recorded size."""
    while not stop.is_set():
        for rd in main_dir(root).glob("*/repodata.json"):
            try:
                doc = json.loads(rd.read_text())
            except ValueError as exc:
                problems.append(f"torn read of {rd}: {exc}")
                continue
            for fn, rec in doc.get("packages.conda", {}).items():
                path = rd.parent / fn
                if _size(path) != rec["size"]:
                    # Reading the index and then the file is two steps: a retirement may rewrite the index
                    # and move the file out in between. It is a violation only if the index that is there
                    # now still names a file that is not (retire rewrites the index first, then moves).
                    current = json.loads(rd.read_text()).get("packages.conda", {})
                    if fn in current and _size(path) != current[fn]["size"]:
                        problems.append(f"{rd} names {fn}, which is missing or incomplete")
            seen.append(len(doc.get("packages.conda", {})))


@pytest.mark.slow
def test_readers_never_see_an_inconsistent_main(root):
    stop, problems, seen = threading.Event(), [], []
    reader = threading.Thread(target=_watch_main, args=(root, stop, problems, seen))
    reader.start()
    try:
        promoted = run_subprocess(root, "promote")
        retired = run_subprocess(root, "retire", "gamma", "--reason", "r")
    finally:
        stop.set()
        reader.join(timeout=60)
    assert (promoted.returncode, retired.returncode) == (1, 0)
    assert problems == [] and 2 in seen


# ---------------------------------------------------------------------------------------------
# concurrency: the main channel's lock

HOLD_LOCK = "import sys, time; from filelock import FileLock; l = FileLock(sys.argv[1]); l.acquire(); " \
            "print('held', flush=True); time.sleep(float(sys.argv[2]))"


def _hold_lock(root: Path, seconds: float) -> subprocess.Popen:
    main_dir(root).mkdir(parents=True, exist_ok=True)
    p = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(main_dir(root) / ".conda-distro.lock"), str(seconds)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_second_promotion_times_out_with_exit_2(root):
    holder = _hold_lock(root, 30)
    try:
        res = run_subprocess(root, "promote", "--lock-timeout", "1")
    finally:
        holder.kill()
        holder.wait(timeout=60)
    assert res.returncode == 2
    assert "another conda-distro process (a promote or retire) is using channel" in res.stderr and "--lock-timeout" in res.stderr
    assert assert_main_consistent(root) == {} and not (root / "channel_state").exists()


def test_second_promotion_waits_for_the_first(root):
    holder = _hold_lock(root, 2)
    t0 = time.monotonic()
    res = run_subprocess(root, "promote", "--lock-timeout", "60")
    holder.wait(timeout=60)
    assert res.returncode == 1 and time.monotonic() - t0 >= 1.5
    assert names(json.loads(res.stdout)["promoted"]) == {"alpha", "gamma"}


@pytest.mark.slow
def test_two_concurrent_promotions_promote_each_file_once(root):
    cmd = [sys.executable, "-m", "conda_distro", "promote", "--root", str(root), "--format", "json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [1, 1], [o[1] for o in outs]
    docs = [json.loads(o[0]) for o in outs]
    promoted = [a["artifact"] for d in docs for a in d["promoted"]]
    assert len(promoted) == len(set(promoted)) == 2
    assert set(assert_main_consistent(root)) == set(promoted)


# ---------------------------------------------------------------------------------------------
# retire (local)


def test_retire_local(root, capsys):
    run(root, "promote", capsys=capsys)
    st = by_name(staging_files(root / "build" / "channels" / "staging"))
    code, doc = run(root, "retire", "alpha", "--reason", "upstream abandoned", "--by", "tester", capsys=capsys)
    assert code == 0
    assert doc["retired"] == [{"artifact": st["alpha"].artifact, "sha256": st["alpha"].sha256}]
    assert doc["dependents"] == [st["gamma"].artifact]
    assert set(assert_main_consistent(root)) == {st["gamma"].artifact}
    assert (root / "build" / "channels" / "retired" / st["alpha"].artifact).is_file()
    (entry,) = Ledger(root / "channel_state").load("alpha").artifacts
    assert entry.retired.reason == "upstream abandoned" and entry.retired.by == "tester"
    assert entry.promoted_at is not None  # the promotion record is kept
    code, doc = run(root, "promote", capsys=capsys)
    assert reasons(doc)["alpha"] == "retired" and doc["promoted"] == []
    code, doc = run(root, "retire", "alpha", "--reason", "again", capsys=capsys)
    assert code == 0 and doc["retired"] == [] and doc["already_retired"] == [st["alpha"].artifact]


def test_retire_bad_input_exits_2(root, capsys):
    run(root, "promote", capsys=capsys)
    assert cli_main(["retire", "alpah", "--reason", "x", "--root", str(root)]) == 2
    assert "did you mean 'alpha'" in capsys.readouterr().err
    assert cli_main(["retire", "alpha", "--reason", "  ", "--root", str(root)]) == 2
    assert "--reason" in capsys.readouterr().err
    assert Ledger(root / "channel_state").load("alpha").artifacts[0].retired is None


@pytest.mark.slow
@pytest.mark.parametrize("step", ["retire-after-ledger", "retire-after-unlist"])
def test_retire_crash_then_rerun_completes(root, capsys, step):
    run(root, "promote", capsys=capsys)
    st = by_name(staging_files(root / "build" / "channels" / "staging"))
    crashed = run_subprocess(root, "retire", "alpha", "--reason", "r", env={"CONDA_DISTRO_TEST_CRASH_AT": step})
    assert crashed.returncode == -9
    assert_main_consistent(root)
    res = run_subprocess(root, "retire", "alpha", "--reason", "r")
    assert res.returncode == 0, res.stderr
    assert set(assert_main_consistent(root)) == {st["gamma"].artifact}
    assert not (main_dir(root) / st["alpha"].artifact).exists()
    assert Ledger(root / "channel_state").load("alpha").artifacts[0].retired.reason == "r"


# ---------------------------------------------------------------------------------------------
# anaconda.org channels through the fake server


@pytest.fixture()
def anaconda_root(template, tmp_path, monkeypatch):
    with FakeAnaconda(TOKEN, lifetime=120) as srv:
        root = write_distro(tmp_path / "distro", staging="anaconda://builds/staging", main="anaconda://distro")
        files = staging_files(template / "staging")
        srv.seed("builds", [api_doc(f) for f in files.values()], label="staging")
        write_results(root, files)
        monkeypatch.setenv("ANACONDA_API_URL", srv.url)
        monkeypatch.setenv("ANACONDA_API_TOKEN", TOKEN)
        yield root, srv, by_name(files)


def test_promote_and_retire_on_anaconda(anaconda_root, capsys):
    root, srv, st = anaconda_root
    code, doc = run(root, "promote", capsys=capsys)
    doc_first = doc
    assert code == 1 and names(doc["promoted"]) == {"alpha", "gamma"}
    copies = [r for r in srv.requests() if r["path"].startswith("/copy/")]
    assert [r["path"] for r in copies] == [f"/copy/package/builds/{n}/1.0/{st[n].artifact}" for n in ("alpha", "gamma")]
    assert all(r["auth"] == "valid" and r["method"] == "POST" and r["body"] == {
        "to_owner": "distro", "from_channel": "staging", "to_channel": "main"} for r in copies)
    in_main = {f["basename"]: f["sha256"] for f in srv.files() if f["owner"] == "distro" and "main" in f["labels"]}
    assert in_main == {st[n].artifact: st[n].sha256 for n in ("alpha", "gamma")}
    assert Ledger(root / "channel_state").load("gamma").artifacts[0].channel == "anaconda://distro"
    n_requests = len(srv.requests())
    code, doc = run(root, "promote", capsys=capsys)
    assert doc["promoted"] == [] and reasons(doc)["alpha"] == "already-in-main"
    assert all(r["method"] == "GET" for r in srv.requests()[n_requests:])

    code, doc = run(root, "retire", "gamma", "--reason", "bad", capsys=capsys)
    assert code == 0 and names(doc["retired"]) == {"gamma"}
    (gamma,) = [f for f in srv.files() if f["owner"] == "distro" and f["attrs"]["name"] == "gamma"]
    assert gamma["labels"] == ["broken", doc_first["snapshot"]]  # (the snapshot label keeps it)
    assert Ledger(root / "channel_state").load("gamma").artifacts[0].retired.reason == "bad"
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err


def test_anaconda_bad_token_exits_2_masked(anaconda_root, monkeypatch):
    root, srv, _ = anaconda_root
    monkeypatch.setenv("ANACONDA_API_TOKEN", "tok-WRONG-5555")
    res = run_subprocess(root, "promote")
    assert res.returncode == 2
    assert "tok-WRONG-5555" not in res.stdout + res.stderr
    assert "401" in res.stderr or "***" in res.stderr
    assert not (root / "channel_state").exists()
    assert not [r for r in srv.requests() if r["method"] != "GET"]
    res = run_subprocess(root, "retire", "alpha", "--reason", "x")
    assert res.returncode == 2 and "tok-WRONG-5555" not in res.stdout + res.stderr


def test_mixed_backends_are_refused_before_writing(template, tmp_path, capsys):
    root = write_distro(tmp_path / "d", main="anaconda://distro")
    copy_channel(template / "staging", root / "build" / "channels" / "staging")
    write_results(root, staging_files(root / "build" / "channels" / "staging"))
    assert cli_main(["promote", "--root", str(root)]) == 2
    assert "server-side copy" in capsys.readouterr().err
    assert not (root / "channel_state").exists()


def test_build_output_uploaded_to_anaconda_staging_then_promoted(template, tmp_path, monkeypatch, capsys):
    """channels.staging = anaconda://…: `build` writes to the local mirror build/channels/staging,
    `upload` puts it on the staging label through anaconda-client, `promote` copies server-side."""
    with FakeAnaconda(TOKEN, lifetime=120) as srv:
        root = write_distro(tmp_path / "distro", staging="anaconda://builds/staging", main="anaconda://distro")
        copy_channel(template / "staging", root / "build" / "channels" / "staging")
        files = staging_files(root / "build" / "channels" / "staging")
        write_results(root, files)
        monkeypatch.setenv("ANACONDA_API_URL", srv.url)
        monkeypatch.setenv("ANACONDA_API_TOKEN", TOKEN)

        assert cli_main(["upload", "--root", str(root), "--format", "json"]) == 0
        assert set(json.loads(capsys.readouterr().out)["uploaded"]) == set(files)
        on_staging = {f["basename"]: f["sha256"] for f in srv.files() if f["owner"] == "builds" and "staging" in f["labels"]}
        assert on_staging == {a: f.sha256 for a, f in files.items()}
        n = len(srv.requests())
        assert cli_main(["upload", "--root", str(root)]) == 0  # again: nothing new is written
        assert all(r["method"] in ("GET", "HEAD") for r in srv.requests()[n:])
        capsys.readouterr()

        code, doc = run(root, "promote", capsys=capsys)
        assert names(doc["promoted"]) == {"alpha", "gamma"}
        in_main = {f["basename"] for f in srv.files() if f["owner"] == "distro" and "main" in f["labels"]}
        assert in_main == {by_name(files)[n].artifact for n in ("alpha", "gamma")}
        out = capsys.readouterr()
        assert TOKEN not in out.out + out.err


def test_upload_needs_an_anaconda_staging(root, capsys):
    assert cli_main(["upload", "--root", str(root)]) == 2
    assert "channels.staging" in capsys.readouterr().err
