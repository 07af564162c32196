"""The sweep's types: its options, the plan (one :class:`Decision` per package), the result, and the
one schema of the document it keeps in ``build/sweep/pytorch-VER.json`` (:class:`SweepDocument`: the
sweep writes it, ``sweep --format json`` prints it, `report unmaintained` and a later
``sweep --commit`` read it back)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from conda_distro.locks import DEFAULT_LOCK_TIMEOUT, Deadline
from conda_distro.safetext import shown
from conda_distro.templating import render

STATUSES = ("unchanged", "bumped", "needs-new-version", "failed", "awaiting-parents", "awaiting-upstream", "not-solvable",
            "unreadable")
FAILURES = ("failed", "not-solvable", "unreadable")  # statuses that make the report's `ok` false
#: their dependents wait (``awaiting-upstream``: no test of the release could run, upstream lacks a build it needs)
BLOCKING = ("failed", "not-solvable", "needs-new-version", "awaiting-parents", "awaiting-upstream", "unreadable")


@dataclass(frozen=True)
class SweepOptions:
    release: str
    commit: bool = False
    dry_run: bool = False
    build: bool = True
    jobs: int = 1
    author: str = "conda-distro bot <bot@conda-distro.invalid>"
    sandbox: bool = True  # False: --no-sandbox
    lock_timeout: float | Deadline = DEFAULT_LOCK_TIMEOUT  # seconds to wait for the repository's and staging's locks
    root: Path | None = None  # the distribution's folder (None: found from the current one)


@dataclass(frozen=True)
class PinEdit:
    old: str  # the requirement text as written (rendered)
    new: str
    line: int
    error: str | None = None  # why the spec cannot be widened (then ``new == old``)


@dataclass
class Decision:
    name: str
    status: str
    maintainers: list[str]
    old_pin: str | None = None
    new_pin: str | None = None
    edits: list[PinEdit] = field(default_factory=list)
    old_build: int | None = None
    new_build: int | None = None
    reason: str | None = None
    log: str | None = None  # failing log excerpt
    tests: list[ReleaseTest] = field(default_factory=list)  # its tests of the new release
    depends_on_pytorch: bool = True  # itself (False: only through distribution packages)

    @property
    def applied(self) -> bool:
        """Is the edit in the working tree after the sweep (only bumped packages keep theirs)?"""
        return self.status == "bumped"


@dataclass
class SweepPlan:
    release: str
    decisions: list[Decision]
    noop: bool = False  # the release is already supported
    dry_run: bool = False  # only planned: nothing is edited, so nothing is applied

    def get(self, name: str) -> Decision:
        return next(d for d in self.decisions if d.name == name)


# ---------------------------------------------------------------------------------------------
# the document on disk (and `sweep --format json`)


class _Doc(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ReleaseTest(_Doc):
    """One test of a package against the swept release (one variant)."""

    pytorch: str
    variant: str
    status: str
    reason: str | None = None


class SweepCommit(_Doc):
    """One commit of ``sweep --commit``: the package it bumps (None: the distro.yaml commit), and the first
    line of its message."""

    package: str | None
    sha: str
    message: str


class PackageEntry(_Doc):
    """One package of the sweep document (a :class:`Decision`)."""

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

    @field_serializer("tests")
    def _tests(self, tests: list[ReleaseTest]) -> list[dict[str, Any]]:
        return [t.model_dump(mode="json", exclude_none=True) for t in tests]  # (no "reason": null)

    @classmethod
    def of(cls, dec: Decision, dry_run: bool) -> PackageEntry:
        return cls(name=dec.name, status=dec.status, old_pin=dec.old_pin, new_pin=dec.new_pin,
                   maintainers=list(dec.maintainers), old_build=dec.old_build, new_build=dec.new_build,
                   applied=dec.applied and not dry_run, pytorch_dependency="direct" if dec.depends_on_pytorch else "indirect",
                   reason=dec.reason, log=dec.log, tests=list(dec.tests))

    def decision(self) -> Decision:
        return Decision(self.name, self.status, list(self.maintainers), old_pin=self.old_pin, new_pin=self.new_pin,
                        old_build=self.old_build, new_build=self.new_build, reason=self.reason, log=self.log,
                        tests=list(self.tests), depends_on_pytorch=self.pytorch_dependency == "direct")


class SweepDocument(_Doc):
    """``build/sweep/pytorch-VER.json``: written from a :class:`SweepResult`, read back by the sweep
    itself and by `report unmaintained` (which needs only ``release`` and the packages' statuses)."""

    release: str
    noop: bool = False
    dry_run: bool = False
    packages: list[PackageEntry] = Field(default_factory=list)
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

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=1) + "\n"

    def result(self) -> SweepResult:
        """The result this document was written from (minus the edits: they are in the recipes)."""
        plan = SweepPlan(self.release, [p.decision() for p in self.packages], noop=self.noop)
        return SweepResult(plan, branch=self.branch, commits=list(self.commits), pr_bodies=dict(self.pull_requests),
                           tracking_issue=self.tracking_issue, report_file=self.report_file, start=self.start)


@dataclass
class SweepResult:
    plan: SweepPlan
    branch: str | None = None
    commits: list[SweepCommit] = field(default_factory=list)
    pr_bodies: dict[str, dict] = field(default_factory=dict)
    tracking_issue: str | None = None
    message: str | None = None
    report_file: str | None = None  # build/sweep/pytorch-VER.json, this document
    start: str | None = None  # --commit: the branch (or commit) checked out again after making the sweep's branches

    @property
    def ok(self) -> bool:
        return not any(d.status in FAILURES for d in self.plan.decisions)

    @property
    def exit_code(self) -> int:
        return 0  # spec §7: the sweep ran; failures are statuses in the report, not an error

    @property
    def summary(self) -> dict[str, int]:
        """How many packages ended in each status (only statuses that occur, in STATUSES order)."""
        counts = {st: sum(d.status == st for d in self.plan.decisions) for st in STATUSES}
        return {st: n for st, n in counts.items() if n}

    @property
    def next_steps(self) -> list[str]:
        """What to do after this sweep, in order."""
        plan, release = self.plan, self.plan.release
        if plan.noop and not self.branch:
            return []
        steps = []
        statuses = {d.status for d in plan.decisions}
        if plan.dry_run:
            steps.append(f"run `conda-distro sweep --pytorch {release}` to edit, build and test (add --commit for the branches)")
        elif self.branch:
            branches = [pr["branch"] for pr in self.pr_bodies.values() if pr.get("branch")]
            if branches:
                steps.append(f"push the {len(branches)} package branch(es) (sweep/pytorch-{release}-NAME) and open one "
                             "pull request each with its body from the report (the release-sweep workflow does this)")
            else:
                steps.append(f"push {self.branch} and open a pull request (only distro.yaml changed)")
            if self.start:
                steps.append(f"you are back on {self.start}; the sweep's edits are on the branches")
        elif "bumped" in statuses:
            steps.append(f"review the edits (git diff), then `conda-distro sweep --pytorch {release} --commit` "
                         "commits them on the sweep branches")
        if statuses & {"failed", "not-solvable", "needs-new-version"}:
            steps.append("open the tracking issue (its body is in the report): it pings the maintainers of failed and "
                         "needs-new-version packages")
        if "awaiting-parents" in statuses:
            steps.append("sweep again once the packages they wait for pass")
        return steps

    def document(self) -> SweepDocument:
        plan = self.plan
        return SweepDocument(release=plan.release, noop=plan.noop, dry_run=plan.dry_run,
                             packages=[PackageEntry.of(d, plan.dry_run) for d in plan.decisions], ok=self.ok,
                             summary=self.summary, next_steps=self.next_steps, branch=self.branch, start=self.start,
                             commits=self.commits, pull_requests=self.pr_bodies, tracking_issue=self.tracking_issue,
                             message=self.message, report_file=self.report_file)

    def to_dict(self) -> dict:
        return self.document().model_dump(mode="json")

    def text_lines(self) -> list[str]:
        """What ``sweep`` prints: the message, one line per package, the branches, the summary, the next steps."""
        lines = [self.message] if self.message else []
        for d in self.plan.decisions:
            pin = f"{d.old_pin} -> {d.new_pin}" if d.old_pin != d.new_pin else (d.old_pin or "")
            if d.old_pin != d.new_pin and not d.applied:
                pin += " (reverted)"
            lines.append(f"  {d.status:18} {d.name:24} {pin}" + (f"  ({shown(d.reason, 'text')})" if d.reason else ""))
        if self.branch:
            lines.append(f"branch {self.branch}: {len(self.commits)} commit(s)")
            lines += [f"  {pr['branch']}  ({name})" for name, pr in self.pr_bodies.items() if pr.get("branch")]
            if self.start:
                lines.append(f"back on {self.start} (the sweep's edits are on the branches)")
        if self.summary:
            lines.append(("planned: " if self.plan.dry_run else "summary: ")
                         + ", ".join(f"{n} {st}" for st, n in self.summary.items()))
        lines += [f"next: {step}" for step in self.next_steps]
        return lines

    def markdown(self) -> str:
        """The tracking issue (or the message), then each pull request's body: ``--format markdown``."""
        return render("sweep.md.j2", result=self)
