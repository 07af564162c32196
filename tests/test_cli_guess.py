"""The CLI people guess (`-h`, `--json`, metavars in capitals, `-j` from the machine, `sandbox DIR`, progress
with the time left) and the words people read (sweep PR bodies, the tracking issue, the unmaintained report,
promote's notes on hints.yaml, excuses' log links, build and verify lines without repeats or nested
parentheses)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path

import pytest
from support.helpers import run_cli

from conda_distro.cli import command


def _commands(cmd, path=()):
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


ALL = [p for p, _ in _commands(command())]


@pytest.mark.parametrize("path", ALL, ids=lambda p: " ".join(p) or "top")
def test_dash_h_is_help_and_no_python_types_are_shown(path, capsys):
    code, short, _ = run_cli(capsys, *path, "-h")
    code2, long, _ = run_cli(capsys, *path, "--help")
    assert code == code2 == 0 and short == long and "Usage: conda-distro" in short
    assert not re.search(r"<(list\[|str>|int|float|dir>|path>|bool>)", short), short
    usage = short.splitlines()[0]
    assert not re.search(r"\{[a-z_A-Z]+\}", usage), usage  # `{name}`: an argument in typer's braces
    for m in re.finditer(r"^  (--[a-z-]+)(?:, -\w)? ([^ ].*?)  ", short, re.M):
        value = m.group(2)
        assert value.startswith("[") or value == value.upper(), (m.group(1), value)


def test_json_is_format_json(make_distro, clean_recipe, capsys):
    root = make_distro({"a": clean_recipe("a")})
    code, as_json, _ = run_cli(capsys, "lint", "--json", "--root", str(root))
    code2, as_format, _ = run_cli(capsys, "lint", "--format", "json", "--root", str(root))
    assert code == code2 == 0 and as_json == as_format and json.loads(as_json)["ok"] is True
    _, text, _ = run_cli(capsys, "lint", "--root", str(root))
    assert not text.lstrip().startswith("{")
    _, help_text, _ = run_cli(capsys, "lint", "-h")
    assert "--json" in help_text and "Same as --format json." in help_text


def test_jobs_default_is_what_the_machine_holds(monkeypatch, tmp_path):
    from conda_distro.engine import executor

    cores = len(os.sched_getaffinity(0))
    n = executor.machine_jobs()
    assert 1 <= n <= cores
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    avail = next(int(ln.split()[1]) * 1024 for ln in meminfo if ln.startswith("MemAvailable:"))
    assert n <= max(1, avail // executor.MEMORY_PER_JOB)
    monkeypatch.setattr(executor, "MEMORY_PER_JOB", 1 << 60)  # a machine whose memory holds no job: still 1
    assert executor.machine_jobs() == 1
    monkeypatch.setattr(executor, "MEMORY_PER_JOB", 1)  # memory for any number: one per core
    assert executor.machine_jobs() == cores


def test_jobs_option_defaults_to_the_machine(capsys):
    for cmd in ("build", "check-pr", "sweep"):
        _, out, _ = run_cli(capsys, cmd, "-h")
        flat = " ".join(out.split())
        assert "-j, --jobs N" in flat and "default: one per core" in flat and "[default: 1" not in flat


def test_sandbox_help_is_sandbox_dir(capsys):
    code, out, _ = run_cli(capsys, "sandbox", "-h")
    assert code == 0
    assert "Usage: conda-distro sandbox [OPTIONS] DIR" in out
    assert not re.search(r"^\s+create\s", out, re.M) and "sandbox create" not in out  # the default's hidden name
    assert "publish-release" in out and "--force" in out


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand a folder to another user")
def test_sandbox_force_refuses_another_users_folder(tmp_path, capsys):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "keep.txt").write_text("mine\n")
    os.chown(theirs, 65534, 65534)
    code, out, err = run_cli(capsys, "sandbox", str(theirs), "--force")
    assert code == 2 and "belongs to another user" in err and "mktemp -d" in err
    assert (theirs / "keep.txt").read_text() == "mine\n"


# ---------------------------------------------------------------------------------------------
# the words


def _decision(name, status, tests, reason=None):
    """A package's outcome after a sweep ran its tests (its decision planned as ``status``)."""
    from conda_distro.sweep.model import Decision, Outcome, ReleaseTest

    dec = Decision(name=name, status=status, maintainers=("alice",), old_pin="<2.7", new_pin="<2.8", reason=reason)
    return Outcome(dec, status, reason, tests=[ReleaseTest(**t) for t in tests])


def test_sweep_pr_body_says_no_gpu():
    from conda_distro.sweep.render import pr_body

    d = _decision("a", "bumped", [{"pytorch": "2.7.0", "variant": "cpu", "status": "passed"},
                                  {"pytorch": "2.7.0", "variant": "cuda", "status": "passed", "gpu": False}])
    body = pr_body(d, "2.7.0")["body"]
    assert "| 2.7.0 | cuda (no GPU) | passed |" in body and "| 2.7.0 | cpu | passed |" in body


def test_tracking_issue_does_not_blame_the_release_for_older_failures():
    from conda_distro.sweep.model import SweepPlan, SweepResult
    from conda_distro.sweep.render import tracking_issue

    old = _decision("old", "failed", [{"pytorch": "2.6.0", "variant": "cpu", "status": "failed"},
                                      {"pytorch": "2.7.0", "variant": "cpu", "status": "failed"}], reason="boom")
    new = _decision("new", "failed", [{"pytorch": "2.7.0", "variant": "cpu", "status": "failed"}], reason="boom")
    plan = SweepPlan(release="2.7.0", decisions=(old.decision, new.decision))
    body = tracking_issue(plan, SweepResult(plan, [old, new]))
    old_line = next(ln for ln in body.splitlines() if ln.startswith("- [ ] `old`"))
    new_line = next(ln for ln in body.splitlines() if ln.startswith("- [ ] `new`"))
    assert "fails on pytorch 2.6.0 too" in old_line and "for pytorch 2.7.0" not in old_line
    assert "fix the package for pytorch 2.7.0" in new_line


def test_unmaintained_report_does_not_call_a_new_failure_past_the_grace_period():
    from conda_distro.reports.unmaintained import Action, Entry, Reason, ReasonKind, UnmaintainedReport

    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    r = Reason(ReasonKind.NEWEST_FAILS, "2.6.0", now, 0, "newest artifact fails", variants=("cpu",))
    rep = UnmaintainedReport(as_of=now.date(), grace_days=60, releases=[],
                             packages=[Entry("a", ["alice"], [r], Action.PING, {"last_commit": None, "newest_artifact": None, "sweep": None,
                                                                  "last_tests": []})])
    md = rep.markdown()
    assert "by more than the grace period" not in md
    assert "fails on pytorch 2.6.0 cpu (0 days)" in md and "listed from the day it fails" in md


def test_excuses_carry_log_links():
    from conda_distro.gate.excuses import Excuse, Excuses, Regression

    e = Excuse(name="a", new_version="2.0", verdict="held-permanently", reasons=["its own tests failed"],
               regressions=[Regression(package="a", pytorch="2.6.0", variant="cpu", log="build/logs/a-test.log"),
                            Regression(package="b", pytorch="2.6.0", variant="cuda", log="https://ci.example/run/1")])
    ex = Excuses(generated=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), candidates=[e])
    text = "\n".join(ex.text_lines())
    assert "log: a on pytorch 2.6.0 cpu: build/logs/a-test.log" in text
    md = ex.markdown()
    assert "`build/logs/a-test.log`" in md and "[b on pytorch 2.6.0 cuda](https://ci.example/run/1)" in md


def test_build_failures_name_each_variant_once():
    from conda_distro.engine.summary import _where

    pairs = [("2.6.0", "cpu")] * 3 + [("2.6.0", "cuda")] * 3 + [("2.5.1", "cpu")]
    assert _where(pairs) == "2.5.1 (cpu), 2.6.0 (cpu, cuda)"


def _hints(*hints):
    from conda_distro.gate.hints import Hint, HintSet

    return HintSet(tuple(Hint(a, p, None, "octocat", "because", dt.date.fromisoformat(e), i + 2)
                         for i, (a, p, e) in enumerate(hints)))


def test_promote_notes_expired_hints_and_refuses_a_block_on_an_unknown_package():
    from conda_distro.errors import UsageError
    from conda_distro.gate.promote import check_hints

    today = dt.date(2026, 6, 1)
    notes = check_hints(_hints(("force", "alpha", "2026-01-01"), ("block", "beta", "2026-12-31")), today,
                        {"alpha", "beta"})
    assert notes == ("expired: force alpha (by @octocat, expires 2026-01-01) (hints.yaml:2) did nothing; "
                     "renew its expires or remove it",)
    with pytest.raises(UsageError) as exc:
        check_hints(_hints(("block", "tensorkitt", "2026-12-31")), today, {"tensorkit", "alpha"})
    assert exc.value.exit_code == 2 and exc.value.line == 2 and exc.value.field == "package"
    assert "tensorkitt" in str(exc.value) and "did you mean 'tensorkit'" in (exc.value.hint or "")
    # an expired block on an unknown name holds nothing either way: a note, no refusal
    assert check_hints(_hints(("block", "gone", "2026-01-01")), today, {"alpha"})[0].startswith("expired: block gone")
