"""channel_state/ ledger: schema, stable minimal-diff output, atomic writes, clear errors."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from conda_distro.errors import LedgerError
from conda_distro.state.ledger import (
    LEDGER_SCHEMA_VERSION,
    ArtifactEntry,
    Ledger,
    PackageState,
    Retirement,
    TestEvidence,
    current_user,
    parse_state,
)
from conda_distro.util.gitutil import current_commit

UTC = dt.UTC
T0 = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def entry(artifact="noarch/foo-1.0-h0_0.conda", sha="a" * 64, **kw) -> ArtifactEntry:
    base = dict(artifact=artifact, sha256=sha, version="1.0", build="h0_0", build_number=0,
                depends=["zlib", "pytorch >=2.4,<2.6"], channel="build/channels/main", promoted_at=T0,
                commit=None, tests=[
                    TestEvidence(release="2.5.1", variant="cuda", status="passed", date=T0),
                    TestEvidence(release="2.10.0", variant="cpu", status="passed", date=T0),
                    TestEvidence(release="2.5.1", variant="cpu", status="passed", date=T0)])
    return ArtifactEntry(**{**base, **kw})


def test_round_trip_stable_order_and_sorted_lists(tmp_path):
    ledger = Ledger(tmp_path / "channel_state")
    path = ledger.add_artifacts("foo", [entry("noarch/foo-1.1-h0_0.conda"), entry()])
    assert path == tmp_path / "channel_state" / "foo.json"
    doc = json.loads(path.read_text())
    assert list(doc) == ["schema_version", "name", "artifacts"]
    assert doc["schema_version"] == LEDGER_SCHEMA_VERSION
    a = doc["artifacts"][0]
    assert list(a) == ["artifact", "sha256", "version", "build", "build_number", "depends", "channel",
                       "promoted_at", "commit", "tests", "retired", "forced_by"]
    assert [x["artifact"] for x in doc["artifacts"]] == ["noarch/foo-1.0-h0_0.conda", "noarch/foo-1.1-h0_0.conda"]
    assert a["depends"] == ["pytorch >=2.4,<2.6", "zlib"]
    assert [(t["release"], t["variant"]) for t in a["tests"]] == [("2.5.1", "cpu"), ("2.5.1", "cuda"), ("2.10.0", "cpu")]
    assert a["promoted_at"] == "2025-01-02T03:04:05Z"
    assert ledger.load("foo") == parse_state(path.read_text(), path)
    assert path.read_text().endswith("}\n") and '  "name": "foo",\n' in path.read_text()
    assert not [p for p in path.parent.iterdir() if p.name != "foo.json"]  # no temp files left


def test_unchanged_state_is_not_rewritten_and_first_record_wins(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.add_artifacts("foo", [entry()])
    assert ledger.add_artifacts("foo", [entry(promoted_at=T0 + dt.timedelta(days=1))]) is None
    assert ledger.load("foo").artifacts[0].promoted_at == T0
    assert ledger.save(ledger.load("foo")) is None


def test_known_artifact_gains_newer_test_evidence_but_keeps_its_promotion(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.add_artifacts("foo", [entry()])
    later = T0 + dt.timedelta(days=30)
    retested = entry(promoted_at=later, commit="c0ffee", tests=[
        TestEvidence(release="2.5.1", variant="cpu", status="failed", date=later),  # newer result wins
        TestEvidence(release="2.11.0", variant="cpu", status="passed", date=later),  # a release added since
        TestEvidence(release="2.10.0", variant="cpu", status="failed", date=T0 - dt.timedelta(days=1))])  # older: ignored
    assert ledger.add_artifacts("foo", [retested]) is not None
    a = ledger.load("foo").artifacts[0]
    assert (a.promoted_at, a.commit) == (T0, None)
    got = {(t.release, t.variant): (t.status, t.date) for t in a.tests}
    assert got == {("2.5.1", "cpu"): ("failed", later), ("2.5.1", "cuda"): ("passed", T0),
                   ("2.10.0", "cpu"): ("passed", T0), ("2.11.0", "cpu"): ("passed", later)}
    assert ledger.add_artifacts("foo", [retested]) is None  # nothing new: not rewritten


def test_retire_records_when_why_who_once(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.add_artifacts("foo", [entry()])
    r1 = Retirement(at=T0, reason="unmaintained", by="alice")
    ledger.retire("foo", [entry(), entry("linux-64/foo-1.0-h1_0.conda", promoted_at=None)], r1)
    ledger.retire("foo", [entry()], Retirement(at=T0, reason="again", by="bob"))
    state = ledger.load("foo")
    assert [a.retired for a in state.artifacts] == [r1, r1]
    assert state.artifacts[0].promoted_at is None  # linux-64 sorts first; was not promoted by us
    assert set(ledger.retired_artifacts()) == {"noarch/foo-1.0-h0_0.conda", "linux-64/foo-1.0-h1_0.conda"}


def _write(tmp_path, text: str):
    (tmp_path / "foo.json").write_text(text)
    return Ledger(tmp_path)


def _good(tmp_path) -> str:
    Ledger(tmp_path).add_artifacts("foo", [entry()])
    return (tmp_path / "foo.json").read_text()


def test_corrupt_json_names_file_and_line(tmp_path):
    text = _good(tmp_path)
    ledger = _write(tmp_path, text.replace('"version": "1.0",', '"version": "1.0"'))
    with pytest.raises(LedgerError) as exc:
        ledger.load("foo")
    e = exc.value
    assert e.path == str(tmp_path / "foo.json") and e.line == 9 and "not valid JSON" in e.message
    assert e.exit_code == 2 and "git" in e.hint


def test_bad_field_names_field_and_line(tmp_path):
    text = _good(tmp_path)
    ledger = _write(tmp_path, text.replace("a" * 64, "not-a-sha"))
    with pytest.raises(LedgerError) as exc:
        ledger.load("foo")
    assert exc.value.field == "artifacts.0.sha256"
    assert exc.value.line == 1 + text.splitlines().index(f'      "sha256": "{"a" * 64}",')
    assert f"{tmp_path / 'foo.json'}:{exc.value.line}" in str(exc.value)


def test_unknown_key_and_missing_key(tmp_path):
    text = _good(tmp_path)
    ledger = _write(tmp_path, text.replace('"build_number": 0,', '"build_number": 0, "colour": "red",'))
    with pytest.raises(LedgerError, match="unknown key") as exc:
        ledger.load("foo")
    assert exc.value.field == "artifacts.0.colour"
    ledger = _write(tmp_path, text.replace('"build": "h0_0",', ""))
    with pytest.raises(LedgerError, match="required key is missing") as exc:
        ledger.load("foo")
    assert exc.value.field == "artifacts.0.build"


def test_schema_version_and_name_checks(tmp_path):
    text = _good(tmp_path)
    with pytest.raises(LedgerError, match="newer conda-distro") as exc:
        _write(tmp_path, text.replace('"schema_version": 1', '"schema_version": 7')).load("foo")
    assert exc.value.field == "schema_version"
    with pytest.raises(LedgerError, match="unsupported schema_version"):
        _write(tmp_path, text.replace('"schema_version": 1', '"schema_version": 0')).load("foo")
    (tmp_path / "foo.json").unlink()
    (tmp_path / "bar.json").write_text(text)
    with pytest.raises(LedgerError, match="records package 'foo'") as exc:
        Ledger(tmp_path).load("bar")
    assert exc.value.field == "name"
    with pytest.raises(LedgerError, match="must be a JSON object"):
        _write(tmp_path, "[]").load("foo")


def test_dates_must_be_utc_aware():
    with pytest.raises(ValueError, match="time zone"):
        entry(promoted_at=dt.datetime(2025, 1, 1))
    est = dt.timezone(dt.timedelta(hours=-5))
    assert entry(promoted_at=dt.datetime(2025, 1, 1, 7, tzinfo=est)).promoted_at == dt.datetime(2025, 1, 1, 12, tzinfo=UTC)


def test_invalid_package_name_is_rejected(tmp_path):
    with pytest.raises(LedgerError):
        Ledger(tmp_path).path_for("../evil")
    with pytest.raises(ValueError):
        PackageState(schema_version=1, name="../evil")


def test_commit_and_user(tmp_path):
    import git

    assert current_commit(tmp_path) is None
    repo = git.Repo.init(tmp_path)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "Ada").set_value("user", "email", "ada@example.org")
    (tmp_path / "f").write_text("x")
    repo.index.add(["f"])
    sha = repo.index.commit("init").hexsha
    assert current_commit(tmp_path) == sha
    assert current_user(tmp_path) == "Ada <ada@example.org>"


def test_compare_with_channel_reports_drift(tmp_path):
    from types import SimpleNamespace as F

    from conda_distro.state.ledger import compare_with_channel

    ledger = Ledger(tmp_path)
    ledger.add_artifacts("foo", [entry(), entry("noarch/foo-2.0-h0_0.conda"), entry("noarch/foo-3.0-h0_0.conda")])
    ledger.retire("foo", [entry("noarch/foo-3.0-h0_0.conda")], Retirement(at=T0, reason="bad", by="x"))
    channel = {"noarch/foo-1.0-h0_0.conda": F(sha256="a" * 64), "noarch/foo-3.0-h0_0.conda": F(sha256="a" * 64),
               "noarch/bar-1.0-h0_0.conda": F(sha256="b" * 64)}
    got = [(d.artifact.split("/")[1], d.kind) for d in compare_with_channel(ledger.load_all(), channel)]
    assert got == [("bar-1.0-h0_0.conda", "not-in-ledger"), ("foo-2.0-h0_0.conda", "missing-from-channel"),
                   ("foo-3.0-h0_0.conda", "retired-but-in-channel")]
    channel = {"noarch/foo-1.0-h0_0.conda": F(sha256="c" * 64), "noarch/foo-2.0-h0_0.conda": F(sha256="a" * 64)}
    assert [d.kind for d in compare_with_channel(ledger.load_all(), channel)] == ["sha256-differs"]
