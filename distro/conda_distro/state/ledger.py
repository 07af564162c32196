"""channel_state/: the ledger of what is in the main channel and how it was tested.

One JSON file per package, ``channel_state/<name>.json``::

    {
      "schema_version": 1,
      "name": "torchplug",
      "artifacts": [                               # sorted by artifact
        {
          "artifact": "noarch/torchplug-0.3.0-h6950d92_0.conda",
          "sha256": "…", "version": "0.3.0", "build": "h6950d92_0", "build_number": 0,
          "depends": ["pytorch >=2.5.1,<2.6.0a0"],  # sorted
          "channel": "build/channels/pytorch",      # the main channel it was promoted to
          "promoted_at": "2025-01-01T12:00:00Z",    # UTC; null if it entered main another way
          "commit": "9ff6986…",                     # the commit whose recipe produced the artifact (recorded
                                                    # when it was built); null: uncommitted recipe, or no git
          "tests": [{"release": "2.5.1", "variant": "cpu", "status": "passed", "date": "…Z"},
                    {"release": "2.5.1", "variant": "cuda", "status": "passed", "date": "…Z",
                     "gpu": false}],                # cuda only: false = run without a GPU ("cuda (no GPU)")
          "retired": null,                          # or {"at": "…Z", "reason": "…", "by": "…"}
          "forced_by": null,                        # or who forced it past the gate (a hints.yaml `force`)
          "recipe": "recipes/torchplug"             # the recipe folder it was built from: who owns the name
                                                    # (conda_distro.state.owners); absent in older entries
        }
      ]
    }

Keys are written in this fixed order and lists sorted, so a promotion shows up as a minimal diff.
Files are written atomically and only when their content changes.
"""

from __future__ import annotations

import datetime as dt
import getpass
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Literal, Protocol

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_serializer

from conda_distro.config import RELEASE_RE
from conda_distro.errors import LedgerError
from conda_distro.state.document import StateDocument, StrictModel
from conda_distro.util.fsutil import atomic_write_text
from conda_distro.util.gitutil import configured_user
from conda_distro.util.jsonio import parse_json, read_json_text
from conda_distro.util.validation import to_error
from conda_distro.util.yamlio import load_fast
from conda_distro.vocab import Target, Variant

LEDGER_SCHEMA_VERSION = 1
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
#: how results and the ledger name the recipe an artifact was built from
RECIPE_RE = re.compile(r"^recipes/[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_HINT = "fix the file by hand or restore it from git (`git checkout -- channel_state/`)"


def _utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None:
        raise ValueError("date has no time zone; write it in UTC like 2025-01-01T12:00:00Z")
    return value.astimezone(dt.UTC)


UtcDatetime = Annotated[dt.datetime, AfterValidator(_utc)]
EvidenceStatus = Literal["passed", "failed", "blocked", "flaky"]  # a test run's status as promotion evidence (no "error")


class TestEvidence(StrictModel):
    """One test run of the artifact against one PyTorch release and variant."""

    __test__ = False  # not a pytest class

    release: str = Field(pattern=RELEASE_RE.pattern)
    variant: Variant
    status: EvidenceStatus
    date: UtcDatetime
    # a cuda test: whether it ran on a machine with a working GPU (false: "cuda (no GPU)", an install +
    # import test under the __cuda override); absent (None): unknown (older evidence) or a cpu test
    gpu: bool | None = None

    @property
    def target(self) -> Target:
        return Target(self.release, self.variant)

    @model_serializer(mode="wrap")
    def _drop_unknown_gpu(self, handler):  # older files stay byte-identical: no `"gpu": null` everywhere
        data = handler(self)
        if data.get("gpu") is None:
            data.pop("gpu", None)
        return data


class Retirement(StrictModel):
    at: UtcDatetime
    reason: str = Field(min_length=1)
    by: str


class ArtifactEntry(StrictModel):
    artifact: str = Field(pattern=r"^[\w-]+/[^/]+$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    version: str = Field(min_length=1, pattern=r"^\S+$")
    build: str = Field(min_length=1, pattern=r"^\S+$")
    build_number: int = Field(ge=0)
    depends: list[str] = Field(default_factory=list)
    channel: str
    promoted_at: UtcDatetime | None
    commit: str | None
    tests: list[TestEvidence] = Field(default_factory=list)
    retired: Retirement | None = None
    forced_by: str | None = None  # promoted by a `force` hint of hints.yaml, given by this person
    # the recipe folder the artifact was built from (``recipes/<folder>``, from its results): who owns its
    # name (conda_distro.state.owners). None: promoted before the ledger recorded it
    recipe: str | None = Field(default=None, pattern=RECIPE_RE.pattern)

    @model_serializer(mode="wrap")
    def _drop_unknown_recipe(self, handler):  # older files stay byte-identical: no `"recipe": null` everywhere
        data = handler(self)
        if data.get("recipe") is None:
            data.pop("recipe", None)
        return data

    @property
    def in_main(self) -> bool:
        return self.retired is None

    def normalised(self) -> ArtifactEntry:
        from rattler import Version

        tests = sorted(self.tests, key=lambda t: (Version(t.release), t.variant))
        return self.model_copy(update={"depends": sorted(self.depends), "tests": tests})


class PackageState(StateDocument):
    SCHEMA_VERSION = LEDGER_SCHEMA_VERSION
    DOCUMENT = "ledger"

    name: str = Field(pattern=_NAME_RE.pattern)
    artifacts: list[ArtifactEntry] = Field(default_factory=list)

    @field_validator("artifacts")
    @classmethod
    def _distinct(cls, v: list[ArtifactEntry]) -> list[ArtifactEntry]:
        seen: set[str] = set()
        for a in v:
            if a.artifact in seen:
                raise ValueError(f"{a.artifact} is recorded twice")
            seen.add(a.artifact)
        return v

    def get(self, artifact: str) -> ArtifactEntry | None:
        return next((a for a in self.artifacts if a.artifact == artifact), None)

    def normalised(self) -> PackageState:
        arts = sorted((a.normalised() for a in self.artifacts), key=lambda a: a.artifact)
        return self.model_copy(update={"artifacts": arts})

    def to_json(self) -> str:
        return self.normalised().stamped().to_text()


# ---------------------------------------------------------------------------------------------
# reading with errors that name file, field and line


def _validation_error(exc: ValidationError, text: str, path: Path) -> LedgerError:
    try:
        doc = load_fast(text)
    except Exception:  # noqa: BLE001 - a line number is a nicety
        doc = None
    return to_error(exc, doc, path, root=PackageState, error=LedgerError, see=_HINT)


def parse_state(text: str, path: Path) -> PackageState:
    data = parse_json(text, path, error=LedgerError, hint=_HINT)
    if not isinstance(data, dict):
        raise LedgerError("must be a JSON object", path=path, line=1, hint=_HINT)
    PackageState.check_version(data, path, error=LedgerError)
    try:
        state = PackageState.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(exc, text, path) from None
    if state.name != path.stem:
        raise LedgerError(f"file is named {path.name} but records package '{state.name}'", path=path,
                          field="name", hint=f"rename the file to {state.name}.json or fix the name")
    return state


# ---------------------------------------------------------------------------------------------
# the store


def _merge_tests(old: list[TestEvidence], new: list[TestEvidence]) -> list[TestEvidence]:
    latest: dict[Target, TestEvidence] = {}
    for t in sorted([*old, *new], key=lambda t: t.date):
        latest[t.target] = t
    return list(latest.values())


class Ledger:
    """The channel_state/ folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path_for(self, name: str) -> Path:
        if not _NAME_RE.match(name):
            raise LedgerError(f"'{name}' is not a valid package name", field="name")
        return self.folder / f"{name}.json"

    def load(self, name: str) -> PackageState | None:
        path = self.path_for(name)
        try:
            text = read_json_text(path, "ledger", error=LedgerError, hint=_HINT)
        except FileNotFoundError:
            return None
        return parse_state(text, path)

    def load_all(self) -> dict[str, PackageState]:
        if not self.folder.is_dir():
            if self.folder.exists() or self.folder.is_symlink():
                raise LedgerError("must be a folder of <package>.json files", path=self.folder, hint=_HINT)
            return {}
        return {p.stem: s for p in sorted(self.folder.glob("*.json")) if (s := self.load(p.stem))}

    def save(self, state: PackageState) -> Path | None:
        """Write ``state`` atomically; returns the path, or None when the file already said exactly this."""
        path = self.path_for(state.name)
        text = state.to_json()
        try:
            if read_json_text(path, "ledger", error=LedgerError, hint=_HINT) == text:
                return None
        except FileNotFoundError:
            pass
        PackageState.check_text(text, path)
        atomic_write_text(path, text)  # (the text of PackageState.write, compared first)
        return path

    def empty(self, name: str) -> PackageState:
        return PackageState(schema_version=LEDGER_SCHEMA_VERSION, name=name, artifacts=[])

    def add_artifacts(self, name: str, entries: Iterable[ArtifactEntry]) -> Path | None:
        """Record artifacts now in main. An artifact already recorded keeps its first promotion record
        (when, from which commit) and gains the newer test evidence (e.g. against a release added since):
        per release × variant the latest result counts. Returns None when nothing changed."""
        state = self.load(name) or self.empty(name)
        incoming = {e.artifact: e for e in entries}
        artifacts = [a.model_copy(update={"tests": _merge_tests(a.tests, incoming[a.artifact].tests)})
                     if a.artifact in incoming else a for a in state.artifacts]
        known = {a.artifact for a in state.artifacts}
        artifacts += [e for e in incoming.values() if e.artifact not in known]
        return self.save(state.model_copy(update={"artifacts": artifacts}))

    def retire(self, name: str, entries: Iterable[ArtifactEntry], retirement: Retirement) -> Path | None:
        """Mark artifacts retired (adding entries for any the ledger did not know). An artifact already
        retired keeps its first retirement record."""
        state = self.load(name) or self.empty(name)
        by_artifact = {a.artifact: a for a in state.artifacts}
        for e in entries:
            current = by_artifact.get(e.artifact, e)
            if current.retired is None:
                by_artifact[e.artifact] = current.model_copy(update={"retired": retirement})
        return self.save(state.model_copy(update={"artifacts": list(by_artifact.values())}))

    def in_main_artifacts(self, states: Mapping[str, PackageState] | None = None) -> set[str]:
        """Every artifact recorded as promoted to main and not retired."""
        states = self.load_all() if states is None else states
        return {a.artifact for s in states.values() for a in s.artifacts if a.in_main}

    def retired_artifacts(self, states: Mapping[str, PackageState] | None = None) -> dict[str, Retirement]:
        states = self.load_all() if states is None else states
        return {a.artifact: a.retired for s in states.values() for a in s.artifacts if a.retired is not None}


# ---------------------------------------------------------------------------------------------
# provenance


def current_user(root: Path) -> str:
    """Who is acting: git's user.name <user.email> if configured, else the login name."""
    user = configured_user(root)
    if user:
        return user
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001
        return "unknown"


# ---------------------------------------------------------------------------------------------
# drift: the ledger against what the channel actually holds (for verify-channel)

DriftKind = Literal["missing-from-channel", "not-in-ledger", "sha256-differs", "retired-but-in-channel"]


class Drift(StrictModel):
    artifact: str
    kind: DriftKind
    detail: str


class _HasSha(Protocol):
    @property
    def sha256(self) -> str: ...


def compare_with_channel(states: Mapping[str, PackageState], files: Mapping[str, _HasSha]) -> list[Drift]:
    """Differences between channel_state/ and a channel listing (``{artifact: file with .sha256}``, e.g.
    ``open_channel(distro, main).list_files()``), sorted by artifact. Empty means they agree."""
    out: list[Drift] = []
    recorded = {a.artifact: a for s in states.values() for a in s.artifacts}
    for art, a in recorded.items():
        f = files.get(art)
        if a.retired is not None:
            if f is not None:
                out.append(Drift(artifact=art, kind="retired-but-in-channel",
                                 detail=f"retired {a.retired.at:%Y-%m-%d} ({a.retired.reason}) but still published"))
        elif f is None:
            out.append(Drift(artifact=art, kind="missing-from-channel", detail="recorded as in main but not published"))
        elif f.sha256 != a.sha256:
            out.append(Drift(artifact=art, kind="sha256-differs",
                             detail=f"ledger {a.sha256[:12]}…, channel {f.sha256[:12]}…"))
    out += [Drift(artifact=art, kind="not-in-ledger", detail="published but not recorded in channel_state/")
            for art in files if art not in recorded]
    return sorted(out, key=lambda d: (d.artifact, d.kind))


def newest_artifact(entries: Iterable[ArtifactEntry]) -> ArtifactEntry | None:
    """The newest of these artifacts (version, build number, promotion, name), or None."""
    from rattler import Version

    entries = list(entries)
    if not entries:
        return None
    epoch = dt.datetime.min.replace(tzinfo=dt.UTC)
    return max(entries, key=lambda a: (Version(a.version), a.build_number, a.promoted_at or epoch, a.artifact))


def latest_tests(entry: ArtifactEntry) -> dict[Target, TestEvidence]:
    """The newest result per (release, variant)."""
    out: dict[Target, TestEvidence] = {}
    for t in sorted(entry.tests, key=lambda t: t.date):
        out[t.target] = t
    return out
