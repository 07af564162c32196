"""Dependency spec analysis on top of rattler's MatchSpec / VersionSpec.

Everything here is pure and cached: thousands of recipes share the same few hundred specs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from rattler import MatchSpec, Version, VersionSpec
from rattler.exceptions import InvalidMatchSpecError, InvalidVersionError, InvalidVersionSpecError

_HUGE = Version("999999999")
_PRE_SUFFIX = re.compile(r"(a0|\.?dev0?|rc0?)$")

GRANULARITY = {1: "major", 2: "minor"}  # anything finer is "patch"


@dataclass(frozen=True)
class ParsedSpec:
    text: str
    name: str
    version: str | None  # the version part as rattler normalised it, None when absent
    build: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@lru_cache(maxsize=65536)
def parse_spec(text: str) -> ParsedSpec:
    """Parse a conda MatchSpec strictly. Never raises: a bad spec comes back with ``error`` set."""
    guess = re.split(r"[\s=<>!~\[]", text.strip(), maxsplit=1)[0]
    try:
        m = MatchSpec(text, strict=True)
    except (InvalidMatchSpecError, InvalidVersionSpecError, InvalidVersionError, ValueError) as exc:
        msg = str(exc).strip() or type(exc).__name__
        if msg == "Eof":
            msg = "the version part ends unexpectedly (a doubled ',' or a trailing operator?)"
        return ParsedSpec(text, guess, None, None, error=msg)
    if m.name is None:
        return ParsedSpec(text, guess, None, None, error="spec has no package name")
    return ParsedSpec(text, m.name.normalized, m.version, m.build)


@lru_cache(maxsize=65536)
def _vspec(version: str) -> VersionSpec:
    return VersionSpec(version)


@lru_cache(maxsize=65536)
def admits(version: str | None, release: str) -> bool:
    """Does a version spec (None = any) admit this release?"""
    if not version:
        return True
    try:
        return _vspec(version).matches(Version(release))
    except (InvalidVersionSpecError, InvalidVersionError):
        return False


@lru_cache(maxsize=65536)
def has_upper_bound(version: str | None) -> bool:
    if not version:
        return False
    try:
        return not _vspec(version).matches(_HUGE)
    except InvalidVersionSpecError:
        return False


def _segments(v: str) -> int:
    v = _PRE_SUFFIX.sub("", v).rstrip(".")
    parts = v.split(".")
    while len(parts) > 1 and parts[-1] == "0":
        parts.pop()
    return len(parts)


def _term_granularity(term: str) -> int | None:
    """Number of version segments fixed by an upper-bounding term, None if the term sets no upper bound."""
    term = term.strip()
    if term.startswith("<="):
        # <=2.5 admits 2.5 but not the bugfix release 2.5.1: never coarser than a patch bound
        return max(3, len(term[2:].split(".")))
    if term.startswith("<"):
        return _segments(term[1:])
    if term.startswith("~="):
        return max(1, len(term[2:].split(".")) - 1)
    if term.startswith("=="):
        return 99
    if term.startswith("="):  # conda fuzzy: =2.5 means 2.5.*
        return len(term[1:].rstrip(".*").split("."))
    if term.endswith("*"):
        core = term.rstrip("*").rstrip(".")
        return len(core.split(".")) if core else None
    if term and term[0].isdigit():
        return 99  # bare version = exact
    return None


@lru_cache(maxsize=65536)
def upper_granularity(version: str | None) -> int | None:
    """How many version segments the upper bound pins: 1 = major (<3), 2 = minor (<2.7 / 2.6.*),
    3+ = patch or exact. The coarsest over ``|`` branches; None when unbounded."""
    if not has_upper_bound(version):
        return None
    worst: int | None = 0
    for branch in version.split("|"):
        terms = [t for t in branch.split(",") if t.strip()]
        fixed = [g for g in (_term_granularity(t) for t in terms) if g is not None]
        if not fixed:
            return None
        g = min(fixed)
        worst = g if worst == 0 else min(worst, g)
    return worst or None


def granularity_name(g: int | None) -> str:
    if g is None:
        return "unbounded"
    return GRANULARITY.get(g, "patch" if g < 99 else "exact")


def pin_granularity(pin_expr: str) -> int:
    """Granularity of a rattler-build pin expression such as ``x.x``."""
    return len([p for p in pin_expr.split(".") if p.strip().lower() == "x"]) or 1


@lru_cache(maxsize=65536)
def admitted_minors(version: str | None, majors: range = range(0, 6), minors: int = 40) -> frozenset[tuple[int, int]]:
    """Which (major, minor) pairs a spec admits, probed on X.Y.0 and X.Y.9 (used for lockstep checks)."""
    out = set()
    for ma in majors:
        for mi in range(minors):
            if admits(version, f"{ma}.{mi}.0") or admits(version, f"{ma}.{mi}.9"):
                out.add((ma, mi))
    return frozenset(out)


def minor_of(release: str) -> tuple[int, int]:
    major, minor = Version(release).as_major_minor()
    return int(major), int(minor)


def next_minor_bound(release: str) -> str:
    """'2.7.0' -> '2.8' (the exclusive upper bound at minor granularity)."""
    ma, mi = minor_of(release)
    return f"{ma}.{mi + 1}"
