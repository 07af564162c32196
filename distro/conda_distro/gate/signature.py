"""Failure signatures: one cause, one entry, whatever the release × variant or the path it ran in.

A failed test's reason is the first error its run printed (rattler-build's ``Script failed with status N``
and the script's last line, e.g. ``ImportError: cannot import name 'center' from 'tensorutils'
(/tmp/rattler-build_x/test_env_h1a2/lib/python3.11/site-packages/tensorutils/__init__.py)``). The same
cause reads differently per target: the test environment's prefix (``$PREFIX``, ``$SRC_DIR_env``, a
temporary folder), memory addresses, times, durations, temporary names (``tmpab12cd``) and random ids differ. Its
**signature** is that line normalized:

* the wrapper words (``test N failed:``, ``Script failed with status N:``) dropped;
* every absolute path cut to what follows ``site-packages/`` (``<site>/tensorutils/__init__.py``) or to
  ``<path>/`` plus its last component;
* hexadecimal addresses (``0x7f3a...``) -> ``0x?``; long hex or base-32 ids, uuids -> ``<id>``;
  ISO dates and clock times -> ``<time>``; durations (``1.23s``, ``45 ms``) -> ``<duration>``;
  ``pid 1234`` -> ``pid ?``;
* runs of white space collapsed.

Findings with one signature are one entry with the targets (and packages) it hit. A regression is *new*
only when its signature was not already seen on the baseline side (the dependent with main's packages).
Pure text functions.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from conda_distro.vocab import Target

_WRAPPERS = (re.compile(r"^test \d+ failed:\s*"), re.compile(r"^Script failed with status -?\d+:?\s*"))
_SITE = re.compile(r"[^\s'\"():,;]*/site-packages/")
_PATH = re.compile(r"(?<![\w.>])(?:\$\{?\w+\}?|~)?(?:/[^\s/'\"():,;]+)+/([^\s/'\"():,;]+)")
_SUBS = (
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "0x?"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"), "<time>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"), "<time>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|us|µs|ns|sec|seconds?|minutes?)\b"), "<duration>"),
    (re.compile(r"\bpid[ =:]?\d+\b", re.I), "pid ?"),
    (re.compile(r"\b(?=[0-9a-z]*\d)(?=[0-9a-z]*[a-z])[0-9a-z]{12,}\b"), "<id>"),  # hashes, random names
    (re.compile(r"\btmp[_0-9A-Za-z]{4,}\b"), "<id>"),  # tempfile's names
)


def normalize(reason: str) -> str:
    """The signature text of a failure's first error line (rules above)."""
    text = " ".join(reason.split())
    for w in _WRAPPERS:
        text = w.sub("", text)
    text = _SITE.sub("<site>/", text)
    text = _PATH.sub(lambda m: f"<path>/{m.group(1)}", text)
    for rx, repl in _SUBS:
        text = rx.sub(repl, text)
    return " ".join(text.split())[:300]


def signature_id(reason: str) -> str:
    """A short stable id of the signature (12 hex digits of its sha256)."""
    return hashlib.sha256(normalize(reason).encode()).hexdigest()[:12]


@dataclass
class Cause:
    """One signature and everything it hit."""

    signature: str
    id: str
    targets: list[Target] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)  # one log per package (the first seen)

    def where(self) -> str:
        by: dict[str, list[str]] = {}
        for r, v in sorted(set(self.targets)):
            by.setdefault(r, []).append(v)
        return ", ".join(f"{r} {'/'.join(vs)}" for r, vs in by.items())

    def to_dict(self) -> dict:
        return {"signature": self.signature, "id": self.id, "packages": list(self.packages),
                "targets": [{"pytorch": r, "variant": v} for r, v in sorted(set(self.targets))], "logs": list(self.logs)}


@dataclass(frozen=True)
class Finding:
    """One failure: a package's test on a release × variant, with its reason and log."""

    package: str
    pytorch: str
    variant: str
    reason: str | None
    log: str | None = None


def group(findings: Iterable[Finding]) -> list[Cause]:
    """One :class:`Cause` per signature, in the order first seen (a finding without a reason is its own
    ``(no reason recorded)`` cause)."""
    out: dict[str, Cause] = {}
    for f in findings:
        text = normalize(f.reason) if f.reason else "(no reason recorded)"
        cid = hashlib.sha256(text.encode()).hexdigest()[:12]
        c = out.setdefault(cid, Cause(text, cid))
        if (f.pytorch, f.variant) not in c.targets:
            c.targets.append(Target(f.pytorch, f.variant))
        if f.package not in c.packages:
            c.packages.append(f.package)
            if f.log:
                c.logs.append(f.log)
    return list(out.values())
