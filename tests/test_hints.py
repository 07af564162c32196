"""hints.yaml (issue 12): the schema, the API the promotion gate uses, and what `lint` says about it.

Malformed files go through the real CLI: exit 2, the finding names hints.yaml, the line and the field,
and nothing is written (not even the fixes `lint --fix` would otherwise apply).
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
from pathlib import Path

import pytest
from support.helpers import run_cli, run_json_at

from conda_distro.errors import ConfigError
from conda_distro.gate.hints import HINTS_FILE, Hint, HintSet, load_hints

TODAY = dt.date(2026, 6, 1)

VALID = """\
# release managers' hints
hints:
  - action: block
    package: tensorkit
    version: "1.3.0"
    by: octocat
    reason: breaks audiokit's resampling (#123)
    expires: 2026-12-31

  - action: force-badtest
    package: audiokit
    version: 0.9.2
    by: hubot
    reason: its test needs the network
    expires: 2026-06-01
  - action: urgent
    package: audiokit
    by: octocat
    reason: security fix
    expires: 2026-05-31
"""


def hint_doc(**fields: str) -> str:
    base = {"action": "block", "package": "tensorkit", "by": "octocat", "reason": "why", "expires": "2026-12-31"}
    base.update(fields)
    body = "".join(f"    {k}: {v}\n" for k, v in base.items() if v is not None)
    return "hints:\n  - " + body[4:]


@pytest.fixture()
def root(make_distro, clean_recipe) -> Path:
    return make_distro({"tensorkit": clean_recipe("tensorkit"), "audiokit": clean_recipe("audiokit")})


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file()}


# ---------------------------------------------------------------------------------------------
# loading


def test_load_valid_file(root):
    (root / HINTS_FILE).write_text(VALID)
    hints = load_hints(root)
    assert hints.path == root / HINTS_FILE
    assert hints.hints == (
        Hint("block", "tensorkit", "1.3.0", "octocat", "breaks audiokit's resampling (#123)", dt.date(2026, 12, 31), 3),
        Hint("force-badtest", "audiokit", "0.9.2", "hubot", "its test needs the network", dt.date(2026, 6, 1), 10),
        Hint("urgent", "audiokit", None, "octocat", "security fix", dt.date(2026, 5, 31), 16),
    )


def test_missing_or_empty_file_means_no_hints(root):
    assert load_hints(root) == HintSet((), None)
    (root / HINTS_FILE).write_text("# nothing yet\n")
    assert load_hints(root).hints == ()
    (root / HINTS_FILE).write_text("hints: []\n")
    assert load_hints(root).hints == ()


def test_the_repositorys_own_hints_file_is_valid_and_empty():
    repo = Path(__file__).resolve().parent.parent
    hints = load_hints(repo)
    assert hints.path == repo / HINTS_FILE and hints.hints == ()
    text = (repo / HINTS_FILE).read_text()
    for action in ("block", "unblock", "force", "force-badtest", "urgent"):
        assert f"#   {action} " in text  # each action is explained


# ---------------------------------------------------------------------------------------------
# expiry and matching


def test_active_and_expired_by_day(root):
    (root / HINTS_FILE).write_text(VALID)
    hints = load_hints(root)
    on = {(h.action, h.package) for h in hints.active(TODAY)}
    off = {(h.action, h.package) for h in hints.expired(TODAY)}
    assert on == {("block", "tensorkit"), ("force-badtest", "audiokit")}  # expires 2026-06-01: still today
    assert off == {("urgent", "audiokit")}
    assert hints.find("urgent", "audiokit", "0.9.2", TODAY) is None  # an expired hint does nothing
    assert hints.find("urgent", "audiokit", "0.9.2", TODAY - dt.timedelta(days=1)).by == "octocat"
    assert hints.find("force-badtest", "audiokit", "0.9.0", TODAY + dt.timedelta(days=1)) is None
    assert [h.action for h in hints.expired(TODAY + dt.timedelta(days=1))] == ["force-badtest", "urgent"]


def test_force_badtest_version_is_an_upper_bound():
    h = Hint("force-badtest", "audiokit", "0.9.2", "hubot", "flaky", dt.date(2030, 1, 1), 2)
    assert h.applies_to("audiokit", "0.9.2") and h.applies_to("audiokit", "0.9") and h.applies_to("audiokit", "0.9.1")
    assert h.applies_to("audiokit", "0.9.2rc1")  # conda ordering: a pre-release comes before the release
    assert not h.applies_to("audiokit", "0.9.3") and not h.applies_to("audiokit", "0.10.0")
    assert not h.applies_to("audiokit", "0.9.2.1") and not h.applies_to("audiokit-extra", "0.1")
    assert Hint("force-badtest", "audiokit", None, "hubot", "x", dt.date(2030, 1, 1), 2).applies_to("audiokit", "99")


def test_other_actions_match_exactly_that_version_or_any():
    block = Hint("block", "tensorkit", "1.3", "octocat", "x", dt.date(2030, 1, 1), 2)
    assert block.applies_to("tensorkit", "1.3") and block.applies_to("tensorkit", "1.3.0")  # conda: 1.3 == 1.3.0
    assert not block.applies_to("tensorkit", "1.2.9") and not block.applies_to("tensorkit", "1.3.1")
    anyv = Hint("force", "tensorkit", None, "octocat", "x", dt.date(2030, 1, 1), 2)
    assert anyv.applies_to("tensorkit", "0.1") and not anyv.applies_to("audiokit", "0.1")


def test_unblock_cancels_a_block_of_the_same_version(root):
    (root / HINTS_FILE).write_text(VALID + "  - action: unblock\n    package: tensorkit\n    version: 1.3.0\n"
                                   "    by: hubot\n    reason: fixed by audiokit 0.9.3\n    expires: 2026-07-01\n")
    hints = load_hints(root)
    assert hints.find("block", "tensorkit", "1.3.0", TODAY).line == 3
    assert hints.blocking("tensorkit", "1.3.0", TODAY) is None  # the unblock cancels it
    assert hints.blocking("tensorkit", "1.3.0", dt.date(2026, 7, 2)).by == "octocat"  # the unblock expired
    assert hints.blocking("tensorkit", "1.4.0", TODAY) is None  # the block is about 1.3.0 only
    with pytest.raises(ValueError):
        hints.find("blok", "tensorkit", "1.3.0", TODAY)


# ---------------------------------------------------------------------------------------------
# malformed: exit 2 from lint, file:line and field, nothing written


MALFORMED = [
    pytest.param(hint_doc(action="blok"), 2, "hints.0.action", "unknown action 'blok'", "did you mean 'block'?",
                 id="wrong-action"),
    pytest.param(hint_doc(expires="2026-13-01"), 6, "hints.0.expires", "'2026-13-01' is not a date: write it as YYYY-MM-DD", None,
                 id="bad-date"),
    pytest.param(hint_doc(expires="31.12.2026"), 6, "hints.0.expires", "is not a date", None, id="not-iso-date"),
    pytest.param(hint_doc(reasn="typo").replace("    reason: why\n", ""), 6, "hints.0.reasn", "unknown key 'reasn'",
                 "did you mean 'reason'?", id="unknown-key"),
    pytest.param(hint_doc() + "    package: audiokit\n", 7, None, "duplicate key 'package' at lines 3 and 7", None,
                 id="duplicate-key"),
    pytest.param(hint_doc(by=None), 2, "hints.0.by", "required key is missing", "add 'by:'", id="missing-by"),
    pytest.param(hint_doc(by="'@octocat'"), 4, "hints.0.by", "is not a GitHub handle", None, id="bad-handle"),
    pytest.param(hint_doc(version="'1.3 beta'"), 7, "hints.0.version", "is not a conda version", None,
                 id="bad-version"),
    pytest.param("hint:\n  - action: block\n", 1, "hint", "unknown key 'hint'", "did you mean 'hints'?", id="top-key"),
    pytest.param("- action: block\n", 1, None, "must be a mapping", None, id="not-a-mapping"),
    pytest.param("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in itertools.pairwise("abcdefghi")), None, None,
        "expands to more than", None, id="alias-bomb"),
]


@pytest.mark.parametrize("text, line, field, message, hint", MALFORMED)
def test_malformed_hints_are_bad_input(root, capsys, text, line, field, message, hint):
    (root / HINTS_FILE).write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_hints(root)
    err = exc.value
    assert err.path == str(root / HINTS_FILE) and message in err.message
    assert (line is None or err.line == line) and err.field == field
    if hint:
        assert hint in err.hint

    code, doc = run_json_at(capsys, root, "lint")
    assert code == 2 and doc["ok"] is False
    [f] = [f for f in doc["findings"] if f["path"] == HINTS_FILE]
    assert f["check"] == "hint-invalid" and f["severity"] == "error" and message in f["message"]
    assert line is None or f["line"] == line
    if field:
        assert f"field '{field}'" in f["message"]
    code, out, err_text = run_cli(capsys, "lint", "--root", str(root))
    assert code == 2 and "Traceback" not in err_text
    assert f"{HINTS_FILE}:{line or err.line}: error: [hint-invalid]" in out


def test_malformed_hints_stop_lint_fix_from_writing(root, capsys):
    recipe = root / "recipes" / "tensorkit" / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace("    - octocat\n", "    - octocat\n    - octocat\n"))
    code, doc = run_json_at(capsys, root, "lint", "--check", "maintainers-duplicate")
    assert code == 0 and [f["fixable"] for f in doc["findings"]] == [True]  # a fix lint --fix would write
    (root / HINTS_FILE).write_text(hint_doc(action="blok"))
    before = snapshot(root)
    code, _, err = run_cli(capsys, "lint", "--fix", "--root", str(root))
    assert code == 2 and "Traceback" not in err
    assert snapshot(root) == before


# ---------------------------------------------------------------------------------------------
# lint: expired and unknown


def test_lint_reports_an_expired_hint_with_line_who_and_what_to_do(root, capsys):
    (root / HINTS_FILE).write_text(VALID)
    code, doc = run_json_at(capsys, root, "lint", "--as-of", TODAY.isoformat())
    assert code == 0 and doc["errors"] == 0  # warnings only
    [f] = [f for f in doc["findings"] if f["path"] == HINTS_FILE]
    assert (f["check"], f["severity"], f["line"], f["recipe"]) == ("hint-expired", "warning", 16, "audiokit")
    assert "urgent audiokit (by @octocat, expires 2026-05-31)" in f["message"] and "1 day(s) ago" in f["message"]
    assert "remove it, or renew it" in f["hint"] and "@octocat" in f["hint"]

    code, doc = run_json_at(capsys, root, "lint", "--as-of", "2027-01-01")
    assert [(f["check"], f["line"]) for f in doc["findings"] if f["path"] == HINTS_FILE] == [
        ("hint-expired", 3), ("hint-expired", 10), ("hint-expired", 16)]
    code, doc = run_json_at(capsys, root, "lint", "--as-of", "2026-05-31")
    assert [f for f in doc["findings"] if f["path"] == HINTS_FILE] == []

    code, out, _ = run_cli(capsys, "lint", "--root", str(root), "--as-of", TODAY.isoformat())
    assert f"{HINTS_FILE}:16: warning: [hint-expired]" in out
    code, out, _ = run_cli(capsys, "lint", "--root", str(root), "--as-of", TODAY.isoformat(), "--format", "github")
    assert f"::warning file={HINTS_FILE},line=16,title=hint-expired::" in out
    code, _, err = run_cli(capsys, "lint", "--root", str(root), "--as-of", "June 1st")
    assert code == 2 and "--as-of" in err


def test_lint_today_defaults_to_the_utc_day(root, capsys):
    (root / HINTS_FILE).write_text(hint_doc(expires="2000-01-01"))
    code, doc = run_json_at(capsys, root, "lint")
    assert [f["check"] for f in doc["findings"] if f["path"] == HINTS_FILE] == ["hint-expired"]


def test_lint_reports_a_hint_about_an_unknown_package(root, capsys):
    (root / HINTS_FILE).write_text(hint_doc(package="tensorkitt") + hint_doc(package="ledgerkit")[len("hints:\n"):])
    (root / "channel_state").mkdir()
    (root / "channel_state" / "ledgerkit.json").write_text(  # known to the ledger: not unknown
        '{"schema_version": 1, "name": "ledgerkit", "artifacts": []}')
    code, doc = run_json_at(capsys, root, "lint", "--as-of", TODAY.isoformat())
    assert code == 0
    [f] = [f for f in doc["findings"] if f["path"] == HINTS_FILE]
    assert (f["check"], f["severity"], f["line"]) == ("hint-unknown-package", "warning", 2)
    assert "'tensorkitt'" in f["message"] and f["hint"] == "did you mean 'tensorkit'?"
    # lint NAME…: only the hints about the named packages
    code, doc = run_json_at(capsys, root, "lint", "audiokit", "--as-of", TODAY.isoformat())
    assert [f for f in doc["findings"] if f["path"] == HINTS_FILE] == []
    code, doc = run_json_at(capsys, root, "lint", "--check", "hint-unknown-package", "--as-of", TODAY.isoformat())
    assert [f["check"] for f in doc["findings"]] == ["hint-unknown-package"]


def test_hint_checks_are_listed(capsys):
    code, out, _ = run_cli(capsys, "lint", "--list-checks")
    assert code == 0 and all(f"{c} (" in out for c in ("hint-expired", "hint-unknown-package", "hint-invalid"))


def test_load_hints_reads_through_the_safe_loader_only(root, monkeypatch):
    """A YAML tag that would construct an object is a plain string to the safe loader, so the schema refuses it."""
    (root / HINTS_FILE).write_text(hint_doc(reason="!!python/object/apply:os.system ['true']"))
    monkeypatch.setattr(os, "system", lambda *_: pytest.fail("a YAML tag ran code"))
    with pytest.raises(ConfigError):
        load_hints(root)
