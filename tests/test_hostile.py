"""Recipe code cannot fool the evidence: the hostile recipes of ``tests/data/hostile/`` run on real
engines (rattler-build inside bubblewrap) against a sandbox world, and each attack that broke an earlier
engine gets nowhere.

* forged reports: a test script writes a fake "passed" report into its parent's (the runner's)
  descriptors and every other one it can open, and leaves a background writer: the test still fails,
  everywhere, and its log is kept;
* swapped bytes: a test rewrites the package it tests and tries to write staging: staging holds the
  bytes built and the results name their sha256;
* host secrets and sockets: build and test scripts read ``~/.netrc`` / ``~/.config/gh/hosts.yml`` of the
  caller's home and try a loopback TCP port, a filesystem unix socket and an abstract unix socket of the
  caller: nothing arrives, no secret appears in logs or results;
* limits: a test that never ends, a build that leaves a process holding its stdout, a test printing
  400 MB: each an ``error`` (``timeout`` / ``output limit``), no process survives, the log is bounded.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.helpers import run_cli_at, run_json_at, sha256

from conda_distro.engine.sandbox import Layout, bwrap_path, require_bwrap, wrap

HOSTILE = Path(__file__).parent / "data" / "hostile"
STAGING = Path("build/channels/staging")

needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed (run .ci/install-sandbox)")


def add_hostile(root: Path, name: str, fill: dict[str, str] | None = None) -> Path:
    dest = root / "recipes" / name
    shutil.copytree(HOSTILE / name, dest)
    for f in dest.iterdir():
        text = f.read_text()
        for key, value in (fill or {}).items():
            text = text.replace(f"@{key}@", value)
        f.write_text(text)
    return dest


def set_limits(root: Path, **limits: object) -> None:
    cfg = root / "distro.yaml"
    cfg.write_text(cfg.read_text() + "limits:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in limits.items()))


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line holds ``marker`` (a sandbox's processes are host processes too)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


# ---------------------------------------------------------------------------------------------
# the report descriptor, without a world: the runner's seal is what keeps it private


SEAL_PROBE = r"""
import os, subprocess, sys
from conda_distro.engine.worker import seal_process
fd = int(sys.argv[1])
if sys.argv[2] == "sealed":
    seal_process(fd)
else:
    os.set_inheritable(fd, False)
subprocess.run(["/bin/sh", "-c", f'(echo FORGED > /proc/$PPID/fd/{fd}) 2>/dev/null; '
                'cat /proc/$PPID/environ >/dev/null 2>&1 && echo ENVIRON-READ >&2; true'])
os.write(fd, b"REAL\n")
"""


@needs_bwrap
@pytest.mark.parametrize("mode", ["sealed", "open"])
def test_a_child_of_the_sealed_runner_cannot_write_its_report_descriptor(mode, tmp_path):
    """The repro of the forged report at its smallest: a child of the runner writes /proc/$PPID/fd/N.
    Sealed (non-dumpable, close-on-exec) it cannot; unsealed (the control) it can."""
    lay = Layout(True)
    work = tmp_path / "work"
    work.mkdir()
    lay.show(work, "work", writable=True)
    r, w = os.pipe()
    proc = subprocess.Popen(wrap([sys.executable, "-I", "-c", SEAL_PROBE, str(w), mode], lay.spec(), require_bwrap()),
                            pass_fds=(w,), stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"})
    os.close(w)
    got = b""
    while chunk := os.read(r, 4096):
        got += chunk
    os.close(r)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    if mode == "sealed":
        assert got == b"REAL\n" and b"ENVIRON-READ" not in err
    else:
        assert b"FORGED" in got and b"ENVIRON-READ" in err


# ---------------------------------------------------------------------------------------------
# forged reports and swapped bytes


@pytest.mark.slow
@needs_bwrap
def test_a_test_that_forges_its_report_still_fails_everywhere_repro(sandbox_world, capsys):
    """The probe: a test script found the worker through /proc/$PPID, wrote a fake "passed" report to
    its report descriptor and left a background writer; a test failing everywhere was promoted with
    "passed" results and no log was kept."""
    add_hostile(sandbox_world, "forger")
    code, doc = run_json_at(capsys, sandbox_world, "build", "forger")
    assert code == 1
    tests = doc["tests"]
    assert len(tests) == 6 and {t["status"] for t in tests} == {"failed"}, tests
    for t in tests:
        log = Path(t["log"]).read_text()
        assert "FORGE-PARENT: " in log and ": wrote to 0 of its descriptors" in log  # the attack ran, and failed
        assert "FORGER-FAILS" in log and "=== test 0: FAILED" in log
    code, doc = run_json_at(capsys, sandbox_world, "promote")
    assert not [p for p in doc["promoted"] if "/forger-" in p["artifact"]]
    assert {h["reason"] for h in doc["held"] if "/forger-" in h["artifact"]} == {"test-failed"}
    assert not list((sandbox_world / "build/work").iterdir())


@pytest.mark.slow
@needs_bwrap
def test_a_test_cannot_change_the_bytes_it_tests_or_staging_repro(sandbox_world, capsys):
    """The probe: a test on the last target rewrote the built .conda (the worker's output folder stayed
    writable and named in the job file); intake hashed the rewritten file."""
    add_hostile(sandbox_world, "swapper")
    code, doc = run_json_at(capsys, sandbox_world, "build", "swapper")
    assert code == 0, doc
    (b,) = doc["builds"]
    staged = sandbox_world / STAGING / b["artifact"]
    assert sha256(staged) == b["sha256"]
    results = json.loads((sandbox_world / "build/results" / (b["artifact"].replace("/", "__") + ".json")).read_text())
    assert results["sha256"] == b["sha256"] and len(results["tests"]) == 6
    assert b"SWAPPED-BYTES" not in staged.read_bytes()
    assert sorted(p.name for p in staged.parent.iterdir() if p.name.startswith("swapper")) == [staged.name]
    for t in doc["tests"]:
        log = Path(t["log"]).read_text()
        assert "SWAP-ATTEMPT done" in log
        assert "CHANNEL-WRITTEN" not in log and "EMPTIED" not in log
        for line in log.splitlines():  # what it could rewrite is its own copy in its own /tmp
            if line.startswith("REWROTE "):
                assert line.split()[1].startswith(("/tmp/", "/dev/shm/")), line
    code, doc = run_json_at(capsys, sandbox_world, "promote")
    assert [p["artifact"] for p in doc["promoted"] if "/swapper-" in p["artifact"]] == [b["artifact"]]


# ---------------------------------------------------------------------------------------------
# host secrets and sockets


class Listeners:
    """A loopback TCP port, a filesystem unix socket and an abstract unix socket of the caller; records
    what arrives."""

    def __init__(self, folder: Path) -> None:
        self.received: list[bytes] = []
        self.abstract = f"conda-distro-probe-{secrets.token_hex(6)}"
        self.unix_path = folder / "probe.sock"
        self.socks = []
        tcp = socket.socket()
        tcp.bind(("127.0.0.1", 0))
        self.port = tcp.getsockname()[1]
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(str(self.unix_path))
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind("\0" + self.abstract)
        for s in (tcp, unix, abstract):
            s.listen(8)
            s.settimeout(0.2)
            self.socks.append(s)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            for s in self.socks:
                try:
                    conn, _ = s.accept()
                except OSError:
                    continue
                with conn:
                    conn.settimeout(2)
                    try:
                        self.received.append(conn.recv(65536) or b"(connected)")
                    except OSError:
                        self.received.append(b"(connected)")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        for s in self.socks:
            s.close()


@pytest.fixture()
def fake_home(monkeypatch) -> Iterator[tuple[Path, list[str]]]:
    """A home folder outside /tmp with planted tokens, as the caller's ``HOME``."""
    base = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else Path.home()
    home = Path(tempfile.mkdtemp(prefix="conda-distro-fake-home-", dir=base))
    netrc, gh = f"NETRC-SECRET-{secrets.token_hex(8)}", f"GH-SECRET-{secrets.token_hex(8)}"
    (home / ".netrc").write_text(f"machine api.anaconda.org login bot password {netrc}\n")
    (home / ".config/gh").mkdir(parents=True)
    (home / ".config/gh/hosts.yml").write_text(f"github.com:\n    oauth_token: {gh}\n    user: bot\n")
    monkeypatch.setenv("HOME", str(home))
    try:
        yield home, [netrc, gh]
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.slow
@needs_bwrap
def test_recipe_code_reads_no_host_secret_and_reaches_no_host_socket_repro(sandbox_world, capsys, fake_home):
    """The probe: under `--ro-bind / /` build and test scripts read the caller's ~/.netrc and
    ~/.config/gh/hosts.yml and sent them over loopback TCP; they also reached a host unix socket and an
    abstract unix socket."""
    home, planted = fake_home
    listen = Listeners(home)
    try:
        add_hostile(sandbox_world, "snooper", {"HOME": str(home), "PORT": str(listen.port),
                                               "UNIX": str(listen.unix_path), "ABSTRACT": listen.abstract})
        code, doc = run_json_at(capsys, sandbox_world, "build", "snooper", "--pytorch", "2.6.0")
        assert code == 0, doc
        logs = [Path(doc["builds"][0]["log"]).read_text(), *(Path(t["log"]).read_text() for t in doc["tests"])]
        assert "SNOOP-build read 0 bytes" in logs[0] and len(logs) == 3
        for log in logs:
            assert "SNOOP-READ" not in log and "CONNECTED" not in log, log[-2000:]
            assert "SNOOP-UNIX-REFUSED" in log and "SNOOP-ABSTRACT-REFUSED" in log
        assert "SNOOP-test read 0 bytes" in logs[1]
        time.sleep(0.5)
        assert listen.received == []
        written = "".join(p.read_text(errors="replace") for p in (sandbox_world / "build").rglob("*")
                          if p.is_file() and p.suffix in (".json", ".log"))
        assert not [s for s in planted if s in written]

        # the control: unsandboxed, the same scripts read the secrets and reach every socket
        shutil.rmtree(sandbox_world / "build/results")
        code, out, err = run_cli_at(capsys, sandbox_world, "build", "snooper", "--pytorch", "2.6.0", "--no-sandbox")
        time.sleep(0.5)
        leaked = b"".join(listen.received)
        assert planted[0].encode() in leaked and planted[1].encode() in leaked
        assert b"tcp" in leaked and b"unix" in leaked and b"abstract" in leaked
    finally:
        listen.close()


# ---------------------------------------------------------------------------------------------
# limits


@pytest.mark.slow
@needs_bwrap
def test_a_test_that_never_ends_is_killed_at_its_limit_repro(sandbox_world, capsys):
    """The probe: a test running forever was still running at 151 s."""
    set_limits(sandbox_world, test_timeout=4)
    add_hostile(sandbox_world, "eternal")
    t0 = time.monotonic()
    code, doc = run_json_at(capsys, sandbox_world, "build", "eternal", "--pytorch", "2.6.0")
    took = time.monotonic() - t0
    assert code == 1
    assert doc["builds"][0]["status"] == "built"
    assert len(doc["tests"]) == 2
    for t in doc["tests"]:
        assert t["status"] == "error" and t["reason"].startswith("timeout"), t
        log = Path(t["log"]).read_text()
        assert "ETERNAL-STARTED" in log and "killed: timeout after 4 s" in log
    assert took < 120  # (2 tests of 4 s each, plus building: a loaded machine is slow, but not that slow)
    assert processes_with("86399") == []
    assert not list((sandbox_world / "build/work").iterdir())
    # an error is never reused: the next build runs it again (and --retry-errors names it)
    code, doc = run_json_at(capsys, sandbox_world, "build", "--retry-errors", "--pytorch", "2.6.0")
    assert {t["name"] for t in doc["tests"] if not t.get("cached")} == {"eternal"}


@pytest.mark.slow
@needs_bwrap
def test_a_build_that_leaves_a_process_on_its_stdout_is_killed_at_its_limit_repro(sandbox_world, capsys):
    """The probe: a build script leaving `sleep 900 &` on its stdout hung the build until it was killed
    at 400 s (rattler-build waits for EOF). The recipe sets its own limit (extra: limits:)."""
    add_hostile(sandbox_world, "lingerer")
    t0 = time.monotonic()
    code, doc = run_json_at(capsys, sandbox_world, "build", "lingerer", "--pytorch", "2.6.0")
    took = time.monotonic() - t0
    assert code == 1
    (b,) = doc["builds"]
    assert b["status"] == "error" and b["reason"].startswith("timeout"), b
    assert "LINGERER-LEFT-A-SLEEPER" in Path(b["log"]).read_text()
    assert {t["status"] for t in doc["tests"]} == {"blocked"}
    assert took < 90
    # the kill takes the sandbox's PID namespace with it; the kernel ends its last processes a moment after
    # bwrap is reaped (once seen still listed on a loaded machine, gone a moment later): a few seconds, not 400
    deadline = time.monotonic() + 10
    while processes_with("86398") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with("86398") == []
    assert not list((sandbox_world / STAGING).glob("*/lingerer-*"))
    assert not list((sandbox_world / "build/work").iterdir())


@pytest.mark.slow
@needs_bwrap
def test_a_test_printing_400_mb_is_cut_at_the_log_limit_repro(sandbox_world, capsys):
    """The probe: a test printing 400 MB took 7 min and grew memory past 600 MB before its log was cut.
    The recipe caps its logs at 1 MiB (extra: limits:)."""
    add_hostile(sandbox_world, "chatty")
    t0 = time.monotonic()
    code, doc = run_json_at(capsys, sandbox_world, "build", "chatty", "--pytorch", "2.6.0")
    took = time.monotonic() - t0
    assert code == 1
    assert len(doc["tests"]) == 2
    for t in doc["tests"]:
        assert t["status"] == "error" and t["reason"].startswith("output limit"), t
        size = Path(t["log"]).stat().st_size
        assert (1 << 20) <= size < (1 << 20) + 4096
    assert took < 120
    assert processes_with("400000000") == []


def test_intake_refuses_bytes_that_changed_after_the_build_ended(tmp_path):
    """Sealing at its smallest: what is staged must be the bytes hashed when the build sandbox exited."""
    from test_killed_tests import _package_with_test

    from conda_distro.engine import intake

    out = tmp_path / "out"
    built = _package_with_test(out, "sealedpkg", "true")
    art = f"noarch/{built.name}"
    sealed = intake.seal(out)
    assert sealed == {art: sha256(built)}
    with open(built, "ab") as fh:  # changed after the hash (what a process left running could try)
        fh.write(b"\0")
    res = intake.accept(out, {art}, frozenset({"sealedpkg"}), tmp_path / "staging", "recipes/sealedpkg", sealed)
    assert res.accepted == {} and "changed between the end of its build" in (res.rejected or "")
    assert not [p for p in (tmp_path / "staging").rglob("*") if p.is_file()]  # nothing staged, no temp file left
    with open(built, "r+b") as fh:
        fh.truncate(built.stat().st_size - 1)
    res = intake.accept(out, {art}, frozenset({"sealedpkg"}), tmp_path / "staging", "recipes/sealedpkg", sealed)
    assert res.rejected is None and res.sha256[art] == sealed[art] == sha256(tmp_path / "staging" / art)
