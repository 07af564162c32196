"""Remote upstream channels for sandboxed builds: what the environments need is mirrored beforehand.

The slow tests serve the sandbox world's upstream channel over HTTP on loopback (``channel_server.py``,
a process of its own, bounded lifetime) and point distro.yaml at it: ``build`` runs sandboxed with the
same results as the file:// world, recipe code cannot reach the server, check-pr and the sweep work,
and a sandbox that needs a record its mirror lacks is an infrastructure ``error`` that a retry fixes.
The fast tests cover the mirror store (checked bytes, clean-up), the unreachable upstream (exit 2), and
how a test environment that could not be set up is recognised.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import git
import pytest
from support.channel_server import ChannelServer
from support.helpers import run_cli, run_cli_at, run_json_at
from support.worlds import copy_world

from conda_distro.engine.sandbox import bwrap_path

SANDBOX_FIXTURES = ("http_world",)  # tests/support/worlds.py: tests using it must be marked slow
HOSTILE = Path(__file__).parent / "data" / "hostile"

needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed (run .ci/install-sandbox)")


@pytest.fixture()
def mirror_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of the test's own (``$CONDA_DISTRO_CACHE``): its mirror store starts empty."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("CONDA_DISTRO_CACHE", str(cache))
    return cache


@pytest.fixture()
def http_world(sandbox_template: Path, tmp_path: Path, mirror_cache: Path) -> Iterator[tuple[Path, ChannelServer]]:
    """A copy of the sandbox world whose upstream channel is served over HTTP (distro.yaml committed)."""
    world = copy_world(sandbox_template, tmp_path / "world")
    server = ChannelServer(world, tmp_path / "requests.log")
    cfg = world / "distro.yaml"
    text, n = re.subn(r"upstream: \[\./upstream\][^\n]*", f'upstream: ["{server.url}/upstream"]', cfg.read_text())
    assert n == 1
    cfg.write_text(text)
    repo = git.Repo(world)
    repo.git.add("-A")
    repo.git.commit("-m", "upstream over http", "--no-verify")
    try:
        yield world, server
    finally:
        server.close()


def statuses(doc: dict) -> tuple[list, list]:
    return (sorted((b["name"], b["artifact"], b["status"]) for b in doc["builds"]),
            sorted((t["name"], t["artifact"], t["pytorch"], t["variant"], t["status"]) for t in doc["tests"]))


def conda_gets(requests: list[str]) -> list[str]:
    return [r.split()[1] for r in requests if r.startswith("GET ") and r.split()[1].endswith(".conda")]


# ------------------------------------------------------------------------------------------ slow: real builds


@pytest.mark.slow
@needs_bwrap
def test_a_remote_upstream_builds_sandboxed_with_the_results_of_a_local_one(http_world, built_report, capsys,
                                                                               mirror_cache):
    """The probe: with `upstream: [conda-forge]` (the real distribution) build, check-pr and sweep exited
    2 ("upstream channel 'conda-forge' is remote"), so CI could build nothing."""
    world, server = http_world
    code, doc = run_json_at(capsys, world, "build", "--all", "--jobs", "2")
    assert code == 1  # the world's failing packages fail, as in the file:// world
    assert statuses(doc) == statuses(built_report)
    # the orchestrator downloaded what the environments need from the channel: python once (into the
    # mirror store), the six pytorch builds once each (the release views); the sandboxes nothing
    gets = conda_gets(server.requests())
    assert sorted(g.rsplit("/", 1)[1].split("-")[0] for g in gets) == ["python"] + ["pytorch"] * 6
    python = next(g for g in gets if "/python-" in g)
    stored = list((mirror_cache / "mirror" / "pkgs").glob("*/python-*.conda"))
    assert len(stored) == 1 and stored[0].name == python.rsplit("/", 1)[1]
    assert stored[0].parent.name == hashlib.sha256(stored[0].read_bytes()).hexdigest()  # content-addressed
    assert not list((world / "build" / "work").iterdir())  # every sandbox's folder (and its mirror views) removed

    # a second build: the store serves what was mirrored, nothing is downloaded again
    shutil.rmtree(world / "build" / "results")
    before = len(server.requests())
    code, doc = run_json_at(capsys, world, "build", "metrickit", "--pytorch", "2.6.0")
    assert code == 0 and {t["status"] for t in doc["tests"]} == {"passed"}  # (its dependents are tested too)
    assert len([t for t in doc["tests"] if t["name"] == "metrickit"]) == 2
    assert conda_gets(server.requests()[before:]) == []


@pytest.mark.slow
@needs_bwrap
def test_recipe_code_cannot_reach_the_remote_channel_from_the_sandbox_repro(http_world, capsys):
    """Build and test scripts try the channel's server (TCP and HTTP): the server never hears them; the
    control, --no-sandbox, reaches it (so the probe works)."""
    world, server = http_world
    dest = world / "recipes" / "phoner"
    shutil.copytree(HOSTILE / "phoner", dest)
    for f in dest.iterdir():
        f.write_text(f.read_text().replace("@PORT@", str(server.port)).replace("@URL@", server.url))
    code, doc = run_json_at(capsys, world, "build", "phoner", "--pytorch", "2.6.0")
    assert code == 0, doc
    logs = [Path(doc["builds"][0]["log"]).read_text(), *(Path(t["log"]).read_text() for t in doc["tests"])]
    assert len(logs) == 3
    assert "PHONE-build-TCP-BLOCKED" in logs[0] and "PHONE-build-HTTP-BLOCKED" in logs[0]
    for log in logs[1:]:
        assert "PHONE-test-TCP-BLOCKED" in log and "PHONE-test-HTTP-BLOCKED" in log
    assert not any("REACHED" in log for log in logs)
    assert not [r for r in server.requests() if "phoner-" in r]

    shutil.rmtree(world / "build" / "results")
    code, out, err = run_cli_at(capsys, world, "build", "phoner", "--pytorch", "2.6.0", "--no-sandbox")
    assert code == 0, err
    heard = [r for r in server.requests() if "phoner-" in r]
    assert any("phoner-build-tcp" in r for r in heard) and any("phoner-test-http" in r for r in heard)


@pytest.mark.slow
@needs_bwrap
def test_check_pr_and_the_sweep_run_on_a_remote_upstream(http_world, capsys):
    world, server = http_world
    recipe = world / "recipes" / "hookprofiler" / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace("summary: ", "summary: (edited) ", 1))
    repo = git.Repo(world)
    repo.git.add("-A")
    repo.git.commit("-m", "hookprofiler: summary", "--no-verify")
    code, out, err = run_cli_at(capsys, world, "check-pr", "--base", "HEAD~1", "--format", "json")
    doc = json.loads(out)
    assert doc["affected"] == ["hookprofiler"], doc["affected"]
    got = {(t["pytorch"], t["variant"]): t["status"] for t in doc["tests"]}
    assert got == {(r, v): "failed" if r == "2.6.0" else "passed" for r in ("2.4.1", "2.5.1", "2.6.0")
                   for v in ("cpu", "cuda")}  # as in the file:// world: its test fails on 2.6.0 only
    assert code == 1 and "cannot be reached" not in err

    # the sweep: a new release appears upstream (on the server), the dry run and an edit-only run work
    code, out, err = run_cli(capsys, "sandbox", "publish-release", str(world), "2.7.0")
    assert code == 0, err
    code, out, err = run_cli_at(capsys, world, "sweep", "--pytorch", "2.7.0", "--dry-run")
    assert code == 0 and out.startswith("dry run: nothing edited, built or committed"), err
    code, doc = run_json_at(capsys, world, "sweep", "--pytorch", "2.7.0", "--no-build")
    assert code == 0, doc
    assert "2.7.0" in (world / "distro.yaml").read_text()
    assert {p["status"] for p in doc["packages"]} >= {"bumped"}


@pytest.mark.slow
@needs_bwrap
def test_a_record_the_mirror_lacks_is_an_infrastructure_error_and_a_retry_fetches_it(http_world, capsys,
                                                                                      monkeypatch):
    """A test environment needs a record the orchestrator's solve did not pick (here: the solve is made
    to forget python): the sandbox cannot set it up, the upstream channel can serve it, so the test is an
    `error` naming the mirror, never `failed`; the missing spec is remembered, and the next sandbox (the
    next test of the run, and the retry) mirrors it and passes."""
    import conda_distro.engine.phases as phases
    from conda_distro.engine.needs import Needs

    world, server = http_world
    real = phases.test_needs

    def forgetful(artifact, channels, cuda, extra=()):
        got = real(artifact, channels, cuda, extra)
        if extra or not artifact.name.startswith("metrickit-"):  # (once it is remembered, it is asked for)
            return got
        return Needs(records=[r for r in got.records if r.file_name.split("-")[0] != "python"],
                     unsolvable=got.unsolvable)

    monkeypatch.setattr(phases, "test_needs", forgetful)
    # one sandbox at a time, so the cuda test starts after the cpu test ended (side by side, each test is
    # judged by what its own sandbox asked for: tests/test_mirror.py's fast test of that below)
    code, doc = run_json_at(capsys, world, "build", "metrickit", "--pytorch", "2.6.0", "--jobs", "1")
    assert code == 1
    assert [b["status"] for b in doc["builds"] if b["name"] == "metrickit"] == ["built"]
    mine = {t["variant"]: t for t in doc["tests"] if t["name"] == "metrickit"}
    # the cpu test ran first: an error naming the mirror; what it missed was remembered at once, so the
    # cuda test after it (same run) had it mirrored and passed
    assert mine["cpu"]["status"] == "error" and mine["cuda"]["status"] == "passed", mine
    reason = mine["cpu"]["reason"]
    assert reason.startswith("mirror: the test environment could not be set up from the local mirror "
                             f"of upstream channel '{server.url}/upstream'"), reason
    assert "infrastructure error, not the package's" in reason
    wanted = json.loads((Path(os.environ["CONDA_DISTRO_CACHE"]) / "mirror" / "wanted" / "metrickit.json").read_text())
    assert any(w.startswith("python") for w in wanted), wanted

    code, doc = run_json_at(capsys, world, "build", "--retry-errors", "--pytorch", "2.6.0")
    assert code == 0, doc["tests"]
    assert {t["status"] for t in doc["tests"] if t["name"] == "metrickit"} == {"passed"}


@pytest.mark.slow
@needs_bwrap
def test_a_build_environment_the_channel_cannot_serve_stays_the_packages_failure(http_world, capsys, mirror_cache):
    """rattler-build's solve against the real channel fails too: a failure of the package, with that
    solver's words, never an infrastructure error."""
    world, _ = http_world
    folder = world / "recipes" / "lonely"
    folder.mkdir()
    (folder / "recipe.yaml").write_text(
        "package: {name: lonely, version: '1.0'}\n"
        "build: {number: 0, noarch: generic, script: ['true']}\n"
        "requirements: {host: [python, no-such-package-anywhere]}\n"
        "about: {license: MIT, summary: lonely (needs what no channel has)}\n"
        "extra: {recipe-maintainers: [octocat]}\n")
    # and a test script that prints what a failed environment looks like cannot pass for one: its
    # environment was set up (rattler-build said so before the script ran), so its failure is its own
    liar = world / "recipes" / "liar"
    liar.mkdir()
    (liar / "recipe.yaml").write_text(
        "package: {name: liar, version: '1.0'}\n"
        "build: {number: 0, noarch: generic, script: ['true']}\n"
        "tests:\n  - script:\n"
        "      - \"echo 'Cannot solve the request because of: No candidates were found for evil-package'\"\n"
        "      - \"echo 'PyRattlerBuildError: failed to setup test environment: nothing'\"\n"
        "      - exit 1\n"
        "about: {license: MIT, summary: liar (a test pretending its environment failed)}\n"
        "extra: {recipe-maintainers: [octocat]}\n")
    code, doc = run_json_at(capsys, world, "build", "lonely", "liar", "--pytorch", "2.6.0")
    assert code == 1
    builds = {b["name"]: b for b in doc["builds"]}
    b = builds["lonely"]
    assert b["status"] == "failed", b
    assert b["reason"].startswith("the build environments cannot be solved from the upstream channels: "), b["reason"]
    assert "no-such-package-anywhere" in b["reason"]
    assert builds["liar"]["status"] == "built"
    tests = [t for t in doc["tests"] if t["name"] == "liar"]
    assert tests and {t["status"] for t in tests} == {"failed"}, tests
    assert not (mirror_cache / "mirror" / "wanted").exists()


# ------------------------------------------------------------------------------------------ fast


def test_an_unreachable_remote_upstream_exits_2_naming_the_channel(make_distro, capsys):
    root = make_distro({"probe": _generic("probe")},
                       {"channels": {"upstream": ["http://user:secret@127.0.0.1:9/t/tok123/chan"]}})
    if bwrap_path() is None:
        pytest.skip("bubblewrap is not installed")
    code, out, err = run_cli_at(capsys, root, "build", "probe")
    assert code == 2, (out, err)
    assert "upstream channel 'http://127.0.0.1:9/t/***/chan' cannot be reached" in err, err
    assert "field 'channels.upstream.0'" in err and "no network" in err
    assert "secret" not in err and "tok123" not in err
    assert not (root / "build").exists()


def _generic(name: str) -> str:
    return (f"package: {{name: {name}, version: '1.0'}}\nbuild: {{number: 0, noarch: generic, script: ['true']}}\n"
            "about: {license: MIT, summary: probe}\nextra: {recipe-maintainers: [octocat]}\n")


def test_the_store_keeps_only_bytes_the_channel_names(tmp_path):
    from conda_distro.engine.mirror import MirrorError, MirrorStore
    from conda_distro.engine.needs import NeededRecord

    src = tmp_path / "ch" / "noarch" / "a-1-0.conda"
    src.parent.mkdir(parents=True)
    src.write_bytes(b"package bytes")
    good = hashlib.sha256(b"package bytes").hexdigest()
    store = MirrorStore(tmp_path / "mirror")
    rec = NeededRecord(url=src.as_uri(), file_name=src.name, subdir="noarch", sha256=good)
    got = store.fetch(rec)
    assert got == tmp_path / "mirror" / "pkgs" / good / "a-1-0.conda" and got.read_bytes() == b"package bytes"
    with pytest.raises(MirrorError, match="has sha256"):
        store.fetch(rec.model_copy(update={"sha256": "0" * 64}))
    assert not (tmp_path / "mirror" / "pkgs" / ("0" * 64) / "a-1-0.conda").exists()
    assert not list((tmp_path / "mirror" / "pkgs").glob(".part-*"))
    with pytest.raises(MirrorError, match="no sha256 or md5"):
        store.fetch(rec.model_copy(update={"sha256": None}))


def test_prune_removes_what_went_unused_and_keeps_the_store_under_its_size(tmp_path):
    from conda_distro.engine.mirror import MirrorStore

    store = MirrorStore(tmp_path / "mirror")
    old = time.time() - 40 * 86400

    def entry(key: str, size: int, when: float) -> Path:
        f = store.pkgs / key / f"{key}.conda"
        f.parent.mkdir(parents=True)
        f.write_bytes(b"x" * size)
        os.utime(f, (when, when))
        return f.parent

    stale = entry("a" * 64, 10, old)
    recent = [entry(c * 64, 100, time.time() - i) for i, c in enumerate("bcd")]
    part = store.pkgs / ".part-xyz"
    part.write_bytes(b"half")
    os.utime(part, (old, old))
    # the temp files of an entry writer and a wanted writer killed with -9 (the folder itself is in use)
    entry_tmp = recent[0] / ".entry.json.k9x.tmp"
    entry_tmp.write_text("{")
    (store.root / "wanted").mkdir(parents=True)
    wanted_tmp = store.root / "wanted" / ".metrickit.json.k9x.tmp"
    wanted_tmp.write_text("[")
    fresh_tmp = recent[1] / ".entry.json.now.tmp"  # a writer at work now: left alone
    fresh_tmp.write_text("{")
    for f in (entry_tmp, wanted_tmp):
        os.utime(f, (old, old))
    store.want("metrickit", ["pip"])
    os.utime(store.root / "wanted" / "metrickit.json", (old, old))
    removed = store.prune(keep_days=30, max_bytes=250)
    assert stale in removed and part in removed and not stale.exists() and not part.exists()
    assert not entry_tmp.exists() and not wanted_tmp.exists() and fresh_tmp.exists()
    assert not (store.root / "wanted" / "metrickit.json").exists()
    # over 250 bytes: the least recently used of the recent ones goes too
    assert [p.exists() for p in recent] == [True, True, False]
    assert store.prune(keep_days=30, max_bytes=250) == []  # converges


def test_a_failed_environment_is_told_from_a_failed_script():
    from conda_distro.engine.backends import env_setup_failure, missing_specs

    setup = ["Cannot solve the request because of: No candidates were found for pip >=23.",
             "PyRattlerBuildError: failed to setup test environment: ..."]
    assert env_setup_failure(setup) == ("pip >=23",)
    # a script that ran came after rattler-build's word that the environment was ready: whatever it
    # prints (even the same lines), the failure is the script's
    ran = ["│ python ┆ 3.11.7 ┆ hf2e68eb_1 ┆ upstream ┆ 10 MiB │", "Successfully updated the test environment",
           *setup, "Script failed with status 1"]
    assert env_setup_failure(ran) is None
    assert env_setup_failure(["Script failed with status 1"]) is None
    report = ("Cannot solve the request because of: metrickit ==0.5.1 h_0 cannot be installed because there are no "
              "viable options:\n└─ metrickit 0.5.1 would require\n   └─ python >=3.10, for which no candidates were found.")
    assert missing_specs(report) == ("python >=3.10",)


def test_urls_are_shown_without_credentials():
    from conda_distro.engine.mirror import RemoteChannel, shown_url

    assert shown_url("https://u:p@conda.anaconda.org/t/abc-123/private/linux-64/x.conda") == \
        "https://conda.anaconda.org/t/***/private/linux-64/x.conda"
    ch = RemoteChannel(0, "conda-forge", "conda-forge", "https://conda.anaconda.org/conda-forge/")
    assert re.fullmatch(r"conda-forge-[0-9a-f]{12}", ch.slug)


def test_a_test_is_judged_by_what_its_own_sandbox_asked_the_mirror_for(tmp_path):
    """Tests of one package run side by side: a sibling remembering a missing record while this test ran
    does not make this test's gap the package's failure (it is an infrastructure error, as it would be
    alone)."""
    from types import SimpleNamespace

    from conda_distro.engine.mirror import MirrorStore
    from conda_distro.engine.needs import Needs
    from conda_distro.engine.phases import TestOut, _judge_mirrored

    store = MirrorStore(tmp_path / "mirror")
    unit = SimpleNamespace(name="metrickit", isolation=SimpleNamespace(mirror=SimpleNamespace(store=store, remotes={})))
    store.want("metrickit", ["python 3.11.*"])  # a sibling test remembered it while this one ran
    got = TestOut(False, message="no candidates for python", env_failed=True, missing=("python 3.11.*",))
    judged = _judge_mirrored(unit, got, Needs(asked=()))  # type: ignore[arg-type]
    assert judged.error and not judged.ok, judged
    # a sandbox that had asked for it and still lacks it: nothing new to fetch, rattler-build's verdict
    same = _judge_mirrored(unit, got, Needs(asked=("python 3.11.*",)))  # type: ignore[arg-type]
    assert not same.error and not same.ok, same


def test_tests_side_by_side_make_their_views_from_one_store_without_tripping_over_each_other(tmp_path):
    """A package's tests run side by side in threads of one process and make their mirror views at once:
    each indexes a file the store has not seen yet and keeps the entry beside it. They once shared one
    temp file name (the process's pid), so one test's rename took the file from under another's, which
    became an infrastructure ``error`` (seen once on a loaded CI machine: one of arrayuser's two tests)."""
    import threading

    from support.channel_builds import build_package

    from conda_distro.engine.mirror import MirrorStore, RemoteChannel
    from conda_distro.engine.needs import NeededRecord

    pkg = build_package(tmp_path / "ch" / "noarch", "alpha", [])
    base = (tmp_path / "ch").as_uri() + "/"
    rec = NeededRecord(url=pkg.as_uri(), file_name=pkg.name, subdir="noarch", channel=base,
                       sha256=hashlib.sha256(pkg.read_bytes()).hexdigest(), size=pkg.stat().st_size)
    remote = RemoteChannel(0, "ch", "ch", base)

    def side_by_side(store: MirrorStore, views: Path, n: int) -> list[BaseException]:
        start, errors = threading.Barrier(n), []

        def one(i: int) -> None:
            start.wait()
            try:
                store.views(views / str(i), [remote], [rec])
                store.want("alpha", [f"spec-{i}"])
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        return errors

    for round_ in range(5):  # a fresh store each round: every thread finds no entry and indexes
        store = MirrorStore(tmp_path / f"mirror{round_}")
        store.fetch(rec)
        assert not side_by_side(store, tmp_path / f"views{round_}", 8)
        entry = json.loads((store.pkgs / rec.sha256 / "entry.json").read_text())
        assert entry["name"] == "alpha"
        assert not [p.name for p in (store.pkgs / rec.sha256).iterdir() if p.name.startswith(".entry")]
        assert sorted(store.wanted("alpha")) == sorted(f"spec-{i}" for i in range(8))  # none lost
        for i in range(8):
            repodata = json.loads((tmp_path / f"views{round_}" / str(i) / remote.slug / "noarch" / "repodata.json").read_text())
            assert pkg.name in repodata["packages.conda"]
