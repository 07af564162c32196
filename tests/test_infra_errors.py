"""Infrastructure errors (a build or test killed at its time or output limit, a sandbox whose mirror
lacked a record) as people see them: check-pr's comment and text give them their own status and cause,
never "blocked" nor "fail"; build's terminal summary shows failure reasons through safetext."""

from __future__ import annotations

import re

from conda_distro.checkpr.check import CheckPrResult
from conda_distro.checkpr.comment import build_report, infra_cause, to_markdown, to_text
from conda_distro.engine.executor import ExecutionResult
from conda_distro.engine.summary import build_table
from conda_distro.engine.supervise import OUTPUT_LIMIT, TIMEOUT
from conda_distro.state.results import BuildRecord
from conda_distro.state.results import TestRecord as Run  # (renamed: pytest would try to collect a Test* class)

LIMITS = "limits: build 3600 s, test 30 s, log 67108864 bytes (distro.yaml `limits:`, a recipe's `extra: limits:`)"


def _run(name: str, release: str, variant: str, status: str, reason: str | None = None) -> Run:
    return Run(name=name, artifact=f"noarch/{name}-1.0-h_0.conda", pytorch=release, variant=variant, status=status,
               reason=reason, log=f"/w/build/pr/main/logs/{name}/h_0.{release}-{variant}.test.log")


def _result(tests: list[Run], builds: list[BuildRecord]) -> CheckPrResult:
    names = list(dict.fromkeys([b.name for b in builds] + [t.name for t in tests]))
    return CheckPrResult(base="origin/main", changed=[names[0]], affected=names, built=True, root=__import__("pathlib").Path("/w"),
                         builds=builds, tests=tests, maintainers={n: [f"{n}-owner"] for n in names})


def test_a_test_killed_at_its_limit_is_an_infrastructure_error_with_its_cause_not_blocked():
    tests = [_run("slowpkg", r, v, "error" if r == "2.6.0" else "passed",
                  f"{TIMEOUT}: {LIMITS}" if r == "2.6.0" else None)
             for r in ("2.5.1", "2.6.0") for v in ("cpu", "cuda")]
    tests += [_run("loudpkg", r, v, "blocked", "the build failed") for r in ("2.5.1", "2.6.0") for v in ("cpu", "cuda")]
    builds = [BuildRecord(name="slowpkg", version="1.0", status="built"),
              BuildRecord(name="loudpkg", version="1.0", status="error", reason=f"{OUTPUT_LIMIT}: {LIMITS}")]
    res = _result(tests, builds)
    rep = build_report(res)
    assert [(r.name, r.status, r.failed_on, r.note) for r in rep.rows] == [
        ("slowpkg", "error", "2.6.0 cpu/cuda", "infrastructure error (timeout)"),
        ("loudpkg", "error", "build", "infrastructure error (output limit)")]
    assert rep.verdict == "infrastructure error, run it again" and rep.icon == "⚠️"
    assert rep.asks == []  # nobody is asked to change a package for an infrastructure error
    md = to_markdown(res)
    lines = md.split("\n")
    assert lines[0] == "### ⚠️ conda-distro check-pr: infrastructure error, run it again"
    assert "| `slowpkg` (changed) | ⚠️ error | 2.6.0 cpu/cuda | infrastructure error (timeout) |" in lines
    assert "| `loudpkg` | ⚠️ error | build | infrastructure error (output limit) |" in lines
    findings = [ln for ln in lines if ln.startswith("- ⚠️ ")]
    assert len(findings) == 2
    assert findings[0].startswith("- ⚠️ `loudpkg` build could not finish (infrastructure error: output limit): output limit: ")
    assert findings[1].startswith("- ⚠️ `slowpkg` test could not finish on 2.6.0 cpu/cuda (infrastructure error: timeout): "
                                  "timeout: limits: build 3600 s, test 30 s")
    assert "(+1 more)" in findings[1]
    # rerun as the check did, in the PR's own scope (`build --retry-errors` reads the shared results store
    # and builds into the shared staging)
    for name in ("loudpkg", "slowpkg"):
        assert f"  hint: not a failure of the package: `conda-distro check-pr --base origin/main --only {name}` " \
               "runs it again" in lines
    assert "`extra: limits:`" in lines[-2] and lines[-2].startswith("**Next:**")
    assert ("locally `conda-distro check-pr --base origin/main --only loudpkg`, "
            "`conda-distro check-pr --base origin/main --only slowpkg`") in lines[-2]
    assert "--retry-errors" not in md
    assert "blocked" not in md.split("**Findings:**")[0].split("|---|---|---|---|")[1]
    text = to_text(res)
    assert text.startswith("check-pr: infrastructure error, run it again\n")
    assert re.search(r"^  slowpkg \*\s+error\s+2\.6\.0 cpu/cuda\s+infrastructure error \(timeout\)$", text, re.M), text
    assert re.search(r"^  warning: slowpkg test could not finish on 2\.6\.0 cpu/cuda \(infrastructure error: timeout\)",
                     text, re.M), text
    assert res.exit_code == 1


def test_a_failure_next_to_an_error_keeps_changes_needed_and_both_rows_say_what_they_are():
    tests = [_run("a", "2.6.0", "cpu", "failed", "AssertionError: [0, 128, 256]"),
             _run("b", "2.6.0", "cpu", "error", "mirror: the test environment could not be set up from the local mirror "
                                               "of upstream channel 'conda-forge' @pytorch/core")]
    res = _result(tests, [BuildRecord(name=n, version="1.0", status="built") for n in "ab"])
    rep = build_report(res)
    assert rep.verdict == "changes needed"
    assert [(r.name, r.status, r.note) for r in rep.rows] == [("a", "fail", "tests failed"),
                                                              ("b", "error", "infrastructure error (mirror)")]
    md = to_markdown(res)
    assert "@pytorch/core" not in md and "@\u200dpytorch/core" in md  # the reason is recipe-side text: de-mentioned
    assert "@b-owner" not in md  # asks go to failures only


def test_infra_causes_are_read_from_the_reason_as_the_engine_writes_it():
    assert infra_cause(f"{TIMEOUT}: {LIMITS}") == "timeout"
    assert infra_cause(f"{OUTPUT_LIMIT}: {LIMITS}") == "output limit"
    assert infra_cause("mirror: cannot download python-3.11.7-h_1.conda") == "mirror"
    assert infra_cause("test 0 failed: Script failed with status 137 (the test process was killed (SIGKILL: out "
                       "of memory, or killed from outside))") == "killed"
    assert infra_cause(None) == "infrastructure"


def test_the_build_summary_shows_failure_reasons_through_safetext():
    """The probe: a test printing escape sequences and a mention as its last line had them in build's
    terminal table, raw."""
    hostile = "\x1b]0;pwned\x07\x1b[31mAssertionError\x1b[0m ping @octocat\x00 and\nsecond line"
    report = ExecutionResult(
        builds=[BuildRecord(name="bad", version="1.0", artifact="noarch/bad-1.0-h_0.conda", status="failed",
                            reason="Script failed to execute \x1b[2J@team"),
                BuildRecord(name="ok", version="1.0", artifact="noarch/ok-1.0-h_0.conda", status="built")],
        tests=[_run("ok", "2.6.0", "cpu", "failed", hostile), _run("ok", "2.6.0", "cuda", "error", f"{TIMEOUT}: {LIMITS}")])
    text = "\n".join(build_table(report))
    assert "\x1b" not in text and "\x00" not in text and "\x07" not in text
    assert "@octocat" not in text and "@\u200doctocat" in text and "@\u200dteam" in text
    assert "ok 1.0: failed on pytorch 2.6.0 (cpu): AssertionError ping @\u200doctocat and second line" in text
    assert "bad 1.0: build failed: Script failed to execute @\u200dteam" in text
    assert "1 could not finish (infrastructure error)" in text
