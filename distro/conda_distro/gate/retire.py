"""Retirement: take a package out of the main channel and record why.

Before anything is written, a package that other distribution packages depend on (run/host, by the
RecipeGraph) is refused unless ``force``; dependents that are retired themselves don't count. Each
retirement also writes a request record, ``channel_state/retirements/<name>-<YYYYMMDD>.yaml`` (who, why,
when, the evidence: the package's `report unmaintained` entry and its last test results), which the reports
link to; rerunning an interrupted retirement keeps the record of the first attempt.

Local main: the files move to ``<main>/../retired/<subdir>/`` after a repodata without them is in
place, then the channel is re-indexed. anaconda.org: each file gets the ``broken`` label and loses the
main label. The ledger records the retirement (when, why, who) *before* the channel is touched, so a
crash leaves an intent that a rerun of the same command completes; a failure that the command sees
restores the ledger. Retired artifacts are never promoted again (promote holds them as ``retired``).
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conda_distro.channels import Channel, ChannelFile, Progress, crash_point, no_progress, open_channel
from conda_distro.channels.depends import depends_names
from conda_distro.distribution import Distribution, load_distribution, open_distro
from conda_distro.errors import DistroError, ExitCode, LedgerError, UsageError
from conda_distro.gate.promote import check_channel_writable, check_ledger_writable, ledger_entry
from conda_distro.graph import RecipeGraph
from conda_distro.state.ledger import ArtifactEntry, Ledger, PackageState, Retirement, current_user, newest_artifact
from conda_distro.state.locks import DEFAULT_LOCK_TIMEOUT, Deadline, repository_lock
from conda_distro.state.records import RecordEvidence, RetirementRecord, RetirementRecords, last_tests
from conda_distro.util.dates import utcnow
from conda_distro.util.fsutil import check_writable

MAX_REASON = 1000  # characters of a retirement's reason (recorded in the ledger and the request record)


@dataclass(frozen=True)
class RetireOptions:
    name: str
    reason: str
    root: Path | None = None
    by: str | None = None
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    progress: Progress = no_progress
    force: bool = False  # retire even though distribution packages depend on it
    #: the package's `report unmaintained` entry (None: it does not lag), recorded as evidence; the report
    #: sits above the gate, so the caller hands it in (the CLI: ``reports.unmaintained.unmaintained_entry``)
    unmaintained: Callable[[Distribution, str], dict[str, Any] | None] | None = None


@dataclass
class RetireResult:
    name: str
    reason: str
    by: str
    retired: list[ChannelFile] = field(default_factory=list)
    moved_to: list[str] = field(default_factory=list)
    already_retired: list[str] = field(default_factory=list)
    dependents: list[str] = field(default_factory=list)  # files left in main that depend on the package
    recipe_dependents: list[str] = field(default_factory=list)  # distribution packages depending on it (--force)
    ledger: str | None = None
    record: str | None = None  # channel_state/retirements/<name>-<YYYYMMDD>.yaml

    exit_code = ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": True,
            "retired": [{"artifact": f.artifact, "sha256": f.sha256} for f in self.retired],
            "name": self.name, "reason": self.reason, "by": self.by,
            "moved_to": list(self.moved_to), "already_retired": list(self.already_retired),
            "dependents": list(self.dependents), "recipe_dependents": list(self.recipe_dependents),
            "forced": bool(self.recipe_dependents), "ledger": self.ledger, "record": self.record,
        }

    def text_lines(self) -> list[str]:
        lines = [f"retired {f.artifact}" for f in self.retired]
        lines += [f"  -> {m}" for m in self.moved_to]
        if not self.retired and self.already_retired:
            lines.append(f"{self.name} was already retired ({len(self.already_retired)} file(s)); nothing to do")
        lines += [f"warning: {d} is still in main and depends on {self.name}" for d in self.dependents]
        if self.recipe_dependents:
            lines.append(f"forced: {', '.join(self.recipe_dependents)} still depend(s) on {self.name} in recipes/")
        if self.ledger:
            lines.append(f"recorded {self.ledger}")
        if self.record:
            lines.append(f"request record {self.record}")
        return lines


def _check_options(options: RetireOptions) -> None:
    if not options.reason.strip():
        raise UsageError("the reason must not be empty", field="--reason",
                         hint="say why, e.g. --reason 'unmaintained: fails against pytorch 2.6'")
    if not options.name.strip():
        raise UsageError("the package name must not be empty", field="NAME")
    if len(options.reason) > MAX_REASON or any(ord(c) < 32 and c not in "\n\t" for c in options.reason):
        raise UsageError(f"the reason must be at most {MAX_REASON} characters of text (no control characters)",
                         field="--reason", hint="say why in a sentence; link an issue for the details")
    if options.by is not None and (not options.by.strip() or len(options.by) > 200
                                   or any(ord(c) < 32 for c in options.by)):
        raise UsageError("who retires it must be a name of at most 200 characters (no control characters)",
                         field="--by", hint="e.g. --by octocat or --by 'Mona Lisa <mona@example.org>'")


def _retirement(ledger: Ledger, name: str, artifact: str) -> Retirement:
    """The retirement the ledger now records for ``artifact`` (just written by ``Ledger.retire``)."""
    state = ledger.load(name)
    entry = state.get(artifact) if state is not None else None
    if entry is None or entry.retired is None:
        raise LedgerError(f"{artifact} is not recorded as retired after retiring it", path=ledger.path_for(name))
    return entry.retired


def _unknown_package(name: str, main: Channel, in_main: dict[str, ChannelFile], dist: Distribution) -> UsageError:
    folder = next((f for f, r in dist.recipes.items() if r.name == name), None)
    if folder is not None:  # a recipe of the distribution that never reached main (`report`: remove-recipe)
        path = dist.recipes[folder].path.parent
        with contextlib.suppress(ValueError):
            path = path.relative_to(dist.root)
        return UsageError(f"{name} was never promoted to the main channel {main.describe()}: there is nothing to "
                          "retire", field="NAME",
                          hint=f"to drop it from the distribution, remove its recipe: git rm -r {path.as_posix()}/ "
                               "(`report unmaintained` suggests remove-recipe for such packages)")
    names = sorted({f.name for f in in_main.values()})
    close = difflib.get_close_matches(name, names, n=1)
    return UsageError(f"no package named '{name}' in the main channel {main.describe()}", field="NAME",
                      hint=f"did you mean '{close[0]}'?" if close else "see channel_state/ for what is in main")


def _dependents(name: str, remaining: dict[str, ChannelFile]) -> list[str]:
    return sorted(f.artifact for f in remaining.values()
                  if f.name != name and name in depends_names(f))


def recipe_dependents(dist: Distribution, name: str, ledger: Ledger) -> list[str]:
    """Distribution packages whose recipes depend on ``name`` (run/host), except retired ones."""
    folders = {r.name: f for f, r in dist.recipes.items()}
    if name not in folders:
        return []
    graph = RecipeGraph.from_recipes(dist.recipes, check_cycles=False)
    out = []
    for folder in graph.dependents(folders[name]):
        state = ledger.load(dist.recipes[folder].name)
        if not (state and state.artifacts and all(a.retired for a in state.artifacts)):
            out.append(dist.recipes[folder].name)
    return sorted(out)


def _refuse(name: str, dependents: list[str]) -> UsageError:
    return UsageError(f"{name} is a dependency of distribution package(s): {', '.join(dependents)}", field="NAME",
                      hint=f"retire {'them' if len(dependents) > 1 else 'it'} first, or pass --force to retire "
                           f"{name} anyway (their builds and tests will fail without it)")


def _retirement_evidence(options: RetireOptions, dist: Distribution, name: str,
                         entries: list[ArtifactEntry]) -> RecordEvidence:
    """The package's `report unmaintained` entry as of today (from ``options.unmaintained``; None when it does
    not lag) and the newest artifact's last test results. The report is evidence, not a gate: when it
    cannot be made, it is left out."""
    entry = None
    if options.unmaintained is not None:
        with contextlib.suppress(DistroError):
            entry = options.unmaintained(dist, name)
    return RecordEvidence(unmaintained=entry, last_tests=last_tests(newest_artifact(entries)))


def _write_record(distro_root: Path, records: RetirementRecords, record: RetirementRecord) -> tuple[str, bool]:
    """Write the request record; returns its repository-relative path and whether it is new."""
    existing = records.find(record.name, record.at)
    path = existing or records.write(record)
    return path.relative_to(distro_root).as_posix(), existing is None


def _restore(ledger: Ledger, name: str, before: PackageState | None) -> None:
    if before is None:
        ledger.path_for(name).unlink(missing_ok=True)
    else:
        ledger.save(before)


def _preflight(options: RetireOptions, name: str, dist: Distribution, main: Channel, ledger: Ledger,
               records: RetirementRecords) -> None:
    """The refusals of :func:`retire`, checked before the lock is taken (taking it writes a lock file):
    every input it reads is readable, the package is in main (or already retired), nothing depends on
    it unless ``force``. They are checked again under the lock."""
    in_main = main.list_files()
    before = ledger.load(name)
    records.for_package(name)
    check_channel_writable(main)  # everything retire writes can be written
    check_ledger_writable(ledger)
    check_writable(records.folder, folder=True, error=LedgerError,
                   hint="channel_state/retirements/ must be a folder this user can write to")
    if not any(f.name == name for f in in_main.values()):
        if before and any(a.retired for a in before.artifacts):
            return
        raise _unknown_package(name, main, in_main, dist)
    dependents = recipe_dependents(dist, name, ledger)
    if dependents and not options.force:
        raise _refuse(name, dependents)


def retire(options: RetireOptions) -> RetireResult:
    _check_options(options)
    distro = open_distro(options.root)
    dist = load_distribution(distro=distro, strict=False)  # retiring must not depend on unrelated recipes
    main, ledger = open_channel(distro, distro.config.channels.main), Ledger(distro.state_dir)
    records = RetirementRecords(distro.state_dir)
    name = options.name.strip()
    _preflight(options, name, dist, main, ledger, records)
    budget = Deadline(options.lock_timeout)  # the repository's lock, shared (no sweep edits the recipes it reads), then main's
    with repository_lock(distro.build_dir, distro.root, budget, shared=True), main.lock(budget):
        crash_point("retire-locked")
        if dist.changed_on_disk():
            dist = load_distribution(distro=distro, strict=False)
        main.recover(main, ledger.in_main_artifacts(), options.progress)  # (what is recorded in main stays)
        in_main = main.list_files()
        files = sorted((f for f in in_main.values() if f.name == name), key=lambda f: f.artifact)
        before = ledger.load(name)
        records.for_package(name)  # every record it will consult is readable before anything is written
        result = RetireResult(name, options.reason.strip(), options.by or current_user(distro.root))
        result.already_retired = sorted(a.artifact for a in (before.artifacts if before else ()) if a.retired)
        if not files:
            if result.already_retired:
                found = records.for_package(name)
                result.record = found[-1][0].relative_to(distro.root).as_posix() if found else None
                return result
            raise _unknown_package(name, main, in_main, dist)
        result.recipe_dependents = recipe_dependents(dist, name, ledger)
        if result.recipe_dependents and not options.force:
            raise _refuse(name, result.recipe_dependents)
        known = {a.artifact: a for a in (before.artifacts if before else ())}
        entries = [known.get(f.artifact) or ledger_entry(f, None, channel=main.ref, promoted_at=None, commit=None)
                   for f in files]
        evidence = _retirement_evidence(options, dist, name, entries)
        written = ledger.retire(name, entries, Retirement(at=utcnow(), reason=result.reason, by=result.by))
        try:
            effective = _retirement(ledger, name, files[0].artifact)  # a rerun keeps the first retirement
            result.record, new_record = _write_record(distro.root, records, RetirementRecord(
                name=name, at=effective.at, by=effective.by, reason=effective.reason,
                artifacts=[f.artifact for f in files], forced=bool(result.recipe_dependents),
                dependents=result.recipe_dependents, evidence=evidence))
        except DistroError:
            _restore(ledger, name, before)  # the command fails as a whole: the ledger says what it said
            raise
        crash_point("retire-after-ledger")
        try:
            result.moved_to = main.withdraw(files, options.progress)
        except DistroError:
            _restore(ledger, name, before)
            if new_record:
                (distro.root / result.record).unlink(missing_ok=True)
            raise
    result.retired = files
    result.dependents = _dependents(name, {a: f for a, f in in_main.items() if f.name != name})
    result.ledger = written.relative_to(distro.root).as_posix() if written else None
    return result
