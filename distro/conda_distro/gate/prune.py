"""`conda-distro prune [--dry-run]`: staging's life cycle. Removes the staging builds that can never be
promoted from this checkout, and their results and logs; keeps everything main or a pending candidate
needs.

Removed (the reasons of :mod:`conda_distro.gate.staleness`, the same ones promote's gate holds them for):
``superseded``, ``reverted``, ``not-from-this-checkout``, ``retired``; and results (with their logs)
of files that are in neither staging nor main (``orphan-results``).

Kept, each with why: builds in main (``in-main``: builds and tests read them from staging); every other
build of this checkout — what `promote` would take, and what it holds for a reason a person or a build
can act on (``candidate``, with the gate's reason and advice), and untested ones (`build` tests them);
and a stale build that a kept candidate needs (``needed``: no build in main or among the kept ones meets
one of that candidate's distribution dependencies).

Safety: it takes the repository's lock (shared: it reads the recipes) and the staging lock (exclusive,
as `build` does: no build writes staging or the results meanwhile). It writes a journal
(``build/prune.journal.json``: each file to remove with its sha256) before it changes anything, then
takes the files out of staging's index, deletes them, re-indexes, deletes their results and logs, and
deletes the journal. A run killed anywhere leaves the journal; the next run completes it first (touching
only files whose sha256 is the journal's: a build made meanwhile under the same name stays), then
plans again; it also drops the removed builds from ``build/excuses.json``'s stale list (the status page
reads it). `--dry-run` prints the plan and writes nothing (it takes no lock).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conda_distro.channels import ChannelFile, crash_point
from conda_distro.channels.depends import parse_dep, satisfies, subdir_compatible
from conda_distro.channels.local import LocalChannel
from conda_distro.config import DistroRepo
from conda_distro.distribution import open_distro
from conda_distro.errors import ExitCode, UsageError
from conda_distro.gate.excuses import EXCUSES_FILE, read_excuses, write_excuses
from conda_distro.gate.holds import HoldClass
from conda_distro.gate.promote import PlanInputs, PromotionContext, PromotionPlan
from conda_distro.gate.staleness import in_main
from conda_distro.state.document import StateDocument, first_problem
from conda_distro.state.locks import DEFAULT_LOCK_TIMEOUT, Deadline, repository_lock, staging_folder, staging_lock
from conda_distro.state.results import ArtifactResults, ResultsStore
from conda_distro.util.fsutil import check_writable
from conda_distro.util.jsonio import read_json
from conda_distro.util.progress import NULL_SINK, ProgressSink, TaskFinish, TaskProgress, TaskStart, TaskStep, log_lines
from conda_distro.util.safetext import shown

JOURNAL = "prune.journal.json"  # under build/
_JOURNAL_HINT = "delete it: the next `conda-distro prune` plans again from staging as it is"


@dataclass(frozen=True)
class PruneOptions:
    root: Path | None = None
    dry_run: bool = False
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    progress: ProgressSink = NULL_SINK  # where prune reports (task ``prune``; channel lines as log events)


@dataclass(frozen=True)
class PruneItem:
    artifact: str
    reason: str  # removed: superseded | reverted | not-from-this-checkout | retired | orphan-results;
    #              kept: in-main | candidate | untested | needed
    detail: str = ""
    hold: str | None = None  # kept candidates: the gate's hold reason (None: it would be promoted)
    hold_class: str | None = None  # kept candidates: the hold's class (conda_distro.gate.holds.HoldClass)
    advice: str | None = None  # kept candidates: what to do about the hold

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"artifact": self.artifact, "reason": self.reason, "detail": self.detail}
        if self.reason == "candidate":
            out.update({"hold": self.hold, "class": self.hold_class, "advice": self.advice})
        return out


@dataclass
class PrunePlan:
    staging: str
    remove: list[ChannelFile] = field(default_factory=list)  # staging files to delete
    removed: list[PruneItem] = field(default_factory=list)  # why, per file (and per orphan results)
    kept: list[PruneItem] = field(default_factory=list)
    results: list[str] = field(default_factory=list)  # artifacts whose results (and logs) go


@dataclass
class PruneResult:
    plan: PrunePlan
    dry_run: bool
    completed: list[str] = field(default_factory=list)  # artifacts an interrupted run's journal still named
    logs_removed: int = 0

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        return {"ok": True, "dry_run": self.dry_run, "staging": self.plan.staging,
                "removed": [i.to_dict() for i in self.plan.removed], "kept": [i.to_dict() for i in self.plan.kept],
                "completed": list(self.completed), "logs_removed": self.logs_removed}

    def text_lines(self) -> list[str]:
        verb = "remove" if self.dry_run else "removed"
        lines = [f"staging {self.plan.staging}"]
        if self.completed:
            lines.append(f"  completed an interrupted prune: {', '.join(self.completed)}")
        lines += [f"  {verb:8} {i.artifact}  {i.reason}: {shown(i.detail, 'text', width=600)}" for i in self.plan.removed]
        for i in self.plan.kept:  # (a hold's detail may quote a failing test: text from recipe code)
            lines.append(f"  kept     {i.artifact}  {i.reason}: {shown(i.detail, 'text', width=600)}")
            if i.advice and i.hold_class not in (None, HoldClass.DONE.value):
                lines.append(f"           what to do: {i.advice}")
        files = sum(i.reason != "orphan-results" for i in self.plan.removed)
        lines.append(f"{files} build(s) {'to remove' if self.dry_run else 'removed'}, "
                     f"{len(self.plan.results)} results file(s), {len(self.plan.kept)} kept"
                     + ("" if self.dry_run else f", {self.logs_removed} log(s) deleted"))
        if self.dry_run:
            lines.append("dry run: nothing was changed")
        return lines


# ---------------------------------------------------------------------------------------------
# the plan (pure)


def _needed(live: list[ChannelFile], main: Mapping[str, ChannelFile], stale: Mapping[str, ChannelFile],
            names: set[str]) -> dict[str, str]:
    """stale artifact -> the kept build that needs it: a distribution dependency of a kept build that no
    file of main nor another kept build meets, and this stale one does."""
    providers = [*main.values(), *live]
    out: dict[str, str] = {}
    for f in live:
        for text in f.depends:
            dep = parse_dep(text)
            if dep is None or dep.name not in names or dep.name == f.name:
                continue
            if any(satisfies(dep, p) and subdir_compatible(f, p) for p in providers):
                continue
            for s in stale.values():
                if satisfies(dep, s) and subdir_compatible(f, s):
                    out.setdefault(s.artifact, f"{f.filename} needs '{text}' and no other build meets it")
    return out


def plan_prune(inputs: PlanInputs, gate: PromotionPlan, staging_ref: str = "staging") -> PrunePlan:
    """What prune removes and keeps, from the gate's inputs and plan (the same classification)."""
    plan = PrunePlan(staging_ref)
    held = {h.artifact: h for h in gate.held}
    promoted = {f.artifact for f in gate.promote}
    stale = {a: inputs.staging[a] for a in inputs.stale if a in inputs.staging}
    live = [f for a, f in sorted(inputs.staging.items()) if a not in stale and not in_main(f, inputs.main)]
    names = {f.name for f in (*inputs.staging.values(), *inputs.main.values())}
    needed = _needed(live, inputs.main, stale, names)
    for art, f in sorted(inputs.staging.items()):
        if in_main(f, inputs.main):
            plan.kept.append(PruneItem(art, "in-main", "in main (builds and tests read it from staging)"))
        elif art in needed:
            plan.kept.append(PruneItem(art, "needed", needed[art]))
        elif art in stale:
            s = inputs.stale[art]
            plan.remove.append(f)
            plan.removed.append(PruneItem(art, s.reason.value, s.detail))
            if art in inputs.results:
                plan.results.append(art)
        elif art in promoted:
            plan.kept.append(PruneItem(art, "candidate", "`conda-distro promote` takes it"))
        elif art in held:
            h = held[art]
            plan.kept.append(PruneItem(art, "candidate", h.detail, h.reason.value, h.hold_class.value, h.what_to_do))
        else:
            plan.kept.append(PruneItem(art, "untested", f"no test results yet: `conda-distro build {f.name}` tests it"))
    for art in sorted(set(inputs.results) - set(inputs.staging) - set(inputs.main)):
        plan.results.append(art)
        plan.removed.append(PruneItem(art, "orphan-results", "results (and logs) of a file in neither staging nor main"))
    return plan


# ---------------------------------------------------------------------------------------------
# execution


class PruneJournal(StateDocument):
    """``build/prune.journal.json``: the staging files, results and logs a run is removing."""

    DOCUMENT = "prune journal"

    files: list[dict[str, Any]]  # each a ChannelFile's fields
    results: dict[str, str | None]  # artifact -> the sha256 its results are for (None: any)
    logs: list[str]

    def to_text(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=1) + "\n"


@dataclass(frozen=True)
class _Journal:
    """What a run is removing, written before anything changes (kill -9: the next run completes it)."""

    path: Path
    files: list[ChannelFile]
    results: dict[str, str | None]  # artifact -> the sha256 its results are for (None: any)
    logs: list[str]

    def write(self) -> None:
        PruneJournal(files=[dataclasses.asdict(f) for f in self.files], results=self.results, logs=self.logs).write(self.path)

    @classmethod
    def read(cls, path: Path) -> _Journal | None:
        try:
            data = read_json(path, "prune", error=UsageError, hint=_JOURNAL_HINT)
        except FileNotFoundError:
            return None
        PruneJournal.check_version(data, path, error=UsageError, hint=_JOURNAL_HINT)
        try:
            doc = PruneJournal.model_validate(data)
            files = [ChannelFile(**{**d, "depends": tuple(d.get("depends") or ()),
                                    "track_features": tuple(d.get("track_features") or ())}) for d in doc.files]
            results, logs = dict(doc.results), list(doc.logs)
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"the prune journal is not of the shape prune writes ({first_problem(exc)})", path=path,
                             hint=_JOURNAL_HINT) from None
        return cls(path, files, results, logs)


def _log_file(log: str, root: Path, build_dir: Path) -> Path | None:
    """A recorded log path, when it is a regular file under ``build/logs/`` reached without a symbolic link
    (a results file can name any path: prune deletes only logs)."""
    try:
        src = Path(log) if Path(log).is_absolute() else root / log
        if src.is_symlink() or not src.is_file():
            return None
        real, logs = src.resolve(), (build_dir / "logs").resolve()
    except (OSError, ValueError):
        return None
    return real if real.is_relative_to(logs) else None


def _logs_of(results: Mapping[str, ArtifactResults], gone: list[str], root: Path, build_dir: Path) -> list[str]:
    """Logs of the results that go, that no kept result names."""
    keep = {t.log for a, r in results.items() if a not in gone for t in r.tests if t.log}
    found = {t.log for a in gone if (r := results.get(a)) is not None for t in r.tests if t.log and t.log not in keep}
    return sorted(str(p) for log in found if (p := _log_file(log, root, build_dir)) is not None)


def _carry_out(journal: _Journal, channel: LocalChannel, store: ResultsStore, progress: ProgressSink) -> int:
    """Remove what the journal names (each step idempotent), then the journal. Returns the logs deleted."""
    say = log_lines(progress)
    steps = len(PRUNE_STEPS)
    progress.on_start(TaskStart(PRUNE_TASK, steps, f"removing {len(journal.files)} build(s), {len(journal.results)} "
                                                   f"result(s) and {len(journal.logs)} log(s)"))
    progress.on_step(TaskStep(PRUNE_TASK, PRUNE_STEPS[0]))
    gone = channel.remove(journal.files, say)
    progress.on_progress(TaskProgress(PRUNE_TASK, 1, steps, step=PRUNE_STEPS[0]))
    crash_point("prune-after-files")
    progress.on_step(TaskStep(PRUNE_TASK, PRUNE_STEPS[1]))
    for art, sha in journal.results.items():
        path = store.path_of(art)
        try:
            res = store.get(art)
        except Exception:  # noqa: BLE001 - a corrupt results file of a file prune removes: it goes too
            res = None
        if res is None or sha is None or res.sha256 == sha:
            path.unlink(missing_ok=True)
    progress.on_progress(TaskProgress(PRUNE_TASK, 2, steps, step=PRUNE_STEPS[1]))
    crash_point("prune-after-results")
    progress.on_step(TaskStep(PRUNE_TASK, PRUNE_STEPS[2]))
    deleted = 0
    for log in journal.logs:
        p = Path(log)
        if p.is_file() and not p.is_symlink():
            p.unlink()
            deleted += 1
    journal.path.unlink(missing_ok=True)
    progress.on_progress(TaskProgress(PRUNE_TASK, 3, steps, step=PRUNE_STEPS[2]))
    progress.on_finish(TaskFinish(PRUNE_TASK))
    if gone:
        say(f"removed {len(gone)} build(s) from {channel.describe()}")
    return deleted


PRUNE_TASK = "prune"
#: the steps of a prune, as its progress names them
PRUNE_STEPS = ("removing builds", "removing results", "removing logs")


def _context(distro: DistroRepo) -> PromotionContext:
    """The gate's context on the local staging folder (for an anaconda.org staging label: the local builds
    under build/channels/staging, which is what builds write and the staging lock guards)."""
    ctx = PromotionContext.open(distro)
    return dataclasses.replace(ctx, staging=LocalChannel(staging_folder(distro), subdirs=distro.subdirs))


def _plan(ctx: PromotionContext) -> tuple[PrunePlan, PlanInputs]:
    inputs = dataclasses.replace(ctx.gather(), installability=None)  # what stays is judged, not solved
    return plan_prune(inputs, ctx.plan(inputs), ctx.staging.ref), inputs


def prune(options: PruneOptions) -> PruneResult:
    distro = open_distro(options.root)
    ctx = _context(distro)
    journal_path = distro.build_dir / JOURNAL
    pending = _Journal.read(journal_path)  # bad input is an error before anything is written
    if options.dry_run:
        plan, _ = _plan(ctx)
        return PruneResult(plan, dry_run=True, completed=[f.artifact for f in pending.files] if pending else [])
    _plan(ctx)  # every input read and validated before a lock file is written
    check_writable(journal_path, folder=False, error=UsageError, hint="fix the build folder's permissions")
    budget = Deadline(options.lock_timeout)
    folder = staging_folder(distro)
    with repository_lock(distro.build_dir, distro.root, budget, shared=True), staging_lock(folder, budget):
        crash_point("prune-locked")
        channel = LocalChannel(folder, subdirs=distro.subdirs)
        store = ResultsStore(distro.build_dir / "results")
        completed: list[str] = []
        logs = 0
        if pending is not None:
            log_lines(options.progress)(f"completing an interrupted prune ({len(pending.files)} build(s))")
            logs += _carry_out(pending, channel, store, options.progress)
            completed = [f.artifact for f in pending.files]
        ctx = _context(open_distro(distro.root))
        plan, inputs = _plan(ctx)
        if plan.remove or plan.results:
            journal = _Journal(journal_path, plan.remove, {a: (r.sha256 if (r := inputs.results.get(a)) else None)
                                                           for a in plan.results},
                               _logs_of(inputs.results, plan.results, distro.root, distro.build_dir))
            journal.write()
            crash_point("prune-after-journal")
            logs += _carry_out(journal, channel, store, options.progress)
        _forget_in_excuses(distro.build_dir, {f.artifact for f in plan.remove} | set(completed))
    return PruneResult(plan, dry_run=False, completed=completed, logs_removed=logs)


def _forget_in_excuses(build_dir: Path, removed: set[str]) -> None:
    """build/excuses.json (written by promote, read by the status page) no longer lists removed builds as stale."""
    excuses = read_excuses(build_dir) if removed else None
    if excuses is not None and any(b.artifact in removed for b in excuses.stale):
        write_excuses(build_dir / EXCUSES_FILE,
                      excuses.model_copy(update={"stale": [b for b in excuses.stale if b.artifact not in removed]}))


__all__ = ["PruneItem", "PruneOptions", "PrunePlan", "PruneResult", "plan_prune", "prune"]
