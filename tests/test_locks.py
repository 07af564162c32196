"""The locks between commands (conda_distro.state.locks): build, sweep, promote and retire exclude each other
where one writes what the other reads, wait for each other at most --lock-timeout in all, then exit 2.

The flock semantics are tested on real processes holding the lock files; the commands, each as a real
process, against a real command paused while it holds its locks (the test hook CONDA_DISTRO_TEST_PAUSE_AT
of channels/hooks.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.worlds import copy_world
from test_sweep import releases_of, tracked_state, world27, world27_template  # noqa: F401 - fixtures

from conda_distro.errors import LockTimeoutError
from conda_distro.state.locks import REPOSITORY_LOCK, Deadline, hold, repository_lock, staging_lock

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_SH if sys.argv[2] == "shared" else fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[3]))
"""


def holder(path: Path, mode: str, seconds: float = 60) -> subprocess.Popen:
    """Another process holding ``path`` (``shared`` or ``exclusive``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(path), mode, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def stop(p: subprocess.Popen) -> None:
    p.kill()
    p.wait(timeout=60)


def test_readers_share_the_lock_and_a_writer_waits_for_them(tmp_path):
    lock = tmp_path / "build" / REPOSITORY_LOCK
    reader = holder(lock, "shared")
    try:
        with repository_lock(tmp_path / "build", tmp_path, 0, shared=True):  # a second reader: at once
            pass
        t0 = time.monotonic()
        with pytest.raises(LockTimeoutError) as err, repository_lock(tmp_path / "build", tmp_path, 0.3, shared=False):
            pass
        assert time.monotonic() - t0 >= 0.3
        assert err.value.exit_code == 2 and str(err.value.path) == str(lock)
        assert f"another conda-distro process (a sweep, build, check-pr, promote or retire) is using the repository {tmp_path}" \
               in err.value.message and "gave up waiting after 0.3 s" in err.value.message
        assert "--lock-timeout" in err.value.hint
        named = err.value.hint.split("sweep wait longer")[0].rsplit(";", 1)[1].replace(" and", ",").split(",")
        _the_commands_named_take_lock_timeout([c.strip() for c in named if c.strip()] + ["sweep"])
    finally:
        stop(reader)
    with repository_lock(tmp_path / "build", tmp_path, 0, shared=False):  # the reader is gone
        pass


def test_a_reader_waits_for_the_writer_and_a_killed_holder_releases(tmp_path):
    writer = holder(tmp_path / ".conda-distro.lock", "exclusive")
    with pytest.raises(LockTimeoutError, match=r"\(a build or sweep\) is using the staging channel"), \
            staging_lock(tmp_path, 0.2, shared=True):
        pass
    stop(writer)  # kill -9: the kernel releases an flock with its process
    with staging_lock(tmp_path, 0, shared=True):
        pass


def test_one_timeout_for_every_lock_a_command_takes(tmp_path):
    """--lock-timeout bounds the waits added up, not each wait: the second lock gets what is left."""
    first, second = tmp_path / "a.lock", tmp_path / "b.lock"
    held_first = holder(first, "exclusive", 0.4)  # released after 0.4 s
    held_second = holder(second, "exclusive")
    budget = Deadline(0.7)
    try:
        t0 = time.monotonic()
        with hold(first, budget, "a", others="x"):
            assert 0.2 <= budget.waited <= 0.7
            time.sleep(0.5)  # work done under a lock does not count
            with pytest.raises(LockTimeoutError, match="gave up waiting after 0.7 s"), hold(second, budget, "b", others="x"):
                pass
        assert budget.left() == 0 and time.monotonic() - t0 < 2.5
    finally:
        stop(held_first)
        stop(held_second)


# ---------------------------------------------------------------------------------------------
# the commands, two real processes each


def start(world: Path, *argv: str, pause_at: str | None = None) -> tuple[subprocess.Popen, Path, Path]:
    """``conda-distro ARGV`` as a process (JSON on stdout); paused at ``pause_at`` until the returned resume
    file exists; the trace file records the steps it passed."""
    trace, resume = world.parent / f"{argv[0]}.trace", world.parent / f"{argv[0]}.resume"
    env = {**os.environ, "CONDA_DISTRO_TEST_TRACE": str(trace), "CONDA_DISTRO_TEST_RESUME": str(resume)}
    if pause_at:
        env["CONDA_DISTRO_TEST_PAUSE_AT"] = pause_at
    proc = subprocess.Popen([sys.executable, "-m", "conda_distro", *argv, "--root", str(world), "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return proc, trace, resume


def passed(trace: Path, step: str, proc: subprocess.Popen, timeout: float = 300) -> float:
    """Wait until the process passes ``step``; its time.monotonic() there."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for line in trace.read_text().splitlines() if trace.is_file() else ():
            name, _, stamp = line.partition(" ")
            if name == step:
                return float(stamp)
        if proc.poll() is not None:
            raise AssertionError(f"ended (exit {proc.returncode}) before {step}: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.02)
    raise AssertionError(f"never reached {step}")


def run(world: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conda_distro", *argv, "--root", str(world), "--format", "json"],
                          capture_output=True, text=True, timeout=600)


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=600)
    return proc.returncode, out, err


def staging_names(world: Path) -> list[str]:
    return sorted(p.name for p in (world / "build" / "channels" / "staging").glob("*/*.conda"))


@pytest.mark.slow
def test_a_build_waits_for_a_running_sweep_and_never_plans_from_its_edits(world27: Path):  # noqa: F811
    """The repro: `build` started during a sweep planned from the sweep's temporary edits (the bumped build
    number). Now it refuses after --lock-timeout, or waits, and builds from the recipes as the sweep left
    them (here: put back, the edits are on the sweep's branches)."""
    before = tracked_state(world27)
    sweep, trace, resume = start(world27, "sweep", "--pytorch", "2.7.0", "--commit", "--no-build",
                                 pause_at="sweep-after-edits")
    try:
        passed(trace, "sweep-after-edits", sweep)
        assert releases_of(world27)[-1] == "2.7.0" and tracked_state(world27) != before  # its edits are on disk

        refused = run(world27, "build", "tensorutils", "--lock-timeout", "1")
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert f"another conda-distro process (a sweep) is using the repository {world27}" in refused.stderr
        assert "gave up waiting after 1 s" in refused.stderr and staging_names(world27) == []

        waiting, _, _ = start(world27, "build", "tensorutils")
        time.sleep(2)
        assert waiting.poll() is None  # it waits for the sweep
    finally:
        resume.touch()
    assert finish(sweep)[0] == 0
    code, out, err = finish(waiting)
    assert code == 0, err
    assert tracked_state(world27) == before
    built = [b["artifact"] for b in json.loads(out)["builds"] if b["name"] == "tensorutils"]
    assert built and all(a.endswith("_0.conda") for a in built), built  # the sweep's edit said build number 1
    assert [n for n in staging_names(world27) if n.startswith("tensorutils-")] == [a.split("/")[-1] for a in built]


@pytest.mark.slow
def test_a_sweep_waits_for_a_running_build(world27: Path):  # noqa: F811
    before = tracked_state(world27)
    build, trace, resume = start(world27, "build", "tensorutils", pause_at="build-locked")
    try:
        passed(trace, "build-locked", build)

        refused = run(world27, "sweep", "--pytorch", "2.7.0", "--no-build", "--lock-timeout", "1")
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert "(a sweep, build, check-pr, promote or retire) is using the repository" in refused.stderr
        assert tracked_state(world27) == before and not (world27 / "build" / "sweep").exists()

        waiting, sweep_trace, _ = start(world27, "sweep", "--pytorch", "2.7.0", "--no-build")
        time.sleep(2)
        assert waiting.poll() is None and not sweep_trace.exists()  # it waits for the build
        resumed = time.monotonic()
    finally:
        resume.touch()
    assert finish(build)[0] == 0
    code, _, err = finish(waiting)
    assert code == 0, err
    assert passed(sweep_trace, "sweep-after-edits", waiting) > resumed  # it edited only once the build was done
    assert releases_of(world27)[-1] == "2.7.0"


@pytest.mark.slow
def test_promote_waits_for_a_build_writing_staging(sandbox_world: Path):
    build, trace, resume = start(sandbox_world, "build", "tensorutils", pause_at="build-locked")
    try:
        passed(trace, "build-locked", build)
        refused = run(sandbox_world, "promote", "--lock-timeout", "1")
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert "another conda-distro process (a build or sweep) is using the staging channel" in refused.stderr
        assert not (sandbox_world / "build" / "channels" / "pytorch").exists()  # main: nothing written

        waiting, _, _ = start(sandbox_world, "promote")
        time.sleep(2)
        assert waiting.poll() is None
    finally:
        resume.touch()
    assert finish(build)[0] == 0
    code, out, err = finish(waiting)
    assert code in (0, 1), err
    promoted = [p["artifact"] for p in json.loads(out)["promoted"]]
    assert any("tensorutils-" in a for a in promoted), out  # it read staging once the build had written it


@pytest.fixture()
def promoted_world(built_template: Path, tmp_path: Path) -> Path:
    world = copy_world(built_template, tmp_path / "world")
    res = run(world, "promote")
    assert res.returncode in (0, 1), res.stderr
    return world


@pytest.mark.slow
@pytest.mark.parametrize("first, pause", [("retire", "retire-locked"), ("promote", "promote-locked")])
def test_retire_and_promote_exclude_each_other_on_main(promoted_world: Path, first: str, pause: str):
    argv = {"retire": ("retire", "trainloop", "--reason", "lock test"), "promote": ("promote",)}
    other = "promote" if first == "retire" else "retire"
    holder_proc, trace, resume = start(promoted_world, *argv[first], pause_at=pause)
    try:
        passed(trace, pause, holder_proc)
        refused = run(promoted_world, *argv[other], "--lock-timeout", "1")
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert "another conda-distro process (a promote or retire) is using channel" in refused.stderr
    finally:
        resume.touch()
    code, _, err = finish(holder_proc)
    assert code in (0, 1), err
    assert run(promoted_world, *argv[other]).returncode in (0, 1)  # and once it is done, the other runs


def test_nothing_but_conda_distro_locks_takes_an_flock(tmp_path):
    """The lock files are plain flock files: an older conda-distro (filelock's FileLock) and this one
    exclude each other on the same file."""
    from filelock import FileLock

    path = tmp_path / ".conda-distro.lock"
    with FileLock(str(path)), pytest.raises(LockTimeoutError), staging_lock(tmp_path, 0.1, shared=True):
        pass
    fd = os.open(path, os.O_RDWR)
    try:
        with staging_lock(tmp_path, 0), pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def _the_commands_named_take_lock_timeout(named: list[str]) -> None:
    """The lock's advice names exactly the commands whose --help lists --lock-timeout (before, it advised
    the option to every command, check-pr and fanout among them, which have none)."""
    commands = ["build", "promote", "retire", "prune", "rollback", "sweep", "check-pr", "watch", "verify-channel",
                "upload", "snapshots", "fanout shard", "fanout merge"]
    have = []
    for cmd in commands:
        r = subprocess.run([sys.executable, "-m", "conda_distro", *cmd.split(), "--help"], capture_output=True,
                           text=True, timeout=120, check=False)
        assert r.returncode == 0, r.stderr
        if "--lock-timeout" in r.stdout:
            have.append(cmd)
    assert sorted(named) == sorted(have)

