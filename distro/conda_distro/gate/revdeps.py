"""Reverse-dependency verdicts of the promotion gate: does a set of candidates break what main holds?

Debian's britney2 migrates a package to testing only when the autopkgtests of its reverse dependencies
pass against it; we do the same per supported release × variant. After promotion, an end user's
environment holds, for each distribution package, the file of main ∪ candidates that admits the
release and that the solver tries first (:mod:`conda_distro.channels.order`). So for every package whose
environment would change, its tests must have run in exactly that environment:

* a **dependent in main** (the newest version of its name, not replaced by a candidate of the same name)
  whose dependencies include a candidate: its main artifact re-tested with the candidate(s) —
  ``pass``; ``regression`` (it passed against main's current packages and fails with the candidates:
  blocks them); ``always-failed`` (it fails against main's current packages too: does not block);
  ``error`` (infrastructure: the candidates wait); ``neutral`` (it has no tests); or not re-tested yet
  (the candidates wait);
* a **candidate** that depends on other candidates must have been tested with them (not with main's
  older ones): otherwise it waits (a set is only promoted as tested together).

Which packages a test ran against is recorded by the build (``TestRecord.against``: the distribution
packages rattler-build installed into the test environment). Pure functions of data: no channels, no
files.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from conda_distro.channels.base import ChannelFile, newest_by_name
from conda_distro.channels.order import InstallOrder, pool_of
from conda_distro.gate.signature import normalize
from conda_distro.state.results import NO_TESTS, ArtifactResults, TestRecord
from conda_distro.vocab import Target


class RetestVerdict(str, enum.Enum):  # noqa: UP042 -- StrEnum would change str()/format() of members (output bytes)
    PASS = "pass"
    REGRESSION = "regression"
    ALWAYS_FAILED = "always-failed"
    ERROR = "error"
    NEUTRAL = "neutral"
    MISSING = "missing"  # not re-tested in that environment yet
    IGNORED = "ignored"  # failed, but a force-badtest hint ignores the dependent's test
    FAILED = "failed"  # a candidate's own test failed in the environment it would be promoted into
    #: it passed and failed on the same inputs (with the candidates, or on the baseline side with main's
    #: packages): never blocks, never counts as a pass; reported with its maintainers
    FLAKY = "flaky"


def ident(f: ChannelFile) -> str:
    """``name-version-build``: how a test run names the packages of its environment."""
    return f"{f.name}-{f.version}-{f.build}"


@dataclass(frozen=True)
class Retest:
    """One dependent's test, for one release × variant, in the environment the candidates make."""

    dependent: ChannelFile
    pytorch: str
    variant: str
    verdict: RetestVerdict
    candidates: tuple[str, ...]  # the candidates (artifacts) in that environment
    log: str | None = None
    detail: str = ""
    is_candidate: bool = False  # the dependent is itself a candidate (not in main)
    reason: str | None = None  # the failing run's first error (its signature groups findings)

    @property
    def holds(self) -> tuple[str, ...]:
        """The candidates this re-test holds back: a dependent in main holds the candidates that break it
        (or that it has not been re-tested with); a candidate that failed, or was not tested, with the
        other candidates holds itself (the set then shrinks, and main's version of it is checked)."""
        if self.verdict not in (RetestVerdict.REGRESSION, RetestVerdict.ERROR, RetestVerdict.MISSING, RetestVerdict.FAILED):
            return ()
        return (self.dependent.artifact,) if self.is_candidate else self.candidates

    def to_dict(self) -> dict:
        return {"package": self.dependent.name, "artifact": self.dependent.artifact, "pytorch": self.pytorch,
                "variant": self.variant, "verdict": self.verdict.value, "log": self.log, "detail": self.detail}


@dataclass
class RevdepResult:
    retests: list[Retest] = field(default_factory=list)

    def blocking(self) -> dict[str, list[Retest]]:
        """candidate artifact -> the retests that hold it."""
        out: dict[str, list[Retest]] = defaultdict(list)
        for r in self.retests:
            for c in r.holds:
                out[c].append(r)
        return out


#: (release, variant) pairs a file's own pytorch pin admits; None: it has no pytorch dependency
Required = Callable[[ChannelFile], "Sequence[Target] | None"]
#: (dependency text of a file) -> (name, admits(file) predicate); built by the caller with rattler
Satisfies = Callable[[str, ChannelFile], bool]


class Environments:
    """What an environment holds after promotion: per (name, release, variant), the file of main ∪
    candidates that admits the release and that the solver tries first (rattler's order,
    :mod:`conda_distro.channels.order`: version, build number, dependencies, timestamp; never the build
    string's hash)."""

    def __init__(self, files: Iterable[ChannelFile], required: Required) -> None:
        self.required = required
        self.by_name: dict[str, list[ChannelFile]] = pool_of(files)
        order = InstallOrder(self.by_name)
        for name, fs in self.by_name.items():
            self.by_name[name] = order.sort(fs)
        self._cache: dict[tuple[str, str, str], ChannelFile | None] = {}

    def admits(self, f: ChannelFile, pair: Target) -> bool:
        req = self.required(f)
        return req is None or pair in req

    def provider(self, name: str, pair: Target) -> ChannelFile | None:
        key = (name, *pair)
        if key not in self._cache:
            self._cache[key] = next((f for f in self.by_name.get(name, ()) if self.admits(f, pair)), None)
        return self._cache[key]


def _latest(runs: Sequence[TestRecord], match: Callable[[TestRecord], bool]) -> TestRecord | None:
    return next((t for t in reversed(runs) if match(t)), None)


@dataclass(frozen=True)
class RevdepInputs:
    main: Mapping[str, ChannelFile]
    candidates: Sequence[ChannelFile]  # what would be promoted (dependency-closed)
    results: Mapping[str, ArtifactResults]
    required: Required
    closure: Callable[[str], frozenset[str]]  # a package name -> the distribution names it depends on (transitively)
    #: a main artifact's test evidence from the ledger: (release, variant) -> status at promotion
    evidence: Mapping[str, Mapping[Target, str]] = field(default_factory=dict)
    #: force-badtest: True when the dependent's failing test is to be ignored (a hint)
    ignore_test: Callable[[ChannelFile], bool] = lambda f: False


def newest_in_main(main: Mapping[str, ChannelFile]) -> list[ChannelFile]:
    """The files of the newest version of each name in main (all its builds: variants, subdirs)."""
    return [f for fs in newest_by_name(main.values()).values() for f in fs]


def _pairs_of(f: ChannelFile, required: Required, res: ArtifactResults | None) -> Sequence[Target]:
    req = required(f)
    if req is not None:
        return req
    return sorted({t.target for t in (res.tests if res else ())})


def check(inputs: RevdepInputs) -> RevdepResult:
    """Every re-test the candidates need: dependents in main, and candidates depending on candidates."""
    cand = {c.artifact: c for c in inputs.candidates}
    cand_names = {c.name for c in inputs.candidates}
    env = Environments([*inputs.main.values(), *inputs.candidates], inputs.required)
    report = RevdepResult()
    if not cand:
        return report
    replaced = cand_names  # a name with a candidate: main's older versions are not what users get
    subjects = [(f, False) for f in newest_in_main(inputs.main) if f.name not in replaced]
    subjects += [(c, True) for c in inputs.candidates]
    idents: dict[str, set[str]] = defaultdict(set)
    for m in inputs.main.values():
        idents[m.name].add(ident(m))
    scope = _Scope(cand, {n: frozenset(i) for n, i in idents.items()})
    for f, is_candidate in subjects:
        closure = inputs.closure(f.name)
        if not is_candidate and not closure & cand_names:
            continue  # nothing it depends on changes
        res = inputs.results.get(f.artifact)
        for pair in _pairs_of(f, inputs.required, res):
            if not env.admits(f, pair):
                continue
            # what its environment holds after promotion at this release × variant: a dependent in main
            # must have been re-tested with the candidates among them; a candidate with all of them
            providers = {n: p for n in sorted(closure) if (p := env.provider(n, pair)) is not None}
            if not any(p.artifact in cand for p in providers.values()) and (not is_candidate or not providers):
                continue
            report.retests.append(_classify(f, is_candidate, pair, providers, res, inputs, scope))
    report.retests = _flaky_everywhere(report.retests)
    return report


def _flaky_everywhere(retests: list[Retest]) -> list[Retest]:
    """A test seen flaky proves no regression: when a dependent's re-test with the candidates is ``flaky``
    on one release × variant, its failures with the same candidates on the others are ``flaky`` too (the
    same test script, run with the same distribution packages; a failure there may be the same coin)."""
    flaky = {(r.dependent.artifact, r.candidates) for r in retests if r.verdict is RetestVerdict.FLAKY}
    if not flaky:
        return retests
    return [replace(r, verdict=RetestVerdict.FLAKY, detail=r.detail + " (flaky with the same packages on another "
                                                               "release or variant: no regression proven)")
            if r.verdict is RetestVerdict.REGRESSION and (r.dependent.artifact, r.candidates) in flaky else r
            for r in retests]


@dataclass(frozen=True)
class _Scope:
    """What every classification of one check shares, computed once."""

    candidates: Mapping[str, ChannelFile]  # by artifact
    main_idents: Mapping[str, frozenset[str]]  # name -> ``ident`` of each of main's files of that name


def _classify(f: ChannelFile, is_candidate: bool, pair: Target, providers: dict[str, ChannelFile],
              res: ArtifactResults | None, inputs: RevdepInputs, scope: _Scope) -> Retest:
    cand = scope.candidates
    names = tuple(sorted(c.artifact for c in providers.values() if c.artifact in cand))
    # a dependent in main is compared on the candidates only (the rest of main is what it was tested with)
    want = {n: ident(c) for n, c in providers.items() if is_candidate or c.artifact in cand}
    runs = res.runs(*pair) if res is not None and res.sha256 == f.sha256 else []
    hit = _latest(runs, lambda t: t.against is not None and all(t.against.get(n) == i for n, i in want.items()))

    def retest(verdict: RetestVerdict, log: str | None = None, detail: str = "") -> Retest:
        return Retest(dependent=f, pytorch=pair[0], variant=pair[1], verdict=verdict, candidates=names, log=log,
                      detail=detail, is_candidate=is_candidate,
                      reason=hit.reason if hit is not None and hit.status == "failed" else None)

    together = ", ".join(sorted(want.values()))
    if hit is None and runs and runs[-1].status == "error":  # its last run could not say what it ran with
        last = runs[-1]
        return retest(verdict=RetestVerdict.ERROR, log=last.log,
                      detail=f"{ident(f)} on pytorch {pair[0]} {pair[1]}: error" + (f" ({last.reason})" if last.reason else ""))
    if hit is None:
        return retest(verdict=RetestVerdict.MISSING,
                      detail=f"{ident(f)} not yet tested with {together} on pytorch {pair[0]} {pair[1]}")
    if hit.status == "passed":
        verdict = RetestVerdict.NEUTRAL if hit.reason == NO_TESTS else RetestVerdict.PASS
        return retest(verdict=verdict, log=hit.log)
    if hit.status == "flaky":
        return retest(verdict=RetestVerdict.FLAKY, log=hit.log,
                      detail=f"{ident(f)} with {together} on pytorch {pair[0]} {pair[1]}: flaky ({_runs(hit)})")
    if hit.status in ("error", "blocked"):
        return retest(verdict=RetestVerdict.ERROR if hit.status == "error" else RetestVerdict.MISSING, log=hit.log,
                      detail=f"{ident(f)} with {together} on pytorch {pair[0]} {pair[1]}: {hit.status}"
                             + (f" ({hit.reason})" if hit.reason else ""))
    # failed with the candidates
    why = f"{ident(f)} fails with {together} on pytorch {pair[0]} {pair[1]}" + (f": {hit.reason}" if hit.reason else "")
    if is_candidate:
        return retest(verdict=RetestVerdict.FAILED, log=hit.log, detail=why)
    if inputs.ignore_test(f):
        return retest(verdict=RetestVerdict.IGNORED, log=hit.log, detail="force-badtest hint")
    main_idents = scope.main_idents
    ref = _latest(runs, lambda t: t.against is not None
                  and all(t.against.get(n) in main_idents.get(n, ()) for n in want))
    before = ref.status if ref is not None else inputs.evidence.get(f.artifact, {}).get(pair)
    if before == "flaky":  # the baseline side passed and failed too: no regression
        return retest(verdict=RetestVerdict.FLAKY, log=hit.log,
                      detail=why + f" (and with main's packages it is flaky: "
                                   f"{_runs(ref) if ref is not None else 'so its promotion recorded'})")
    if before == "passed":
        return retest(verdict=RetestVerdict.REGRESSION, log=hit.log, detail=why)
    if before == "failed" and ref is not None and ref.reason and hit.reason \
            and normalize(ref.reason) != normalize(hit.reason):  # failing before, but of another cause: a new one
        return retest(verdict=RetestVerdict.REGRESSION, log=hit.log,
                      detail=why + f" (a new failure: with main's packages it failed of another cause: "
                                   f"{normalize(ref.reason)})")
    return retest(verdict=RetestVerdict.ALWAYS_FAILED, log=hit.log,
                  detail=why + (" (it failed against main's current packages too)" if before else
                                " (never seen passing there)"))


def _runs(t: TestRecord) -> str:
    """``passed 1 of 3 runs`` (a confirmed test's attempts)."""
    att: list[str] = [*t.attempts] if t.attempts else [t.status]
    return f"passed {att.count('passed')} of {len(att)} runs on the same inputs"
