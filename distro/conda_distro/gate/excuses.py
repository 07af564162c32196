"""Excuses: for every candidate in staging that is not in main, why (britney's excuses, grouped).

One entry per package version (its artifacts: variants, subdirs), with the verdict of the promotion
plan, read from the hold's class (:class:`conda_distro.gate.holds.HoldClass`, the one classification
`promote`'s exit code and the status page use too): ``promote``; ``waiting`` (not tested yet, re-tests
still to run, infrastructure errors, tests seen with other recipes: a build decides it);
``held-temporarily`` (its tests, a dependent's regression, installability, a held dependency: fixed by
a new build or a fix elsewhere); ``held-permanently`` (needs a decision: a block hint, a build number
bump, the owner of its name); the worst of its holds decides. Every hold of every artifact is listed
(``reasons``: a check's hold never hides another's). Each entry carries the advice of its holds (``advice``: followed, it
unblocks the candidate). Builds that can never be promoted (superseded, reverted, from other recipes,
retired: :mod:`conda_distro.gate.staleness`) are no candidates: they are listed apart (``stale``), do not make
`excuses` exit 1, and `conda-distro prune` removes them. Entries are grouped by what blocks them, not
listed flat. `promote` writes them to ``build/excuses.json`` (a dry run too); `conda-distro excuses`
prints them; `status` reads the file back into the same types (:func:`read_excuses`).

Reasons quote test failure reasons, which recipe code wrote: they are kept clean and short in the file
(:func:`conda_distro.util.safetext.shown`, ``text``), and escaped and de-mentioned wherever they are shown in
markdown or HTML (``line``), a file read back included.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from conda_distro.channels.base import ChannelFile, newest_by_name
from conda_distro.errors import UsageError
from conda_distro.gate.holds import PRUNE_ADVICE, Held, HoldClass, HoldReason
from conda_distro.gate.signature import Cause, Finding
from conda_distro.gate.signature import group as group_causes
from conda_distro.state.document import StateDocument, StrictModel
from conda_distro.util.dates import utcnow
from conda_distro.util.jsonio import read_json
from conda_distro.util.safetext import shown
from conda_distro.util.validation import to_error

EXCUSES_FILE = "excuses.json"
REASON_WIDTH = 600  # characters of a reason (it may quote a failing test's reason)
_HINT = "rerun `conda-distro promote` (it writes build/excuses.json) or delete the file"

ExcuseVerdict = Literal["held-permanently", "held-temporarily", "waiting", "promote"]
VERDICTS: tuple[ExcuseVerdict, ...] = ("held-permanently", "held-temporarily", "waiting", "promote")  # worst first

_OWN = {HoldReason.TEST_FAILED: "its own tests", HoldReason.NOT_TESTED: "tests still to run",
        HoldReason.WAITING: "tests still to run", HoldReason.SHA256_MISMATCH: "a file of the same name in main",
        HoldReason.TESTED_WITH_OTHER_RECIPES: "a re-test with this checkout's recipes",
        HoldReason.NOT_OWNER: "the owner of its name", HoldReason.NO_TESTS: "tests that run (none ran)"}


def verdict_of(reason: HoldReason | None) -> ExcuseVerdict:
    """The verdict of a hold's class (:class:`conda_distro.gate.holds.HoldClass`): the one classification
    promote's exit code and the status page read too."""
    if reason is None:
        return "promote"
    verdict = reason.hold_class.verdict
    return verdict if verdict in VERDICTS else "held-permanently"


class Regression(StrictModel):
    """A failing (release, variant) behind a hold, with its log: a dependent's run with the candidate (a
    regression), or the candidate's own test."""

    package: str
    pytorch: str
    variant: str
    log: str | None = None
    reason: str | None = None  # the first error of the failing run (its signature groups them: ``causes``)


class FlakyNote(StrictModel):
    """A test that passed and failed on the same inputs (:mod:`conda_distro.gate.flaky`): it does not hold
    the candidate; its maintainers are told and a `force-badtest` hint is suggested."""

    package: str
    pytorch: str
    variant: str
    detail: str = ""
    log: str | None = None
    maintainers: list[str] = Field(default_factory=list)
    advice: str = ""

    def line(self) -> str:
        return (f"flaky: {self.package} on pytorch {self.pytorch} {self.variant} ({self.detail}); never blocks; "
                f"{self.advice}")


def group_of(verdict: str, blocked_by: list[str], promote_with: list[str], own: str | None = None) -> str:
    """What an excuse is grouped under: the packages that block it, else ``own`` (what of its own holds it:
    its own tests, a rebuild from this checkout, ...; by default by its verdict), or ``nothing: promoted
    [together]``."""
    if verdict == "promote":
        return "nothing: promoted" + (" together" if promote_with else "")
    if blocked_by:
        return ", ".join(blocked_by)
    return own or ("tests still to run" if verdict == "waiting" else "its own tests")


class Excuse(StrictModel):
    name: str
    old_version: str | None = None
    new_version: str
    verdict: ExcuseVerdict
    reasons: list[str] = Field(default_factory=list)
    blocked_by: list[str] = Field(default_factory=list)
    promote_with: list[str] = Field(default_factory=list)
    days_waiting: int = 0
    maintainers: list[str] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)
    regressions: list[Regression] = Field(default_factory=list)
    group: str = ""  # see group_of; a file without it: the file's `groups`, else group_of's default
    advice: list[str] = Field(default_factory=list)  # what to do, one line per hold (each, followed, unblocks it)
    flaky: list[FlakyNote] = Field(default_factory=list)  # flaky tests met on the way (they hold nothing)

    @model_validator(mode="before")
    @classmethod
    def _derived_keys_out(cls, data: Any) -> Any:
        """``causes`` in the file is derived (:meth:`to_dict`), not read."""
        return {k: v for k, v in data.items() if k != "causes"} if isinstance(data, dict) else data

    def causes(self) -> list[Cause]:
        """The failures behind it, one per signature, with the targets and packages each hit."""
        return group_causes(Finding(r.package, r.pytorch, r.variant, r.reason, r.log) for r in self.regressions)

    @model_validator(mode="after")
    def _grouped(self) -> Excuse:
        if not self.group:
            self.group = group_of(self.verdict, self.blocked_by, self.promote_with)
        return self

    @property
    def title(self) -> str:
        """The heading of its group: ``blocked by X`` or ``nothing: promoted``."""
        return self.group if self.group.startswith("nothing") else f"blocked by {self.group}"

    def own_failure(self, regression: Regression) -> bool:
        return regression.package == self.name

    def to_dict(self) -> dict[str, Any]:
        return {**self.model_dump(mode="json"), "causes": [c.to_dict() for c in self.causes()]}


class StaleBuild(StrictModel):
    """A staging build that can never be promoted (:mod:`conda_distro.gate.staleness`): no candidate, listed
    apart, and no reason for `promote` or `excuses` to exit 1. `conda-distro prune` removes it."""

    artifact: str
    name: str
    version: str
    reason: str  # superseded | reverted | not-from-this-checkout | retired
    detail: str = ""
    advice: str = PRUNE_ADVICE

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


@dataclass(frozen=True)
class ExcusesOptions:
    root: Path | None = None  # the distribution's folder (None: found from the current one)


class Excuses(StateDocument):
    """``build/excuses.json``: written by `promote` (:func:`write_excuses`), read back by the status page
    (:func:`read_excuses`) into the same types. ``ok`` and ``groups`` in the file are derived."""

    DOCUMENT = "excuses"

    generated: dt.datetime
    candidates: list[Excuse]
    stale: list[StaleBuild] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _groups_of_the_file(cls, data: Any) -> Any:
        """``ok`` and ``groups`` in the file are derived, not read; a file whose candidates carry no ``group``
        takes it from the file's ``groups`` list."""
        if not isinstance(data, dict):
            return data
        groups = data.get("groups")
        data = {k: v for k, v in data.items() if k not in ("ok", "groups")}
        if not isinstance(groups, list) or not isinstance(data.get("candidates"), list):
            return data
        label = {n: g["blocked_by"] for g in groups if isinstance(g, dict) and isinstance(g.get("blocked_by"), str)
                 for n in g.get("candidates") or () if isinstance(n, str)}
        return {**data, "candidates": [{**c, "group": label[c["name"]]}
                                       if isinstance(c, dict) and not c.get("group") and c.get("name") in label else c
                                       for c in data["candidates"]]}

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
        return {"schema_version": self.schema_version, "ok": self.ok, "generated": self.generated.isoformat().replace("+00:00", "Z"),
                "candidates": [e.to_dict() for e in self.candidates],
                "stale": [b.to_dict() for b in self.stale],
                "groups": [{"blocked_by": g, "candidates": [e.name for e in es]} for g, es in self.groups()]}

    def to_text(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def stale_lines(self) -> list[str]:
        if not self.stale:
            return []
        lines = [f"stale ({len(self.stale)}; never promotable: `conda-distro prune` removes them):"]
        lines += [f"  {b.artifact}  {b.reason}: {shown(b.detail, 'text', width=REASON_WIDTH)}" for b in self.stale]
        return lines

    def text_lines(self) -> list[str]:
        if not self.candidates:
            return ["no candidates: everything in staging is in main" + (" (or stale)" if self.stale else ""),
                    *self.stale_lines()]
        lines = []
        for group, es in self.groups():
            lines.append(f"blocked by {group} ({len(es)}):" if not group.startswith("nothing") else f"{group} ({len(es)}):")
            for e in es:
                old = e.old_version or "(new)"
                lines.append(f"  {e.name} {old} -> {e.new_version}  {e.verdict}, {e.days_waiting} day(s) in staging")
                lines += [f"    - {shown(r, 'text', width=REASON_WIDTH)}" for r in e.reasons]
                lines += [f"    log: {r.package} on pytorch {r.pytorch} {r.variant}: {shown(r.log, 'text', width=600)}"
                          for r in e.regressions if r.log]
                if e.promote_with:
                    lines.append(f"    goes with: {', '.join(e.promote_with)}")
                if e.verdict != "promote":
                    lines += [f"    what to do: {a}" for a in e.advice]
                if e.maintainers and e.verdict != "promote":
                    lines.append(f"    maintainers: {' '.join('@' + m for m in e.maintainers)}")
                lines += [f"    {shown(n.line(), 'text', width=REASON_WIDTH)}" for n in e.flaky]
                lines += [f"    cause: {shown(c.signature, 'text', width=REASON_WIDTH)} ({', '.join(c.packages)} on "
                          f"{c.where()})" for c in e.causes() if e.verdict != "promote"]
        lines += self.stale_lines()
        counts = {v: sum(e.verdict == v for e in self.candidates) for v in VERDICTS}
        lines.append(", ".join(f"{n} {v}" for v, n in counts.items() if n) + f" ({len(self.candidates)} candidates)"
                     + (f", {len(self.stale)} stale" if self.stale else ""))
        return lines

    def _stale_markdown(self) -> list[str]:
        if not self.stale:
            return []
        out = [f"### stale: never promotable ({len(self.stale)})", "",
               "`conda-distro prune` removes them from staging.", "", "| build | why |", "|---|---|"]
        out += [f"| `{b.artifact}` | {b.reason}: {shown(b.detail, width=REASON_WIDTH)} |" for b in self.stale]
        return [*out, ""]

    def markdown(self) -> str:
        if not self.candidates:
            return "\n".join(["## Excuses", "", "No candidates: everything in staging is in main"
                              + (" (or stale)." if self.stale else "."), "", *self._stale_markdown()])
        out = ["## Excuses", ""]
        for _group, es in self.groups():
            title = es[0].title
            out += [f"### {title} ({len(es)})", "", "| package | main → staging | verdict | days | why |",
                    "|---|---|---|---|---|"]
            for e in es:
                why = "<br>".join(shown(r, width=REASON_WIDTH) for r in e.reasons) or "—"
                why += "".join(f"<br>log: {_log_link(r)}" for r in e.regressions if r.log)
                if e.promote_with:
                    why += f"<br>goes with {', '.join(e.promote_with)}"
                if e.verdict != "promote" and e.advice:
                    why += "<br>what to do: " + "; ".join(shown(a, width=REASON_WIDTH) for a in e.advice)
                why += "".join("<br>" + shown(n.line(), width=REASON_WIDTH) for n in e.flaky)
                if e.verdict != "promote":
                    why += "".join(f"<br>cause: {shown(c.signature, width=REASON_WIDTH)} ({', '.join(c.packages)} on "
                                   f"{c.where()})" for c in e.causes())
                out.append(f"| `{e.name}` | {e.old_version or '(new)'} → {e.new_version} | {e.verdict} | "
                           f"{e.days_waiting} | {why} |")
            pings = sorted({m for e in es if e.verdict != "promote" for m in e.maintainers}
                           | {m for e in es for n in e.flaky for m in n.maintainers})
            if pings:
                out += ["", "maintainers: " + " ".join(f"@{m}" for m in pings)]
            out.append("")
        return "\n".join(out + self._stale_markdown())


def _log_link(r: Regression) -> str:
    """A failing run's log in a markdown cell: a link when the log is a URL, its path as code otherwise."""
    what = shown(f"{r.package} on pytorch {r.pytorch} {r.variant}", width=REASON_WIDTH)
    log = r.log or ""
    if log.startswith(("https://", "http://")) and not any(c in log for c in " ()<>|"):
        return f"[{what}]({log})"
    return f"{what}: {shown(log, 'code', width=600)}"


def _first_seen(arts: list[str], inputs: Any) -> dt.datetime | None:
    dates = [t.date for a in arts if (res := inputs.results.get(a)) is not None for t in res.tests]
    dates = [d if d.tzinfo else d.replace(tzinfo=dt.UTC) for d in dates]
    return min(dates) if dates else None


def excuses_of(plan: Any, inputs: Any, now: dt.datetime | None = None) -> Excuses:
    """The excuses of a promotion plan (:class:`conda_distro.gate.promote.PromotionPlan`) made from
    ``inputs`` (:class:`conda_distro.gate.promote.PlanInputs`)."""
    now = now or utcnow()
    held: dict[str, Held] = {h.artifact: h for h in plan.held}
    promoted = {f.artifact for f in plan.promote}
    untracked = set(plan.untracked)
    groups: dict[tuple[str, str], list[ChannelFile]] = defaultdict(list)
    stale = []
    for art, f in sorted(inputs.staging.items()):
        h = held.get(art)
        if art in inputs.main or (h is not None and h.hold_class is HoldClass.DONE):
            continue
        if h is not None and h.hold_class is HoldClass.STALE:
            stale.append(StaleBuild(artifact=art, name=f.name, version=f.version, reason=h.reason.value,
                                    detail=shown(h.detail, "text", width=REASON_WIDTH), advice=h.what_to_do))
            continue
        groups[(f.name, f.version)].append(f)
    in_main = {name: fs[0].version for name, fs in newest_by_name(inputs.main.values()).items()}
    set_of = {a: s for s in plan.sets for a in s}
    label = {f.artifact: f"{f.name} {f.version}" for fs in groups.values() for f in fs}
    out = []
    for (name, version), files in sorted(groups.items()):
        arts = sorted(f.artifact for f in files)
        hs = [x for a in arts if a in held for x in held[a].holds]  # every hold of every artifact, in order
        worst: ExcuseVerdict = min((verdict_of(h.reason) for h in hs), key=VERDICTS.index, default="promote")
        if any(a in untracked for a in arts) and worst == "promote":
            worst = "waiting"
        reasons = list(dict.fromkeys(shown(f"{h.reason.value}: {h.detail}", "text", width=REASON_WIDTH) for h in hs))
        if any(a in untracked for a in arts):
            reasons.append(f"not tested yet: run `conda-distro build {name}`")
        with_ = sorted({label.get(b, b) for a in arts if a in promoted for b in set_of.get(a, ())} - {f"{name} {version}"})
        first = _first_seen(arts, inputs)
        blocked_by = sorted({b for h in hs for b in h.blocked_by})
        own = next((h.reason for h in hs if not h.blocked_by), None)
        flaky = [FlakyNote(package=t.package, pytorch=t.pytorch, variant=t.variant, detail=t.detail, log=t.log,
                           maintainers=list(t.maintainers), advice=t.advice)
                 for t in getattr(plan, "flaky", ()) if t.candidate in arts
                 or (t.candidate is None and (t.package, t.version) == (name, version))]
        out.append(Excuse(name=name, old_version=in_main.get(name), new_version=version,
                          verdict=worst, reasons=reasons, blocked_by=blocked_by, promote_with=with_,
                          days_waiting=max(0, (now - first).days) if first else 0,
                          maintainers=list(dict.fromkeys(m for h in hs for m in h.maintainers))
                          or list(inputs.maintainers.get(name, ())),
                          artifacts=arts, regressions=[Regression(**{k: r[k] for k in Regression.model_fields if k in r})
                                       for h in hs for r in h.regressions],
                          group=group_of(worst, blocked_by, with_, _OWN.get(own, "its own tests") if own else None),
                          advice=list(dict.fromkeys([*(h.what_to_do for h in hs),
                                                     *(["`conda-distro build " + name + "`"]
                                                       if any(a in untracked for a in arts) else [])])),
                          flaky=flaky))
    return Excuses(candidates=out, stale=stale, generated=now.replace(microsecond=0))


def write_excuses(path: Path, excuses: Excuses) -> Path:
    excuses.write(path)
    return path


def read_excuses(build_dir: Path) -> Excuses | None:
    """``build/excuses.json`` as :class:`Excuses`, or None when there is none. A file that is there but
    unreadable or of another shape is bad input (exit 2): an error naming the file, the field and the line."""
    path = build_dir / EXCUSES_FILE
    try:
        data = read_json(path, "excuses", error=UsageError, hint=_HINT)
    except FileNotFoundError:
        return None
    if not isinstance(data, dict):
        raise UsageError("the promotion gate's excuses must be a JSON object", path=path, line=1, hint=_HINT)
    Excuses.check_version(data, path, error=UsageError)
    try:
        return Excuses.model_validate(data)
    except ValidationError as exc:
        raise to_error(exc, data, path, root=Excuses, error=UsageError, see=_HINT) from None
