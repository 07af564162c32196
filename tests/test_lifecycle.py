"""A life of the channel: months of a sandbox world played through the CLI (``bench/bench_lifecycle.py``),
shortened; and the test clock it moves days with.
"""

from __future__ import annotations

import datetime as dt

import pytest

from conda_distro.errors import UsageError
from conda_distro.util.dates import TEST_TODAY_ENV, parse_as_of, utcnow


def test_the_test_clock_moves_every_date_the_tool_takes_to_the_given_day(monkeypatch):
    monkeypatch.delenv(TEST_TODAY_ENV, raising=False)
    real = utcnow()
    assert abs((real - dt.datetime.now(dt.UTC)).total_seconds()) < 5 and real.microsecond == 0
    monkeypatch.setenv(TEST_TODAY_ENV, "2031-02-03")
    moved = utcnow()
    assert moved.date() == dt.date(2031, 2, 3) and moved.tzinfo is not None
    assert abs((moved.time().hour * 3600 + moved.time().minute * 60) - (real.hour * 3600 + real.minute * 60)) <= 120
    assert parse_as_of(None) == dt.date(2031, 2, 3)  # the reports' default day
    assert parse_as_of("2030-01-01") == dt.date(2030, 1, 1)  # --as-of still wins
    from conda_distro.state.results import TestRecord

    rec = TestRecord(name="a", artifact="noarch/a-1-h0_0.conda", pytorch="2.5.1", variant="cpu", status="passed")
    assert rec.date.date() == dt.date(2031, 2, 3)  # test results are stamped by the same clock
    monkeypatch.setenv(TEST_TODAY_ENV, "next tuesday")
    with pytest.raises(UsageError, match=TEST_TODAY_ENV):
        utcnow()


@pytest.mark.slow
def test_a_short_life_of_the_channel_leaves_no_candidate_stuck(tmp_path):
    """``bench/bench_lifecycle.py`` shortened to one minor (2.6.0) with the same invariants after every step:
    a new package, a PR that breaks a dependent (check-pr fails it) fixed in the same PR, a package broken
    since day 0 fixed, release day with the lockstep package's new version; main installable, ledger equal
    to main, promote/excuses/page agreeing, the repository clean, nothing left in the temp folders."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from bench_lifecycle import Life, play, summary

    lines: list[str] = []
    life = Life(tmp_path, minors=1, say=lines.append, test_tmpdir_on_disk=True)
    play(life, short=True)
    report = summary(life, 0.0)
    assert life.steps >= 6 and life.checks >= 40, report
    assert life.findings == [] and life.stuck == [], "\n".join(lines) + "\n" + report
    assert "promoted gradclip" in "\n".join(lines) and "quantserve" in "\n".join(lines)


def test_a_new_repository_is_dated_by_the_tools_clock_whatever_git_date_the_environment_holds(tmp_path, monkeypatch):
    """`sandbox DIR` commits the world with GitPython, which parsed $GIT_AUTHOR_DATE itself when no date was
    given and raised (a traceback) on ISO 8601 with a "+00:00" offset, a form git accepts; the commit is now
    dated by the tool's clock (the test hook moves it)."""
    import git

    from conda_distro.util.gitutil import init_repository

    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-11-26T12:00:00+00:00")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-11-26T12:00:00+00:00")
    monkeypatch.setenv(TEST_TODAY_ENV, "2031-02-03")
    (tmp_path / "a.txt").write_text("a\n")
    sha = init_repository(tmp_path, "first", "bot", "bot@example.invalid")
    commit = git.Repo(tmp_path).commit(sha)
    assert commit.authored_datetime.date() == dt.date(2031, 2, 3) == commit.committed_datetime.date()
