"""Failures already present on the base: which of a PR's failing tests main already fails the same way.

A PR that changes distro.yaml affects every package; one that changes a library affects its dependents. A
package that already fails a release × variant on the base (main) fails there in the PR's run too: that
failure is not the PR's. Each failing test of the PR's run (status ``failed`` or ``blocked``) is either

* **already failing on the base** — the same package, the same release × variant, main's latest record
  there is a failure with the same status and the same failure signature
  (:func:`conda_distro.gate.signature.normalize`: paths, ids, times cut); or
* **new** — anything else, and whenever evidence is missing: no record of main's, a record that cannot be
  read, a record without a reason, another signature, or main passed there. Fail closed: only evidence of
  main's own failure makes a failure "already failing".

Main's record of a package on a target (:func:`main_record`):

1. the ledger **at the base commit** (``git show BASE:channel_state/NAME.json``, never the PR's copy: a PR
   cannot write its own evidence). Among main's artifacts of the package (not retired), a test evidence
   ``passed`` or ``flaky`` on the target means main passes there; else a ``failed`` or ``blocked`` one is
   main's failure, and its reason is the results store's record of that artifact on that target (the run
   the ledger recorded: same date; else the newest run of that artifact there with the same status, run in
   a checkout of the base's history);
2. else (the package is not in main for that target) the shared results store (``build/results/``, what
   builds on main recorded): the newest run of the package on the target made in a checkout whose commit
   is the base or one of its ancestors. When it failed, the package is not in main for that target because
   it failed there.

The results store is not in git: where it is absent (a fresh CI runner), no failure has a reason on the
base, and every failure is new.

:func:`classify` and :func:`main_record` are pure; :class:`BaseLookup` reads the ledger at the base and the
results store, once per package.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from conda_distro.errors import DistroError
from conda_distro.gate.signature import normalize
from conda_distro.state.ledger import PackageState, latest_tests, parse_state
from conda_distro.state.results import ArtifactResults, ResultsStore, TestRecord
from conda_distro.util.gitutil import find_repo, is_ancestor, show_file
from conda_distro.vocab import Target

if TYPE_CHECKING:
    from git import Repo

#: the statuses of a failing test (``error`` is the infrastructure's, ``flaky`` never blocks)
FAILING = ("failed", "blocked")
PASSING = ("passed", "flaky")
_SAME_RUN = dt.timedelta(seconds=1)  # the ledger's date of a run and the results' date of it


@dataclass(frozen=True)
class MainRecord:
    """Main's latest outcome of one package on one release × variant."""

    status: str  # passed | flaky | failed | blocked
    reason: str | None = None  # a failure's reason (None: not known: no evidence of *which* failure)
    source: str = "ledger"  # "ledger": main's artifact's recorded test; "results": a run on the base's history

    @property
    def failing(self) -> bool:
        return self.status in FAILING


@dataclass(frozen=True)
class Classified:
    """One failing test of the PR's run, classified."""

    name: str
    artifact: str
    pytorch: str
    variant: str
    status: str
    on_base: bool  # True: already failing on the base (never blocks the PR); False: new (blocks)
    why: str  # our words: what evidence decided it

    @property
    def key(self) -> tuple[str, str, str, str]:
        return run_key(self)

    def to_dict(self) -> dict:
        return {"name": self.name, "artifact": self.artifact, "pytorch": self.pytorch, "variant": self.variant, "status": self.status,
                "on_base": self.on_base, "why": self.why}


def run_key(t: TestRecord | Classified) -> tuple[str, str, str, str]:
    """One test of a run: package, artifact, release, variant."""
    return (t.name, t.artifact, t.pytorch, str(t.variant))


def signature(reason: str | None) -> str | None:
    """A failure's signature; None when it has no reason (then it matches nothing)."""
    text = normalize(reason) if reason and reason.strip() else ""
    return text or None


def classify(failures: Iterable[TestRecord], evidence: Mapping[tuple[str, Target], MainRecord]) -> list[Classified]:
    """Each failing test (``failed`` / ``blocked``; others are skipped) as already failing on the base or
    new, from main's records (package, target) -> :class:`MainRecord` (rules: module docstring)."""
    out = []
    for t in failures:
        if t.status not in FAILING:
            continue
        main = evidence.get((t.name, Target(t.pytorch, t.variant)))
        on_base, why = _judge(t, main)
        out.append(Classified(t.name, t.artifact, t.pytorch, str(t.variant), t.status, on_base, why))
    return out


def _judge(t: TestRecord, main: MainRecord | None) -> tuple[bool, str]:
    if main is None:
        return False, "no record of main's on this release × variant"
    if not main.failing:
        return False, f"main {main.status} on this release × variant"
    if main.status != t.status:
        return False, f"main is {main.status} here, this run {t.status}"
    mine, theirs = signature(t.reason), signature(main.reason)
    if theirs is None:
        return False, "main's failure here has no recorded reason"
    if mine != theirs:
        return False, "main fails here with another cause"
    where = "main's ledger" if main.source == "ledger" else "a run on the base; not in main for this target"
    return True, f"main {main.status} here with the same cause: {where}"


def main_record(state: PackageState | None, results: Sequence[ArtifactResults], target: Target,
                on_base: Callable[[str], bool]) -> MainRecord | None:
    """Main's record of one package on ``target``: from its ledger ``state`` at the base, its results in the
    shared store (``results``) and ``on_base`` (is this commit the base or one of its ancestors?). None:
    no evidence."""
    evidence = [e for a in (state.artifacts if state else []) if a.in_main
                if (e := latest_tests(a).get(target)) is not None]
    if any(e.status in PASSING for e in evidence):
        return MainRecord(next(e.status for e in evidence if e.status in PASSING))
    for a in (state.artifacts if state else []):
        e = latest_tests(a).get(target) if a.in_main else None
        if e is None or e.status not in FAILING:
            continue
        runs = [t for r in results if r.artifact == a.artifact and r.sha256 == a.sha256
                for t in r.runs(*target) if not t.baseline and t.status == e.status]
        same = [t for t in runs if abs(_utc(t.date) - e.date) <= _SAME_RUN] \
            or [t for t in runs if t.commit and on_base(t.commit)]
        return MainRecord(e.status, same[-1].reason if same else None)
    if evidence:  # (only statuses neither passing nor failing: none today)
        return None
    runs = sorted((t for r in results for t in r.runs(*target)
                   if not t.baseline and t.status != "error" and t.commit and on_base(t.commit)),
                  key=lambda t: _utc(t.date))
    if not runs:
        return None
    newest = runs[-1]
    return MainRecord(newest.status, newest.reason, "results")


def _utc(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


@dataclass
class BaseLookup:
    """Main's evidence, read lazily per package: the ledger at ``base`` (a git ref of the checkout at
    ``root``) and the shared results store. Anything unreadable is no evidence."""

    root: Path
    base: str
    state_dir: Path  # channel_state/ in the checkout (read at ``base``, never from the work tree)
    results_dir: Path  # the shared results store (build/results/)
    _states: dict[str, PackageState | None] = field(default_factory=dict, repr=False)
    _results: dict[str, list[ArtifactResults]] = field(default_factory=dict, repr=False)
    _ancestors: dict[str, bool] = field(default_factory=dict, repr=False)
    _repo: list[Repo | None] = field(default_factory=list, repr=False)  # [the repository or None], once looked up

    def _git(self) -> Repo | None:
        if not self._repo:
            self._repo.append(find_repo(self.root, with_commit=True))
        return self._repo[0]

    def evidence(self, failures: Iterable[TestRecord]) -> dict[tuple[str, Target], MainRecord]:
        """Main's records for the (package, target) of each failing test."""
        out: dict[tuple[str, Target], MainRecord] = {}
        for t in failures:
            key = (t.name, Target(t.pytorch, t.variant))
            if t.status not in FAILING or key in out:
                continue
            rec = main_record(self._state(t.name), self._package_results(t.name), key[1], self._on_base)
            if rec is not None:
                out[key] = rec
        return out

    def _state(self, name: str) -> PackageState | None:
        if name not in self._states:
            self._states[name] = None
            repo = self._git()
            if repo is not None and repo.working_tree_dir is not None:
                path = self.state_dir / f"{name}.json"
                try:
                    rel = path.resolve().relative_to(Path(repo.working_tree_dir).resolve()).as_posix()
                    self._states[name] = parse_state(show_file(repo, self.base, rel), path)
                except (ValueError, DistroError):  # outside the repository, not at the base, unreadable
                    pass
        return self._states[name]

    def _package_results(self, name: str) -> list[ArtifactResults]:
        if name not in self._results:
            store, got = ResultsStore(self.results_dir), []
            for p in sorted(self.results_dir.glob(f"*__{name}-*.json")) if self.results_dir.is_dir() else []:
                try:
                    r = store.get(p.name[: -len(".json")].replace("__", "/", 1))
                except DistroError:  # a corrupt file is no evidence
                    continue
                if r is not None and r.name == name:
                    got.append(r)
            self._results[name] = got
        return self._results[name]

    def _on_base(self, commit: str) -> bool:
        if commit not in self._ancestors:
            repo = self._git()
            self._ancestors[commit] = repo is not None and is_ancestor(repo, commit, self.base)
        return self._ancestors[commit]
