"""Snapshots of main, as the ledger records them: ``channel_state/snapshots/<name>.json``.

A snapshot is an immutable copy of what main held at one moment, named ``snapshot-YYYYMMDD-N`` (the UTC
date it was taken, N counting from 1 within that day). End users pin one as a channel:

* a local main at ``DIR`` has ``DIR/label/<name>/`` (the same ``label/`` path anaconda.org serves), its
  package files hard-linked to main's (no copies) and main's index at that moment;
* an ``anaconda://OWNER`` main has the label ``<name>``, copied from main on the server and locked.

Next to each snapshot, in ``<snapshot>/lockfiles/`` (local main) or ``build/snapshots/<name>/``
(anaconda.org main; the status page publishes them): a lockfile per supported release × variant and a
CycloneDX SBOM. The record says when, who, from which commit of this repository, and exactly which files
(artifact -> sha256) the snapshot holds::

    {"schema_version": 1, "name": "snapshot-20261201-1", "created_at": "2026-12-01T10:00:00Z",
     "by": "Ann <ann@example.org>", "commit": "9ff6986…", "channel": "build/channels/pytorch",
     "url": "file:///…/pytorch/label/snapshot-20261201-1",
     "artifacts": {"noarch/torchplug-0.3.0-h6950d92_0.conda": "…sha256…"},
     "lockfiles": {"2.5.1-cpu": "lockfiles/pytorch-2.5.1-cpu.lock"}, "sbom": "sbom.cdx.json"}

Rollbacks are recorded in ``channel_state/rollbacks/<time>-<name>.json`` (who, why, from what to what).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from conda_distro.errors import ChannelError, LedgerError, UsageError
from conda_distro.state.document import StateDocument
from conda_distro.state.ledger import UtcDatetime
from conda_distro.util.jsonio import parse_json, read_json_text

SNAPSHOT_SCHEMA_VERSION = 1
NAME_RE = re.compile(r"^snapshot-(\d{8})-([1-9]\d*)$")
SNAPSHOTS_DIR = "snapshots"  # in channel_state/
ROLLBACKS_DIR = "rollbacks"  # in channel_state/
LABEL_DIR = "label"  # in a local main: label/<name>/
LOCKFILES_DIR = "lockfiles"
SBOM_FILE = "sbom.cdx.json"
_HINT = "fix the file by hand or restore it from git (`git checkout -- channel_state/`)"


class SnapshotRecord(StateDocument):
    SCHEMA_VERSION = SNAPSHOT_SCHEMA_VERSION
    DOCUMENT = "snapshot record"

    name: str = Field(pattern=NAME_RE.pattern)
    created_at: UtcDatetime
    by: str
    commit: str | None
    channel: str  # the main channel (distro.yaml's channels.main)
    url: str  # where conda reads the snapshot (-c URL)
    artifacts: dict[str, str]  # artifact -> sha256
    lockfiles: dict[str, str] = Field(default_factory=dict)  # "<release>-<variant>" -> path under the snapshot's files
    sbom: str | None = None

    def to_text(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=False) + "\n"

    def to_json(self) -> str:
        return self.stamped().to_text()


class RollbackRecord(StateDocument):
    SCHEMA_VERSION = SNAPSHOT_SCHEMA_VERSION
    DOCUMENT = "rollback record"

    at: UtcDatetime
    by: str
    why: str = Field(min_length=1)
    to: str = Field(pattern=NAME_RE.pattern)
    channel: str
    removed: list[str]  # artifacts taken out of main
    restored: list[str]  # artifacts put back into main

    def to_text(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2) + "\n"

    def to_json(self) -> str:
        return self.stamped().to_text()


def check_name(name: str, *, field: str = "--to") -> str:
    if not NAME_RE.match(name):
        raise UsageError(f"'{name}' is not a snapshot name like snapshot-20261201-1", field=field,
                         hint="list the snapshots with `conda-distro snapshots`")
    return name


class SnapshotStore:
    """``channel_state/snapshots/`` and ``channel_state/rollbacks/``."""

    def __init__(self, state_dir: Path) -> None:
        self.folder = state_dir / SNAPSHOTS_DIR
        self.rollbacks = state_dir / ROLLBACKS_DIR

    def path_for(self, name: str) -> Path:
        return self.folder / f"{check_name(name, field='name')}.json"

    def load(self, name: str) -> SnapshotRecord | None:
        path = self.path_for(name)
        try:
            text = read_json_text(path, "ledger", error=LedgerError, hint=_HINT)
        except FileNotFoundError:
            return None
        try:
            SnapshotRecord.check_version(parse_json(text, path, error=LedgerError, hint=_HINT), path, error=LedgerError)
            return SnapshotRecord.model_validate_json(text)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise LedgerError(f"invalid snapshot record: {where}: {first['msg']}", path=path, field=where,
                              hint=_HINT) from None

    def all(self) -> list[SnapshotRecord]:
        """Every snapshot, oldest first."""
        if not self.folder.is_dir():
            return []
        names = [p.stem for p in self.folder.glob("snapshot-*.json") if NAME_RE.match(p.stem)]
        records = [r for n in names if (r := self.load(n)) is not None]
        return sorted(records, key=sort_key)

    def save(self, record: SnapshotRecord) -> Path:
        path = self.path_for(record.name)
        record.write(path)
        return path

    def next_name(self, today: dt.date, taken: set[str] = frozenset()) -> str:  # type: ignore[assignment]
        """``snapshot-YYYYMMDD-N`` with N one more than any recorded (or ``taken``) that day."""
        day = today.strftime("%Y%m%d")
        used = [int(m.group(2)) for n in {*(r.name for r in self.all()), *taken}
                if (m := NAME_RE.match(n)) and m.group(1) == day]
        return f"snapshot-{day}-{max(used, default=0) + 1}"

    def rollback_path(self, day: dt.date, name: str) -> Path:
        """``rollbacks/<YYYYMMDD>-<snapshot>.json``: a rerun of a killed rollback finds the first run's record."""
        return self.rollbacks / f"{day:%Y%m%d}-{check_name(name, field='name')}.json"

    def load_rollback(self, path: Path) -> RollbackRecord | None:
        try:
            text = read_json_text(path, "ledger", error=LedgerError, hint=_HINT)
        except FileNotFoundError:
            return None
        try:
            RollbackRecord.check_version(parse_json(text, path, error=LedgerError, hint=_HINT), path, error=LedgerError)
            return RollbackRecord.model_validate_json(text)
        except ValidationError as exc:
            raise LedgerError(f"invalid rollback record: {exc.errors()[0]['msg']}", path=path, hint=_HINT) from None

    def rollback_history(self) -> list[RollbackRecord]:
        if not self.rollbacks.is_dir():
            return []
        return [r for p in sorted(self.rollbacks.glob("*.json")) if (r := self.load_rollback(p)) is not None]


def files_of(record: SnapshotRecord, build_dir: Path) -> Path:
    """Where a snapshot's lockfiles and SBOM are: inside the snapshot's folder (a local main, ``file://``
    URL), else ``build/snapshots/<name>/``."""
    if record.url.startswith("file://"):
        return Path(record.url[len("file://"):])
    return build_dir / SNAPSHOTS_DIR / record.name


def sort_key(record: SnapshotRecord) -> tuple[str, int]:
    m = NAME_RE.match(record.name)
    assert m is not None
    return m.group(1), int(m.group(2))




# ---------------------------------------------------------------------------------------------
# `conda-distro snapshots`


@dataclass(frozen=True)
class SnapshotsOptions:
    root: Path | None = None


@dataclass
class SnapshotsResult:
    snapshots: list[SnapshotRecord]
    current: str | None  # the snapshot main holds exactly now (None: none does, or main is unreadable)
    rollbacks: list[RollbackRecord] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 0

    def to_dict(self) -> dict[str, Any]:
        return {"ok": True, "current": self.current,
                "snapshots": [{**s.model_dump(mode="json"), "files": len(s.artifacts)} for s in self.snapshots],
                "rollbacks": [r.model_dump(mode="json") for r in self.rollbacks]}

    def text_lines(self) -> list[str]:
        if not self.snapshots:
            return ["no snapshots yet: every promotion that changes main takes one"]
        lines = []
        for s in self.snapshots:
            mark = "*" if s.name == self.current else " "
            lines.append(f"{mark} {s.name}  {s.created_at:%Y-%m-%d %H:%M}Z  {len(s.artifacts):>5} files  "
                         f"commit {(s.commit or 'unknown')[:12]}  by {s.by}")
            lines.append(f"    conda: -c {s.url}")
        lines += [f"rolled back to {r.to} at {r.at:%Y-%m-%d %H:%M}Z by {r.by}: {r.why}" for r in self.rollbacks]
        if self.current:
            lines.append(f"* main holds exactly {self.current}")
        return lines


def list_snapshots(options: SnapshotsOptions) -> SnapshotsResult:
    """`conda-distro snapshots`: every snapshot the ledger records, oldest first, and which one main is."""
    from conda_distro.channels import open_channel
    from conda_distro.distribution import open_distro

    distro = open_distro(options.root)
    store = SnapshotStore(distro.state_dir)
    snaps = store.all()
    try:
        main = open_channel(distro, distro.config.channels.main)
        current_files: dict[str, str] | None = {a: f.sha256 for a, f in main.list_files().items()}
    except ChannelError:  # main unreachable from here: the list stands without knowing which one main is
        current_files = None
    current = next((s.name for s in reversed(snaps) if s.artifacts == current_files), None)
    return SnapshotsResult(snaps, current, store.rollback_history())


__all__ = ["RollbackRecord", "SnapshotRecord", "SnapshotStore", "SnapshotsOptions", "check_name", "list_snapshots"]
