"""The schema of proposals/<name>.yaml (spec §5, PyTorch RFC-0006): :class:`ProposalData`, strict
(an unknown key is an error with a did-you-mean hint), and the checks of its single fields."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from conda_distro.errors import UsageError
from conda_distro.util.validation import HANDLE_RE

PROPOSALS_DIR = "proposals"
SCHEMA_VERSION = 1
PLACEHOLDER_VERSION = "0.0.0"  # written when `propose` is not told the version; proposal-incomplete flags it
# conda-forge's rule for package names: lowercase letters, digits, '.', '_' and '-', starting alphanumeric.
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")
URL_RE = re.compile(r"^https?://\S+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _text(v: Any) -> Any:
    """An empty YAML value (``key:``) is an unanswered question, not an error."""
    return "" if v is None else v


class Maintainer(_Strict):
    handle: str
    consent: bool = False

    @field_validator("handle", mode="before")
    @classmethod
    def _handle(cls, v: Any) -> Any:
        if isinstance(v, str) and not HANDLE_RE.match(v.strip()):
            raise ValueError(f"'{v}' is not a GitHub handle (write the bare handle, e.g. 'octocat', without '@')")
        return v.strip() if isinstance(v, str) else v

    @field_validator("consent", mode="before")
    @classmethod
    def _consent(cls, v: Any) -> Any:
        if v is None:
            return False
        s = str(v).strip().lower()
        if s in ("true", "false"):
            return s == "true"
        raise ValueError(f"consent must be true or false, not '{v}'")


class ProposalData(_Strict):
    """The fields of proposals/<name>.yaml. Free-text answers default to '' (not yet answered)."""

    schema_version: int = SCHEMA_VERSION
    name: str
    version: str = ""
    summary: str = ""
    homepage: str = ""
    repository: str = ""
    license: str = ""
    issue: str = ""
    maintainers: list[Maintainer] = Field(min_length=1)
    pytorch_dependency: str = ""
    focus_area: str = ""
    downstream_users: str = ""
    test_plan: str = ""

    _v_text = field_validator("version", "summary", "homepage", "repository", "license", "issue",
                              "pytorch_dependency", "focus_area", "downstream_users", "test_plan",
                              mode="before")(_text)

    @field_validator("schema_version")
    @classmethod
    def _schema(cls, v: int) -> int:
        if v != SCHEMA_VERSION:
            raise ValueError(f"unsupported schema_version {v} (this conda-distro reads {SCHEMA_VERSION})")
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        problem = name_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        problem = version_problem(v) if v.strip() else None
        if problem:
            raise ValueError(problem)
        return v.strip()

    @field_validator("homepage", "repository")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip()
        if v and not URL_RE.match(v):
            raise ValueError(f"'{v}' is not an http(s) URL")
        return v

    @field_validator("maintainers")
    @classmethod
    def _unique_maintainers(cls, v: list[Maintainer]) -> list[Maintainer]:
        seen: set[str] = set()
        for m in v:
            if m.handle.lower() in seen:
                raise ValueError(f"maintainer '{m.handle}' is listed more than once")
            seen.add(m.handle.lower())
        return v


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid package name for the distribution, or None."""
    if not NAME_RE.match(name or ""):
        return (f"'{name}' is not a valid conda package name (lowercase letters, digits, '.', '_' and '-', "
                "starting with a letter or digit)")
    return None


def version_problem(version: str) -> str | None:
    """Why ``version`` is not a conda version, or None."""
    from rattler import Version
    from rattler.exceptions import InvalidVersionError

    v = version.strip()
    try:
        if not v or "-" in v or " " in v or v[:1] in ("v", "V"):
            raise InvalidVersionError(v)
        Version(v)
    except (InvalidVersionError, ValueError):
        return f"'{version}' is not a conda version (no leading 'v', no '-' or spaces; e.g. 1.2.0)"
    return None


def validate_handle(handle: str) -> str:
    if not HANDLE_RE.match(handle or ""):
        raise UsageError(f"'{handle}' is not a GitHub handle", field="--maintainer",
                         hint="write the bare handle, e.g. 'octocat' or 'org/team', without a leading '@'")
    return handle
