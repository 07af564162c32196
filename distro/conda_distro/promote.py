"""Promotion: staging -> main for every artifact whose tests all passed (spec §2 `promote`).

Two stages with a named type each:

* :func:`make_plan` — pure: :class:`PlanInputs` (what staging and main hold, the test results, the
  ledger's retirements, the release × variant matrix) in, :class:`PromotionPlan` out. Every artifact
  is either promoted or held with a named reason (:class:`HoldReason`). ``--dry-run`` prints this.
* :func:`execute_plan` — side effects, under the main channel's lock: recover what an interrupted run
  left, copy + verify the files, publish (re-index), then record them in channel_state/.

:func:`promote` ties them together for the CLI.
"""

from __future__ import annotations

import datetime as dt
import enum
import fnmatch
from collections import defaultdict, deque
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from rattler import MatchSpec
from rattler.exceptions import InvalidMatchSpecError, InvalidVersionError, InvalidVersionSpecError

from conda_distro.channels import Channel, ChannelFile, Progress, crash_point, no_progress, open_channel
from conda_distro.channels.local import LocalChannel, sha256_of
from conda_distro.config import Distro, DistroConfig
from conda_distro.distribution import open_distro
from conda_distro.errors import ExitCode
from conda_distro.ledger import ArtifactEntry, Ledger, Retirement, TestEvidence, utcnow
from conda_distro.provenance import CheckoutRecipes
from conda_distro.results import ArtifactResults, ResultsStore
from conda_distro.specs import admits

DEFAULT_LOCK_TIMEOUT = 600.0


class HoldReason(str, enum.Enum):
    TEST_FAILED = "test-failed"
    NOT_TESTED = "not-tested"
    DEPENDENCY_NOT_IN_MAIN = "dependency-not-in-main"
    ALREADY_IN_MAIN = "already-in-main"
    SHA256_MISMATCH = "sha256-mismatch"
    RETIRED = "retired"
    NOT_FROM_THIS_CHECKOUT = "not-from-this-checkout"  # built or tested from other recipes than this checkout's

    @property
    def is_failure(self) -> bool:
        """Held for a reason that makes the command exit 1 (not a mere no-op)."""
        return self not in (HoldReason.ALREADY_IN_MAIN, HoldReason.RETIRED)


@dataclass(frozen=True)
class Held:
    file: ChannelFile
    reason: HoldReason
    detail: str

    @property
    def artifact(self) -> str:
        return self.file.artifact

    def to_dict(self) -> dict[str, str]:
        return {"artifact": self.artifact, "reason": self.reason.value, "detail": self.detail}


# ---------------------------------------------------------------------------------------------
# dependency specs


@dataclass(frozen=True)
class Dep:
    text: str
    name: str
    version: str | None
    build: str | None


@lru_cache(maxsize=65536)
def parse_dep(text: str) -> Dep | None:
    """A ``depends`` entry of repodata as name/version/build; None if rattler cannot parse it."""
    try:
        m = MatchSpec(text)
    except (InvalidMatchSpecError, InvalidVersionSpecError, InvalidVersionError, ValueError):
        return None
    if m.name is None:
        return None
    return Dep(text, m.name.normalized, m.version, m.build)


@lru_cache(maxsize=65536)
def _version_matches(spec: str, version: str) -> bool:
    return admits(spec, version)


def satisfies(dep: Dep, f: ChannelFile) -> bool:
    if f.name != dep.name:
        return False
    if dep.version and not _version_matches(dep.version, f.version):
        return False
    return not dep.build or fnmatch.fnmatchcase(f.build, dep.build)


def subdir_compatible(dependent: ChannelFile, provider: ChannelFile) -> bool:
    return "noarch" in (dependent.subdir, provider.subdir) or dependent.subdir == provider.subdir


# ---------------------------------------------------------------------------------------------
# the test matrix


@dataclass(frozen=True)
class TestMatrix:
    """The supported releases × variants of distro.yaml, and which of them an artifact must pass."""

    __test__ = False  # not a pytest class

    pytorch: str
    releases: tuple[str, ...]
    variants: tuple[str, ...]

    @classmethod
    def from_config(cls, config: DistroConfig) -> "TestMatrix":
        return cls(config.pytorch.name, tuple(config.pytorch.releases), tuple(config.pytorch.variants))

    def required(self, f: ChannelFile) -> list[tuple[str, str]] | None:
        """(release, variant) pairs the artifact's own pytorch pin admits; None when it has no pytorch
        dependency. A cuda-only artifact (depends on ``__cuda``) needs only the cuda variant."""
        deps = [d for d in (parse_dep(t) for t in f.depends) if d is not None]
        pins = [d for d in deps if d.name == self.pytorch]
        if not pins:
            return None
        variants = [v for v in self.variants if v == "cuda" or not any(d.name == "__cuda" for d in deps)]
        return [(r, v) for r in self.releases if all(admits(p.version, r) for p in pins) for v in variants]


def _pairs(pairs: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"pytorch {r} {v}" for r, v in pairs)


# ---------------------------------------------------------------------------------------------
# the plan


@dataclass(frozen=True)
class PlanInputs:
    staging: Mapping[str, ChannelFile]
    main: Mapping[str, ChannelFile]
    results: Mapping[str, ArtifactResults]
    retired: Mapping[str, Retirement]
    matrix: TestMatrix
    #: sha256 of the staging files as they are on disk (local staging), re-checked against the results
    on_disk: Mapping[str, str] | None = None
    #: this checkout's recipe input hashes ({recipe folder: hash, None when absent}) of every recipe the
    #: results name; None: provenance is not checked (a plan made without a checkout)
    recipes: Mapping[str, str | None] | None = None


@dataclass
class PromotionPlan:
    staging: str
    main: str
    promote: list[ChannelFile] = field(default_factory=list)  # dependencies first
    held: list[Held] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)  # in staging with no test results at all

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.FAILURES if any(h.reason.is_failure for h in self.held) else ExitCode.OK

    def held_for(self, reason: HoldReason) -> list[Held]:
        return [h for h in self.held if h.reason is reason]

    def to_dict(self) -> dict[str, Any]:
        return {
            "staging": self.staging,
            "main": self.main,
            "promoted": [{"artifact": f.artifact, "sha256": f.sha256} for f in self.promote],
            "held": [h.to_dict() for h in self.held],
            "untracked": list(self.untracked),
        }

    def text_lines(self, done: bool = False) -> list[str]:
        """Human-readable plan; ``done`` words it as carried out rather than planned."""
        lines = [f"staging {self.staging} -> main {self.main}"]
        verb = "promoted" if done else "promote "
        lines += [f"  {verb} {f.artifact}  (sha256 {f.sha256[:12]}…)" for f in self.promote]
        for h in sorted(self.held, key=lambda h: (not h.reason.is_failure, h.artifact)):
            lines.append(f"  {'held' if h.reason.is_failure else 'skip'}     {h.artifact}  {h.reason.value}: {h.detail}")
        lines += [f"  untested {a}  (no test results; run `conda-distro build`)" for a in self.untracked]
        failures = sum(h.reason.is_failure for h in self.held)
        lines.append(f"{len(self.promote)} {'promoted' if done else 'to promote'}, {failures} held, "
                     f"{len(self.held) - failures} already done")
        return lines


def _gate_main(f: ChannelFile, main: Mapping[str, ChannelFile]) -> Held | None:
    there = main.get(f.artifact)
    if there is None:
        return None
    if there.sha256 == f.sha256:
        return Held(f, HoldReason.ALREADY_IN_MAIN, "the same file (same sha256) is already in main")
    return Held(f, HoldReason.SHA256_MISMATCH,
                f"main already has {f.filename} with sha256 {there.sha256[:12]}…, staging has {f.sha256[:12]}…; "
                "files are never overwritten: bump the build number")


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
                                              "rebuild it with `conda-distro build`")
    return None


def _short(h: str | None) -> str:
    return f"{h[:12]}…" if h else "none"


def _gate_provenance(f: ChannelFile, res: ArtifactResults, recipes: Mapping[str, str | None] | None) -> Held | None:
    """Only what the recipes of this checkout built and tested goes to main: the artifact's recipe input
    hash, and that of every recipe its tests saw (its own and its distribution dependencies'), must be
    this checkout's."""
    if recipes is None:
        return None
    rebuild = "; build and test it from this checkout with `conda-distro build`"
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
    other: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for pair, t in sorted(res.latest().items()):
        differing = sorted(r for r, h in t.recipes.items() if recipes.get(r) != h) if t.recipes else ["(unrecorded)"]
        for r in differing:
            other[r].append(pair)
    if other:
        what = "; ".join(f"{r} against {_pairs(p)}" for r, p in sorted(other.items()))
        return Held(f, HoldReason.NOT_FROM_THIS_CHECKOUT,
                    f"tested with other recipes than this checkout's: {what}" + rebuild.replace("build and test", "re-test"))
    return None


def _gate_tests(f: ChannelFile, res: ArtifactResults, matrix: TestMatrix) -> Held | None:
    latest = res.latest()
    failed = sorted(p for p, t in latest.items() if t.status == "failed")
    if failed:
        return Held(f, HoldReason.TEST_FAILED, f"failed against {_pairs(failed)}")
    blocked = sorted(p for p, t in latest.items() if t.status == "blocked")
    if blocked:
        return Held(f, HoldReason.NOT_TESTED, f"blocked (a dependency failed) against {_pairs(blocked)}")
    required = matrix.required(f)
    missing = [p for p in required or () if p not in latest]
    if missing:
        return Held(f, HoldReason.NOT_TESTED, f"not tested against {_pairs(missing)}")
    if not latest:
        why = "its pytorch pin admits no supported release" if required == [] else "no test results recorded"
        return Held(f, HoldReason.NOT_TESTED, why)
    return None


@dataclass
class _DepState:
    """Bookkeeping of the dependency pass for one candidate."""

    file: ChannelFile
    unmet: dict[int, Dep]  # index in depends -> dep not yet satisfied


def _distribution_deps(f: ChannelFile, names: set[str]) -> dict[int, Dep]:
    deps = {i: parse_dep(t) for i, t in enumerate(f.depends)}
    return {i: d for i, d in deps.items() if d is not None and d.name in names and d.name != f.name}


def _resolve_dependencies(candidates: Sequence[ChannelFile], main: Mapping[str, ChannelFile],
                          names: set[str]) -> tuple[list[ChannelFile], dict[str, _DepState]]:
    """Which candidates can go: each distribution dependency must be met by a file in main or by another
    candidate that can go. Work-list propagation, linear in the number of (dependency, provider) edges.
    Returns the promotable files in dependency order and the state of those that cannot go."""
    main_by_name: dict[str, list[ChannelFile]] = defaultdict(list)
    for m in main.values():
        main_by_name[m.name].append(m)
    cand_by_name: dict[str, list[ChannelFile]] = defaultdict(list)
    for c in candidates:
        cand_by_name[c.name].append(c)
    states: dict[str, _DepState] = {}
    waiting: dict[str, list[tuple[str, int]]] = defaultdict(list)  # provider -> (dependent, dep index)
    for c in candidates:
        unmet = {i: d for i, d in _distribution_deps(c, names).items()
                 if not any(satisfies(d, m) and subdir_compatible(c, m) for m in main_by_name[d.name])}
        states[c.artifact] = _DepState(c, unmet)
        for i, d in unmet.items():
            for p in cand_by_name[d.name]:
                if p.artifact != c.artifact and satisfies(d, p) and subdir_compatible(c, p):
                    waiting[p.artifact].append((c.artifact, i))
    ready = deque(a for a, s in states.items() if not s.unmet)
    order: list[ChannelFile] = []
    while ready:
        art = ready.popleft()
        order.append(states.pop(art).file)
        for dependent, i in waiting.pop(art, ()):
            st = states.get(dependent)
            if st is not None and st.unmet.pop(i, None) is not None and not st.unmet:
                ready.append(dependent)
    return order, states


def _dependency_held(state: _DepState, held_by_name: Mapping[str, list[Held]]) -> Held:
    dep = state.unmet[min(state.unmet)]
    why = [f"{h.artifact} is held ({h.reason.value})" for h in held_by_name.get(dep.name, ())]
    detail = f"needs '{dep.text}': no matching file in main or promotable in this run"
    return Held(state.file, HoldReason.DEPENDENCY_NOT_IN_MAIN, detail + (f" ({'; '.join(why)})" if why else ""))


def make_plan(inputs: PlanInputs, *, staging_ref: str = "staging", main_ref: str = "main") -> PromotionPlan:
    """Pure: decide, for every staging artifact that has test results, whether it goes to main."""
    plan = PromotionPlan(staging_ref, main_ref)
    candidates: list[ChannelFile] = []
    for art, f in sorted(inputs.staging.items()):
        res = inputs.results.get(art)
        if res is None:
            plan.untracked.append(art)
            continue
        held = (_gate_main(f, inputs.main) or _gate_retired(f, inputs.retired)
                or _gate_sealed(f, res, (inputs.on_disk or {}).get(art))
                or _gate_provenance(f, res, inputs.recipes) or _gate_tests(f, res, inputs.matrix))
        if held:
            plan.held.append(held)
        else:
            candidates.append(f)
    names = {f.name for f in (*inputs.staging.values(), *inputs.main.values())}  # distribution packages
    plan.promote, unmet = _resolve_dependencies(candidates, inputs.main, names)
    held_by_name: dict[str, list[Held]] = defaultdict(list)
    for h in plan.held:
        held_by_name[h.file.name].append(h)
    plan.held += [_dependency_held(s, held_by_name) for s in unmet.values()]
    plan.held.sort(key=lambda h: h.artifact)
    return plan


# ---------------------------------------------------------------------------------------------
# execution


@dataclass(frozen=True)
class PromoteOptions:
    root: Path | None = None
    dry_run: bool = False
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    progress: Progress = no_progress


@dataclass
class PromoteResult:
    plan: PromotionPlan
    dry_run: bool
    ledger_written: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> ExitCode:
        return self.plan.exit_code

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.exit_code == ExitCode.OK, **self.plan.to_dict(), "dry_run": self.dry_run,
                "ledger": list(self.ledger_written)}

    def text_lines(self) -> list[str]:
        lines = self.plan.text_lines(done=not self.dry_run)
        if self.dry_run:
            lines.append("dry run: nothing was written")
        lines += [f"recorded {p}" for p in self.ledger_written]
        return lines


@dataclass
class PromotionContext:
    """Everything promotion reads and writes, opened once from distro.yaml."""

    distro: Distro
    staging: Channel
    main: Channel
    results: ResultsStore
    ledger: Ledger

    @classmethod
    def open(cls, distro: Distro) -> "PromotionContext":
        ch = distro.config.channels
        return cls(distro, open_channel(distro, ch.staging), open_channel(distro, ch.main),
                   ResultsStore(distro.build_dir / "results"), Ledger(distro.state_dir))

    def gather(self) -> PlanInputs:
        staging, main = self.staging.list_files(), self.main.list_files()
        results = {r.artifact: r for r in self.results.all()}
        return PlanInputs(
            staging=staging, main=main, results=results,
            retired=self.ledger.retired_artifacts(), matrix=TestMatrix.from_config(self.distro.config),
            on_disk=self._on_disk(staging, main, results), recipes=self._recipes(staging, main, results))

    def _recipes(self, staging: Mapping[str, ChannelFile], main: Mapping[str, ChannelFile],
                 results: Mapping[str, ArtifactResults]) -> dict[str, str | None]:
        """This checkout's recipe input hash of every recipe named by the results of a candidate."""
        checkout = CheckoutRecipes(self.distro.root)
        named = set()
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
        return make_plan(inputs, staging_ref=self.staging.ref, main_ref=self.main.ref)


def _evidence(res: ArtifactResults | None) -> list[TestEvidence]:
    out = []
    for t in (res.latest().values() if res else ()):
        date = t.date if t.date.tzinfo else t.date.replace(tzinfo=dt.timezone.utc)
        out.append(TestEvidence(release=t.pytorch, variant=t.variant, status=t.status, date=date))
    return out


def ledger_entry(f: ChannelFile, res: ArtifactResults | None, *, channel: str,
                 promoted_at: dt.datetime | None, commit: str | None) -> ArtifactEntry:
    return ArtifactEntry(artifact=f.artifact, sha256=f.sha256, version=f.version, build=f.build,
                         build_number=f.build_number, depends=list(f.depends), channel=channel,
                         promoted_at=promoted_at, commit=commit, tests=_evidence(res))


def record_in_ledger(plan: PromotionPlan, ctx: PromotionContext,
                     results: Mapping[str, ArtifactResults]) -> list[str]:
    """Ledger entries for what was promoted, and for anything already in main that the ledger misses
    (an earlier run that stopped between publishing and recording). Returns the files written."""
    files = [*plan.promote, *(h.file for h in plan.held_for(HoldReason.ALREADY_IN_MAIN))]
    by_name: dict[str, list[ChannelFile]] = defaultdict(list)
    for f in files:
        by_name[f.name].append(f)
    now = utcnow()
    written = []
    for name in sorted(by_name):
        # the commit whose recipe produced the artifact (recorded at build time), not this checkout's HEAD
        entries = [ledger_entry(f, res := results.get(f.artifact), channel=ctx.main.ref, promoted_at=now,
                                commit=res.commit if res else None)
                   for f in by_name[name]]
        path = ctx.ledger.add_artifacts(name, entries)
        if path is not None:
            written.append(path.relative_to(ctx.distro.root).as_posix())
            crash_point("promote-after-first-ledger-file")
    return written


def execute_plan(plan: PromotionPlan, ctx: PromotionContext, results: Mapping[str, ArtifactResults],
                 progress: Progress = no_progress) -> list[str]:
    """Carry out ``plan`` (made from ``results``); the caller holds the main channel's lock.
    Returns the ledger files written."""
    ctx.main.recover(ctx.staging, {f.artifact for f in plan.promote}, progress)
    if plan.promote:
        progress(f"promoting {len(plan.promote)} artifact(s) to {ctx.main.describe()}")
        ctx.main.receive(ctx.staging, plan.promote, progress)
        crash_point("promote-after-copy")
        ctx.main.publish(progress)
        crash_point("promote-after-index")
    return record_in_ledger(plan, ctx, results)


def promote(options: PromoteOptions) -> PromoteResult:
    """Plan, and unless ``dry_run``, execute under the main channel's lock (planned again inside it)."""
    ctx = PromotionContext.open(open_distro(options.root))
    if options.dry_run:
        return PromoteResult(ctx.plan(ctx.gather()), dry_run=True)
    ctx.main.check_source(ctx.staging)
    # Every input is read and validated (repodata records, results, ledger) before anything is written,
    # the lock file included: a bad record is an error naming file, record and field, and exit 2.
    ctx.gather()
    with ctx.main.lock(options.lock_timeout):
        inputs = ctx.gather()
        if not inputs.staging:
            options.progress(f"staging {ctx.staging.describe()} has no indexed packages")
        plan = ctx.plan(inputs)
        written = execute_plan(plan, ctx, inputs.results, options.progress)
    return PromoteResult(plan, dry_run=False, ledger_written=written)
