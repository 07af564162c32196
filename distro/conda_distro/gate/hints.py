"""``hints.yaml``: reviewed release-manager hints for the promotion gate.

The file sits at the repository root, next to distro.yaml, and is optional (no file = no hints)::

    hints:
      - action: block            # block | unblock | force | force-badtest | urgent
        package: tensorkit
        version: "1.3.0"         # optional: without it the hint is about every version
        by: octocat              # GitHub handle of the release manager who wrote it
        reason: breaks audiokit's resampling (#123)
        expires: 2026-12-31      # YYYY-MM-DD; the hint is active up to and including that day

What each action does in the gate (``promote``):

* ``block`` holds the package (held reason ``blocked-by-hint``); ``unblock`` cancels a ``block`` for the
  same package (and version).
* ``force`` promotes the package despite failing own tests or regressions; the ledger records it as
  forced, and by whom.
* ``force-badtest PKG VER`` ignores PKG's failing tests (as a dependent re-tested against a candidate)
  for every version of PKG up to and including VER (without a version: any version).
* ``urgent`` lets the package go without waiting for dependents' re-tests that have not run yet (never
  over a regression).

A hint with ``version`` applies to exactly that version (``force-badtest``: up to it); versions compare
as conda versions (rattler's ``Version``). An expired hint does nothing; ``lint`` reports it
(``hint-expired``), and a hint about a package the distribution does not know (``hint-unknown-package``).

The file is read with the project's safe YAML loader (duplicate keys and alias bombs are refused) and
checked by a strict schema: an unknown key is an error with a did-you-mean hint, and every error is a
:class:`~conda_distro.errors.ConfigError` naming the file, the line and the field (exit 2).
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from conda_distro.errors import ConfigError, DistroError
from conda_distro.util.validation import Handle, check_reason, to_error
from conda_distro.util.yamlio import LDict, LList, load_fast_file

HINTS_FILE = "hints.yaml"
Action = Literal["block", "unblock", "force", "force-badtest", "urgent"]
ACTIONS: tuple[str, ...] = get_args(Action)
_SEE = "see the comment at the top of hints.yaml, or docs/release-day.md, section \"Promotion gate: hints.yaml\""
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class _HintData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    action: str
    package: str
    version: str | None = None
    by: Handle
    reason: str = Field(min_length=1)
    expires: dt.date

    @field_validator("action")
    @classmethod
    def _action(cls, v: str) -> str:
        if v not in ACTIONS:
            raise ValueError(f"unknown action '{v}' (the actions are {', '.join(ACTIONS)})")
        return v

    @field_validator("package")
    @classmethod
    def _package(cls, v: str) -> str:
        from rattler import PackageName
        from rattler.exceptions import InvalidPackageNameError

        try:
            PackageName(v)
        except InvalidPackageNameError:
            raise ValueError(f"'{v}' is not a conda package name (letters, digits, '-', '_' and '.')") from None
        return v

    @field_validator("version")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        from rattler import Version
        from rattler.exceptions import InvalidVersionError

        if v is None:
            return v
        try:
            if not v.strip() or " " in v:
                raise InvalidVersionError(v)
            Version(v)
        except (InvalidVersionError, ValueError):
            raise ValueError(f"'{v}' is not a conda version (e.g. 1.3.0)") from None
        return v

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        return check_reason(v, "say why (an issue link helps the next release manager)")

    @field_validator("expires", mode="before")
    @classmethod
    def _expires(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                if not _DATE_RE.match(v.strip()):
                    raise ValueError
                return dt.date.fromisoformat(v.strip())
            except ValueError:
                raise ValueError(f"'{v}' is not a date: write it as YYYY-MM-DD, e.g. 2026-12-31") from None
        return v


class _HintsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hints: list[_HintData] = Field(default_factory=list)

    @field_validator("hints", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return [] if v is None else v

    @field_validator("hints")
    @classmethod
    def _distinct(cls, v: list[_HintData]) -> list[_HintData]:
        seen: set[tuple] = set()
        for h in v:
            key = (h.action, h.package, h.version)
            if key in seen:
                raise ValueError(f"two '{h.action}' hints for {h.package}{' ' + h.version if h.version else ''}: "
                                 "keep one (which reason and expiry were meant?)")
            seen.add(key)
        return v


@dataclass(frozen=True)
class Hint:
    """One hint of hints.yaml, with the line its list item starts on."""

    action: str
    package: str
    version: str | None
    by: str
    reason: str
    expires: dt.date
    line: int

    def applies_to(self, name: str, version: str) -> bool:
        """Is this hint about ``name`` at ``version``? Without a version: any version. ``force-badtest``:
        every version up to and including the hint's; the other actions: exactly the hint's version."""
        if name != self.package:
            return False
        if self.version is None:
            return True
        from rattler import Version

        if self.action == "force-badtest":
            return Version(version) <= Version(self.version)
        return Version(version) == Version(self.version)

    def is_active(self, today: dt.date) -> bool:
        return self.expires >= today

    def describe(self) -> str:
        """``block tensorkit 1.3.0 (by @octocat, expires 2026-12-31)``"""
        what = f"{self.action} {self.package}" + (f" {self.version}" if self.version else "")
        return f"{what} (by @{self.by}, expires {self.expires.isoformat()})"

    def to_dict(self) -> dict:
        return {"action": self.action, "package": self.package, "version": self.version, "by": self.by,
                "reason": self.reason, "expires": self.expires.isoformat(), "line": self.line}


@dataclass(frozen=True)
class HintSet:
    """The hints of a repository (``path`` None: it has no hints.yaml)."""

    hints: tuple[Hint, ...] = ()
    path: Path | None = None

    def active(self, today: dt.date) -> list[Hint]:
        """Hints still in force on ``today`` (their expiry day included)."""
        return [h for h in self.hints if h.is_active(today)]

    def expired(self, today: dt.date) -> list[Hint]:
        return [h for h in self.hints if not h.is_active(today)]

    def find(self, action: str, name: str, version: str, today: dt.date) -> Hint | None:
        """The first active ``action`` hint that applies to ``name`` at ``version``, or None."""
        if action not in ACTIONS:
            raise ValueError(f"unknown hint action {action!r}")
        return next((h for h in self.active(today) if h.action == action and h.applies_to(name, version)), None)

    def blocking(self, name: str, version: str, today: dt.date) -> Hint | None:
        """The active ``block`` hint holding ``name`` at ``version``, unless an active ``unblock`` cancels it."""
        block = self.find("block", name, version, today)
        return None if block is None or self.find("unblock", name, version, today) else block


def _action_guess(err: ConfigError, doc: LDict) -> ConfigError:
    """A misspelt action gets a did-you-mean hint, as a misspelt key does."""
    parts = (err.field or "").split(".")
    if len(parts) == 3 and parts[0] == "hints" and parts[2] == "action" and parts[1].isdigit():
        written = str(doc["hints"][int(parts[1])]["action"])
        close = difflib.get_close_matches(written, ACTIONS, n=1, cutoff=0.5)
        if close:
            err.hint = f"did you mean '{close[0]}'?"
    return err


def load_hints(root: Path) -> HintSet:
    """The hints of the repository at ``root``. A missing hints.yaml (or an empty one) means no hints;
    a malformed one raises :class:`ConfigError` naming the file, line and field (exit 2)."""
    path = root / HINTS_FILE
    if not path.exists() and not path.is_symlink():  # (a FIFO or a device is refused by the reader)
        return HintSet((), None)
    try:
        doc = load_fast_file(path)
    except DistroError as exc:  # YAML syntax, duplicate keys, alias bombs, unreadable file
        raise ConfigError(exc.message, path=path, line=exc.line, hint=exc.hint) from None
    if doc is None:
        return HintSet((), path)
    if not isinstance(doc, LDict):
        raise ConfigError("hints.yaml must be a mapping with one key, hints: (a list)", path=path,
                          line=getattr(doc, "line", 1), hint=_SEE)
    try:
        data = _HintsFile.model_validate(doc)
    except ValidationError as exc:
        raise _action_guess(to_error(exc, doc, path, root=_HintsFile, error=ConfigError, see=_SEE), doc) from None
    items = doc.get("hints")
    lines = [items.line_of(i) if isinstance(items, LList) else doc.line_of("hints") for i in range(len(data.hints))]
    return HintSet(tuple(Hint(h.action, h.package, h.version, h.by, h.reason, h.expires, line)
                         for h, line in zip(data.hints, lines, strict=True)), path)


__all__ = ["ACTIONS", "HINTS_FILE", "Hint", "HintSet", "load_hints"]
