"""Dependency spec analysis on top of rattler's MatchSpec / VersionSpec.

Everything here is pure and cached: thousands of recipes share the same few hundred specs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
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
    return ParsedSpec(text, m.name.normalized, m.version, m.build)


@lru_cache(maxsize=65536)
def _vspec(version: str) -> VersionSpec:
    return VersionSpec(version)


@lru_cache(maxsize=65536)
@lru_cache(maxsize=65536)
def admits(version: str | None, release: str) -> bool:
    """Does a version spec (None = any) admit this release? (Remembered: lint asks it of every pin for
    every supported release, with few distinct pins.)"""
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
    if version is None or not has_upper_bound(version):
        return None
    worst = 0
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
    pair = Version(release).as_major_minor()
    if pair is None:  # a version without a minor part
        raise ValueError(f"{release!r} has no major.minor version")
    return int(pair[0]), int(pair[1])


def next_minor_bound(release: str) -> str:
    """'2.7.0' -> '2.8' (the exclusive upper bound at minor granularity)."""
    ma, mi = minor_of(release)
    return f"{ma}.{mi + 1}"


# ---------------------------------------------------------------------------------------------
# editing the version part of a spec as written (the sweep's widening); everything else is kept


class SpecEditError(ValueError):
    """The version part of a spec cannot be found or widened without changing its other parts."""


@dataclass(frozen=True)
class SpecParts:
    """A spec as written, cut around its version part: ``text == head + version + tail``.

    ``head`` is ``[channel::]name`` and the separating blank, ``tail`` the build string and/or the
    bracket part (``[build=..., version=...]``) with their blanks; with ``in_bracket`` the version is
    the value of ``version=`` inside the bracket (its quotes are in ``head``/``tail``)."""

    head: str
    version: str
    tail: str
    in_bracket: bool = False

    @property
    def text(self) -> str:
        return self.head + self.version + self.tail


# a token: runs of non-blanks, a ${{ ... }} expression counting as one piece (it may hold blanks)
_TOKEN = re.compile(r"(?:\$\{\{.*?\}\}|[^\s\[])+")
_OPERATOR = re.compile(r"[=<>!~]")


def bracket_start(text: str) -> int:
    """Index of the '[' that opens a trailing bracket part (outside ${{ }}), -1 when there is none."""
    depth = 0
    i = 0
    while i < len(text):
        if text.startswith("${{", i):
            end = text.find("}}", i)
            i = len(text) if end < 0 else end + 2
            continue
        if text[i] == "[" and depth == 0:
            return i if text.rstrip().endswith("]") else -1
        i += 1
    return -1


def split_spec(text: str, has_build: bool) -> SpecParts:
    """Cut ``text`` (rendered or not) around its version part. ``has_build``: whether the spec has a
    build-string part outside brackets (rattler's parse of the rendered text says so). A spec without
    a version part gets an empty one at the place it would go."""
    body_end = len(text.rstrip())
    b = bracket_start(text)
    bracket = text[b:body_end] if b >= 0 else ""
    head_text = text[:b] if b >= 0 else text[:body_end]
    tokens = list(_TOKEN.finditer(head_text))
    if not tokens:
        raise SpecEditError(f"no package name in '{text}'")
    first = tokens[0]
    op = _OPERATOR.search(first.group())
    if op is not None and "::" not in first.group()[op.start():]:  # name and version written together: pytorch>=2.4
        start = first.start() + op.start()
        rest = tokens[1:]
        if first.group()[op.start()] == "=" and first.group()[op.start():op.start() + 2] != "==":
            # conda's fuzzy 'name=2.5' or 'name=2.5=build': keep the = form's version, build after it
            inner = first.group()[op.start() + 1:]
            ver, sep, build = inner.partition("=")
            if sep:
                return SpecParts(text[:start + 1], ver, text[start + 1 + len(ver):])
            return SpecParts(text[:start + 1], ver, text[first.end():])
        if has_build:
            if not rest:
                raise SpecEditError(f"cannot find the version part of '{text}'")
            ver_end = rest[-2].end() if len(rest) >= 2 else first.end()
        else:
            ver_end = rest[-1].end() if rest else first.end()
        return SpecParts(text[:start], text[start:ver_end], text[ver_end:])
    rest = tokens[1:]
    if has_build:
        if not rest:
            raise SpecEditError(f"cannot find the build part of '{text}'")
        ver_tokens = rest[:-1]
    else:
        ver_tokens = rest
    if ver_tokens:
        head, version = text[:ver_tokens[0].start()], text[ver_tokens[0].start():ver_tokens[-1].end()]
        tail = text[ver_tokens[-1].end():]
    else:
        head, version, tail = text[:first.end()], "", text[first.end():]
    if bracket and not version.strip("*"):
        m = re.search(r"""(?<![\w-])version\s*=\s*(?:"([^"]*)"|'([^']*)'|([^,\]\s]+))""", bracket)
        if m is not None:
            g = next(i for i in (1, 2, 3) if m.group(i) is not None)
            at = b + m.start(g)
            return SpecParts(text[:at], m.group(g), text[at + len(m.group(g)):], in_bracket=True)
    return SpecParts(head, version, tail)


def _build_outside_brackets(text: str, spec: MatchSpec) -> bool:
    start = bracket_start(text)
    return spec.build is not None and not (start >= 0 and re.search(r"(?<![\w-])build\s*=", text[start:]))


def build_outside_brackets(text: str) -> bool:
    """Does a rendered spec carry a build string outside its bracket part (``pytorch 2.5.* *cuda*``)?
    Raises :class:`SpecEditError` when it is not a valid spec."""
    try:
        return _build_outside_brackets(text, MatchSpec(text, strict=True))
    except (InvalidMatchSpecError, InvalidVersionSpecError, InvalidVersionError, ValueError) as exc:
        raise SpecEditError(f"'{text}' is not a valid spec: {exc}") from None


def widen_version(version: str, release: str) -> str:
    """Replace the upper bound of a version spec with the next minor after ``release``.
    ``>=2.4,<2.7`` -> ``>=2.4,<2.8``; ``>=2.4,<2.7.0a0`` -> ``>=2.4,<2.8.0a0``; ``2.5.*`` -> ``>=2.5,<2.8``;
    ``~=2.4.0`` -> ``>=2.4.0,<2.8``. Terms that are not literal versions (``${{ expr }}``) are kept."""
    bound = next_minor_bound(release)
    parts = version.split(",")
    out, replaced = [], False
    for p in parts:
        m = re.fullmatch(r"\s*<(=?)\s*(\d+(?:\.\d+)*?)(\.0a0|a0)?\s*", p)
        c = re.fullmatch(r"\s*~=\s*(\d+(?:\.\d+)*)\s*", p)
        if m and not replaced:
            out.append(f"<{bound}{m.group(3) or ''}")
            replaced = True
        elif c and not replaced:
            out += [f">={c.group(1)}", f"<{bound}"]
            replaced = True
        else:
            out.append(p.strip())
    if replaced:
        return ",".join(out)
    m = re.fullmatch(r"\s*=?=?(\d+\.\d+)(\.\*|\.\d+\.\*)?\s*", version)
    floor = m.group(1) if m else None
    return f">={floor},<{bound}" if floor else f"{version},<{bound}"


def _probe_releases(release: str) -> list[str]:
    """Versions below ``release`` to compare what two version specs admit (the widening must keep them)."""
    ma, mi = minor_of(release)
    return [f"{ma}.{m}.{p}" for m in range(max(0, mi - 6), mi + 1) for p in (0, 1)]


def widen_spec(text: str, release: str, *, supported: tuple[str, ...] = ()) -> str:
    """``text`` (a rendered spec) with only its version part widened to admit ``release`` at minor
    granularity: channel, name, build string and bracket keys are kept as written
    (``pytorch 2.10.* *cuda*`` -> ``pytorch >=2.10,<2.12 *cuda*`` for 2.11.0). Checked with rattler's
    MatchSpec: the result has the same name/channel/build, admits ``release`` and everything the
    old spec admitted. Raises :class:`SpecEditError`."""
    try:
        old = MatchSpec(text, strict=True)
    except (InvalidMatchSpecError, InvalidVersionSpecError, InvalidVersionError, ValueError) as exc:
        raise SpecEditError(f"'{text}' is not a valid spec: {exc}") from None
    parts = split_spec(text, _build_outside_brackets(text, old))
    if not parts.version.strip() or parts.version.strip() == "*" or admits(old.version, release):
        return text  # admits the release already: nothing to widen (never narrowed)
    new_version = widen_version(parts.version, release)
    if parts.in_bracket:
        new_text = parts.head + new_version + parts.tail
        if "," in new_version and not parts.head.endswith(("'", '"')):
            new_text = parts.head + f'"{new_version}"' + parts.tail
    else:
        head = parts.head if parts.head.endswith((" ", "\t")) or not parts.head.endswith("=") or \
            parts.head.endswith(("==", ">=", "<=", "!=", "~=")) else parts.head[:-1] + " "
        new_text = head + new_version + parts.tail
        if parts.head.endswith("=") and head != parts.head and parts.tail.startswith("="):
            new_text = head + new_version + " " + parts.tail[1:]
    try:
        new = MatchSpec(new_text, strict=True)
    except (InvalidMatchSpecError, InvalidVersionSpecError, InvalidVersionError, ValueError) as exc:
        raise SpecEditError(f"widening '{text}' gave '{new_text}', which is not a valid spec: {exc}") from None
    same = lambda m: (m.name.normalized if m.name else None, m.build, str(m.channel) if m.channel else None,  # noqa: E731
                      m.subdir, m.build_number, m.file_name, m.md5, m.sha256)
    if same(new) != same(old):
        raise SpecEditError(f"widening '{text}' gave '{new_text}', which changes more than the version")
    if not admits(new.version, release):
        name = old.name.normalized if old.name else ""
        raise SpecEditError(f"widening '{text}' gave '{new_text}', which still does not admit {name} {release}")
    lost = [v for v in (*supported, *_probe_releases(release))
            if admits(old.version, v) and not admits(new.version, v)]
    if lost:
        raise SpecEditError(f"widening '{text}' to '{new_text}' would drop {lost[0]}, which it admitted")
    return new_text


def version_older(recipe_version: str, proposal_version: str) -> bool:
    """Is the recipe's version older than the version the proposal was made for?"""
    try:
        return Version(recipe_version) < Version(proposal_version)
    except (InvalidVersionError, ValueError):
        return False


def spec_resolvable(version_spec: str | None, versions: Iterable[str]) -> bool:
    """Does any of ``versions`` satisfy the spec (no spec or no known versions: yes)?"""
    versions = list(versions)
    return not version_spec or not versions or any(admits(version_spec, v) for v in versions)
