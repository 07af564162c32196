"""Promotion: staging -> main for every artifact whose tests all passed.

Two stages with a named type each:

* :func:`plan_gate` — pure: :class:`PlanInputs` (what staging and main hold, the test results, the
  ledger's retirements, the release × variant matrix: :mod:`conda_distro.gate.inputs`) in,
  :class:`PromotionPlan` out. Every artifact is either promoted or held with named reasons
  (:class:`HoldReason`; every check's hold is kept: :mod:`conda_distro.gate.policies`). ``--dry-run``
  prints this.
* :func:`execute_plan` — side effects, under the main channel's lock: recover what an interrupted run
  left, copy + verify the files, publish (re-index), then record them in channel_state/.

:func:`promote` ties them together for the CLI.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from conda_distro.channels import Channel, ChannelFile, crash_point, open_channel
from conda_distro.channels.depends import (
    ChannelDep,
    distribution_closure,
    lockstep_of_files,
    parse_dep,
    satisfies,
    subdir_compatible,
)
from conda_distro.channels.local import REPODATA, LocalChannel, sha256_of
from conda_distro.config import DistroRepo
from conda_distro.distribution import Distribution, load_distribution, open_distro
from conda_distro.enduser.take import ensure_snapshot
from conda_distro.engine.releases import Availability, availability_if_readable
from conda_distro.errors import ChannelError, ExitCode, LedgerError, UsageError
from conda_distro.gate.excuses import EXCUSES_FILE, Excuses, ExcusesOptions, excuses_of, write_excuses
from conda_distro.gate.flaky import FlakyTest, flaky_tests
from conda_distro.gate.hints import HintSet, load_hints
from conda_distro.gate.holds import Held, HoldClass, HoldReason
from conda_distro.gate.inputs import (
    PlanInputs,
    TestMatrix,
    hint_for,
    hint_text,
    pairs_text,
)
from conda_distro.gate.installability import Installability
from conda_distro.gate.policies import DEPENDENCIES, INSTALLABILITY, REVDEPS, Candidate, judge, lifted_text, stale_hold
from conda_distro.gate.revdeps import Retest, RetestVerdict, RevdepInputs, ident
from conda_distro.gate.revdeps import check as check_revdeps
from conda_distro.gate.staleness import StalenessInputs, recipe_outputs, stale_builds
from conda_distro.state.ledger import RECIPE_RE, ArtifactEntry, EvidenceStatus, Ledger, TestEvidence
from conda_distro.state.locks import DEFAULT_LOCK_TIMEOUT, LOCK_NAME, Deadline, repository_lock, staging_folder, staging_lock
from conda_distro.state.owners import registry_of
from conda_distro.state.provenance import CheckoutRecipes
from conda_distro.state.results import ArtifactResults, ResultsStore, TestRecord
from conda_distro.util.dates import utcnow
from conda_distro.util.fsutil import check_writable
from conda_distro.util.progress import NULL_SINK, ProgressSink, TaskFinish, TaskProgress, TaskStart, TaskStep, log_lines
from conda_distro.util.safetext import shown
from conda_distro.vocab import Target, Variant, artifact_name


@dataclass
class PromotionPlan:
    staging: str
    main: str
    promote: list[ChannelFile] = field(default_factory=list)  # dependencies first
    held: list[Held] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)  # in staging with no test results at all
    sets: list[list[str]] = field(default_factory=list)  # candidates promoted together or not at all
    retests: list[Retest] = field(default_factory=list)  # reverse-dependency re-tests the promotion relies on
    forced: dict[str, str] = field(default_factory=dict)  # artifact -> who forced it (a force hint)
    hints_used: list[str] = field(default_factory=list)  # what each applied hint did
    hint_notes: list[str] = field(default_factory=list)  # hints that did nothing, and why (expired)
    installability_solves: int = 0
    flaky: list[FlakyTest] = field(default_factory=list)  # tests that passed and failed on the same inputs

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.FAILURES if any(h.reason.is_failure for h in self.held) else ExitCode.OK

    def counts(self) -> dict[str, int]:
        """Promoted, untracked, and held per hold class (what a long-run check of the gate reads)."""
        out = {"promoted": len(self.promote), "untracked": len(self.untracked)}
        out.update({c.value: sum(h.hold_class is c for h in self.held) for c in HoldClass})
        return out

    def held_for(self, reason: HoldReason) -> list[Held]:
        return [h for h in self.held if h.reason is reason]

    def to_dict(self) -> dict[str, Any]:
        return {
            "staging": self.staging,
            "main": self.main,
            "promoted": [{"artifact": f.artifact, "sha256": f.sha256, **({"forced_by": self.forced[f.artifact]}
                                                                         if f.artifact in self.forced else {})}
                         for f in self.promote],
            "held": [h.to_dict() for h in self.held],
            "counts": self.counts(),
            "untracked": list(self.untracked),
            "sets": [list(s) for s in self.sets],
            "retests": [r.to_dict() for r in self.retests],
            "hints": list(self.hints_used),
            "hint_notes": list(self.hint_notes),
            "flaky": [t.to_dict() for t in self.flaky],
        }

    def text_lines(self, done: bool = False) -> list[str]:
        """Human-readable plan; ``done`` words it as carried out rather than planned."""
        lines = [f"staging {self.staging} -> main {self.main}"]
        verb = "promoted" if done else "promote "
        lines += [f"  {verb} {f.artifact}  (sha256 {f.sha256[:12]}…)"
                  + (f"  forced by {self.forced[f.artifact]}" if f.artifact in self.forced else "")
                  for f in self.promote]
        lines += [f"  together: {', '.join(s)}" for s in self.sets]
        word = {HoldClass.STALE: "stale", HoldClass.DONE: "skip"}
        for h in sorted(self.held, key=lambda h: (not h.reason.is_failure, h.hold_class is HoldClass.DONE, h.artifact)):
            lines.append(f"  {word.get(h.hold_class, 'held'):8} {h.artifact}  {h.reason.value}: "
                         f"{shown(h.detail, 'text', width=600)}")
            if h.hold_class is not HoldClass.DONE:
                lines.append(f"           what to do: {h.what_to_do}")
            for more in h.also:  # every further hold of it, in the gate's order
                lines.append(f"           also {more.reason.value}: {shown(more.detail, 'text', width=600)}")
                lines.append(f"           what to do: {more.what_to_do}")
        lines += [f"  untested {a}  (no test results; run `conda-distro build {artifact_name(a)}`)" for a in self.untracked]
        lines += [f"  hint     {n}" for n in self.hint_notes]
        for t in self.flaky:
            lines.append(f"  flaky    {t.package} {t.version} on pytorch {t.pytorch} {t.variant}: "
                         f"{shown(t.detail, 'text', width=600)} (never blocks)")
            lines.append(f"           what to do: {t.advice}")
        failures = sum(h.reason.is_failure for h in self.held)
        stale = sum(h.hold_class is HoldClass.STALE for h in self.held)
        lines.append(f"{len(self.promote)} {'promoted' if done else 'to promote'}, {failures} held, "
                     + (f"{stale} stale (never promotable: `conda-distro prune` removes them), " if stale else "")
                     + f"{len(self.held) - failures - stale} already done")
        return lines


def check_hints(hints: HintSet, today: dt.date, known: set[str]) -> tuple[str, ...]:
    """What promote says of hints.yaml before it applies it: an expired hint does nothing (a note says so,
    with what to do); a ``block`` hint naming a package neither a recipe, staging nor main knows is refused
    (exit 2): it is a typo that would let through what someone meant to hold."""
    for h in hints.active(today):
        if h.action == "block" and h.package not in known:
            close = difflib.get_close_matches(h.package, sorted(known), n=1, cutoff=0.6)
            raise UsageError(f"block hint names package '{h.package}', which no recipe, staging "
                             "or main knows: it would hold nothing", path=hints.path, line=h.line, field="package",
                             hint=(f"did you mean '{close[0]}'? " if close else "")
                                  + "fix the package name, or remove the hint")
    return tuple(f"expired: {h.describe()}" + (f" (hints.yaml:{h.line})" if h.line else "")
                 + " did nothing; renew its expires or remove it" for h in hints.expired(today))


@dataclass
class _DepState:
    """Bookkeeping of the dependency pass for one candidate."""

    file: ChannelFile
    unmet: dict[int, ChannelDep]  # index in depends -> dep not yet satisfied


def _distribution_deps(f: ChannelFile, names: set[str]) -> dict[int, ChannelDep]:
    deps = {i: parse_dep(t) for i, t in enumerate(f.depends)}
    return {i: d for i, d in deps.items() if d is not None and d.name in names and d.name != f.name}


def _resolve_dependencies(candidates: Sequence[ChannelFile], main: Mapping[str, ChannelFile], names: set[str]
                          ) -> tuple[list[ChannelFile], dict[str, _DepState], dict[str, set[str]]]:
    """Which candidates can go: each distribution dependency must be met by a file in main or by another
    candidate that can go. Work-list propagation, linear in the number of (dependency, provider) edges.
    Returns the promotable files in dependency order, the state of those that cannot go, and for each
    candidate the candidates that alone can meet one of its dependencies (they go together)."""
    main_by_name: dict[str, list[ChannelFile]] = defaultdict(list)
    for m in main.values():
        main_by_name[m.name].append(m)
    cand_by_name: dict[str, list[ChannelFile]] = defaultdict(list)
    for c in candidates:
        cand_by_name[c.name].append(c)
    states: dict[str, _DepState] = {}
    waiting: dict[str, list[tuple[str, int]]] = defaultdict(list)  # provider -> (dependent, dep index)
    needs: dict[str, set[str]] = defaultdict(set)  # dependent -> candidate providers
    for c in candidates:
        unmet = {i: d for i, d in _distribution_deps(c, names).items()
                 if not any(satisfies(d, m) and subdir_compatible(c, m) for m in main_by_name[d.name])}
        states[c.artifact] = _DepState(c, unmet)
        for i, d in unmet.items():
            for p in cand_by_name[d.name]:
                if p.artifact != c.artifact and satisfies(d, p) and subdir_compatible(c, p):
                    waiting[p.artifact].append((c.artifact, i))
                    needs[c.artifact].add(p.artifact)
    ready = deque(a for a, s in states.items() if not s.unmet)
    order: list[ChannelFile] = []
    while ready:
        art = ready.popleft()
        order.append(states.pop(art).file)
        for dependent, i in waiting.pop(art, ()):
            st = states.get(dependent)
            if st is not None and st.unmet.pop(i, None) is not None and not st.unmet:
                ready.append(dependent)
    return order, states, needs


def _dependency_holds(f: ChannelFile, unmet: Mapping[int, ChannelDep], held_by_name: Mapping[str, list[Held]]
                      ) -> list[Held]:
    """One hold per distribution dependency of ``f`` that nothing in main or promotable in this run meets,
    in the order of its depends (every one: none hides another)."""
    out = []
    for i in sorted(unmet):
        dep = unmet[i]
        holds = [h for h in held_by_name.get(dep.name, ()) if satisfies(dep, h.file)]
        why = [f"{h.artifact} is held ({h.reason.value})" for h in held_by_name.get(dep.name, ())]
        detail = f"needs '{dep.text}': no matching file in main or promotable in this run"
        live = [h for h in holds if h.hold_class is not HoldClass.STALE]
        if live:  # the dependency's own hold is what to act on
            advice = f"{dep.name} is held ({live[0].reason.value}): {live[0].what_to_do}; then `conda-distro promote` takes both"
        else:  # nothing of this checkout meets it: build it from this checkout (a stale build never goes)
            advice = f"`conda-distro build {dep.name}` builds it from this checkout (and re-tests {f.name} with it)"
        out.append(Held(f, HoldReason.DEPENDENCY_NOT_IN_MAIN, detail + (f" ({'; '.join(why)})" if why else ""),
                        advice=advice, policy=DEPENDENCIES.id))
    return out


def _dependency_held(state: _DepState, held_by_name: Mapping[str, list[Held]]) -> Held:
    """The hold of a candidate dropped at the dependency stage: its first unmet dependency, the others after."""
    first, *more = _dependency_holds(state.file, state.unmet, held_by_name)
    return first.with_also(more)


def _with_unmet_dependencies(plan: PromotionPlan, inputs: PlanInputs, names: set[str],
                             held_by_name: Mapping[str, list[Held]]) -> None:
    """Every artifact held for another reason also says which of its distribution dependencies nothing in
    main or promoted in this run meets (its excuses list every hold it has, not only the first)."""
    met_by = [*inputs.main.values(), *plan.promote]
    for i, h in enumerate(plan.held):
        if h.hold_class in (HoldClass.DONE, HoldClass.STALE) \
                or any(x.reason is HoldReason.DEPENDENCY_NOT_IN_MAIN for x in h.holds):
            continue
        unmet = {j: d for j, d in _distribution_deps(h.file, names).items()
                 if not any(d.name == m.name and satisfies(d, m) and subdir_compatible(h.file, m) for m in met_by)}
        if unmet:
            plan.held[i] = h.with_also(_dependency_holds(h.file, unmet, held_by_name))


_VERDICT_ORDER = (RetestVerdict.REGRESSION, RetestVerdict.FAILED, RetestVerdict.ERROR, RetestVerdict.MISSING)


def _held_for_retests(f: ChannelFile, retests: list[Retest], inputs: PlanInputs | None = None) -> Held:
    """The hold for a candidate that its reverse-dependency re-tests keep back (worst verdict first)."""
    worst = min((r.verdict for r in retests), key=_VERDICT_ORDER.index)
    these = [r for r in retests if r.verdict is worst]
    names = tuple(sorted({r.dependent.name for r in these}))
    pairs = sorted({Target(r.pytorch, Variant(r.variant)) for r in these})
    if worst is RetestVerdict.REGRESSION:
        regs = tuple({"package": r.dependent.name, "artifact": r.dependent.artifact, "pytorch": r.pytorch,
                      "variant": r.variant, "log": r.log, "reason": r.reason} for r in these)
        return Held(f, HoldReason.REGRESSION, f"breaks {', '.join(names)} (in main) on {pairs_text(pairs)}: "
                    + these[0].detail, blocked_by=names, regressions=regs)
    if worst is RetestVerdict.FAILED:
        regs = tuple({"package": f.name, "pytorch": r.pytorch, "variant": r.variant, "log": r.log, "reason": r.reason}
                     for r in these)
        others = sorted({c for r in these for c in r.candidates})
        return Held(f, HoldReason.TEST_FAILED, these[0].detail, blocked_by=tuple(others), regressions=regs)
    if worst is RetestVerdict.ERROR:
        return Held(f, HoldReason.WAITING, f"infrastructure error re-testing {', '.join(names)}: {these[0].detail}; "
                    "run `conda-distro build --retry-errors`", blocked_by=names)
    if these[0].is_candidate:  # it waits for a test with the candidates it would go with
        names = tuple(sorted({c.split("/")[-1].rsplit("-", 2)[0] for r in these for c in r.candidates})) or names
    subject = "a test with the candidates it goes with" if these[0].is_candidate else \
        f"re-tests of {', '.join(names)} (in main)"
    build = f"`conda-distro build {' '.join(sorted({r.dependent.name for r in these} | {f.name}))}`"
    held = Held(f, HoldReason.WAITING, f"waits for {subject}: {these[0].detail}; run {build}", blocked_by=names)
    stale = sorted(_stale_in_the_way(these, inputs)) if inputs is not None else []
    if stale:  # a re-test keeps installing a build that can never go: it must leave staging first
        return dataclasses.replace(held, detail=held.detail + f" (its last run was with {', '.join(stale)}, a stale "
                                                              "build the solver prefers)",
                                   advice=f"`conda-distro prune` (removes {', '.join(stale)}), then {build}")
    return held


def _stale_in_the_way(retests: Sequence[Retest], inputs: PlanInputs) -> set[str]:
    """Stale staging builds (``name-version-build``) that the latest runs of these re-tests installed."""
    stale = {ident(inputs.staging[a]) for a in inputs.stale if a in inputs.staging}
    found: set[str] = set()
    for r in retests:
        res = inputs.results.get(r.dependent.artifact)
        runs = res.runs(r.pytorch, r.variant) if res is not None else []
        if runs and runs[-1].against:
            found |= set(runs[-1].against.values()) & stale
    return found


def _sets(promote: Sequence[ChannelFile], retests: Sequence[Retest], needs: Mapping[str, set[str]]) -> list[list[str]]:
    """Candidates that need each other: a dependency only a candidate meets, or a candidate tested with
    another (it goes only with what it was tested with)."""
    parent = {f.artifact: f.artifact for f in promote}

    def find(a: str) -> str:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def join(a: str, b: str) -> None:
        if a in parent and b in parent:
            parent[find(a)] = find(b)

    edges = {(r.dependent.artifact, c) for r in retests if r.is_candidate for c in r.candidates}
    edges |= {(a, b) for a, providers in needs.items() for b in providers}
    for a, b in edges:
        join(a, b)
    groups: dict[str, list[str]] = defaultdict(list)
    for f in promote:
        groups[find(f.artifact)].append(f.artifact)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


def plan_gate(inputs: PlanInputs, *, staging_ref: str = "staging", main_ref: str = "main") -> PromotionPlan:
    """Pure (the installability solver is handed in): decide, for every staging artifact that has test
    results, whether it goes to main.

    1. Each artifact alone: not already in main, not retired, results sealed to its bytes, built from this
       checkout, its own tests passed, no block hint.
    2. Then, until nothing changes: the candidates whose distribution dependencies are met (in main or
       promoted with them); their dependents' re-tests (:mod:`conda_distro.gate.revdeps`): a regression, an
       infrastructure error or a missing re-test holds the candidate; then installability
       (:mod:`conda_distro.gate.installability`): a package of main that could no longer be installed holds
       the candidates in its dependency closure. Each round holds at least one candidate, so it ends.
    """
    plan = PromotionPlan(staging_ref, main_ref)
    candidates: list[ChannelFile] = []
    for art, f in sorted(inputs.staging.items()):
        res = inputs.results.get(art)
        if res is None:
            stale = stale_hold(f, inputs)
            if stale is not None:
                plan.held.append(stale)
            else:
                plan.untracked.append(art)
            continue
        judged = judge(Candidate(f, res, inputs))
        if judged.held is not None:
            plan.held.append(judged.held)
            continue
        for lifted, hint in judged.lifted:  # it goes despite these: say so
            plan.forced[f.artifact] = hint.by
            plan.hints_used.append(lifted_text(f, lifted, hint))
        candidates.append(f)
    names = {f.name for f in (*inputs.staging.values(), *inputs.main.values())}  # distribution packages
    closure = distribution_closure([*inputs.staging.values(), *inputs.main.values()])
    pairs = [Target(r, v) for r in inputs.matrix.releases for v in inputs.matrix.variants]

    def ignore_test(f: ChannelFile) -> bool:
        return hint_for(inputs, "force-badtest", f) is not None

    held_by_name: dict[str, list[Held]] = defaultdict(list)
    for h in plan.held:
        held_by_name[h.file.name].append(h)
    while True:
        plan.promote, unmet, needs = _resolve_dependencies(candidates, inputs.main, names)
        for s in unmet.values():
            h = _dependency_held(s, held_by_name)
            plan.held.append(h)
            held_by_name[h.file.name].append(h)
        candidates = list(plan.promote)
        rev = check_revdeps(RevdepInputs(inputs.main, plan.promote, inputs.results, inputs.matrix.required, closure,
                                         inputs.evidence, ignore_test))
        plan.retests = rev.retests
        holds: dict[str, Held] = {}
        by_artifact = {c.artifact: c for c in plan.promote}
        for art, retests in sorted(rev.blocking().items()):
            f = by_artifact[art]
            if _forgiven(f, retests, inputs, plan):
                continue
            holds[art] = dataclasses.replace(_held_for_retests(f, retests, inputs), policy=REVDEPS.id)
        if inputs.installability is not None and plan.promote:
            for h in (dataclasses.replace(x, policy=INSTALLABILITY.id) for x in _installability_holds(plan, inputs, pairs)):
                before = holds.get(h.artifact)
                if before is None:
                    holds[h.artifact] = h
                elif before.reason is HoldReason.WAITING:  # a structural finding outranks waiting for re-tests
                    holds[h.artifact] = h.with_also([before])
                else:
                    holds[h.artifact] = before.with_also([h])
        if not holds:
            break
        for h in holds.values():
            plan.held.append(h)
            held_by_name[h.file.name].append(h)
        candidates = [c for c in candidates if c.artifact not in holds]
    _with_unmet_dependencies(plan, inputs, names, held_by_name)
    plan.sets = _sets(plan.promote, plan.retests, needs)
    gone = {h.artifact for h in plan.held if h.hold_class in (HoldClass.STALE, HoldClass.DONE)}
    plan.flaky = flaky_tests([f for a, f in sorted(inputs.staging.items()) if a not in gone], inputs.results,
                             plan.retests, inputs.maintainers)
    plan.held = sorted((_with_maintainers(h, inputs.maintainers) for h in plan.held), key=lambda h: h.artifact)
    # a hint that lifted a hold of a candidate held later (by a dependency, its dependents, installability)
    # promoted nothing: it is not said to have
    promoted = {f.artifact for f in plan.promote}
    dropped = set(plan.forced) - promoted
    plan.forced = {a: by for a, by in plan.forced.items() if a in promoted}
    plan.hints_used = [u for u in dict.fromkeys(plan.hints_used) if not any(u.startswith(f"{a}: ") for a in dropped)]
    plan.hint_notes = list(inputs.hint_notes)
    return plan


def _installability_holds(plan: PromotionPlan, inputs: PlanInputs, pairs: Sequence[Target]) -> list[Held]:
    assert inputs.installability is not None
    report = inputs.installability.check(inputs.main, plan.promote, pairs)
    plan.installability_solves += report.solves
    if report.error is not None:  # infrastructure: never counted as pass or fail
        return [Held(f, HoldReason.WAITING, f"installability could not be checked: {report.error}")
                for f in plan.promote if f.artifact not in plan.forced]
    out: dict[str, Held] = {}
    by_artifact = {c.artifact: c for c in plan.promote}
    for d in report.decreases:
        for art in d.culprits:
            if art not in out and art not in plan.forced:
                out[art] = Held(by_artifact[art], HoldReason.UNINSTALLABLE,
                                f"{d.name} (in main) could be installed with pytorch {d.pytorch} {d.variant} "
                                f"and cannot after this promotion: {d.why}", blocked_by=(d.name,))
    return list(out.values())


def _forgiven(f: ChannelFile, retests: list[Retest], inputs: PlanInputs, plan: PromotionPlan) -> bool:
    """A force hint promotes despite everything; urgent despite re-tests that have not run (never over
    a regression or a failure)."""
    force = next((h for a in sorted(REVDEPS.lifted_by) if (h := hint_for(inputs, a, f)) is not None), None)
    if force is not None:
        plan.forced[f.artifact] = force.by
        plan.hints_used.append(f"{f.artifact}: promoted despite its dependents' re-tests ({hint_text(force)})")
        return True
    if all(r.verdict in (RetestVerdict.MISSING, RetestVerdict.ERROR) for r in retests):
        urgent = hint_for(inputs, "urgent", f)
        if urgent is not None:
            plan.hints_used.append(f"{f.artifact}: not waiting for re-tests ({hint_text(urgent)})")
            return True
    return False


def _with_maintainers(h: Held, maintainers: Mapping[str, tuple[str, ...]]) -> Held:
    """Who to tell: the held package's maintainers, then those of the dependents it breaks."""
    names = [h.file.name, *(r["package"] for x in h.holds for r in x.regressions if r.get("package") != h.file.name)]
    for x in h.holds:
        if x.reason in (HoldReason.REGRESSION, HoldReason.WAITING, HoldReason.UNINSTALLABLE):
            names += list(x.blocked_by)
    who: list[str] = []
    for n in names:
        who += [m for m in maintainers.get(n, ()) if m not in who]
    return dataclasses.replace(h, maintainers=tuple(who)) if who else h


# ---------------------------------------------------------------------------------------------
# execution


@dataclass(frozen=True)
class PromoteOptions:
    root: Path | None = None
    dry_run: bool = False
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    progress: ProgressSink = NULL_SINK  # where promote reports (task ``promote``; channel lines as log events)


@dataclass
class PromoteResult:
    plan: PromotionPlan
    dry_run: bool
    ledger_written: list[str] = field(default_factory=list)
    excuses: str | None = None  # where the excuses were written (build/excuses.json)
    snapshot: str | None = None  # the snapshot of main this promotion took (conda_distro.enduser.take)

    @property
    def exit_code(self) -> ExitCode:
        return self.plan.exit_code

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.exit_code == ExitCode.OK, **self.plan.to_dict(), "dry_run": self.dry_run,
                "ledger": list(self.ledger_written), "excuses": self.excuses, "snapshot": self.snapshot}

    def text_lines(self) -> list[str]:
        lines = self.plan.text_lines(done=not self.dry_run)
        if self.dry_run:
            lines.append("dry run: nothing was written to main or channel_state/")
        lines += [f"recorded {p}" for p in self.ledger_written]
        if self.snapshot:
            lines.append(f"snapshot of main: {self.snapshot} (`conda-distro snapshots`)")
        if self.excuses:
            lines.append(f"why each candidate waits: `conda-distro excuses` (also {self.excuses})")
        return lines


@dataclass
class PromotionContext:
    """Everything promotion reads and writes, opened once from distro.yaml."""

    distro: DistroRepo
    staging: Channel
    main: Channel
    results: ResultsStore
    ledger: Ledger
    today: dt.date = field(default_factory=lambda: utcnow().date())  # for hints' expiry

    @classmethod
    def open(cls, distro: DistroRepo) -> PromotionContext:
        ch = distro.config.channels
        return cls(distro, open_channel(distro, ch.staging), open_channel(distro, ch.main),
                   ResultsStore(distro.build_dir / "results"), Ledger(distro.state_dir))

    def gather(self) -> PlanInputs:
        staging, main = self.staging.list_files(), self.main.list_files()
        results = {r.artifact: r for r in self.results.all()}
        states = self.ledger.load_all()
        files = [*staging.values(), *main.values()]
        matrix = TestMatrix.from_config(self.distro.config, self.available,
                                        lockstep_of_files(files, self.distro.config.pytorch.lockstep))
        retired = self.ledger.retired_artifacts(states)
        recipes = self._recipes(staging, main, results)
        return PlanInputs(
            staging=staging, main=main, results=results, retired=retired, matrix=matrix,
            on_disk=self._on_disk(staging, main, results), recipes=recipes,
            stale=stale_builds(StalenessInputs(staging, main, results, recipes, recipe_outputs(self.dist.recipes.values()),
                                               frozenset(retired))),
            evidence={a.artifact: {t.target: t.status for t in a.tests}
                      for st in states.values() for a in st.artifacts},
            hints=(hints := load_hints(self.distro.root)), today=self.today,
            hint_notes=check_hints(hints, self.today, {f.name for f in files} | set(self.maintainers)),
            owners=registry_of(self.dist, states).verdicts(),
            maintainers=self.maintainers, installability=Installability(
                self.distro.upstream_urls, self.distro.subdirs, matrix.pytorch, matrix.required, distribution_closure(files)))

    @cached_property
    def available(self) -> Availability | None:
        """What upstream can serve; read once, though promote gathers its inputs twice (upstream is not
        what the lock guards)."""
        return availability_if_readable(self.distro)

    @cached_property
    def dist(self) -> Distribution:
        """The checkout's recipes (unreadable ones left out); read once, though promote gathers its inputs
        twice (before and under the lock)."""
        return load_distribution(self.distro.root, strict=False, distro=self.distro)

    @cached_property
    def maintainers(self) -> dict[str, tuple[str, ...]]:
        """package name -> its recipe's maintainers (every output of a recipe has its maintainers)."""
        return {out: tuple(r.maintainers) for r in self.dist.recipes.values() for out in (r.name, *r.output_names)}

    def _recipes(self, staging: Mapping[str, ChannelFile], main: Mapping[str, ChannelFile],
                 results: Mapping[str, ArtifactResults]) -> dict[str, str | None]:
        """This checkout's recipe input hash of every recipe named by the results of a candidate."""
        checkout = CheckoutRecipes(self.distro.root)
        named: set[str] = set()
        for art, res in results.items():
            if art in staging and art not in main:
                named.update(r for r in (res.recipe,) if r)
                named.update(r for t in res.tests for r in t.recipes)
        return {r: checkout.digest(r) for r in sorted(named)}

    def _on_disk(self, staging: Mapping[str, ChannelFile], main: Mapping[str, ChannelFile],
                 results: Mapping[str, ArtifactResults]) -> dict[str, str] | None:
        """sha256 of each local staging file that could be promoted (has results, not yet in main)."""
        if not isinstance(self.staging, LocalChannel):
            return None  # anaconda.org: its API's sha256 is what is copied
        out = {}
        for art, f in staging.items():
            path = self.staging.file_path(f)
            if art in results and art not in main and path.is_file():
                out[art] = sha256_of(path)
        return out

    def plan(self, inputs: PlanInputs) -> PromotionPlan:
        return plan_gate(inputs, staging_ref=self.staging.ref, main_ref=self.main.ref)


def _ledger_evidence(res: ArtifactResults | None, held: set[str] | None = None) -> list[TestEvidence]:
    """Per release × variant, the newest outcome in an environment main holds: runs against packages
    in ``held`` (``name-version-build`` of main after this promotion) only; None: any run."""
    out: list[TestEvidence] = []
    if res is None:
        return out
    for (r, v) in sorted(res.latest()):
        newest: tuple[TestRecord, EvidenceStatus] | None = None
        for t in res.runs(r, v):
            if t.status != "error" and (held is None or all(i in held for i in (t.against or {}).values())):
                newest = (t, t.status)
        if newest is None:
            continue
        t, status = newest
        date = t.date if t.date.tzinfo else t.date.replace(tzinfo=dt.UTC)
        out.append(TestEvidence(release=t.pytorch, variant=t.variant, status=status, date=date, gpu=t.gpu))
    return out


def ledger_entry(f: ChannelFile, res: ArtifactResults | None, *, channel: str,
                 promoted_at: dt.datetime | None, commit: str | None, held: set[str] | None = None,
                 forced_by: str | None = None) -> ArtifactEntry:
    recipe = res.recipe if res is not None and res.recipe and RECIPE_RE.match(res.recipe) else None
    return ArtifactEntry(artifact=f.artifact, sha256=f.sha256, version=f.version, build=f.build,
                         build_number=f.build_number, depends=list(f.depends), channel=channel,
                         promoted_at=promoted_at, commit=commit, tests=_ledger_evidence(res, held), forced_by=forced_by,
                         recipe=recipe)


def record_in_ledger(plan: PromotionPlan, ctx: PromotionContext, results: Mapping[str, ArtifactResults],
                     main: Mapping[str, ChannelFile]) -> list[str]:
    """Ledger entries for what was promoted, and for anything already in main that the ledger misses
    (an earlier run that stopped between publishing and recording). Returns the files written."""
    files = [*plan.promote, *(h.file for h in plan.held_for(HoldReason.ALREADY_IN_MAIN))]
    by_name: dict[str, list[ChannelFile]] = defaultdict(list)
    for f in files:
        by_name[f.name].append(f)
    now = utcnow()
    written = []
    main_after = {ident(f) for f in (*main.values(), *plan.promote)}
    for name in sorted(by_name):
        # the commit whose recipe produced the artifact (recorded at build time), not this checkout's HEAD
        entries = [ledger_entry(f, res := results.get(f.artifact), channel=ctx.main.ref, promoted_at=now,
                                commit=res.commit if res else None, held=main_after,
                                forced_by=plan.forced.get(f.artifact))
                   for f in by_name[name]]
        path = ctx.ledger.add_artifacts(name, entries)
        if path is not None:
            written.append(path.relative_to(ctx.distro.root).as_posix())
            crash_point("promote-after-first-ledger-file")
    return written


def execute_plan(plan: PromotionPlan, ctx: PromotionContext, inputs: PlanInputs,
                 progress: ProgressSink = NULL_SINK) -> list[str]:
    """Carry out ``plan`` (made from ``results``); the caller holds the main channel's lock. Reports the task
    ``promote`` to ``progress`` (three steps: copy, index, record). Returns the ledger files written."""
    say = log_lines(progress)
    # what channel_state/ records in main stays in main even when no index names it (an index deleted to be
    # rebuilt, as a damaged index's advice says): indexed again below, never moved out as a leftover
    ctx.main.recover(ctx.staging, {f.artifact for f in plan.promote} | ctx.ledger.in_main_artifacts(), say)
    if not plan.promote:
        if isinstance(ctx.main, LocalChannel) and ctx.main.unindexed_files():
            ctx.main.publish(say)
        return record_in_ledger(plan, ctx, inputs.results, inputs.main)
    progress.on_start(TaskStart(PROMOTE_TASK, len(PROMOTE_STEPS),
                                f"promoting {len(plan.promote)} artifact(s) to {ctx.main.describe()}"))
    progress.on_step(TaskStep(PROMOTE_TASK, PROMOTE_STEPS[0]))
    ctx.main.receive(ctx.staging, plan.promote, say)
    progress.on_progress(TaskProgress(PROMOTE_TASK, 1, len(PROMOTE_STEPS), step=PROMOTE_STEPS[0]))
    crash_point("promote-after-copy")
    progress.on_step(TaskStep(PROMOTE_TASK, PROMOTE_STEPS[1]))
    ctx.main.publish(say)
    progress.on_progress(TaskProgress(PROMOTE_TASK, 2, len(PROMOTE_STEPS), step=PROMOTE_STEPS[1]))
    crash_point("promote-after-index")
    progress.on_step(TaskStep(PROMOTE_TASK, PROMOTE_STEPS[2]))
    written = record_in_ledger(plan, ctx, inputs.results, inputs.main)
    progress.on_progress(TaskProgress(PROMOTE_TASK, 3, len(PROMOTE_STEPS), step=PROMOTE_STEPS[2]))
    progress.on_finish(TaskFinish(PROMOTE_TASK))
    return written


PROMOTE_TASK = "promote"
#: the steps of a promotion, as its progress names them
PROMOTE_STEPS = ("copying into main", "indexing main", "recording in channel_state/")
_WRITE_HINT = "fix the file or folder (a folder where a file belongs, or the other way round, or no permission)"


def check_channel_writable(channel: Channel) -> None:
    """Everything promote or retire writes in ``channel``, when it is a local folder, can be written: the
    folder, its subdir folders, their indexes, the lock file and the folder retired files move to
    (``ChannelError`` naming the path otherwise). anaconda.org is written through its API."""
    if not isinstance(channel, LocalChannel):
        return
    folders = [channel.path, *(channel.path / s for s in channel.subdirs), channel.retired_dir]
    files = [channel.path / LOCK_NAME, *(channel.path / s / REPODATA for s in channel.subdirs)]
    for p in folders:
        check_writable(p, folder=True, error=ChannelError, hint=_WRITE_HINT)
    for p in files:
        check_writable(p, folder=False, error=ChannelError, hint=_WRITE_HINT)


def check_ledger_writable(ledger: Ledger) -> None:
    """channel_state/ is a folder (or can be made one) that this process can write to."""
    check_writable(ledger.folder, folder=True, error=LedgerError, hint=_WRITE_HINT)


def check_promote_writes(ctx: PromotionContext, dry_run: bool) -> None:
    """Every place promote writes, checked before it writes anything: the excuses file; unless ``dry_run``,
    also the main channel and channel_state/ (each ledger file is read and validated by the gather)."""
    check_writable(ctx.distro.build_dir / EXCUSES_FILE, folder=False, error=UsageError, hint=_WRITE_HINT)
    if not dry_run:
        check_channel_writable(ctx.main)
        check_ledger_writable(ctx.ledger)


def _write_excuses(ctx: PromotionContext, plan: PromotionPlan, inputs: PlanInputs) -> str:
    path = write_excuses(ctx.distro.build_dir / "excuses.json", excuses_of(plan, inputs))
    try:
        return path.relative_to(ctx.distro.root).as_posix()
    except ValueError:
        return str(path)


def explain_promotion(options: ExcusesOptions) -> Excuses:
    """`conda-distro excuses`: why each candidate in staging is not in main (the plan `promote --dry-run`
    would make, explained; nothing is written)."""
    return excuses_of(*plan_promotion(options.root))


def plan_promotion(root: Path | None) -> tuple[PromotionPlan, PlanInputs]:
    """The plan `promote --dry-run` would print, and what it was made from (for `excuses`)."""
    ctx = PromotionContext.open(open_distro(root))
    inputs = ctx.gather()
    return ctx.plan(inputs), inputs


def promote(options: PromoteOptions) -> PromoteResult:
    """Plan, and unless ``dry_run``, execute under the locks (:mod:`conda_distro.state.locks`): the repository's
    and staging's, shared (no sweep edits the recipes and no build writes staging or the results while
    they are read and copied), then main's; planned again inside them, from distro.yaml as it is then.
    The plan's excuses are written to build/excuses.json (a dry run too)."""
    ctx = PromotionContext.open(open_distro(options.root))
    check_promote_writes(ctx, options.dry_run)
    if options.dry_run:
        inputs = ctx.gather()
        plan = ctx.plan(inputs)
        return PromoteResult(plan, dry_run=True, excuses=_write_excuses(ctx, plan, inputs))
    ctx.main.check_source(ctx.staging)
    # Every input is read and validated (repodata records, results, ledger) before anything is written,
    # the lock files included: a bad record is an error naming file, record and field, and exit 2.
    ctx.gather()
    budget = Deadline(options.lock_timeout)
    with repository_lock(ctx.distro.build_dir, ctx.distro.root, budget, shared=True), \
            staging_lock(staging_folder(ctx.distro), budget, shared=True), ctx.main.lock(budget):
        crash_point("promote-locked")
        ctx = PromotionContext.open(open_distro(ctx.distro.root))  # a sweep may have added a release meanwhile
        inputs = ctx.gather()
        if not inputs.staging:
            log_lines(options.progress)(f"staging {ctx.staging.describe()} has no indexed packages")
        plan = ctx.plan(inputs)
        written = execute_plan(plan, ctx, inputs, options.progress)
        snap = ensure_snapshot(ctx.distro, ctx.main, progress=log_lines(options.progress))  # main is always captured
    return PromoteResult(plan, dry_run=False, ledger_written=written, excuses=_write_excuses(ctx, plan, inputs),
                         snapshot=snap.record.name if snap.record else None)
