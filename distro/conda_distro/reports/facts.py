"""What the repository and the ledger say, as of a date (the inputs of every report).

* release dates: the commit that added each release to distro.yaml's ``pytorch.releases`` (git log on
  distro.yaml), else the first test against it recorded in channel_state/;
* per recipe: the first and the last commit touching ``recipes/<name>/``;
* per package: its artifacts in main and its retired ones, with the test evidence up to the date;
* the latest results of the builds in staging (``build/results/``, what `build` recorded), so a package
  whose builds never reached main is shown with what its builds did;
* optionally the open statuses of release-day sweeps saved under ``build/sweep/*.json``.

Commits whose author matches ``policy.bot_authors`` (default ``*[bot]``) are not maintainer activity: the
last commit of a recipe is its last commit by a person.

Everything after the as-of date is left out, so ``--as-of`` shows the distribution as it was then.
Outside git (or before the first commit) the git facts are simply unknown.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from conda_distro.config import DISTRO_FILE
from conda_distro.distribution import Distribution
from conda_distro.errors import UsageError
from conda_distro.graph import RecipeGraph
from conda_distro.pins import admitted_releases
from conda_distro.state.ledger import ArtifactEntry, Ledger, PackageState, newest_artifact
from conda_distro.state.records import RetirementRecords, release_key
from conda_distro.state.results import ArtifactResults, ResultsStore, TestRecord
from conda_distro.sweep.model import SweepDocument
from conda_distro.util.gitutil import file_versions, folder_log
from conda_distro.util.jsonio import read_json_text
from conda_distro.util.yamlio import load_fast
from conda_distro.vocab import Target

OPEN_SWEEP_STATUSES = ("failed", "needs-new-version", "awaiting-parents", "awaiting-upstream", "not-solvable")


def cutoff_of(as_of: dt.date) -> dt.datetime:
    """The first instant after the as-of day (UTC): facts at or after it are in the future."""
    return dt.datetime.combine(as_of + dt.timedelta(days=1), dt.time(), dt.UTC)


def days_between(earlier: dt.datetime | dt.date, as_of: dt.date) -> int:
    day = earlier.astimezone(dt.UTC).date() if isinstance(earlier, dt.datetime) else earlier
    return (as_of - day).days


# ---------------------------------------------------------------------------------------------
# the facts


@dataclass(frozen=True)
class ReleaseDate:
    release: str
    date: dt.datetime | None
    source: str  # "distro.yaml, commit 1a2b3c4" | "first test in channel_state/" | "unknown"
    added_later: bool = False  # added to distro.yaml after its first commit: by a release-day sweep

    def to_dict(self) -> dict[str, Any]:
        return {"release": self.release, "date": _iso(self.date), "source": self.source}


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    author: str
    email: str
    date: dt.datetime
    summary: str

    def to_dict(self, as_of: dt.date | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"sha": self.sha, "author": self.author, "email": self.email, "date": _iso(self.date),
               "summary": self.summary}
        if as_of is not None:
            out["days_ago"] = days_between(self.date, as_of)
        return out


@dataclass(frozen=True)
class RecipeHistory:
    first: CommitInfo  # the commit that added recipes/<name>/ (whoever made it)
    last: CommitInfo | None  # the newest commit touching it made by a person (None: only bots touched it)
    bot_commits: int = 0  # commits by bots newer than ``last`` (not activity)


@dataclass(frozen=True)
class StagedBuild:
    """A build in staging (``build/results/``) that is not in main: its latest result per (release, variant)."""

    artifact: str
    version: str
    tests: dict[Target, TestRecord]

    @property
    def promotable(self) -> bool:
        """Every latest result passed: `promote` can take it (awaiting promotion)."""
        return bool(self.tests) and all(t.status in ("passed", "flaky") for t in self.tests.values())

    def failures(self) -> list[TestRecord]:
        return [t for t in self.tests.values() if t.status == "failed"]


@dataclass(frozen=True)
class SweepMark:
    release: str
    status: str
    reason: str | None
    file: str

    def to_dict(self) -> dict[str, Any]:
        return {"release": self.release, "status": self.status, "reason": self.reason, "file": self.file}


@dataclass(frozen=True)
class PackageFacts:
    name: str
    maintainers: list[str]
    in_main: list[ArtifactEntry]  # not retired (as of the date), tests up to the date
    retired: list[ArtifactEntry]
    tracks_pytorch: bool  # depends on pytorch, directly or through distribution packages
    admitted: set[str] | None  # supported releases its recipe's pins admit; None without a recipe
    history: RecipeHistory | None = None
    sweep: SweepMark | None = None
    record: str | None = None  # newest retirement request record (repository-relative path)
    staged: StagedBuild | None = None  # newest build in staging not in main (and not older than main's newest)
    recipe_path: str | None = None  # repository-relative path of its recipe.yaml

    @property
    def never_promoted(self) -> bool:
        return not self.in_main and not self.retired

    @property
    def newest(self) -> ArtifactEntry | None:
        return newest_artifact(self.in_main)

    @property
    def last_commit(self) -> CommitInfo | None:
        return self.history.last if self.history else None

    @property
    def active_since(self) -> CommitInfo | None:
        """The last commit by a person, else (only bots touched it) the commit that added the recipe."""
        return (self.history.last or self.history.first) if self.history else None


@dataclass(frozen=True)
class Facts:
    as_of: dt.date
    distro_name: str
    pytorch: str
    grace_days: int
    releases: list[ReleaseDate]  # supported, oldest first
    variants: list[str]
    packages: dict[str, PackageFacts]  # by name, sorted
    graph: RecipeGraph
    cuda_only: set[str] = field(default_factory=set)  # recipes that run only with __cuda
    results: dict[str, ArtifactResults] = field(default_factory=dict)  # build/results/ by artifact
    # releases distro.yaml once listed and no longer does (dropped from the window, or a .0 its bugfix
    # replaced), oldest first, dated by the commit that first listed them
    former: list[ReleaseDate] = field(default_factory=list)


def _iso(value: dt.datetime | None) -> str | None:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


# ---------------------------------------------------------------------------------------------
# ledger snapshot


def snapshot(state: PackageState, cutoff: dt.datetime) -> tuple[list[ArtifactEntry], list[ArtifactEntry]]:
    """(in main, retired) as of ``cutoff``: artifacts promoted later are left out, and so are tests and
    retirements dated later."""
    in_main, retired = [], []
    for a in state.artifacts:
        if a.promoted_at is not None and a.promoted_at >= cutoff:
            continue
        a = a.model_copy(update={"tests": [t for t in a.tests if t.date < cutoff]})
        if a.retired is not None and a.retired.at < cutoff:
            retired.append(a)
        else:
            in_main.append(a.model_copy(update={"retired": None}))
    return in_main, retired


# ---------------------------------------------------------------------------------------------
# git


def _releases_in(blob_text: bytes) -> list[str]:
    try:
        doc = load_fast(blob_text.decode("utf-8"))
        return [str(r) for r in doc["pytorch"]["releases"]]
    except Exception:  # noqa: BLE001 - an old, broken distro.yaml in history says nothing
        return []


def git_release_dates(root: Path, cutoff: dt.datetime) -> dict[str, ReleaseDate]:
    """release -> the first commit (before ``cutoff``) whose distro.yaml lists it."""
    out: dict[str, ReleaseDate] = {}
    later = False
    for version in file_versions(root, root / DISTRO_FILE):
        if version.date >= cutoff:
            break
        if version.data is None:
            continue
        for release in _releases_in(version.data):
            out.setdefault(release, ReleaseDate(release, version.date, f"distro.yaml, commit {version.sha[:7]}",
                                                added_later=later))
        later = True
    return out


def is_bot(author: str, email: str, patterns: Iterable[str]) -> bool:
    """Does a commit author match one of ``policy.bot_authors`` (name or e-mail, case-insensitive)? In a
    pattern only ``*`` is a wildcard: ``*[bot]`` means names ending in the literal ``[bot]``."""
    import re

    who = (author.strip(), email.strip())
    return any(re.fullmatch(re.escape(p).replace(r"\*", ".*"), w, re.IGNORECASE) for p in patterns for w in who)


def recipe_histories(root: Path, recipes_dir: Path, cutoff: dt.datetime,
                     bots: Iterable[str] = ()) -> dict[str, RecipeHistory]:
    """recipe folder -> first commit and last commit by a person (before ``cutoff``) touching
    ``recipes/<name>/``; one git log. Commits by ``bots`` (author patterns) are not activity."""
    bots = list(bots)
    first: dict[str, CommitInfo] = {}
    last: dict[str, CommitInfo] = {}
    by_bots: dict[str, int] = {}
    for entry in folder_log(root, recipes_dir):
        info = CommitInfo(entry.sha, entry.author, entry.email, entry.date, entry.summary)
        if info.date >= cutoff:
            continue
        bot = is_bot(entry.author, entry.email, bots)
        for name in {p.split("/")[0] for p in entry.paths}:
            if bot and name not in last:  # git log is newest first
                by_bots[name] = by_bots.get(name, 0) + 1
            elif not bot:
                last.setdefault(name, info)
            first[name] = info
    return {n: RecipeHistory(first[n], last.get(n), by_bots.get(n, 0)) for n in first}


# ---------------------------------------------------------------------------------------------
# sweeps (optional)


def sweep_statuses(build_dir: Path, root: Path) -> dict[str, SweepMark]:
    """Open statuses of the saved sweep results (``build/sweep/*.json``, the `sweep --format json`
    document); the newest release wins. Files of another shape are ignored: they are optional."""
    from rattler import Version
    from rattler.exceptions import InvalidVersionError

    folder = build_dir / "sweep"
    docs: list[tuple[Version, Path, SweepDocument]] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:  # a file that is no regular file, too large or too deep is an error (exit 2), not ignored
            text = read_json_text(path, "sweep", error=UsageError)
        except FileNotFoundError:
            continue
        try:
            doc = SweepDocument.model_validate_json(text)
        except (ValueError, ValidationError):
            continue
        try:
            release = Version(doc.release)
        except (InvalidVersionError, ValueError):
            raise UsageError(f"the sweep record's release {doc.release!r} is not a version", path=path,
                             field="release", hint="delete the file (rerun `conda-distro sweep --pytorch VER` "
                                                   "to make a new one) or fix its release") from None
        docs.append((release, path, doc))
    out: dict[str, SweepMark] = {}
    for _, path, doc in sorted(docs, key=lambda vpd: vpd[0]):
        for p in doc.packages:
            if p.status in OPEN_SWEEP_STATUSES:
                out[p.name] = SweepMark(doc.release, p.status, p.reason, _relpath(path, root))
            else:
                out.pop(p.name, None)
    return out


def _relpath(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------------------------------
# staging results


def staging_results(build_dir: Path) -> dict[str, ArtifactResults]:
    """``build/results/``: every artifact `build` recorded (a bad file is an error naming it)."""
    return {r.artifact: r for r in ResultsStore(build_dir / "results").all()}


def staged_build(name: str, results: Iterable[ArtifactResults], in_main: Iterable[ArtifactEntry],
                 retired: Iterable[ArtifactEntry], cutoff: dt.datetime,
                 skip: frozenset[str] = frozenset()) -> StagedBuild | None:
    """The newest build of ``name`` in staging that is not in main (nor retired, nor in ``skip``: stale
    builds, which are never promoted) and not older than main's newest, with its latest results before
    ``cutoff``."""
    from rattler import Version

    known = {a.artifact for a in [*in_main, *retired]} | skip
    newest = newest_artifact(in_main)
    floor = Version(newest.version) if newest else None
    found: list[tuple[Version, dt.datetime, str, StagedBuild]] = []
    for r in results:
        if r.name != name or r.artifact in known:
            continue
        tests: dict[Target, TestRecord] = {}
        for t in sorted((t for t in r.tests if t.date < cutoff), key=lambda t: t.date):
            tests[t.target] = t
        if not tests or (floor is not None and Version(r.version) < floor):
            continue
        found.append((Version(r.version), max(t.date for t in tests.values()), r.artifact,
                      StagedBuild(r.artifact, r.version, tests)))
    return max(found, key=lambda f: f[:3])[3] if found else None


# ---------------------------------------------------------------------------------------------
# gathering


def release_dates(dist: Distribution, states: Mapping[str, PackageState],
                  cutoff: dt.datetime) -> tuple[list[ReleaseDate], list[ReleaseDate]]:
    """(the supported releases, the former ones: listed once in distro.yaml's history, not any more)."""
    from_git = git_release_dates(dist.root, cutoff)
    first_test: dict[str, dt.datetime] = {}
    for s in states.values():
        for a in s.artifacts:
            for t in a.tests:
                if t.date < cutoff and (t.release not in first_test or t.date < first_test[t.release]):
                    first_test[t.release] = t.date
    out = []
    for r in dist.config.pytorch.releases:
        if r in from_git:
            out.append(from_git[r])
        elif r in first_test:
            out.append(ReleaseDate(r, first_test[r], "first test in channel_state/"))
        else:
            out.append(ReleaseDate(r, None, "unknown"))
    supported = set(dist.config.pytorch.releases)
    former = [d for r, d in from_git.items() if r not in supported and d.date is not None]
    return out, sorted(former, key=lambda d: release_key((d.release, "")))


def _tracks_pytorch(dist: Distribution, graph: RecipeGraph, pytorch: str) -> set[str]:
    direct = {n for n, r in dist.recipes.items() if pytorch in r.dep_names("host", "run")}
    return {n for n in graph.names if n in direct or graph.ancestors(n) & direct}


def _depends_on(entries: Iterable[ArtifactEntry], name: str) -> bool:
    return any(d.split()[0] == name for a in entries for d in a.depends if d.split())


def gather(dist: Distribution, as_of: dt.date, *, sweeps: bool = True, skip: frozenset[str] = frozenset()) -> Facts:
    """Everything the reports need, as of ``as_of``. ``sweeps=False`` reads only channel_state/ and the
    repository (the status page); ``skip``: staging builds to leave out (stale ones: never promoted)."""
    cutoff = cutoff_of(as_of)
    config = dist.config
    pytorch = config.pytorch.name
    graph = RecipeGraph.from_recipes(dist.recipes)
    states = Ledger(dist.distro.state_dir).load_all()
    histories = recipe_histories(dist.root, dist.distro.recipes_dir, cutoff, config.policy.bot_authors)
    results = staging_results(dist.distro.build_dir)
    sweep = sweep_statuses(dist.distro.build_dir, dist.root) if sweeps else {}
    admitted = admitted_releases(dist.recipes, graph, pytorch, list(config.pytorch.releases))
    tracking = _tracks_pytorch(dist, graph, pytorch)
    records = RetirementRecords(dist.distro.state_dir)
    by_pkg = {r.name: folder for folder, r in dist.recipes.items()}
    packages: dict[str, PackageFacts] = {}
    for name in sorted(set(by_pkg) | set(states)):
        folder = by_pkg.get(name)
        recipe = dist.recipes.get(folder) if folder else None
        in_main, retired = snapshot(states[name], cutoff) if name in states else ([], [])
        recs = [p for p, r in records.for_package(name) if r.at < cutoff]
        staged = staged_build(name, results.values(), in_main, retired, cutoff, skip)
        packages[name] = PackageFacts(
            name=name,
            maintainers=list(recipe.maintainers) if recipe else [],
            in_main=in_main,
            retired=retired,
            tracks_pytorch=(folder in tracking) if folder else _depends_on(in_main + retired, pytorch),
            admitted=admitted.get(folder) if folder else None,
            history=histories.get(folder) if folder else None,
            sweep=sweep.get(name) or (sweep.get(folder) if folder else None),
            record=_relpath(recs[-1], dist.root) if recs else None,
            staged=staged,
            recipe_path=_relpath(recipe.path, dist.root) if recipe is not None else None,
        )
    cuda_only = {r.name for r in dist.recipes.values() if "__cuda" in r.dep_names("run")}
    supported, former = release_dates(dist, states, cutoff)
    return Facts(as_of=as_of, distro_name=config.name, pytorch=pytorch, grace_days=config.policy.unmaintained_grace_days,
                 releases=supported, variants=list(config.pytorch.variants),
                 packages=packages, graph=graph, cuda_only=cuda_only, results=results, former=former)
