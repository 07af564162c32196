"""`report unmaintained`: packages that lag behind the supported PyTorch releases.

A package is listed for one or more reasons:

* ``missed-release`` — past ``policy.unmaintained_grace_days`` after a supported release was added (or
  after the recipe was added, if later), no artifact of it in main has passed a test against that release
  in any variant, nor against any newer release (a package whose pins start later is not lagging on an
  older release);
* ``newest-fails`` — its newest artifact in main, or its newest build in staging (``build/results/``; a
  build that fails a test is never promoted), fails (latest result ``failed``) against a supported
  release; one reason per release naming it and the failing variants; reported at once, dated from the
  first failure of the current streak.

A release that the newest build in staging has a result for is not "missed": if that build passes every
test it is *awaiting promotion* (the reason is marked ``pending`` with that build), otherwise the
``newest-fails`` reason names the release that fails. A package whose every reason is pending has the
action ``pending`` (right after a sweep, before `promote`): nobody is pinged.

Otherwise the action is ``retire`` once a reason is older than twice the grace period (or the package has
lagged without a break for that long: see :func:`lagging_since`; dropping a release from the window does
not restart the clock) *and* the last
commit by a person touching ``recipes/<name>/`` is older than the grace period (inactivity; commits by
``policy.bot_authors`` are not activity); ``remove-recipe`` instead of ``retire`` for a package that was
never promoted (nothing to retire from main: delete its recipe); otherwise ``ping``. Retired packages are
not listed as lagging: they are listed apart, with their retirement request record.

:func:`evaluate` is pure (facts in, report out); :func:`report_unmaintained` gathers the facts.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conda_distro.distribution import Distribution, load_distribution
from conda_distro.errors import ExitCode
from conda_distro.gate.excuses import read_excuses
from conda_distro.reports.facts import Facts, PackageFacts, ReleaseDate, StagedBuild, days_between, gather
from conda_distro.state.ledger import ArtifactEntry, latest_tests
from conda_distro.state.records import last_tests, release_key
from conda_distro.util.dates import parse_as_of
from conda_distro.util.safetext import shown
from conda_distro.util.templating import render


class Action(enum.StrEnum):
    PING = "ping"
    RETIRE = "retire"
    REMOVE_RECIPE = "remove-recipe"  # would be retire, but nothing of it was ever promoted
    PENDING = "pending"  # every reason is fixed by a build in staging awaiting promotion


ACTION_ORDER = {Action.RETIRE: 0, Action.REMOVE_RECIPE: 0, Action.PING: 1, Action.PENDING: 2}


class ReasonKind(enum.StrEnum):
    MISSED_RELEASE = "missed-release"
    NEWEST_FAILS = "newest-fails"


@dataclass(frozen=True)
class Reason:
    kind: ReasonKind
    release: str
    since: dt.datetime  # the release was added / the recipe was added / the failures began
    days: int  # since ``since``, as of the report date
    message: str
    variant: str | None = None  # newest-fails with a single failing variant
    variants: tuple[str, ...] = ()  # newest-fails: the failing variants
    where: str = "main"  # main | staging: which artifact the reason is about
    artifact: str | None = None
    pending: str | None = None  # the build in staging, awaiting promotion, that passes this release
    detail: str | None = None  # the failing test's reason (staging results)
    log: str | None = None  # the failing test's log (staging results)

    @property
    def short(self) -> str:
        if self.pending:
            return f"pytorch {self.release}: awaiting promotion"
        if self.kind is ReasonKind.MISSED_RELEASE:
            return f"missed pytorch {self.release} ({self.days} days)"
        where = " in staging" if self.where == "staging" else ""
        return f"fails on pytorch {self.release} {'/'.join(self.variants)}{where} ({self.days} days)"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "release": self.release, "variant": self.variant,
                "variants": list(self.variants), "where": self.where, "artifact": self.artifact,
                "pending": self.pending, "since": self.since.date().isoformat(), "days": self.days,
                "message": self.message, "detail": self.detail, "log": self.log}


@dataclass
class Entry:
    name: str
    maintainers: list[str]
    reasons: list[Reason]
    action: Action
    evidence: dict[str, Any]

    @property
    def days(self) -> int:
        return max(r.days for r in self.open_reasons or self.reasons)

    @property
    def open_reasons(self) -> list[Reason]:
        """The reasons no build in staging fixes."""
        return [r for r in self.reasons if not r.pending]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "maintainers": list(self.maintainers), "reasons": [r.to_dict() for r in self.reasons],
                "action": self.action.value, "evidence": self.evidence}


@dataclass(frozen=True)
class RetiredEntry:
    name: str
    at: dt.datetime
    by: str
    reason: str
    artifacts: list[str]
    record: str | None  # channel_state/retirements/<name>-<date>.yaml

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "at": self.at.strftime("%Y-%m-%dT%H:%M:%SZ"), "by": self.by, "reason": self.reason,
                "artifacts": list(self.artifacts), "record": self.record}


@dataclass
class UnmaintainedReport:
    as_of: dt.date
    grace_days: int
    releases: list[ReleaseDate]
    packages: list[Entry] = field(default_factory=list)
    retired: list[RetiredEntry] = field(default_factory=list)

    @property
    def exit_code(self) -> ExitCode:
        """1 when some package needs someone to act (``pending`` ones only wait for `promote`)."""
        return ExitCode.FAILURES if self.lagging else ExitCode.OK

    @property
    def lagging(self) -> list[Entry]:
        return [e for e in self.packages if e.action is not Action.PENDING]

    @property
    def pending(self) -> list[Entry]:
        return [e for e in self.packages if e.action is Action.PENDING]

    def get(self, name: str) -> Entry | None:
        return next((e for e in self.packages if e.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.exit_code == ExitCode.OK, "as_of": self.as_of.isoformat(), "grace_days": self.grace_days,
                "releases": [r.to_dict() for r in self.releases],
                "packages": [e.to_dict() for e in self.packages],
                "retired": [r.to_dict() for r in self.retired]}

    def text_lines(self) -> list[str]:
        lines = [f"unmaintained packages as of {self.as_of} (grace period {self.grace_days} days):"]
        if not self.lagging:
            lines.append("  none: no package lags past the grace period")
        for e in self.packages:
            last = e.evidence.get("last_commit")
            who = ", ".join(f"@{m}" for m in e.maintainers) or "(no maintainers)"
            lines.append(f"  {e.action.value:7} {e.name}  maintainers: {who}")
            lines += [f"          - {shown(r.message, 'text', width=600)}" for r in e.reasons]
            if e.action is Action.REMOVE_RECIPE:
                lines.append(f"          - never promoted to main: remove recipes/{e.name}/ (nothing to retire)")
            lines.append(f"          - last recipe commit: {last['date'][:10]} {last['sha'][:7]} by {shown(last['author'], 'text')}"
                         if last else "          - last recipe commit: unknown (not in git, or only bots)")
        for r in self.retired:
            lines.append(f"  retired {r.name} on {r.at:%Y-%m-%d} ({shown(r.reason, 'text', width=600)})"
                         + (f": {r.record}" if r.record else ""))
        return lines

    def markdown(self) -> str:
        return render("unmaintained.md.j2", report=self)


@dataclass(frozen=True)
class UnmaintainedOptions:
    root: Path | None = None
    as_of: str | None = None  # YYYY-MM-DD; default today (UTC)


# ---------------------------------------------------------------------------------------------
# the rules (pure)


def _newest_passing(pkg: PackageFacts, releases: list[str]) -> int | None:
    """Index in ``releases`` of the newest release some artifact in main passes against."""
    passed = {t.release for a in pkg.in_main for t in a.tests if t.status == "passed"}
    idx = [i for i, r in enumerate(releases) if r in passed]
    return max(idx) if idx else None


def _staged_note(staged: StagedBuild | None, release: str) -> tuple[str | None, str]:
    """(the pending artifact, a note for the message) about the newest build in staging and ``release``."""
    if staged is None:
        return None, ""
    results = {v: t.status for (r, v), t in staged.tests.items() if r == release}
    if not results:
        return None, ""
    if staged.promotable:
        return staged.artifact, f"; awaiting promotion: its build {staged.version} in staging passes it"
    held = sorted({f"{r} ({v})" for (r, v), t in staged.tests.items() if t.status != "passed"},
                  key=lambda rv: release_key((rv.split()[0], rv)))
    if "passed" in results.values():
        return None, (f"; its build {staged.version} in staging passes it but cannot be promoted: it fails "
                      f"against pytorch {', '.join(held)}")
    return None, f"; its build {staged.version} in staging fails it"


def missed_releases(pkg: PackageFacts, facts: Facts) -> list[Reason]:
    if not pkg.tracks_pytorch:
        return []
    names = [r.release for r in facts.releases]
    newest = _newest_passing(pkg, names)
    added = pkg.history.first.date if pkg.history else None
    out = []
    for i, rd in enumerate(facts.releases):
        if rd.date is None or (newest is not None and i <= newest):
            continue
        late_recipe = added is not None and added > rd.date
        since = added if added is not None and late_recipe else rd.date
        days = days_between(since, facts.as_of)
        if days > facts.grace_days:
            after = "the recipe was added" if late_recipe else "it was added to distro.yaml"
            where = "in main" if not pkg.never_promoted else "(nothing of it was ever promoted to main)"
            pending, note = _staged_note(pkg.staged, rd.release)
            out.append(Reason(ReasonKind.MISSED_RELEASE, rd.release, since, days,
                              f"no passing test against pytorch {rd.release} {where}, {days} days after {after} "
                              f"(grace {facts.grace_days} days){note}", pending=pending))
    return out


def _failing_since(entry: ArtifactEntry, release: str, variant: str) -> dt.datetime:
    runs = sorted((t for t in entry.tests if (t.release, t.variant) == (release, variant)), key=lambda t: t.date)
    since = runs[-1].date
    for t in reversed(runs):
        if t.status != "failed":
            break
        since = t.date
    return since


def _variants(vs: list[str]) -> str:
    return ", ".join(vs)


def _main_fails(pkg: PackageFacts, facts: Facts, supported: set[str]) -> list[Reason]:
    newest = pkg.newest
    if newest is None:
        return []
    staged = pkg.staged
    failing: dict[str, list[str]] = {}
    for (release, variant), t in sorted(latest_tests(newest).items(), key=lambda kv: release_key(kv[0])):
        if release in supported and t.status == "failed":
            failing.setdefault(release, []).append(variant)
    out = []
    for release, variants in failing.items():
        since = min(_failing_since(newest, release, v) for v in variants)
        days = days_between(since, facts.as_of)
        pending = None
        if staged is not None and staged.promotable and all(
                (release, v) in staged.tests for v in variants):
            pending = staged.artifact
        message = (f"newest artifact {newest.version} fails against pytorch {release} ({_variants(variants)}) "
                   f"since {since:%Y-%m-%d} ({days} days)")
        if pending and staged is not None:
            message += f"; awaiting promotion: its build {staged.version} in staging passes it"
        out.append(Reason(ReasonKind.NEWEST_FAILS, release, since, days, message,
                          variant=variants[0] if len(variants) == 1 else None, variants=tuple(variants),
                          artifact=newest.artifact, pending=pending))
    return out


def _staging_fails(staged: StagedBuild, facts: Facts, supported: set[str], skip: set[str]) -> list[Reason]:
    failing: dict[str, list] = {}
    for (release, _variant), t in sorted(staged.tests.items(), key=lambda kv: release_key(kv[0])):
        if release in supported and release not in skip and t.status == "failed":
            failing.setdefault(release, []).append(t)
    out = []
    for release, tests in failing.items():
        since = min(t.date for t in tests)
        days = days_between(since, facts.as_of)
        variants = [t.variant for t in tests]
        detail = next((t.reason for t in tests if t.reason), None)
        message = (f"its newest build {staged.version} in staging fails against pytorch {release} "
                   f"({_variants(variants)}) since {since:%Y-%m-%d} ({days} days), so it cannot be promoted"
                   + (f": {_first_line(detail)}" if detail else ""))
        out.append(Reason(ReasonKind.NEWEST_FAILS, release, since, days, message,
                          variant=variants[0] if len(variants) == 1 else None, variants=tuple(variants),
                          where="staging", artifact=staged.artifact, detail=detail,
                          log=next((t.log for t in tests if t.log), None)))
    return out


def _first_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    return line if len(line) <= limit else line[:limit - 1] + "…"


def newest_fails(pkg: PackageFacts, facts: Facts) -> list[Reason]:
    """Failures of the newest artifact in main and of the newest build in staging, one reason per release."""
    supported = {r.release for r in facts.releases}
    out = _main_fails(pkg, facts, supported)
    if pkg.staged is not None:
        out += _staging_fails(pkg.staged, facts, supported, {r.release for r in out})
    return sorted(out, key=lambda r: (release_key((r.release, "")), r.where))


def inactive(pkg: PackageFacts, facts: Facts) -> bool:
    """No commit by a person touching the recipe within the grace period (commits by bots do not count; a
    recipe only bots touched is dated by the commit that added it). Unknown (no git): not inactive."""
    last = pkg.active_since
    return last is not None and days_between(last.date, facts.as_of) > facts.grace_days


def lagging_since(pkg: PackageFacts, facts: Facts) -> dt.datetime | None:
    """When the package's unbroken lag began, if it began on a release the window no longer lists: the
    addition of the oldest former release (dropped from distro.yaml, or a ``.0`` its bugfix replaced) newer
    than every release an artifact of it in main ever passed, or the recipe's addition if later. Moving the
    window does not restart the clock of a package that never caught up. None: no such release."""
    if not pkg.tracks_pytorch or not facts.former:
        return None
    passed = [release_key((t.release, "")) for a in pkg.in_main + pkg.retired for t in a.tests if t.status == "passed"]
    best = max(passed) if passed else None
    missed = [r for r in facts.former if r.date is not None and (best is None or release_key((r.release, "")) > best)]
    if not missed:
        return None
    since = min(r.date for r in missed if r.date is not None)
    added = pkg.history.first.date if pkg.history else None
    return max(since, added) if added is not None else since


def action_for(reasons: list[Reason], pkg: PackageFacts, facts: Facts) -> Action:
    open_reasons = [r for r in reasons if not r.pending]
    if not open_reasons:
        return Action.PENDING
    lag = max(r.days for r in open_reasons)
    if (began := lagging_since(pkg, facts)) is not None:
        lag = max(lag, days_between(began, facts.as_of))
    overdue = lag > 2 * facts.grace_days
    if overdue and inactive(pkg, facts):
        return Action.REMOVE_RECIPE if pkg.never_promoted else Action.RETIRE
    return Action.PING


def _day(date: dt.datetime | None) -> str | None:
    """A release date as YYYY-MM-DD (a missed release always has one)."""
    return date.strftime("%Y-%m-%d") if date is not None else None


def _report_evidence(pkg: PackageFacts, reasons: list[Reason], facts: Facts) -> dict[str, Any]:
    dates = {r.release: r for r in facts.releases}
    newest = pkg.newest
    return {
        "missed_releases": [{"release": r.release, "released": _day(dates[r.release].date),
                             "release_source": dates[r.release].source, "since": r.since.date().isoformat(),
                             "days_since": r.days, "overdue_days": r.days - facts.grace_days}
                            for r in reasons if r.kind is ReasonKind.MISSED_RELEASE],
        "failing": [{"artifact": r.artifact, "where": r.where, "release": r.release, "variant": v,
                     "since": r.since.date().isoformat(), "days": r.days}
                    for r in reasons if r.kind is ReasonKind.NEWEST_FAILS for v in r.variants],
        "newest_artifact": None if newest is None else {
            "artifact": newest.artifact, "version": newest.version,
            "promoted_at": newest.promoted_at.strftime("%Y-%m-%d") if newest.promoted_at else None},
        "last_tests": last_tests(newest),
        "last_commit": pkg.last_commit.to_dict(facts.as_of) if pkg.last_commit else None,
        "bot_commits_ignored": pkg.history.bot_commits if pkg.history else 0,
        "inactive": inactive(pkg, facts),
        "lagging_since": _day(lagging_since(pkg, facts)),
        "never_promoted": pkg.never_promoted,
        "staged": None if pkg.staged is None else {
            "artifact": pkg.staged.artifact, "version": pkg.staged.version, "promotable": pkg.staged.promotable,
            "tests": [{"release": t.pytorch, "variant": t.variant, "status": t.status,
                       "date": t.date.strftime("%Y-%m-%dT%H:%M:%SZ"), "reason": t.reason, "log": t.log}
                      for _, t in sorted(pkg.staged.tests.items(), key=lambda kv: release_key(kv[0]))]},
        "sweep": pkg.sweep.to_dict() if pkg.sweep else None,
        "retirement_record": pkg.record,
    }


def evaluate_package(pkg: PackageFacts, facts: Facts) -> Entry | None:
    if not pkg.in_main and pkg.retired:
        return None  # retired: listed apart
    reasons = missed_releases(pkg, facts) + newest_fails(pkg, facts)
    if not reasons:
        return None
    return Entry(pkg.name, list(pkg.maintainers), reasons, action_for(reasons, pkg, facts), _report_evidence(pkg, reasons, facts))


def retired_entry(pkg: PackageFacts) -> RetiredEntry | None:
    if pkg.in_main or not pkg.retired:
        return None
    last = max((a.retired for a in pkg.retired if a.retired is not None), key=lambda r: r.at)
    return RetiredEntry(pkg.name, last.at, last.by, last.reason,
                        sorted(a.artifact for a in pkg.retired), pkg.record)


def evaluate(facts: Facts) -> UnmaintainedReport:
    report = UnmaintainedReport(facts.as_of, facts.grace_days, list(facts.releases))
    for pkg in facts.packages.values():
        if (entry := evaluate_package(pkg, facts)) is not None:
            report.packages.append(entry)
        elif (gone := retired_entry(pkg)) is not None:
            report.retired.append(gone)
    report.packages.sort(key=lambda e: (ACTION_ORDER[e.action], -e.days, e.name))
    return report


def unmaintained_entry(dist: Distribution, name: str) -> dict[str, Any] | None:
    """The package's entry of `report unmaintained` as of today, or None when it does not lag (what
    `retire` records as evidence; the CLI hands this function to :class:`~conda_distro.gate.retire.RetireOptions`)."""
    facts = gather(dist, parse_as_of(None), sweeps=True)
    pkg = facts.packages.get(name)
    found = evaluate_package(pkg, facts) if pkg is not None else None
    return found.to_dict() if found is not None else None


def report_unmaintained(options: UnmaintainedOptions) -> UnmaintainedReport:
    """Stale staging builds (the promotion gate's, build/excuses.json) are never pending: they are left out."""
    as_of = parse_as_of(options.as_of)
    dist = load_distribution(options.root)
    excuses = read_excuses(dist.distro.build_dir)
    return evaluate(gather(dist, as_of, skip=frozenset(b.artifact for b in excuses.stale) if excuses else frozenset()))
