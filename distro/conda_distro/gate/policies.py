"""The promotion gate's checks of one candidate, as policies (britney's shape): each an object with an
``id`` that returns a hold (:class:`~conda_distro.gate.holds.Held`) or nothing, and that declares the hint
actions it honours: ``lifted_by`` (a hint of that action lifts its hold: the candidate goes despite it,
e.g. ``force`` over its own tests) and ``reads`` (hints the check itself reads, e.g. ``block``/``unblock``).

:func:`judge` runs every policy of :data:`POLICIES` in order and keeps every hold (none hides a later
one), except that a build that is done (the same file is in main) or stale (never promotable) is settled
by that hold: it is no candidate, and nothing further is asked of it. A hold whose policy is lifted by a
hint of the candidate is set aside; the candidate is held by the rest, in order (the first is its
primary hold: the reason promote prints first and its exit code reads), or goes when none is left.
Adding a check: a class here and its place in :data:`POLICIES` (this file only).

The checks on the candidates together (a dependency promoted with it, its dependents' re-tests,
installability of main) run after these, round by round in :func:`conda_distro.gate.promote.plan_gate`;
:data:`SET_POLICIES` names them and the hints they honour.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from conda_distro.channels import ChannelFile
from conda_distro.gate.holds import Held, HoldClass, HoldReason
from conda_distro.gate.inputs import PlanInputs, TestMatrix, hint_for, hint_text, pairs_text
from conda_distro.gate.staleness import Stale
from conda_distro.state.ledger import Retirement
from conda_distro.state.owners import Owner
from conda_distro.state.results import NO_TESTS, ArtifactResults, TestRecord
from conda_distro.vocab import Target


@dataclass(frozen=True)
class Candidate:
    """One staging artifact with its results, and everything the gate knows (:class:`PlanInputs`)."""

    file: ChannelFile
    results: ArtifactResults
    inputs: PlanInputs


class Policy:
    """One check of one candidate. Subclasses set :attr:`id` and implement :meth:`check`."""

    id: ClassVar[str]
    #: hint actions (hints.yaml) that lift this policy's hold: the candidate goes despite it
    lifted_by: ClassVar[frozenset[str]] = frozenset()
    #: hint actions this policy reads itself
    reads: ClassVar[frozenset[str]] = frozenset()

    @property
    def honours(self) -> frozenset[str]:
        """Every hint action that bears on this check."""
        return self.lifted_by | self.reads

    def check(self, c: Candidate) -> Held | None:
        raise NotImplementedError


@dataclass(frozen=True)
class SetPolicy:
    """A check of the candidates together (run by :func:`conda_distro.gate.promote.plan_gate`)."""

    id: str
    lifted_by: frozenset[str] = frozenset()
    reads: frozenset[str] = frozenset()

    @property
    def honours(self) -> frozenset[str]:
        return self.lifted_by | self.reads


def _gate_main(f: ChannelFile, main: Mapping[str, ChannelFile]) -> Held | None:
    there = main.get(f.artifact)
    if there is None:
        return None
    if there.sha256 == f.sha256:
        return Held(f, HoldReason.ALREADY_IN_MAIN, "the same file (same sha256) is already in main")
    return Held(f, HoldReason.SHA256_MISMATCH,
                f"main already has {f.filename} with sha256 {there.sha256[:12]}…, staging has {f.sha256[:12]}…; "
                "files are never overwritten: bump the build number")


def _gate_stale(f: ChannelFile, stale: Mapping[str, Stale]) -> Held | None:
    s = stale.get(f.artifact)
    return Held(f, s.reason, s.detail) if s is not None else None


def _gate_retired(f: ChannelFile, retired: Mapping[str, Retirement]) -> Held | None:
    r = retired.get(f.artifact)
    return Held(f, HoldReason.RETIRED, f"retired {r.at:%Y-%m-%d} by {r.by}: {r.reason}") if r else None


def _gate_sealed(f: ChannelFile, res: ArtifactResults, on_disk: str | None = None) -> Held | None:
    if res.sha256 != f.sha256:
        return Held(f, HoldReason.NOT_TESTED, f"the test results are for another build of this file "
                                              f"(sha256 {res.sha256[:12]}…, staging has {f.sha256[:12]}…)")
    if on_disk is not None and on_disk != res.sha256:  # the sealed sha256, re-checked against the bytes
        return Held(f, HoldReason.NOT_TESTED, f"the test results are for another build of this file "
                                              f"(sha256 {res.sha256[:12]}…, the staging file on disk has {on_disk[:12]}…); "
                                              f"rebuild it with `conda-distro build {f.name}`")
    return None


def _short(h: str | None) -> str:
    return f"{h[:12]}…" if h else "none"


def _gate_provenance(f: ChannelFile, res: ArtifactResults, recipes: Mapping[str, str | None] | None) -> Held | None:
    """Only what the recipes of this checkout built and tested goes to main: the artifact's recipe input
    hash, and that of every recipe its tests saw (its own and its distribution dependencies'), must be
    this checkout's."""
    if recipes is None:
        return None
    rebuild = f"; build and test it from this checkout with `conda-distro build {f.name}`"
    if not res.recipe or not res.recipe_hash:
        return Held(f, HoldReason.NOT_FROM_THIS_CHECKOUT,
                    "its results record no recipe input hash (made before provenance was recorded)" + rebuild)
    here = recipes.get(res.recipe)
    at = f" at commit {res.commit[:12]}" if res.commit else ""
    if here is None:
        return Held(f, HoldReason.NOT_FROM_THIS_CHECKOUT,
                    f"built from {res.recipe}{at}, which this checkout does not have")
    if here != res.recipe_hash:
        return Held(f, HoldReason.NOT_FROM_THIS_CHECKOUT,
                    f"built from another version of {res.recipe}{at} (recipe input hash {_short(res.recipe_hash)}, "
                    f"this checkout's is {_short(here)})" + rebuild)
    other: dict[str, list[Target]] = defaultdict(list)
    for pair, t in sorted(res.latest().items()):
        differing = sorted(r for r, h in t.recipes.items() if recipes.get(r) != h) if t.recipes else ["(unrecorded)"]
        for r in differing:
            other[r].append(pair)
    if other:
        what = "; ".join(f"{r} against {pairs_text(p)}" for r, p in sorted(other.items()))
        return Held(f, HoldReason.TESTED_WITH_OTHER_RECIPES,
                    f"tested with other recipes than this checkout's: {what}" + rebuild.replace("build and test", "re-test"),
                    advice=f"`conda-distro build {f.name}` re-tests it with this checkout's recipes")
    return None


def _gate_owner(f: ChannelFile, res: ArtifactResults, owners: Mapping[str, Owner | None] | None) -> Held | None:
    """A name goes to main only from the recipe that owns it (conda_distro.state.owners): the recipe the
    results say the artifact was built from must be its owner."""
    if owners is None or f.name not in owners:
        return None  # no recipe of this checkout declares the name and nobody owns it: provenance decides
    owner = owners[f.name]
    built = res.recipe or "a recipe its results do not name"
    fix = "; the owner registry is package_owners.yaml and channel_state/ (docs/add-your-package.md, section \"Owned package names\")"
    if owner is None:
        return Held(f, HoldReason.NOT_OWNER, f"several recipes declare '{f.name}' and none owns it (this file was "
                                             f"built from {built})" + fix)
    if res.recipe != owner.path:
        return Held(f, HoldReason.NOT_OWNER, f"'{f.name}' belongs to {owner.describe()}; this file was built from "
                                             f"{built}" + fix, blocked_by=(owner.path,))
    return None


def _passing_evidence(t: TestRecord) -> bool:
    """Whether an own test's latest record is evidence the artifact works there: ``passed`` (one run, or
    every run passed), or ``flaky`` *with a passing run among its recorded attempts* (a flaky test never
    blocks, but an own test must have passed somewhere). Every other status holds in :func:`_gate_tests`:
    ``failed`` (test-failed), ``error`` (waiting), ``blocked`` and any status not named here (not-tested):
    fail closed, a status added to ``TestStatus`` holds until it is handled here."""
    if t.status == "passed":
        return t.attempts is None or "passed" in t.attempts
    if t.status == "flaky":
        return "passed" in (t.attempts or ())
    return False


def _gate_tests(f: ChannelFile, res: ArtifactResults, matrix: TestMatrix) -> Held | None:
    required = matrix.required(f)
    untestable = set(matrix.admitted(f) or ()) - set(required or ())  # upstream cannot serve them
    latest = {p: t for p, t in res.latest().items() if p not in untestable}
    failed = sorted(p for p, t in latest.items() if t.status == "failed")
    if failed:
        return Held(f, HoldReason.TEST_FAILED, f"failed against {pairs_text(failed)}",
                    regressions=tuple({"package": f.name, "pytorch": r, "variant": v, "log": latest[Target(r, v)].log,
                                       "reason": latest[Target(r, v)].reason} for r, v in failed))
    errors = sorted(p for p, t in latest.items() if t.status == "error")
    if errors:
        why = latest[errors[0]].reason
        return Held(f, HoldReason.WAITING, f"infrastructure error testing against {pairs_text(errors)}"
                    + (f" ({why})" if why else "") + "; run `conda-distro build --retry-errors`")
    blocked = sorted(p for p, t in latest.items() if t.status == "blocked")
    if blocked:
        return Held(f, HoldReason.NOT_TESTED, f"blocked (a dependency failed) against {pairs_text(blocked)}")
    unproven = sorted(p for p, t in latest.items() if not _passing_evidence(t))
    if unproven:
        what = ", ".join(sorted({latest[p].status for p in unproven}))
        return Held(f, HoldReason.NOT_TESTED, f"no passing run ({what}) against {pairs_text(unproven)}")
    missing = [p for p in required or () if p not in latest]
    if missing:
        return Held(f, HoldReason.NOT_TESTED, f"not tested against {pairs_text(missing)}")
    if not latest:
        why = "its pytorch pin admits no supported release" if required == [] else "no test results recorded"
        return Held(f, HoldReason.NOT_TESTED, why)
    return None


def _gate_hint_block(f: ChannelFile, inputs: PlanInputs) -> Held | None:
    block = hint_for(inputs, "block", f)
    if block is None or hint_for(inputs, "unblock", f) is not None:
        return None
    return Held(f, HoldReason.BLOCKED_BY_HINT, hint_text(block), blocked_by=(f"hint:{block.by}",))


class Staleness(Policy):
    """A build that can never be promoted from this checkout (:mod:`conda_distro.gate.staleness`)."""

    id = "stale"

    def check(self, c: Candidate) -> Held | None:
        return _gate_stale(c.file, c.inputs.stale)


class InMain(Policy):
    """Main has this file already, or another file of the same name (never overwritten)."""

    id = "in-main"

    def check(self, c: Candidate) -> Held | None:
        return _gate_main(c.file, c.inputs.main)


class Retired(Policy):
    id = "retired"

    def check(self, c: Candidate) -> Held | None:
        return _gate_retired(c.file, c.inputs.retired)


class Sealed(Policy):
    """The results were sealed to these bytes."""

    id = "sealed"

    def check(self, c: Candidate) -> Held | None:
        return _gate_sealed(c.file, c.results, (c.inputs.on_disk or {}).get(c.file.artifact))


class Provenance(Policy):
    id = "provenance"

    def check(self, c: Candidate) -> Held | None:
        return _gate_provenance(c.file, c.results, c.inputs.recipes)


class Ownership(Policy):
    id = "owner"

    def check(self, c: Candidate) -> Held | None:
        return _gate_owner(c.file, c.results, c.inputs.owners)


class BlockHint(Policy):
    id = "block-hint"
    reads = frozenset({"block", "unblock"})

    def check(self, c: Candidate) -> Held | None:
        return _gate_hint_block(c.file, c.inputs)


class OwnTests(Policy):
    """Its own tests passed against every release × variant it must pass (a ``force`` hint lifts it)."""

    id = "tests"
    lifted_by = frozenset({"force"})

    def check(self, c: Candidate) -> Held | None:
        return _gate_tests(c.file, c.results, c.inputs.matrix)


class NoTests(Policy):
    """Fail closed: a candidate is evidence only where a test ran. When rattler-build ran no test at all on
    every release × variant it must pass (an empty or missing ``tests:`` section, a render that lost it),
    nothing says the package works: held ``no-tests`` (a person decides: add tests, or a ``force`` hint)."""

    id = "no-tests"
    lifted_by = frozenset({"force"})

    def check(self, c: Candidate) -> Held | None:
        f, matrix = c.file, c.inputs.matrix
        untestable = set(matrix.admitted(f) or ()) - set(matrix.required(f) or ())
        latest = {p: t for p, t in c.results.latest().items() if p not in untestable}
        if latest and all(t.status == "passed" and t.reason == NO_TESTS for t in latest.values()):
            return Held(f, HoldReason.NO_TESTS, f"no test ran on {pairs_text(sorted(latest))}: "
                                                "rattler-build found no tests in the package")
        return None


#: the checks of one candidate, in order (the first hold is the candidate's primary one)
POLICIES: tuple[Policy, ...] = (Staleness(), InMain(), Retired(), Sealed(), Provenance(), Ownership(), BlockHint(),
                                OwnTests(), NoTests())

#: the checks of the candidates together, in the order plan_gate runs them each round
DEPENDENCIES = SetPolicy("dependencies")
REVDEPS = SetPolicy("revdeps", lifted_by=frozenset({"force"}), reads=frozenset({"urgent", "force-badtest"}))
INSTALLABILITY = SetPolicy("installability")
SET_POLICIES: tuple[SetPolicy, ...] = (DEPENDENCIES, REVDEPS, INSTALLABILITY)


@dataclass
class Judgement:
    """What the policies say about one candidate."""

    held: Held | None = None  # its primary hold, every other kept one in ``held.also``; None: it may go
    lifted: list[tuple[Held, Any]] = field(default_factory=list)  # holds a hint lifted, with the hint


def judge(c: Candidate, policies: Sequence[Policy] | None = None) -> Judgement:
    """Every policy's hold of ``c``, in order; a done or stale build is settled by that hold."""
    kept: list[Held] = []
    out = Judgement()
    for policy in POLICIES if policies is None else policies:
        held = policy.check(c)
        if held is None:
            continue
        held = dataclasses.replace(held, policy=held.policy or policy.id)
        hint = next((h for a in sorted(policy.lifted_by) if (h := hint_for(c.inputs, a, c.file)) is not None), None)
        if hint is not None:
            out.lifted.append((held, hint))
            continue
        kept.append(held)
        if held.hold_class in (HoldClass.DONE, HoldClass.STALE):
            break
    if kept:
        out.held = kept[0].with_also(kept[1:])
    return out


def stale_hold(f: ChannelFile, inputs: PlanInputs) -> Held | None:
    """The hold of a staging build with no results that can never be promoted (or None)."""
    held = _gate_stale(f, inputs.stale)
    return dataclasses.replace(held, policy=Staleness.id) if held is not None else None


def lifted_text(f: ChannelFile, held: Held, hint: Any) -> str:
    """What promote says of a hold a hint lifted."""
    return f"{f.artifact}: promoted despite '{held.reason.value}' ({hint_text(hint)})"

