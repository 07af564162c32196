"""``build/excuses.json``: why each candidate in staging is not in main (the promotion gate, spec §10),
read for the status page. The promotion gate writes it; this module only reads and checks it.

A file that is there but unreadable or of another shape is bad input: an error naming the file, the field
and the line (exit 2), never a page that silently leaves the excuses out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from conda_distro.errors import UsageError
from conda_distro.validation import load_json, to_error

EXCUSES_FILE = "excuses.json"
_HINT = "rerun `conda-distro promote` (it writes build/excuses.json) or delete the file"
Verdict = Literal["promote", "held-temporarily", "held-permanently", "waiting"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Regression(_Model):
    package: str
    pytorch: str
    variant: str
    log: str | None = None


class Candidate(_Model):
    name: str
    old_version: str | None = None
    new_version: str
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    blocked_by: list[str] = Field(default_factory=list)
    promote_with: list[str] = Field(default_factory=list)
    days_waiting: int = 0
    maintainers: list[str] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)
    regressions: list[Regression] = Field(default_factory=list)


class Group(_Model):
    blocked_by: str
    candidates: list[str]


class Excuses(_Model):
    ok: bool
    generated: str
    candidates: list[Candidate]
    groups: list[Group] = Field(default_factory=list)

    def candidate(self, name: str) -> Candidate | None:
        return next((c for c in self.candidates if c.name == name), None)

    def grouped(self) -> list[tuple[str, list[Candidate]]]:
        """(blocked by, candidates) in the file's group order; candidates blocked by nothing (or in no group)
        last, under ``""``."""
        out: list[tuple[str, list[Candidate]]] = []
        seen: set[str] = set()
        for g in self.groups:
            members = [c for n in g.candidates if (c := self.candidate(n)) is not None]
            seen.update(c.name for c in members)
            out.append((g.blocked_by, members))
        rest = [c for c in self.candidates if c.name not in seen]
        if rest:
            out.append(("", rest))
        return out


def read_excuses(build_dir: Path) -> Excuses | None:
    """``build/excuses.json``, or None when there is none."""
    path = build_dir / EXCUSES_FILE
    if not path.exists():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = None  # load_json words the error
    data = load_json(path, error=UsageError, hint=_HINT, text=text)
    if not isinstance(data, dict):
        raise UsageError("the promotion gate's excuses must be a JSON object", path=path, line=1, hint=_HINT)
    try:
        return Excuses.model_validate(data)
    except ValidationError as exc:
        raise to_error(exc, data, path, root=Excuses, error=UsageError, see=_HINT) from None
