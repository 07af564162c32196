"""The lock of the real world: exactly which wheels and sdists it is made of (``real-world.lock.json``).

One JSON document, written by `sandbox --real` when it resolves (no lock yet, or ``--refresh``) and read by
every later run, which then downloads exactly these files (by name, version and sha256) and resolves
nothing. Rules:

* **Strict and versioned:** ``schema_version`` (now 1), no unknown keys anywhere, every sha256 64 hex
  digits, every closure's wheel listed in ``wheels`` under its own name; a lock that breaks a rule is
  refused (exit 2) naming the field, and nothing is written.
* **Stable and git-friendly:** keys in a fixed order, maps sorted by key, lists sorted, two-space indent,
  one value per line, no timestamps: resolving the same PyPI twice writes the same bytes, and a diff
  shows only what moved.
* **Per release × variant:** one closure per pytorch build of distro.yaml (``release``, ``variant``), each
  the complete set of wheels pip resolved for ``torch`` (+ its lockstep packages) together with every
  requirement of the recipes; a build upstream cannot serve is a closure with no wheels and an
  ``unavailable`` reason, so that later runs do not ask again. The wheel files themselves (sha256, URL)
  are listed once in ``wheels``, keyed by file name.
* **Used while it satisfies the repository:** a lock serves as long as it has a closure for every
  release × variant of distro.yaml, its lockstep names and target python are the repository's and every
  closure holds a version of every recipe requirement that the requirement admits; otherwise it is stale
  and `sandbox --real` stops, naming what is missing (``--refresh`` re-resolves).
* The recipes' sdists (``sources``) are recorded too; the recipes themselves pin them (version and
  sha256), so that section follows the recipes without any resolution.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from conda_distro.errors import BridgeError
from conda_distro.upstream.names import normalize
from conda_distro.util.fsutil import atomic_write_text
from conda_distro.util.jsonio import read_json
from conda_distro.util.validation import to_error
from conda_distro.vocab import Target, Variant

SCHEMA_VERSION: Literal[1] = 1
LOCK_FILE = "real-world.lock.json"
SEE = "the lock is written by `conda-distro sandbox DIR --real` (docs/real-world.md)"
REFRESH_HINT = ("re-resolve with `conda-distro sandbox DIR --real --refresh` (it rewrites {lock} and prints what "
                "changed), then commit the lock")

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Name = Annotated[str, Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]  # a normalised PyPI name


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class LockedWheel(_Strict):
    """One wheel file: the project and version it is, its sha256 and where it was found."""

    name: Name
    version: str
    sha256: Sha256
    url: str | None = None  # provenance; downloads go by name, version and sha256 through pip


class LockedClosure(_Strict):
    """What pip resolved for one release × variant (both None: the requirements alone, no pytorch)."""

    release: str | None = None
    variant: Literal["cpu", "cuda"] | None = None
    request: list[str]  # the pytorch pin and lockstep pins pip was asked for (besides the requirements)
    unavailable: list[str] = []  # what upstream could not serve for this build, and why
    wheels: dict[Name, str] = {}  # project -> wheel file name (a key of RealLock.wheels)

    @model_validator(mode="after")
    def _build_or_none(self) -> LockedClosure:
        if (self.release is None) != (self.variant is None):
            raise ValueError("give both release and variant, or neither")
        return self

    @property
    def label(self) -> str:
        return f"{self.release} {self.variant}" if self.release else "requirements"

    @property
    def target(self) -> Target | None:
        return Target(self.release, Variant(self.variant)) if self.release and self.variant else None


class LockedSource(_Strict):
    """One recipe's sdist."""

    recipe: str  # the recipe folder's name
    name: str  # the PyPI project
    version: str
    filename: str
    sha256: Sha256
    url: str  # where it is downloaded from (PyPI's file URL; the recipe names the conda-forge-style one)


class RealLock(_Strict):
    """``real-world.lock.json`` (module docstring)."""

    schema_version: Literal[1]
    python: Annotated[str, Field(pattern=r"^\d+\.\d+$")]  # the target interpreter the wheels were chosen for
    platform: Literal["linux-64"]
    lockstep: list[Name] = []  # PyPI projects released with torch, resolved per build
    requirements: list[str] = []  # the recipes' requirements the closures were resolved with
    excluded: list[Name] = []  # projects resolved but built by the distribution itself (not taken)
    closures: list[LockedClosure]
    wheels: dict[str, LockedWheel] = {}  # file name -> the file
    sources: list[LockedSource] = []

    @model_validator(mode="after")
    def _consistent(self) -> RealLock:
        seen: set[tuple[str | None, str | None]] = set()
        for i, c in enumerate(self.closures):
            if (c.release, c.variant) in seen:
                raise ValueError(f"closures.{i}: a second closure for {c.label}")
            seen.add((c.release, c.variant))
            for name, fn in c.wheels.items():
                w = self.wheels.get(fn)
                if w is None:
                    raise ValueError(f"closures.{i}.wheels.{name}: '{fn}' is not listed in wheels")
                if w.name != name:
                    raise ValueError(f"closures.{i}.wheels.{name}: '{fn}' is a wheel of {w.name}")
        for fn, w in self.wheels.items():
            if not fn.endswith(".whl") or "/" in fn or not normalize(fn.split("-", 1)[0]) == w.name:
                raise ValueError(f"wheels.{fn}: not a wheel file name of {w.name}")
        return self

    # ------------------------------------------------------------------ reading it

    def closure(self, release: str, variant: str) -> LockedClosure | None:
        return next((c for c in self.closures if c.release == release and c.variant == variant), None)

    def files_of(self, closures: Iterable[LockedClosure]) -> dict[str, LockedWheel]:
        return {fn: self.wheels[fn] for c in closures for fn in c.wheels.values()}

    def text(self) -> str:
        """The canonical text (module docstring: stable and git-friendly)."""
        doc = self.model_dump(mode="json")
        doc["wheels"] = dict(sorted(doc["wheels"].items()))
        doc["closures"] = sorted(doc["closures"], key=lambda c: (c["release"] or "", c["variant"] or ""))
        for c in doc["closures"]:
            c["wheels"] = dict(sorted(c["wheels"].items()))
        doc["sources"] = sorted(doc["sources"], key=lambda s: (s["recipe"], s["filename"]))
        for key in ("lockstep", "requirements", "excluded"):
            doc[key] = sorted(doc[key])
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"

    def channel_key(self, closures: Sequence[LockedClosure], exclude: Iterable[str]) -> str:
        """The hash of everything of this lock a bridged channel is made of: the chosen closures with their
        files' sha256, the lockstep names, the target python and what the distribution builds itself
        (the sources are not part of it: a changed sdist never rebuilds the channel). Of the names the
        distribution builds only those some closure holds count: they are the wheels left unconverted, so a new
        recipe whose name no closure resolves (a compiled extension nothing else requires) keeps the key."""
        held = {self.wheels[fn].name for c in closures for fn in c.wheels.values()}
        doc = {
            "schema_version": self.schema_version, "python": self.python, "platform": self.platform,
            "lockstep": sorted(self.lockstep), "exclude": sorted(set(exclude) & held),
            "closures": sorted(([c.release, c.variant, sorted(c.unavailable),
                                 sorted((fn, self.wheels[fn].sha256) for fn in c.wheels.values())]
                                for c in closures), key=lambda x: (x[0] or "", x[1] or "")),
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def read_lock(path: Path) -> RealLock:
    """The lock in ``path``. A file that is not a regular file within its size cap (jsonio), not JSON, or
    breaks a rule of the schema is a :class:`BridgeError` (exit 2) naming the file and the field."""
    hint = f"{SEE}; restore it from git, or delete it and run again to resolve a new one"
    if path.is_symlink():
        raise BridgeError("the lock is not a regular file", path=path, hint=hint)
    doc = read_json(path, "lock", error=BridgeError, hint=hint)
    if isinstance(doc, dict) and doc.get("schema_version") not in (None, SCHEMA_VERSION):
        raise BridgeError(f"schema_version {doc.get('schema_version')!r} is not one this conda-distro reads "
                          f"({SCHEMA_VERSION})", path=path, field="schema_version",
                          hint="use the conda-distro that wrote it, or re-resolve with --refresh")
    try:
        return RealLock.model_validate(doc)
    except ValidationError as exc:
        err = to_error(exc, doc, path, root=RealLock, error=BridgeError, see=hint)
        # a rule across fields (_consistent) names its field at the start of its message
        if err.field is None and (m := re.match(r"^([\w.\-+]+): (.*)$", err.message, re.S)):
            err = BridgeError(m.group(2), path=path, field=m.group(1), hint=hint)
        raise err from None


def write_lock(path: Path, lock: RealLock) -> None:
    """Write the canonical text atomically, readable as any file of the repository (umask's mode)."""
    atomic_write_text(path, lock.text())
    umask = os.umask(0)
    os.umask(umask)
    path.chmod(0o666 & ~umask)


# ---------------------------------------------------------------------------------- is it still the one


@dataclass(frozen=True)
class Wanted:
    """What the repository asks of the lock now."""

    python: str  # 3.11
    targets: tuple[Target, ...]  # (release, variant)
    lockstep: tuple[str, ...]
    requirements: tuple[str, ...]  # pip requirements of the recipes


def stale_reasons(lock: RealLock, wanted: Wanted) -> list[str]:
    """Why ``lock`` cannot serve ``wanted`` (empty: it can). Module docstring: a lock serves as long as it
    satisfies the repository."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    out: list[str] = []
    if lock.python != wanted.python:
        out.append(f"it was resolved for python {lock.python}; this python is {wanted.python}")
    if sorted(lock.lockstep) != sorted(normalize(n) for n in wanted.lockstep):
        out.append(f"its lockstep packages are [{', '.join(lock.lockstep)}]; distro.yaml's are "
                   f"[{', '.join(wanted.lockstep)}]")
    for release, variant in wanted.targets:
        if lock.closure(release, variant) is None:
            out.append(f"it has no closure for PyTorch {release} {variant}")
    reqs = []
    for text in wanted.requirements:
        try:
            reqs.append(Requirement(text))
        except InvalidRequirement:
            out.append(f"the requirement '{text}' cannot be read")
    for release, variant in wanted.targets:
        c = lock.closure(release, variant)
        if c is None or not c.wheels:
            continue
        for req in reqs:
            name = normalize(req.name)
            if name in lock.excluded:
                continue
            fn = c.wheels.get(name)
            if fn is None:
                out.append(f"the recipes require {req}, which its closure for {c.label} lacks")
                continue
            try:
                version = Version(lock.wheels[fn].version)
            except InvalidVersion:
                continue
            if not req.specifier.contains(version, prereleases=True):
                out.append(f"the recipes require {req}; its closure for {c.label} holds {name} {version}")
    return out


# ---------------------------------------------------------------------------------- what changed


@dataclass(frozen=True)
class ClosureChange:
    """How one release × variant moved between two locks (projects by name, ``name version``)."""

    target: str  # "2.15.0 cuda" or "requirements"
    status: str  # "added" | "removed" | "changed"
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()  # "name old -> new" (or "name version: new sha256" for rebuilt files)
    unavailable: tuple[str, ...] = ()  # the new lock's reasons, when they differ

    def to_dict(self) -> dict:
        return {"target": self.target, "status": self.status, "added": list(self.added),
                "removed": list(self.removed), "changed": list(self.changed), "unavailable": list(self.unavailable)}

    def lines(self) -> list[str]:
        head = {"added": "new", "removed": "gone", "changed": "changed"}[self.status]
        out = [f"  {self.target} ({head}):"]
        out += [f"    + {x}" for x in self.added]
        out += [f"    - {x}" for x in self.removed]
        out += [f"    ~ {x}" for x in self.changed]
        out += [f"    ! {x}" for x in self.unavailable]
        return out


@dataclass(frozen=True)
class LockChanges:
    closures: tuple[ClosureChange, ...] = ()
    sources: tuple[str, ...] = ()  # "+ einops 0.8.3", "- einops 0.8.2"
    other: tuple[str, ...] = ()  # python, lockstep, requirements

    @property
    def empty(self) -> bool:
        return not (self.closures or self.sources or self.other)

    def to_dict(self) -> dict:
        return {"closures": [c.to_dict() for c in self.closures], "sources": list(self.sources),
                "other": list(self.other)}

    def lines(self) -> list[str]:
        if self.empty:
            return ["  nothing changed"]
        out = [f"  {x}" for x in self.other]
        for c in self.closures:
            out += c.lines()
        if self.sources:
            out.append("  sources:")
            out += [f"    {x}" for x in self.sources]
        return out


def _versions(lock: RealLock | None, c: LockedClosure | None) -> dict[str, tuple[str, str]]:
    if lock is None or c is None:
        return {}
    return {n: (lock.wheels[fn].version, lock.wheels[fn].sha256) for n, fn in c.wheels.items()}


def _closure_change(old: RealLock | None, new: RealLock, key: tuple[str | None, str | None]) -> ClosureChange | None:
    def find(lock: RealLock | None) -> LockedClosure | None:
        return next((c for c in lock.closures if (c.release, c.variant) == key), None) if lock else None

    a, b = find(old), find(new)
    va, vb = _versions(old, a), _versions(new, b)
    added = tuple(f"{n} {vb[n][0]}" for n in sorted(vb.keys() - va.keys()))
    removed = tuple(f"{n} {va[n][0]}" for n in sorted(va.keys() - vb.keys()))
    changed = tuple(f"{n} {va[n][0]} -> {vb[n][0]}" if va[n][0] != vb[n][0] else f"{n} {vb[n][0]}: new sha256"
                    for n in sorted(va.keys() & vb.keys()) if va[n] != vb[n])
    ua, ub = (tuple(a.unavailable) if a else ()), (tuple(b.unavailable) if b else ())
    if not (added or removed or changed) and ua == ub and (a is None) == (b is None):
        return None
    status = "added" if a is None else "removed" if b is None else "changed"
    label = (b or a).label  # type: ignore[union-attr]
    return ClosureChange(label, status, added, removed, changed, ub if ub != ua else ())


def lock_changes(old: RealLock | None, new: RealLock) -> LockChanges:
    """What moved from ``old`` to ``new`` (everything is new when there was no lock)."""
    keys = sorted({(c.release, c.variant) for c in [*(old.closures if old else []), *new.closures]},
                  key=lambda k: (k[0] or "", k[1] or ""))
    closures = tuple(ch for k in keys if (ch := _closure_change(old, new, k)) is not None)
    other = []
    if old is not None:
        if old.python != new.python:
            other.append(f"python {old.python} -> {new.python}")
        if sorted(old.lockstep) != sorted(new.lockstep):
            other.append(f"lockstep [{', '.join(old.lockstep)}] -> [{', '.join(new.lockstep)}]")
        ra, rb = set(old.requirements), set(new.requirements)
        other += [f"requirement + {r}" for r in sorted(rb - ra)] + [f"requirement - {r}" for r in sorted(ra - rb)]
    return LockChanges(closures, source_changes(old.sources if old else [], new.sources), tuple(other))


def source_changes(old: Sequence[LockedSource], new: Sequence[LockedSource]) -> tuple[str, ...]:
    a = {(s.recipe, s.name, s.version, s.sha256) for s in old}
    b = {(s.recipe, s.name, s.version, s.sha256) for s in new}
    return tuple([f"+ {r}: {n} {v}" for r, n, v, _ in sorted(b - a)] + [f"- {r}: {n} {v}" for r, n, v, _ in sorted(a - b)])


@dataclass
class LockBuilder:
    """Collects closures while resolving, then makes the :class:`RealLock`."""

    python: str
    lockstep: Sequence[str] = ()
    requirements: Sequence[str] = ()
    closures: list[LockedClosure] = field(default_factory=list)
    wheels: dict[str, LockedWheel] = field(default_factory=dict)
    excluded: set[str] = field(default_factory=set)

    def add(self, release: str | None, variant: str | None, request: Sequence[str],
            wheels: Mapping[str, tuple[str, LockedWheel]], unavailable: Sequence[str] = ()) -> None:
        """``wheels``: project -> (file name, file)."""
        for fn, w in wheels.values():
            self.wheels[fn] = w
        self.closures.append(LockedClosure(release=release, variant=variant, request=list(request),  # type: ignore[arg-type]
                                           unavailable=list(unavailable),
                                           wheels={n: fn for n, (fn, _) in wheels.items()}))

    def build(self, sources: Sequence[LockedSource] = ()) -> RealLock:
        return RealLock(schema_version=SCHEMA_VERSION, python=self.python, platform="linux-64",
                        lockstep=sorted(normalize(n) for n in self.lockstep), requirements=sorted(self.requirements),
                        excluded=sorted(self.excluded), closures=self.closures, wheels=self.wheels,
                        sources=list(sources))


__all__ = ["LOCK_FILE", "REFRESH_HINT", "SCHEMA_VERSION", "ClosureChange", "LockBuilder", "LockChanges",
           "LockedClosure", "LockedSource", "LockedWheel", "RealLock", "Wanted", "lock_changes", "read_lock",
           "source_changes", "stale_reasons", "write_lock"]
