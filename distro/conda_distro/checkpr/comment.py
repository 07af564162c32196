"""check-pr's report for people: the PR comment (markdown) and its plain-text twin.

A :class:`~conda_distro.checkpr.check.CheckPrResult` becomes a :class:`PrReport`:

* the verdict, first;
* one row per package: ``pass / fail / error / needs-pin-update / blocked / n-a`` and the release ×
  variant targets that failed (``all 6``, or ``2.6.0 cpu/cuda``), not one line per target; ``error`` is an
  infrastructure error (a build or test killed at its time or output limit, or out of memory; a sandbox
  that could not get its environment from the mirror of a remote channel), with its cause: it says
  nothing about the package, and a rerun runs it again;
* the findings: each with its ``file:line``, a hint saying what to do and a link to its log (identical
  failures on several targets are one finding);
* the failures **already failing on the base — not caused by this PR** (:mod:`conda_distro.checkpr.onbase`:
  main's record on the same release × variant fails with the same signature), apart: they are not the PR's
  failures, never count as such (status ``already-failing``, no finding, nobody asked) and never block it;
* the downstream maintainers (of affected packages the PR does not change) that must act, each
  mentioned once, with what they must do.

Log links: ``LogLinks.base`` is the CI run's artifact URL (``--log-url`` / ``CONDA_DISTRO_LOG_URL``;
``{path}`` in it is replaced by the log's path relative to the repository); without it the log's path
is shown. Rendering: ``templates/checkpr.md.j2`` and ``checkpr.txt.j2``.

What the PR's recipes and their build and test scripts wrote (failure reasons, lint and proposal messages
quoting a recipe, the solver's explanation, an unreadable file's error, changed folder names) is kept
apart from our own words in the report (``detail`` fields) and rendered through
:func:`conda_distro.util.safetext.shown`: escaped and de-mentioned in the comment, cleaned in the text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.checkpr.check import CheckPrResult, PinUpdate
from conda_distro.distribution import Unreadable
from conda_distro.errors import DistroError
from conda_distro.gate.signature import normalize
from conda_distro.lint.base import CHECKS, Finding
from conda_distro.state.results import BuildRecord, TestRecord
from conda_distro.util.safetext import shown
from conda_distro.util.templating import render
from conda_distro.vocab import Target, Variant

STATUSES = ("pass", "fail", "error", "needs-pin-update", "blocked", "already-failing", "n-a")
ICONS = {"pass": "✅", "fail": "❌", "error": "⚠️", "needs-pin-update": "📌", "blocked": "⛔", "already-failing": "🔸",
         "n-a": "➖"}
ON_BASE = "already failing on the base (not caused by this PR)"
#: the causes of an infrastructure ``error`` (a build or test that could not finish), as its reason begins
CAUSES = (("timeout", "timeout"), ("output limit", "output limit"), ("mirror", "mirror"), ("disk full", "disk full"))
MARKER = "<!-- conda-distro:check-pr -->"  # the sticky comment's hidden marker (the comment workflow adds it)


@dataclass(frozen=True)
class LogLinks:
    """Where a log can be read: a URL made from ``base`` (the CI run's artifact page), else its path."""

    base: str | None = None
    root: Path | None = None

    def path(self, log: str | None) -> str | None:
        if not log:
            return None
        p = Path(log)
        if self.root is not None and p.is_absolute():
            try:
                return p.resolve().relative_to(self.root.resolve()).as_posix()
            except ValueError:
                return p.as_posix()
        return p.as_posix()

    def url(self, log: str | None) -> str | None:
        rel = self.path(log)
        if not rel or not self.base:
            return None
        return self.base.replace("{path}", rel) if "{path}" in self.base else self.base


@dataclass
class CommentRow:
    name: str
    status: str
    changed: bool = False
    failed_on: str = ""  # "all 6", "2.6.0 cpu/cuda", "build", ""
    note: str = ""
    detail: str = ""  # what a build or test wrote (a blocked reason): shown through safetext

    @property
    def icon(self) -> str:
        return ICONS[self.status]


@dataclass
class Item:
    """One finding: what, where (file:line), what to do, and its log."""

    severity: str  # error | warning | on-base (already failing on the base: not the PR's)
    message: str  # our words (markdown)
    package: str | None = None
    location: str | None = None
    hint: str | None = None  # our words (markdown)
    log_path: str | None = None
    log_url: str | None = None
    more_logs: int = 0  # other targets' logs of the same failure
    detail: str | None = None  # after the message: what a recipe, its build or its test wrote (safetext)
    detail_hint: str | None = None  # a hint quoting a recipe (lint, proposals): safetext
    sep: str = ": "  # between message and detail

    @property
    def icon(self) -> str:
        return {"error": "❌", "on-base": ICONS["already-failing"]}.get(self.severity, "⚠️")


@dataclass
class Ask:
    """A downstream maintainer, mentioned once, and what they must do (per package)."""

    handle: str
    asks: list[str] = field(default_factory=list)


@dataclass
class PrReport:
    verdict: str  # "ready to merge" | "changes needed" | "nothing to build" | "cannot read …"
    icon: str
    summary: str
    base: str
    verdict_detail: str = ""  # after the verdict: the message of the error that stopped check-pr (safetext)
    rows: list[CommentRow] = field(default_factory=list)
    targets: int = 0  # release × variant combinations of the distribution
    items: list[Item] = field(default_factory=list)
    on_base: list[Item] = field(default_factory=list)  # already failing on the base: not caused by this PR
    asks: list[Ask] = field(default_factory=list)
    solver: str | None = None  # the first solver explanation, folded (safetext: a block)
    not_built: bool = False  # --no-build
    scope: str | None = None
    next_steps: list[str] = field(default_factory=list)
    error: dict | None = None  # exit 2: the error that stopped check-pr (location, message, hint)

    def markdown(self) -> str:
        return render("checkpr.md.j2", r=self)

    def text(self) -> str:
        return render("checkpr.txt.j2", r=self)


# ---------------------------------------------------------------------------------------------


def _version_key(release: str) -> tuple:
    return tuple(int(x) if x.isdigit() else 0 for x in release.split("."))


def targets_text(failed: Sequence[Target], every: Sequence[Target]) -> str:
    """``all 6`` when every target failed, else per release: ``2.5.1 cuda, 2.6.0 cpu/cuda``."""
    got = sorted(set(failed), key=lambda t: (_version_key(t[0]), t[1]))
    if not got:
        return ""
    if len(got) > 1 and set(got) >= set(every):
        return f"all {len(got)}"
    by: dict[str, list[str]] = {}
    for r, v in got:
        by.setdefault(r, []).append(v)
    return ", ".join(f"{r} {'/'.join(vs)}" for r, vs in by.items())


def _one_line(text: str | None, limit: int = 240) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _loc(path: str | None, line: int | None) -> str | None:
    if not path:
        return None
    return f"{path}:{line}" if line else path


def to_markdown(res: CheckPrResult, log_url: str | None = None, root: Path | None = None) -> str:
    """The PR comment of ``res`` (logs linked under ``log_url``, paths relative to ``root``)."""
    return build_report(res, LogLinks(log_url, root or res.root)).markdown()


def to_text(res: CheckPrResult, log_url: str | None = None, root: Path | None = None) -> str:
    """The same report as plain text (the terminal's `check-pr`)."""
    return build_report(res, LogLinks(log_url, root or res.root)).text()


def build_report(res: CheckPrResult, links: LogLinks = LogLinks()) -> PrReport:
    """The report of one check-pr run (see the module docstring)."""
    if res.nothing_buildable:
        return PrReport("nothing to build", "✅", f"This PR changes no recipe, proposal or distro.yaml (compared with "
                        f"`{res.base}`); no build or test is needed.", res.base)
    if res.malformed:
        return _malformed(res)
    facts = _Facts.of(res)
    verdict, icon = ("ready to merge", "✅") if res.ok else \
        ("infrastructure error, run it again", "⚠️") if _only_errors(res) else ("changes needed", "❌")
    rep = PrReport(verdict, icon, "", res.base,
                   targets=len(facts.every), not_built=not res.built and bool(res.affected),
                   scope=res.scope if res.built else None)
    rep.items, rep.solver = _findings(res, facts, links)
    rep.on_base = _on_base_items(res, links)
    rep.rows = _rows(res, facts)
    counts = {s: sum(r.status == s for r in rep.rows) for s in STATUSES}
    parts = [f"{n} {s}" for s, n in counts.items() if n]
    rep.summary = ((f"{len(rep.rows)} package(s): {', '.join(parts)}; " if rep.rows else "no recipe to build or test; ")
                   + f"changed: {', '.join(shown(n, 'code') for n in res.changed) or '(no recipe)'}"
                   + (f"; proposals: {', '.join(shown(n, 'code') for n in res.changed_proposals)}"
                      if res.changed_proposals else "")
                   + f"; base {shown(res.base, 'code')}")
    rep.asks = _asks(res, rep.rows, facts.pins)
    rep.next_steps = _next_steps(res, rep)
    return rep


@dataclass
class _Facts:
    """What the parts of the report look up in a check-pr result, gathered once."""

    every: list[Target]  # every release × variant solved or tested, in release order
    pins: dict[str, PinUpdate]  # dependent -> its pin that must change
    unreadable: dict[str, Unreadable]
    blocked_by: dict[str, str]  # recipe -> the unreadable recipe it waits for
    lint_errors: set[str]
    conflicts: dict[str, list[Target]]  # package -> the targets where it is not co-installable
    builds: dict[str, list[BuildRecord]]

    @classmethod
    def of(cls, res: CheckPrResult) -> _Facts:
        every = sorted({t.target for t in res.tests} | {Target(s.pytorch, Variant(s.variant)) for s in res.solve},
                       key=lambda t: (_version_key(t[0]), t[1]))
        conflicts: dict[str, list[Target]] = {}
        for s in res.solve:
            for name in s.conflicting:
                conflicts.setdefault(name, []).append(Target(s.pytorch, Variant(s.variant)))
        builds: dict[str, list[BuildRecord]] = {}
        for b in res.builds:
            builds.setdefault(b.name, []).append(b)
        return cls(every, {p.name: p for p in res.needs_pin_update}, {u.recipe: u for u in res.excluded.unreadable},
                   {b.name: b.by for b in res.excluded.blocked}, {f.recipe for f in res.lint if f.severity == "error"},
                   conflicts, builds)


def _findings(res: CheckPrResult, facts: _Facts, links: LogLinks) -> tuple[list[Item], str | None]:
    """Lint and proposal findings, failed builds, failed tests (one per package and reason), pins, solves;
    and the solver's explanation of the first conflict."""
    items: list[Item] = []
    loc = res.locations
    for f in res.lint + res.proposals:
        items.append(_finding(f))
    failed_tests: dict[tuple[str, str], list[TestRecord]] = {}
    for t in res.own_tests:  # one finding per package and cause: the failure's signature (paths, ids, times cut)
        if t.status == "failed":
            failed_tests.setdefault((t.name, _one_line(normalize(t.reason) if t.reason else "failed")), []).append(t)
    for b in res.builds:
        if b.status == "failed":
            where = loc.get(b.name)
            items.append(Item("error", f"`{b.name}` build failed", b.name, _loc(where.path, where.build) if where else None,
                              f"reproduce with `{reproduce(res, b.name)}`", links.path(b.log), links.url(b.log),
                              detail=b.reason or "failed"))
    items += _error_items(res, links)
    for (name, _cause), tests in failed_tests.items():  # shown with the first target's own words
        where = loc.get(name)
        targets = [t.target for t in tests]
        first = sorted(tests, key=lambda t: (_version_key(t.pytorch), t.variant))[0]
        items.append(Item("error", f"`{name}` test failed on {targets_text(targets, _targets_of(res, name))}",
                          name, _loc(where.path, where.tests) if where else None,
                          f"reproduce with `{reproduce(res, name, first.pytorch)}`",
                          links.path(first.log), links.url(first.log), len(tests) - 1, detail=_one_line(first.reason or "failed")))
    for p in res.needs_pin_update:
        items.append(Item("error", f"`{p.name}`: `{p.pin}` does not admit {p.dependency} {p.new_version}", p.name,
                          f"{p.path}:{p.line}", f"change it to `{p.suggested}`"))
    bad_solves = [s for s in res.solve if not s.ok]
    culprits_seen: set[tuple[str, ...]] = set()
    for s in bad_solves:
        key = tuple(s.conflicting)
        if key in culprits_seen:
            continue
        culprits_seen.add(key)
        on = [Target(x.pytorch, Variant(x.variant)) for x in bad_solves if tuple(x.conflicting) == key]
        who = ", ".join(f"`{c}`" for c in key) or "the distribution"
        items.append(Item("error", f"not co-installable on {targets_text(on, facts.every)}: {who}",
                          hint="`conda-distro solve` explains the conflict (below)"))
    solver = ((bad_solves[0].conflict or "").strip() or None) if bad_solves else None
    return items, solver


def reproduce(res: CheckPrResult, name: str, release: str | None = None) -> str:
    """The command that reproduces a failure of ``name`` on the PR branch: the PR's own builds of it and of
    the packages it depends on that the PR changes, in a private scope, tested on ``release`` (never
    ``build NAME``: that tests against the shared staging's older parent and leaves its build there)."""
    base = res.base if re.fullmatch(r"[\w./@^~-]+", res.base or "") else "BASE"  # (a ref as typed: no shell words)
    return f"conda-distro check-pr --base {base} --only {name}" + (f" --pytorch {release}" if release else "")


def rerun_hint(res: CheckPrResult, name: str) -> str:
    """An infrastructure error of ``name``: the command that runs it again as the check did (not `build
    --retry-errors`: that reads the shared results store, not the PR's, and builds into the shared staging)."""
    return f"not a failure of the package: `{reproduce(res, name)}` runs it again"


def _errored(res: CheckPrResult) -> list[str]:
    return sorted({t.name for t in res.tests if t.status == "error"} | {b.name for b in res.builds if b.status == "error"})


def _only_errors(res: CheckPrResult) -> bool:
    """Nothing is wrong with the PR's packages, but some build or test could not finish."""
    errors = any(t.status == "error" for t in res.tests) or any(b.status == "error" for b in res.builds)
    wrong = (any(f.severity == "error" for f in res.lint + res.proposals) or any(not s.ok for s in res.solve)
             or res.needs_pin_update or res.excluded.unreadable
             or any(t.status == "failed" for t in res.own_tests) or any(b.status == "failed" for b in res.builds))
    return errors and not wrong


def _rows(res: CheckPrResult, facts: _Facts) -> list[CommentRow]:
    """One row per package: affected ones, and changed or blocked ones that could not be read."""
    names = list(res.affected) + [n for n in (*facts.unreadable, *facts.blocked_by) if n not in res.affected
                                  and (n in res.changed or n in facts.blocked_by)]
    rows = []
    own = res.own_tests
    known_all = [t for t in res.tests if res.on_base(t)]
    for name in names:
        row = CommentRow(name, "pass", changed=name in res.changed)
        tests = [t for t in own if t.name == name]
        known = [t.target for t in known_all if t.name == name]
        failed = [t.target for t in tests if t.status == "failed"]
        blocked = [t.target for t in tests if t.status == "blocked"]
        errored = [t.target for t in tests if t.status == "error"]
        bstat = {b.status for b in facts.builds.get(name, [])}
        if name in facts.pins:
            p = facts.pins[name]
            row.status, row.note = "needs-pin-update", f"pin `{p.pin}` → `{p.suggested}`"
            row.failed_on = targets_text(failed or facts.conflicts.get(name, []), _targets_of(res, name) or facts.every)
        elif name in facts.unreadable:
            row.status, row.note = "fail", "recipe cannot be read"
        elif "failed" in bstat:
            row.status, row.failed_on, row.note = "fail", "build", "build failed"
        elif failed or name in facts.lint_errors or name in facts.conflicts:
            row.status = "fail"
            row.failed_on = targets_text(failed or facts.conflicts.get(name, []), _targets_of(res, name) or facts.every)
            row.note = "tests failed" if failed else ("lint errors" if name in facts.lint_errors else "not co-installable")
        elif errored or "error" in bstat:
            row.status = "error"
            row.failed_on = targets_text(errored, _targets_of(res, name)) if errored else "build"
            row.note = f"infrastructure error ({', '.join(_causes(res, name))})"
        elif name in facts.blocked_by:
            row.status, row.note = "blocked", f"waits for `{facts.blocked_by[name]}` (unreadable)"
        elif "blocked" in bstat or (tests and len(blocked) == len(tests)):
            row.status = "blocked"
            why = next((b.reason for b in facts.builds.get(name, []) if b.status == "blocked"), None) \
                or next((t.reason for t in tests if t.status == "blocked"), None)
            row.failed_on = targets_text(blocked, _targets_of(res, name)) if blocked else ""
            waits = _waits_for(why, res.affected)
            row.note, row.detail = (waits, "") if waits else ("blocked", why or "")
        elif not res.built:
            row.status, row.note = "n-a", "not built here (`--no-build`)"
        elif not tests and not known:
            row.status, row.note = "n-a", "no supported release admitted"
        if known and row.status == "pass":  # only failures main already has: not the PR's
            row.status, row.failed_on, row.note = "already-failing", targets_text(known, _targets_of(res, name)), ON_BASE
        elif known:
            row.note += f"; {ON_BASE} on {targets_text(known, _targets_of(res, name))}"
        flaky = [Target(t.pytorch, t.variant) for t in tests if t.status == "flaky"]
        if flaky and row.status == "pass":  # passed and failed on the same inputs: never blocks, said
            row.failed_on = targets_text(flaky, _targets_of(res, name))
            row.note = "flaky (passed and failed on the same inputs; never blocks: tell its maintainers)"
        rows.append(row)
    return rows


def _asks(res: CheckPrResult, rows: list[CommentRow], pins: dict[str, PinUpdate]) -> list[Ask]:
    """Downstream maintainers: each mentioned once, with what they must do."""
    by_handle: dict[str, Ask] = {}
    for row in rows:
        flaky = row.status == "pass" and row.note.startswith("flaky")
        if not flaky and (row.changed or row.status not in ("fail", "needs-pin-update")):
            continue
        if flaky:
            ask = (f"`{row.name}`: its test is flaky on {row.failed_on} (passed and failed on the same inputs; it "
                   f"blocks nothing): please make it deterministic")
        elif row.status == "needs-pin-update":
            p = pins[row.name]
            ask = f"`{row.name}`: change `{p.pin}` to `{p.suggested}` in `{p.path}:{p.line}` (here or in a follow-up PR)"
        else:
            ask = (f"`{row.name}`: fails with this change ({row.failed_on or row.note}); tell the author whether "
                   f"`{row.name}` or this PR must change")
        for handle in res.maintainers.get(row.name, []):
            by_handle.setdefault(handle, Ask(handle)).asks.append(ask)
    return list(by_handle.values())


def _targets_of(res: CheckPrResult, name: str) -> list[Target]:
    return [t.target for t in res.tests if t.name == name]


def _waits_for(reason: str | None, names: list[str]) -> str | None:
    """``waits for `layerkit` `` when a blocked reason names an affected package."""
    if not reason:
        return None

    found = [n for n in names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", reason)]
    return f"waits for {', '.join(f'`{n}`' for n in found)}" if found else None


def _next_steps(res: CheckPrResult, rep: PrReport) -> list[str]:
    if res.ok:
        owners = sorted({m for n in res.changed for m in res.maintainers.get(n, [])})
        who = f" ({', '.join(owners)})" if owners else ""
        return [f"a maintainer of the changed packages{who} reviews and merges; promotion to the main channel "
                "follows on main"]
    steps = []
    if any(f.severity == "error" for f in res.lint + res.proposals):
        steps.append("fix the lint errors (`conda-distro lint --fix` fixes the simple ones)")
    if any(t.status == "failed" for t in res.own_tests) or any(b.status == "failed" for b in res.builds):
        steps.append("fix the failing builds/tests (each finding links its log)")
    if any(not s.ok for s in res.solve):
        steps.append("make the pins co-installable (`conda-distro solve` explains the conflict)")
    if res.needs_pin_update:
        steps.append("update the dependents' pins listed above")
    if errored := _errored(res):
        again = ", ".join(f"`{reproduce(res, n)}`" for n in errored)
        steps.append(f"run the infrastructure errors again (rerun the check; locally {again}); a package that needs "
                     "more time or output sets `extra: limits:` in its recipe")
    return steps or ["see the findings above"]


def infra_cause(reason: str | None) -> str:
    """The cause of an infrastructure error, from its reason: ``timeout``, ``output limit``, ``mirror``,
    ``killed`` (SIGKILL, out of memory) or ``infrastructure``."""
    text = (reason or "").strip().lower()
    for prefix, cause in CAUSES:
        if text.startswith(prefix):
            return cause
    return "killed" if "killed" in text or "sigkill" in text else "infrastructure"


def _causes(res: CheckPrResult, name: str) -> list[str]:
    got = [b.reason for b in res.builds if b.name == name and b.status == "error"] + \
          [t.reason for t in res.tests if t.name == name and t.status == "error"]
    return list(dict.fromkeys(infra_cause(r) for r in got)) or ["infrastructure"]


def _error_items(res: CheckPrResult, links: LogLinks) -> list[Item]:
    """Builds and tests that could not finish: one finding per package, cause and reason (warnings: they
    are not the package's failures)."""
    items: list[Item] = []
    for b in res.builds:
        if b.status == "error":
            items.append(Item("warning", f"`{b.name}` build could not finish (infrastructure error: "
                                         f"{infra_cause(b.reason)})", b.name, hint=rerun_hint(res, b.name),
                              log_path=links.path(b.log), log_url=links.url(b.log), detail=b.reason or "no reason given"))
    grouped: dict[tuple[str, str], list[TestRecord]] = {}
    for t in res.tests:
        if t.status == "error":
            grouped.setdefault((t.name, _one_line(t.reason or "no reason given")), []).append(t)
    for (name, reason), tests in grouped.items():
        first = sorted(tests, key=lambda t: (_version_key(t.pytorch), t.variant))[0]
        on = targets_text([t.target for t in tests], _targets_of(res, name))
        items.append(Item("warning", f"`{name}` test could not finish on {on} (infrastructure error: "
                                     f"{infra_cause(first.reason)})", name, hint=rerun_hint(res, name),
                          log_path=links.path(first.log), log_url=links.url(first.log), more_logs=len(tests) - 1,
                          detail=reason))
    return items


def _on_base_items(res: CheckPrResult, links: LogLinks) -> list[Item]:
    """The failing tests already failing on the base: one entry per package, status and cause, with why."""
    grouped: dict[tuple[str, str, str], list[TestRecord]] = {}
    for t in res.tests:
        if res.on_base(t):
            cause = _one_line(normalize(t.reason) if t.reason else t.status)
            grouped.setdefault((t.name, t.status, cause), []).append(t)
    items = []
    for (name, status, _cause), tests in grouped.items():
        where = res.locations.get(name)
        first = sorted(tests, key=lambda t: (_version_key(t.pytorch), t.variant))[0]
        what = "test failed" if status == "failed" else "test blocked"
        items.append(Item("on-base", f"`{name}` {what} on {targets_text([t.target for t in tests], _targets_of(res, name))}",
                          name, _loc(where.path, where.tests) if where else None,
                          "main fails the same way here: not caused by this PR, and it does not block it",
                          links.path(first.log), links.url(first.log), len(tests) - 1,
                          detail=_one_line(first.reason or status)))
    return items


def _finding(f: Finding) -> Item:
    """A lint or proposal finding: its message and hint quote the recipe or proposal (the PR's text)."""
    return Item(f.severity, f"[{f.check}]", f.recipe, _loc(f.path, f.line), detail=f.message, detail_hint=f.hint, sep=" ")


def _malformed(res: CheckPrResult) -> PrReport:
    """Exit 2 from fatal lint/proposal findings: the comment names the first unreadable file."""
    fatal = [f for f in res.lint + res.proposals if f.check in CHECKS and CHECKS[f.check].fatal] \
        or [f for f in res.lint + res.proposals if f.severity == "error"]
    first = fatal[0] if fatal else None
    rep = error_report(DistroError(first.message, path=first.path, line=first.line, hint=first.hint)
                       if first else DistroError("an input cannot be read"), res.base)
    rep.items = [_finding(f) for f in res.lint + res.proposals]
    return rep


def error_report(exc: DistroError, base: str = "", root: Path | None = None) -> PrReport:
    """The comment for an exit-2 error (bad recipe, proposal, distro.yaml, --base, …): check-pr stopped
    before building anything, and the comment says why and what to do. Paths are shown relative to
    ``root`` (default: the current folder) when they are inside it."""
    path = LogLinks(root=root or Path.cwd()).path(exc.path) if exc.path else None
    what = f"cannot read {shown(_loc(path, exc.line), 'code')}" if path else "bad input"
    message = exc.message if not exc.field or path else f"{exc.field}: {exc.message}"
    return PrReport(what, "🛑", "", base, verdict_detail=message,
                    error={"location": exc.location, "message": exc.message, "hint": exc.hint},
                    next_steps=["fix it and push again: nothing was built or tested"])
