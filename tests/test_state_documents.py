"""Every document the tool keeps on disk follows one discipline (conda_distro.state.document): a strict
base (unknown keys refused, naming the field), ``schema_version`` on every document (a newer one refused
before anything else, an older one, or one written before the field existed, still read), and one atomic
writer that stamps the current version."""

from __future__ import annotations

import datetime as dt
import importlib
import json
import pkgutil
import re
from pathlib import Path

import pytest

import conda_distro
from conda_distro.enduser.snapshots import SnapshotStore
from conda_distro.errors import DistroError
from conda_distro.gate.excuses import Excuses, read_excuses, write_excuses
from conda_distro.gate.prune import PruneJournal
from conda_distro.state.document import StateDocument, StrictModel
from conda_distro.state.ledger import Ledger, PackageState
from conda_distro.state.records import RetirementRecord, RetirementRecords
from conda_distro.state.results import SCHEMA_VERSION as RESULTS_VERSION
from conda_distro.state.results import ArtifactResults, ResultsStore
from conda_distro.state.sweep_journal import SweepJournal, UncommittedEdits, find_journal
from conda_distro.sweep.model import SweepDocument

PACKAGE = Path(conda_distro.__file__).parent
SHA = "a" * 64
GENERATED = "2026-11-20T10:00:00Z"

#: each kept document, where it lives, and a document of it in the shape written before ``schema_version``
OLD_SHAPES: dict[str, tuple[str, str]] = {
    "ledger": ("channel_state/foo.json", json.dumps({"name": "foo", "artifacts": []})),
    "results": ("build/results/noarch__foo-1.0-h0_0.conda.json",
                json.dumps({"artifact": "noarch/foo-1.0-h0_0.conda", "name": "foo", "version": "1.0", "sha256": SHA,
                            "tests": [{"name": "foo", "artifact": "noarch/foo-1.0-h0_0.conda", "pytorch": "2.5.1",
                                       "variant": "cpu", "status": "passed", "date": GENERATED}]})),
    # the derived keys (ok, groups, causes) a writer of this shape put in the file are no unknown keys
    "excuses": ("build/excuses.json", json.dumps({
        "ok": False, "generated": GENERATED, "stale": [],
        "candidates": [{"name": "foo", "new_version": "1.0", "verdict": "waiting", "reasons": ["not-tested: x"],
                        "causes": []}],
        "groups": [{"blocked_by": "tests still to run", "candidates": ["foo"]}]})),
    "sweep journal": ("build/sweep/pytorch-2.6.0.journal.json", json.dumps({
        "release": "2.6.0", "phase": "edited", "commit": False, "originals": {"distro.yaml": "a\n"},
        "written": {"distro.yaml": "b\n"}, "branch": None, "base": None, "tip": None, "start": None,
        "result": None}, indent=1)),
    "uncommitted": ("build/sweep/pytorch-2.6.0.uncommitted.json", json.dumps({
        "release": "2.6.0", "originals": {"distro.yaml": "a\n"}, "written": {"distro.yaml": "b\n"}}, indent=1)),
    "retirement record": ("channel_state/retirements/foo-20261120.yaml",
                          "name: foo\nat: '2026-11-20T10:00:00Z'\nby: ann\nreason: broken upstream\n"
                          "artifacts: [noarch/foo-1.0-h0_0.conda]\n"),
    "snapshot": ("channel_state/snapshots/snapshot-20261120-1.json", json.dumps({
        "name": "snapshot-20261120-1", "created_at": GENERATED, "by": "ann", "commit": None, "channel": "main",
        "url": "file:///main", "artifacts": {}})),
    "prune journal": ("build/prune.journal.json", json.dumps({"files": [], "results": {}, "logs": []})),
}


def read(kind: str, root: Path) -> StateDocument | None:
    """The document of ``kind`` under ``root``, as the command that uses it reads it."""
    if kind == "ledger":
        return Ledger(root / "channel_state").load("foo")
    if kind == "results":
        return ResultsStore(root / "build" / "results").get("noarch/foo-1.0-h0_0.conda")
    if kind == "excuses":
        return read_excuses(root / "build")
    if kind == "sweep journal":
        return find_journal(root / "build")
    if kind == "uncommitted":
        return UncommittedEdits.load(root / "build", "2.6.0")
    if kind == "retirement record":
        ((_, record),) = RetirementRecords(root / "channel_state").for_package("foo")
        return record
    if kind == "snapshot":
        return SnapshotStore(root / "channel_state").load("snapshot-20261120-1")
    from conda_distro.gate import prune

    journal = prune._Journal.read(root / "build" / "prune.journal.json")
    assert journal is not None
    return PruneJournal(files=[], results=journal.results, logs=journal.logs)


def put(root: Path, kind: str, text: str) -> Path:
    path = root / OLD_SHAPES[kind][0]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("kind", sorted(OLD_SHAPES))
def test_a_document_written_before_schema_version_is_still_read(kind, tmp_path):
    put(tmp_path, kind, OLD_SHAPES[kind][1])
    doc = read(kind, tmp_path)
    assert isinstance(doc, StateDocument) and doc.schema_version == type(doc).SCHEMA_VERSION


def _with(kind: str, **keys) -> str:
    """The old-shape document of ``kind`` with ``keys`` added (JSON, or YAML lines)."""
    text = OLD_SHAPES[kind][1]
    if text.startswith("{"):
        return json.dumps({**json.loads(text), **keys})
    return text + "".join(f"{k}: {json.dumps(v)}\n" for k, v in keys.items())


@pytest.mark.parametrize("kind", sorted(OLD_SHAPES))
def test_a_newer_document_is_refused_before_its_new_keys(kind, tmp_path):
    path = put(tmp_path, kind, _with(kind, schema_version=99, a_key_of_the_future=1))
    with pytest.raises(DistroError, match="newer conda-distro") as exc:
        read(kind, tmp_path)
    assert exc.value.field == "schema_version" and str(exc.value.path) == str(path)


@pytest.mark.parametrize("kind", sorted(OLD_SHAPES))
def test_an_unknown_key_is_refused_naming_the_file(kind, tmp_path):
    path = put(tmp_path, kind, _with(kind, schema_versoin=1))
    with pytest.raises(DistroError) as exc:
        read(kind, tmp_path)
    assert str(exc.value.path) == str(path) and "schema_versoin" in f"{exc.value.message} {exc.value.field}"
    assert "\n" not in exc.value.message and "errors.pydantic.dev" not in exc.value.message  # one line, ours


def test_every_write_stamps_the_current_version_atomically(tmp_path):
    store = ResultsStore(tmp_path)
    old = ArtifactResults.model_validate({**json.loads(OLD_SHAPES["results"][1]), "schema_version": 1})
    store.put(old)
    (written,) = tmp_path.iterdir()  # no temp file beside it
    assert json.loads(written.read_text())["schema_version"] == RESULTS_VERSION == 4
    excuses = Excuses.model_validate_json(OLD_SHAPES["excuses"][1])
    path = write_excuses(tmp_path / "excuses.json", excuses)
    doc = json.loads(path.read_text())
    assert list(doc)[:2] == ["schema_version", "ok"] and doc["schema_version"] == 1
    assert read_excuses(tmp_path) == excuses
    journal = SweepJournal(release="2.6.0", originals={"distro.yaml": "a\n"}, written={"distro.yaml": "b\n"})
    journal.save(tmp_path)
    assert find_journal(tmp_path) == journal
    assert json.loads((tmp_path / "sweep" / "pytorch-2.6.0.journal.json").read_text())["schema_version"] == 1
    record = RetirementRecord(name="foo", at=dt.datetime(2026, 11, 20, tzinfo=dt.UTC), by="ann", reason="x",
                              artifacts=[])
    assert RetirementRecords(tmp_path).read(RetirementRecords(tmp_path).write(record)) == record
    assert json.loads(SweepDocument(release="2.6.0").to_text())["schema_version"] == 1



@pytest.mark.parametrize("kind", sorted(OLD_SHAPES))
@pytest.mark.parametrize("bad", ["", "\n", "{\"artifact\": ", "[]", "{}"])
def test_a_writer_never_writes_an_empty_or_broken_document(kind, bad, tmp_path, monkeypatch):
    """A results file was once found empty (0 bytes: its readers failed closed, a gate held). No writer of
    the tool can make one: the text is parsed as its readers parse it before the atomic write, and an
    empty or broken one is an error naming the file; the file on disk stays as it was."""
    path = put(tmp_path, kind, OLD_SHAPES[kind][1])
    doc = read(kind, tmp_path)
    assert doc is not None
    type(doc).check_text(doc.stamped().to_text(), path)  # what the tool writes passes
    before = path.read_bytes()
    monkeypatch.setattr(type(doc), "to_text", lambda self: bad)
    with pytest.raises(DistroError, match=f"refusing to write the {type(doc).DOCUMENT}") as exc:
        if kind == "ledger":
            Ledger(tmp_path / "channel_state").save(doc)
        else:
            doc.write(path)
    assert str(exc.value.path) == str(path) and "bug in conda-distro" in (exc.value.hint or "")
    assert path.read_bytes() == before and sorted(path.parent.iterdir()) == [path]  # untouched, no temp file

def _subclasses(cls: type) -> set[type]:
    out = set(cls.__subclasses__())
    return out | {s for c in out for s in _subclasses(c)}


def test_kept_documents_share_the_one_strict_base():
    for info in pkgutil.walk_packages([str(PACKAGE)], "conda_distro."):
        importlib.import_module(info.name)
    documents = {c.__name__ for c in _subclasses(StateDocument)}
    assert {"PackageState", "ArtifactResults", "RetirementRecord", "Excuses", "SweepDocument", "SweepJournal",
            "UncommittedEdits", "PruneJournal", "SnapshotRecord", "RollbackRecord"} <= documents
    for cls in (*_subclasses(StrictModel), PackageState):
        assert cls.model_config.get("extra") == "forbid", cls
    # no module keeps a private base of its own for documents (state/document.py is the one)
    private = re.compile(r"^class _\w+\(BaseModel\):\n(\s+\"\"\"[^\n]*\n)?\s+model_config = [^\n]*\n\n\n", re.M)
    kept = ("state", "gate", "sweep", "enduser")
    offenders = [p for room in kept for p in (PACKAGE / room).glob("*.py") if private.search(p.read_text())]
    assert offenders == []
