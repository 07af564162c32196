"""Excuses: for every candidate in staging that is not in main, why (britney's excuses, grouped).

One entry per package version (its artifacts: variants, subdirs), with the verdict of the promotion
plan: ``promote``; ``waiting`` (not tested yet, re-tests still to run, infrastructure errors);
``held-temporarily`` (its tests, a dependent's regression, installability, a held dependency: fixed by
a new build or a fix elsewhere); ``held-permanently`` (needs someone to act: a block hint, a rebuild
from this checkout, a build number bump, retired). Entries are grouped by what blocks them, not listed
flat. `promote` writes them to ``build/excuses.json`` (a dry run too); `conda-distro excuses` prints them.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from rattler import Version

from conda_distro.channels.base import ChannelFile
from conda_distro.holds import Held, HoldReason
from conda_distro.yamlio import atomic_write_text

PERMANENT = {HoldReason.RETIRED, HoldReason.SHA256_MISMATCH, HoldReason.NOT_FROM_THIS_CHECKOUT,
             HoldReason.BLOCKED_BY_HINT}
WAITING = {HoldReason.WAITING, HoldReason.NOT_TESTED}
VERDICTS = ("held-permanently", "held-temporarily", "waiting", "promote")  # worst first

_OWN = {HoldReason.TEST_FAILED: "its own tests", HoldReason.NOT_TESTED: "tests still to run",
        HoldReason.WAITING: "tests still to run", HoldReason.SHA256_MISMATCH: "a file of the same name in main",
        HoldReason.NOT_FROM_THIS_CHECKOUT: "a rebuild from this checkout", HoldReason.RETIRED: "retirement"}


def verdict_of(reason: HoldReason | None) -> str:
    if reason is None:
        return "promote"
    if reason in PERMANENT:
        return "held-permanently"
    return "waiting" if reason in WAITING else "held-temporarily"


@dataclass
class Excuse:
    name: str
    old_version: str | None
    new_version: str
    verdict: str
    reasons: list[str] = field(default_factory=list)
    blocked_by: list[str] = field(default_factory=list)
    promote_with: list[str] = field(default_factory=list)
    days_waiting: int = 0
    maintainers: list[str] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)
    regressions: list[dict] = field(default_factory=list)

    @property
    def group(self) -> str:
        if self.verdict == "promote":
            return "nothing: promoted" + (" together" if self.promote_with else "")
        return ", ".join(self.blocked_by) if self.blocked_by else self._own

    _own: str = "its own tests"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "old_version": self.old_version, "new_version": self.new_version,
                "verdict": self.verdict, "reasons": list(self.reasons), "blocked_by": list(self.blocked_by),
                "promote_with": list(self.promote_with), "days_waiting": self.days_waiting,
                "maintainers": list(self.maintainers), "artifacts": list(self.artifacts),
                "regressions": list(self.regressions)}


@dataclass
class Excuses:
    candidates: list[Excuse]
    generated: dt.datetime

    @property
    def ok(self) -> bool:
        return all(e.verdict == "promote" for e in self.candidates)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def groups(self) -> list[tuple[str, list[Excuse]]]:
        by: dict[str, list[Excuse]] = defaultdict(list)
        for e in self.candidates:
            by[e.group].append(e)

        def rank(item: tuple[str, list[Excuse]]) -> tuple:
            worst = min(VERDICTS.index(e.verdict) for e in item[1])
            return worst, -len(item[1]), item[0]

        return sorted(by.items(), key=rank)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "generated": self.generated.isoformat().replace("+00:00", "Z"),
                "candidates": [e.to_dict() for e in self.candidates],
                "groups": [{"blocked_by": g, "candidates": [e.name for e in es]} for g, es in self.groups()]}

    def text_lines(self) -> list[str]:
        if not self.candidates:
            return ["no candidates: everything in staging is in main"]
        lines = []
        for group, es in self.groups():
            lines.append(f"blocked by {group} ({len(es)}):" if not group.startswith("nothing") else f"{group} ({len(es)}):")
            for e in es:
                old = e.old_version or "(new)"
                lines.append(f"  {e.name} {old} -> {e.new_version}  {e.verdict}, {e.days_waiting} day(s) in staging")
                lines += [f"    - {r}" for r in e.reasons]
                if e.promote_with:
                    lines.append(f"    goes with: {', '.join(e.promote_with)}")
                if e.maintainers and e.verdict != "promote":
                    lines.append(f"    maintainers: {' '.join('@' + m for m in e.maintainers)}")
        counts = {v: sum(e.verdict == v for e in self.candidates) for v in VERDICTS}
        lines.append(", ".join(f"{n} {v}" for v, n in counts.items() if n) + f" ({len(self.candidates)} candidates)")
        return lines

    def markdown(self) -> str:
        if not self.candidates:
            return "## Excuses\n\nNo candidates: everything in staging is in main.\n"
        out = ["## Excuses", ""]
        for group, es in self.groups():
            title = group if group.startswith("nothing") else f"blocked by {group}"
            out += [f"### {title} ({len(es)})", "", "| package | main → staging | verdict | days | why |",
                    "|---|---|---|---|---|"]
            for e in es:
                why = "<br>".join(_md(r) for r in e.reasons) or "—"
                if e.promote_with:
                    why += f"<br>goes with {', '.join(e.promote_with)}"
                out.append(f"| `{e.name}` | {e.old_version or '(new)'} → {e.new_version} | {e.verdict} | "
                           f"{e.days_waiting} | {why} |")
            pings = sorted({m for e in es if e.verdict != "promote" for m in e.maintainers})
            if pings:
                out += ["", "maintainers: " + " ".join(f"@{m}" for m in pings)]
            out.append("")
        return "\n".join(out)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _first_seen(arts: list[str], inputs: Any) -> dt.datetime | None:
    dates = [t.date for a in arts if (res := inputs.results.get(a)) is not None for t in res.tests]
    dates = [d if d.tzinfo else d.replace(tzinfo=dt.timezone.utc) for d in dates]
    return min(dates) if dates else None


def excuses_of(plan: Any, inputs: Any, now: dt.datetime | None = None) -> Excuses:
    """The excuses of a promotion plan (:class:`conda_distro.promote.PromotionPlan`) made from
    ``inputs`` (:class:`conda_distro.promote.PlanInputs`)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    held: dict[str, Held] = {h.artifact: h for h in plan.held}
    promoted = {f.artifact for f in plan.promote}
    untracked = set(plan.untracked)
    groups: dict[tuple[str, str], list[ChannelFile]] = defaultdict(list)
    for art, f in inputs.staging.items():
        h = held.get(art)
        if art in inputs.main or (h is not None and h.reason is HoldReason.ALREADY_IN_MAIN):
            continue
        groups[(f.name, f.version)].append(f)
    in_main: dict[str, Version] = {}
    for f in inputs.main.values():
        if f.name not in in_main or Version(f.version) > in_main[f.name]:
            in_main[f.name] = Version(f.version)
    set_of = {a: s for s in plan.sets for a in s}
    label = {f.artifact: f"{f.name} {f.version}" for fs in groups.values() for f in fs}
    out = []
    for (name, version), files in sorted(groups.items()):
        arts = sorted(f.artifact for f in files)
        hs = [held[a] for a in arts if a in held]
        worst = min((verdict_of(h.reason) for h in hs), key=VERDICTS.index, default="promote")
        if any(a in untracked for a in arts) and worst == "promote":
            worst = "waiting"
        reasons = list(dict.fromkeys(f"{h.reason.value}: {h.detail}" for h in hs))
        if any(a in untracked for a in arts):
            reasons.append("not tested yet: run `conda-distro build`")
        with_ = sorted({label.get(b, b) for a in arts if a in promoted for b in set_of.get(a, ())} - {f"{name} {version}"})
        first = _first_seen(arts, inputs)
        e = Excuse(name=name, old_version=str(in_main[name]) if name in in_main else None, new_version=version,
                   verdict=worst, reasons=reasons, blocked_by=sorted({b for h in hs for b in h.blocked_by}),
                   promote_with=with_, days_waiting=max(0, (now - first).days) if first else 0,
                   maintainers=list(dict.fromkeys(m for h in hs for m in h.maintainers))
                   or list(inputs.maintainers.get(name, ())),
                   artifacts=arts, regressions=[r for h in hs for r in h.regressions])
        own = next((h.reason for h in hs if not h.blocked_by), None)
        e._own = _OWN.get(own, "its own tests") if own else ("tests still to run" if worst == "waiting" else "its own tests")
        out.append(e)
    return Excuses(out, now.replace(microsecond=0))


def write_excuses(path: Path, excuses: Excuses) -> Path:
    import json

    atomic_write_text(path, json.dumps(excuses.to_dict(), indent=2) + "\n")
    return path
