"""Retirement request records: ``channel_state/retirements/<name>-<YYYYMMDD>.yaml``.

`retire` writes one per retirement, next to the ledger it amends, so the request is reviewed and kept in
git with the rest of channel_state/: who asked, why, when, what was taken out, which distribution
packages still depended on it (``--force``), and the evidence at that moment (the package's entry of
`report unmaintained`, if any, and its last test results). `report unmaintained` and `status` link to it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from conda_distro.errors import DistroError, LedgerError
from conda_distro.state.document import StateDocument, StrictModel
from conda_distro.state.ledger import ArtifactEntry, TestEvidence, UtcDatetime, latest_tests
from conda_distro.util.yamlio import dump_plain, load_typed, read_yaml_text

RECORD_SCHEMA_VERSION = 1
RECORDS_DIR = "retirements"
_STEM_RE = re.compile(r"(.+)-\d{8}(?:-\d+)?")
_HINT = "fix the file by hand or restore it from git (`git checkout -- channel_state/retirements/`)"


class RecordEvidence(StrictModel):
    unmaintained: dict[str, Any] | None = None  # the package's `report unmaintained` entry at the time
    last_tests: list[dict[str, Any]] = Field(default_factory=list)  # newest artifact's latest results


class RetirementRecord(StateDocument):
    SCHEMA_VERSION = RECORD_SCHEMA_VERSION
    DOCUMENT = "retirement record"

    name: str
    at: UtcDatetime
    by: str
    reason: str = Field(min_length=1)
    artifacts: list[str]
    forced: bool = False
    dependents: list[str] = Field(default_factory=list)  # distribution packages depending on it (--force)
    evidence: RecordEvidence = Field(default_factory=RecordEvidence)

    def to_text(self) -> str:
        return dump_plain(self.model_dump(mode="json"))

    @classmethod
    def parse_text(cls, text: str) -> Any:
        return load_typed(text)


class RetirementRecords:
    """The ``channel_state/retirements/`` folder."""

    def __init__(self, state_dir: Path) -> None:
        self.folder = state_dir / RECORDS_DIR

    def _candidates(self, name: str) -> list[Path]:
        if not self.folder.is_dir():
            if self.folder.exists():
                raise LedgerError("must be a folder of retirement records", path=self.folder, hint=_HINT)
            return []
        return sorted(p for p in self.folder.glob(f"{name}-*.yaml") if _stem_name(p) == name)

    def read(self, path: Path) -> RetirementRecord:
        text = read_yaml_text(path, error=LedgerError, hint=_HINT)
        try:
            data = load_typed(text, path=path)
        except DistroError as exc:
            raise LedgerError(f"retirement record: {exc.message}", path=path, line=exc.line, hint=_HINT) from None
        if not isinstance(data, dict):
            raise LedgerError("a retirement record must be a YAML mapping", path=path, line=1, hint=_HINT)
        RetirementRecord.check_version(data, path, error=LedgerError)
        try:
            return RetirementRecord.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise LedgerError(err["msg"].removeprefix("Value error, "), path=path,
                              field=".".join(map(str, err["loc"])) or None, hint=_HINT) from None

    def for_package(self, name: str) -> list[tuple[Path, RetirementRecord]]:
        """Every record of ``name``, oldest first."""
        found = [(p, self.read(p)) for p in self._candidates(name)]
        return sorted(found, key=lambda pr: (pr[1].at, pr[0].name))

    def find(self, name: str, at: dt.datetime) -> Path | None:
        """The record of the retirement made at ``at`` (the ledger's retirement time), if written."""
        return next((p for p, r in self.for_package(name) if r.at == at), None)

    def write(self, record: RetirementRecord) -> Path:
        """Write ``record`` (idempotent: a record of the same retirement is kept as it is)."""
        existing = self.find(record.name, record.at)
        if existing is not None:
            return existing
        stem = f"{record.name}-{record.at:%Y%m%d}"
        path, n = self.folder / f"{stem}.yaml", 2
        while path.exists():
            path, n = self.folder / f"{stem}-{n}.yaml", n + 1
        try:
            record.write(path)
        except OSError as exc:
            raise LedgerError(f"cannot write the retirement record: {exc.strerror or exc}", path=path,
                              hint="check that channel_state/retirements/ is a folder you can write to") from None
        return path


def _stem_name(path: Path) -> str | None:
    """``torchplug-20250101`` / ``torchplug-20250101-2`` -> ``torchplug``."""
    m = _STEM_RE.fullmatch(path.stem)
    return m.group(1) if m else None


def _test_dict(artifact: str, t: TestEvidence) -> dict[str, Any]:
    return {"artifact": artifact, "release": t.release, "variant": t.variant, "status": t.status,
            "date": t.date.strftime("%Y-%m-%dT%H:%M:%SZ")}


def last_tests(entry: ArtifactEntry | None) -> list[dict[str, Any]]:
    """The newest artifact's latest result per (release, variant)."""
    if entry is None:
        return []
    return [_test_dict(entry.artifact, t) for _, t in sorted(latest_tests(entry).items(), key=lambda kv: release_key(kv[0]))]


def release_key(pair: Sequence[str]) -> tuple:
    """(release, variant) in release order."""
    from rattler import Version

    return (Version(pair[0]), pair[1])
