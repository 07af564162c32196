"""The sweep's types: its options, the plan (one :class:`Decision` per package), the result, and the
one schema of the document it keeps in ``build/sweep/pytorch-VER.json`` (:class:`SweepDocument`: the
sweep writes it, ``sweep --format json`` prints it, `report unmaintained`, ``sweep report`` and a later
``sweep --commit`` read it back).

A sweep runs in one of two modes: ``release-day`` (a release distro.yaml does not list yet: it is added
and every pin that leaves it out is widened where tests allow) and ``admission`` (a release distro.yaml
lists already: only the packages whose pins still leave it out, fixed since, are admitted). The release's
state (:data:`RELEASE_STATES`) says which commands apply; every result names the next one."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, field_serializer

from conda_distro.engine.gpu import variant_label
from conda_distro.state.document import StateDocument, StrictModel
from conda_distro.state.locks import DEFAULT_LOCK_TIMEOUT, Deadline
from conda_distro.util.progress import ProgressSink
from conda_distro.util.safetext import shown
from conda_distro.util.templating import render
from conda_distro.vocab import SweepStatus

STATUSES = tuple(SweepStatus)  # in the report's order
FAILURES = tuple(s for s in SweepStatus if s.is_failure)  # statuses that make the report's `ok` false
BLOCKING = tuple(s for s in SweepStatus if s.is_blocking)  # their dependents wait
MODES = ("release-day", "admission")
WIDEN, NEW_BUILD, TEST = "widen the pins", "build for the new minor", "test the existing builds"
ACTIONS = (WIDEN, NEW_BUILD, TEST)
#: where a release stands, from the repository (see :mod:`conda_distro.sweep.state`)
RELEASE_STATES = ("not-swept", "interrupted", "uncommitted", "committed", "supported")


@dataclass(frozen=True)
class SweepOptions:
    release: str
    commit: bool = False
    dry_run: bool = False
    build: bool = True
    jobs: int | None = 1  # None: what the machine holds
    author: str = "conda-distro bot <bot@conda-distro.invalid>"
    sandbox: bool = True  # False: --no-sandbox
    lock_timeout: float | Deadline = DEFAULT_LOCK_TIMEOUT  # seconds to wait for the repository's and staging's locks
    progress: ProgressSink | None = None  # where the sweep's builds report progress (the CLI's sink; None: nowhere)
    root: Path | None = None  # the distribution's folder (None: found from the current one)
    package: str | None = None  # --package: admit this one package (a release distro.yaml lists already)
    # how the edited distribution is built and tested (None: `run_build` on this machine); the fan-out over CI
    # runners passes its own (conda_distro.fanout.sweep: plan the shards, build one shard, merge the bundles)
    execute: Callable[..., Any] | None = None


@dataclass(frozen=True)
class Waiting:
    """A package whose pins still leave the release out, and what it waits for: ``ready`` (nothing: the
    sweep admits it), ``needs-fix`` (it failed against the release and its recipe is unchanged since),
    ``awaiting-parents`` (a dependency leaves the release out), ``needs-new-version`` (lockstep),
    ``awaiting-merge`` (a sweep admitted it on its branch sweep/pytorch-VER-NAME: its pull request waits)."""

    name: str
    status: str
    reason: str
    maintainers: tuple[str, ...] = ()
    waits_for: tuple[str, ...] = ()
    command: str | None = None  # what admits it once its reason is gone

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "reason": self.reason, "maintainers": list(self.maintainers),
                "waits_for": list(self.waits_for), "command": self.command}

    @classmethod
    def of(cls, data: dict[str, Any]) -> Waiting:
        return cls(str(data.get("name", "")), str(data.get("status", "")), str(data.get("reason", "")),
                   tuple(data.get("maintainers") or ()), tuple(data.get("waits_for") or ()), data.get("command"))


@dataclass(frozen=True)
class PinEdit:
    old: str  # the requirement text as written (rendered)
    new: str
    line: int
    error: str | None = None  # why the spec cannot be widened (then ``new == old``)


#: a package's planned status (:func:`~conda_distro.sweep.plan.decide`); execution turns it into the outcome's
#: status (``failed``, ``not-solvable``, ``awaiting-parents``, ``awaiting-upstream``); every one is in STATUSES
PLANNED = ("unchanged", "bumped", "needs-new-version", "awaiting-parents", "unreadable")


@dataclass(frozen=True)
class Decision:
    """What the plan does to one package (pure data, frozen: execution never writes into it; what happened
    is its :class:`Outcome`)."""

    name: str
    status: str  # planned (PLANNED)
    maintainers: tuple[str, ...]
    old_pin: str | None = None
    new_pin: str | None = None
    edits: tuple[PinEdit, ...] = ()
    old_build: int | None = None
    new_build: int | None = None
    reason: str | None = None
    depends_on_pytorch: bool = True  # itself (False: only through distribution packages)
    recipe_hash: str | None = None  # the recipe folder's input hash (a late admission plans with it)
    #: what the release needs of it (:data:`ACTIONS`): its pins widened (noarch and pinned packages), new
    #: builds for the new minor (compiled: one build per minor follows the pytorch variant key), or a test
    #: of its existing builds; "" when it needs nothing
    action: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "maintainers", tuple(self.maintainers))
        object.__setattr__(self, "edits", tuple(self.edits))


@dataclass(frozen=True)
class Outcome:
    """What the sweep did to one planned package: its status (STATUSES) and why, its tests of the release,
    the failing log excerpt. Made from its :class:`Decision` (:meth:`planned`) and replaced, never edited,
    by each phase that learns more. It reads like the decision for everything the plan decided."""

    decision: Decision
    status: str
    reason: str | None = None
    log: str | None = None  # failing log excerpt
    tests: list[ReleaseTest] = field(default_factory=list)  # its tests of the new release
    recipe_hash: str | None = None  # the recipe folder's input hash before the sweep (a failure is retried once it changes)

    @classmethod
    def planned(cls, dec: Decision) -> Outcome:
        return cls(dec, dec.status, dec.reason, recipe_hash=dec.recipe_hash)

    def but(self, status: str, reason: str | None, **more: Any) -> Outcome:
        """This outcome with another status and reason (and ``log``, ``tests``, ``recipe_hash``)."""
        return dataclasses.replace(self, status=status, reason=reason, **more)

    @property
    def name(self) -> str:
        return self.decision.name

    @property
    def maintainers(self) -> tuple[str, ...]:
        return self.decision.maintainers

    @property
    def old_pin(self) -> str | None:
        return self.decision.old_pin

    @property
    def new_pin(self) -> str | None:
        return self.decision.new_pin

    @property
    def old_build(self) -> int | None:
        return self.decision.old_build

    @property
    def new_build(self) -> int | None:
        return self.decision.new_build

    @property
    def depends_on_pytorch(self) -> bool:
        return self.decision.depends_on_pytorch

    @property
    def action(self) -> str:
        return self.decision.action

    @property
    def applied(self) -> bool:
        """Is the edit in the working tree after the sweep (only bumped packages keep theirs)?"""
        return self.status == "bumped"


def planned_outcomes(plan: SweepPlan) -> dict[str, Outcome]:
    """Every planned package's outcome before anything ran, by name, in the plan's (dependency) order."""
    return {d.name: Outcome.planned(d) for d in plan.decisions}


@dataclass(frozen=True)
class SweepPlan:
    """The sweep's plan: pure data, frozen (``--dry-run`` prints it); a run's statuses are its outcomes."""

    release: str
    decisions: tuple[Decision, ...]
    noop: bool = False  # the release is already supported
    dry_run: bool = False  # only planned: nothing is edited, so nothing is applied
    mode: str = "release-day"  # or "admission": the release is listed already; only lagging packages are swept
    waiting: tuple[Waiting, ...] = ()  # packages whose pins still leave the release out

    def __post_init__(self) -> None:
        object.__setattr__(self, "decisions", tuple(self.decisions))
        object.__setattr__(self, "waiting", tuple(self.waiting))

    def get(self, name: str) -> Decision:
        return next(d for d in self.decisions if d.name == name)


# ---------------------------------------------------------------------------------------------
# the document on disk (and `sweep --format json`)


class ReleaseTest(StrictModel):
    """One test of a package against the swept release (one variant)."""

    pytorch: str
    variant: str
    status: str
    reason: str | None = None
    gpu: bool | None = None  # cuda: whether the test ran on a machine with a working GPU (None: cpu, or unknown)

    @property
    def label(self) -> str:
        """The variant as people read it: ``cuda (no GPU)`` for a cuda test run without a GPU."""
        return variant_label(self.variant, self.gpu)


class SweepCommit(StrictModel):
    """One commit of ``sweep --commit``: the package it bumps (None: the distro.yaml commit), and the first
    line of its message."""

    package: str | None
    sha: str
    message: str


class PackageEntry(StrictModel):
    """One package of the sweep document (an :class:`Outcome`)."""

    name: str
    status: str
    old_pin: str | None = None
    new_pin: str | None = None
    maintainers: list[str] = Field(default_factory=list)
    old_build: int | None = None
    new_build: int | None = None
    applied: bool = False
    pytorch_dependency: str = "direct"  # or "indirect": only through distribution packages
    reason: str | None = None
    log: str | None = None
    tests: list[ReleaseTest] = Field(default_factory=list)
    recipe_hash: str | None = None
    action: str = ""  # widen the pins | build for the new minor | test the existing builds | "" (nothing)

    @field_serializer("tests")
    def _tests(self, tests: list[ReleaseTest]) -> list[dict[str, Any]]:
        return [t.model_dump(mode="json", exclude_none=True) for t in tests]  # (no "reason": null)

    @classmethod
    def of(cls, out: Outcome, dry_run: bool) -> PackageEntry:
        return cls(name=out.name, status=out.status, old_pin=out.old_pin, new_pin=out.new_pin,
                   maintainers=list(out.maintainers), old_build=out.old_build, new_build=out.new_build,
                   applied=out.applied and not dry_run, pytorch_dependency="direct" if out.depends_on_pytorch else "indirect",
                   reason=out.reason, log=out.log, tests=list(out.tests), recipe_hash=out.recipe_hash,
                   action=out.action)

    def outcome(self) -> Outcome:
        """The outcome this entry was written from (its decision as read back: the edits are in the recipes)."""
        dec = Decision(self.name, self.status, tuple(self.maintainers), old_pin=self.old_pin, new_pin=self.new_pin,
                       old_build=self.old_build, new_build=self.new_build, reason=self.reason,
                       depends_on_pytorch=self.pytorch_dependency == "direct", recipe_hash=self.recipe_hash,
                       action=self.action)
        return Outcome(dec, self.status, self.reason, self.log, list(self.tests), self.recipe_hash)


class SweepDocument(StateDocument):
    """``build/sweep/pytorch-VER.json``: written from a :class:`SweepResult`, read back by the sweep
    itself and by `report unmaintained` (which needs only ``release`` and the packages' statuses)."""

    DOCUMENT = "sweep report"

    release: str
    mode: str = "release-day"
    state: str | None = None  # where the release stands after this run (RELEASE_STATES)
    noop: bool = False
    dry_run: bool = False
    packages: list[PackageEntry] = Field(default_factory=list)
    admitted: list[str] = Field(default_factory=list)  # packages whose pins now admit the release (this run)
    waiting: list[dict[str, Any]] = Field(default_factory=list)  # Waiting.to_dict(): pins still leave it out
    next_command: str | None = None  # the one conda-distro command to run next (None: a person acts first)
    ok: bool = True
    summary: dict[str, int] = Field(default_factory=dict)
    next_steps: list[str] = Field(default_factory=list)
    branch: str | None = None
    start: str | None = None
    commits: list[SweepCommit] = Field(default_factory=list)
    pull_requests: dict[str, dict[str, Any]] = Field(default_factory=dict)
    tracking_issue: str | None = None
    message: str | None = None
    report_file: str | None = None
    admissions: list[dict[str, Any]] = Field(default_factory=list)  # later runs that admitted packages (saved file)

    def to_text(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=1) + "\n"

    def to_json(self) -> str:
        """The file's text (:meth:`write` writes it)."""
        return self.stamped().to_text()

    def result(self) -> SweepResult:
        """The result this document was written from (minus the edits: they are in the recipes)."""
        outcomes = [p.outcome() for p in self.packages]
        plan = SweepPlan(self.release, tuple(o.decision for o in outcomes), noop=self.noop, mode=self.mode,
                         waiting=tuple(Waiting.of(w) for w in self.waiting))
        return SweepResult(plan, outcomes, branch=self.branch, commits=list(self.commits), pr_bodies=dict(self.pull_requests),
                           tracking_issue=self.tracking_issue, report_file=self.report_file, start=self.start,
                           state=self.state, admissions=list(self.admissions))


def command(release: str, *extra: str) -> str:
    """A sweep command line, as the advice names it."""
    return " ".join(("conda-distro sweep", *(("report",) if "report" in extra else ()), "--pytorch", release,
                     *(e for e in extra if e != "report")))


@dataclass
class SweepResult:
    """A sweep's result: its frozen plan and one :class:`Outcome` per planned package, in the plan's order
    (none given: each as planned, nothing ran)."""

    plan: SweepPlan
    outcomes: list[Outcome] = field(default_factory=list)
    branch: str | None = None
    commits: list[SweepCommit] = field(default_factory=list)
    pr_bodies: dict[str, dict] = field(default_factory=dict)
    tracking_issue: str | None = None
    message: str | None = None
    report_file: str | None = None  # build/sweep/pytorch-VER.json, this document
    start: str | None = None  # --commit: the branch (or commit) checked out again after making the sweep's branches
    state: str | None = None  # where the release stands after this run (RELEASE_STATES)
    admissions: list[dict] = field(default_factory=list)  # the saved report's later admissions
    replay: bool = False  # a saved report shown again (`sweep report`): its branches are not this run's

    def __post_init__(self) -> None:
        if not self.outcomes:
            self.outcomes = list(planned_outcomes(self.plan).values())

    @property
    def ok(self) -> bool:
        return not any(o.status in FAILURES for o in self.outcomes)

    @property
    def exit_code(self) -> int:
        return 0  # the sweep ran; failures are statuses in the report, not an error

    @property
    def summary(self) -> dict[str, int]:
        """How many packages ended in each status (only statuses that occur, in STATUSES order)."""
        counts = {st: sum(o.status == st for o in self.outcomes) for st in STATUSES}
        return {st: n for st, n in counts.items() if n}

    @property
    def admitted(self) -> list[str]:
        """The packages whose pins admit the release after this run (on its branches, or edited in the work
        tree): bumped ones, and on a release day the unchanged ones that depend on pytorch themselves."""
        if self.plan.dry_run or self.plan.noop:
            return []
        return [d.name for d in self.outcomes
                if d.status == "bumped" or (self.plan.mode == "release-day" and d.status == "unchanged"
                                            and d.depends_on_pytorch and not d.reason)]

    @property
    def next_command(self) -> str | None:
        """The one conda-distro command to run next; None when a person acts first (review and merge the
        pull requests, fix a package, publish a lockstep release)."""
        release, state = self.plan.release, self.state
        if self.plan.dry_run:
            return command(release)
        if state == "interrupted":
            return command(release, "--commit")
        if state == "uncommitted":
            return command(release, "--commit")
        if state == "not-swept":
            return command(release)
        if state == "supported" and any(w.status == "ready" for w in self.plan.waiting):
            ready = [w.name for w in self.plan.waiting if w.status == "ready"]
            return command(release, "--package", ready[0]) if len(ready) == 1 else command(release)
        return None

    @property
    def next_steps(self) -> list[str]:
        """What to do after this sweep, in order: every step a person can follow as written."""
        plan, release = self.plan, self.plan.release
        if plan.noop and not self.branch and not self.state:
            return []
        steps = []
        statuses = {o.status for o in self.outcomes}
        if plan.dry_run:
            steps.append(f"run `{command(release)}` to edit, build and test (add --commit for the branches)")
            return steps
        if self.state == "interrupted":
            steps.append(f"finish the interrupted sweep: `{command(release)}` (with --commit if it was started with it)")
            return steps
        branches = [pr["branch"] for pr in self.pr_bodies.values() if pr.get("branch")]
        if self.state == "committed" or (self.state == "supported" and branches and self.commits and not self.replay):
            if branches:
                steps.append(f"push the {len(branches)} package branch(es) (sweep/pytorch-{release}-NAME) and open one "
                             "pull request each with its body from the report (the release-sweep workflow does this)")
            elif self.branch:
                steps.append(f"push {self.branch} and open a pull request (only distro.yaml changed)")
            if self.start and not self.replay:
                steps.append(f"you are back on {self.start}; the sweep's edits are on the branches")
            steps.append(f"`{command(release, 'report')}` prints this report again (it changes nothing)")
        elif self.state == "uncommitted" and ("bumped" in statuses or plan.mode == "release-day"):
            steps.append(f"review the edits (git diff), then `{command(release, '--commit')}` commits them on the sweep "
                         "branches")
        elif self.state == "not-swept":
            steps.append(f"sweep it: `{command(release)}` (once the release is published upstream)")
        if statuses & {"failed", "not-solvable", "needs-new-version"}:
            steps.append("open the tracking issue (its body is in the report): it pings the maintainers of failed and "
                         "needs-new-version packages")
        waiting = {w.status: [x.name for x in plan.waiting if x.status == w.status] for w in plan.waiting}
        if "awaiting-parents" in statuses or "awaiting-parents" in waiting:
            steps.append(f"packages awaiting their parents are admitted with them: once the parents' fixes are merged, "
                         f"`{command(release)}` (on a checkout whose distro.yaml lists {release}) admits every package "
                         "fixed since")
        if "failed" in statuses or "needs-fix" in waiting:
            steps.append(f"once a failed package is fixed (its pins still leave {release} out; `conda-distro lint` warns), "
                         f"`{command(release, '--package', 'NAME')}` on a checkout whose distro.yaml lists {release} "
                         f"admits it (`{command(release)}` admits every package fixed since)")
        if "ready" in waiting:
            steps.append(f"ready to be admitted now: {', '.join(waiting['ready'])}: `{self.next_command}`")
        return steps

    def document(self) -> SweepDocument:
        plan = self.plan
        return SweepDocument(release=plan.release, mode=plan.mode, state=self.state, noop=plan.noop,
                             dry_run=plan.dry_run, packages=[PackageEntry.of(o, plan.dry_run) for o in self.outcomes],
                             admitted=self.admitted, waiting=[w.to_dict() for w in plan.waiting],
                             next_command=self.next_command, ok=self.ok, summary=self.summary,
                             next_steps=self.next_steps, branch=self.branch, start=self.start,
                             commits=self.commits, pull_requests=self.pr_bodies, tracking_issue=self.tracking_issue,
                             message=self.message, report_file=self.report_file, admissions=self.admissions)

    def to_dict(self) -> dict:
        return self.document().model_dump(mode="json")

    def text_lines(self) -> list[str]:
        """What ``sweep`` prints: the message, one line per package, the branches, the summary, what waits,
        the next steps."""
        lines = [self.message] if self.message else []
        for d in self.outcomes:
            pin = f"{d.old_pin} -> {d.new_pin}" if d.old_pin != d.new_pin else (d.old_pin or "")
            if d.old_pin != d.new_pin and not d.applied:
                pin += " (reverted)"
            lines.append(f"  {d.status:18} {d.name:24} {pin}" + (f"  ({shown(d.reason, 'text')})" if d.reason else "")
                         + (f"  [{d.action}]" if d.action else ""))
        if self.branch or (self.plan.mode == "admission" and self.commits):
            if self.branch:
                lines.append(f"branch {self.branch}: {len(self.commits)} commit(s)")
            lines += [f"  {pr['branch']}  ({name})" for name, pr in self.pr_bodies.items() if pr.get("branch")]
            if self.start and not self.replay:
                lines.append(f"back on {self.start} (the sweep's edits are on the branches)")
        if self.summary:
            lines.append(("planned: " if self.plan.dry_run else "summary: ")
                         + ", ".join(f"{n} {st}" for st, n in self.summary.items()))
        for w in self.plan.waiting:
            lines.append(f"  waiting: {w.status:18} {w.name:24} {shown(w.reason, 'text')}")
        lines += [f"next: {step}" for step in self.next_steps]
        return lines

    def markdown(self) -> str:
        """The tracking issue (or the message), then each pull request's body: ``--format markdown``."""
        return render("sweep.md.j2", result=self)
