"""`status --out DIR`: a static status page (``index.html`` + ``style.css``, no external assets, no JS).

It shows a package × release × variant matrix, each cell one of :data:`CELL_STATUSES` and carrying
``data-package``/``data-release``/``data-variant``/``data-status``/``data-source`` attributes. Every
package has a row for **main** (the ledger, channel_state/) and, when `build` left a newer build in
staging that is not in main (``build/results/``), a row for **staging** under it, labelled with the
promotion gate's verdict (``build/excuses.json``: the hold classes of :mod:`conda_distro.gate.holds`, so the
page, the excuses and `promote` agree; stale builds get no row and are listed apart). Failures are red,
link to an entry of the failures list with the test's reason and its log (copied next to the page,
under ``logs/``). Also: per-release progress ("2.6.0: 7 of 10 packages of the distribution admit and
pass", each other one named with why), maintainers (linked to their GitHub profiles), links to the
recipe files (``--repo-url``, default: the GitHub ``origin`` remote, at the checked-out commit) and
searches of its open pull requests per package
and of the sweep tracking issue per swept release (:class:`RepoLinks`), the `report unmaintained` flags,
retirements, the promotion gate's excuses (``build/excuses.json`` read by :func:`conda_distro.gate.excuses.read_excuses`,
grouped by what blocks them; those promoted since are left out) and a dependency view (an
inline SVG of the RecipeGraph levels plus a table of dependencies and dependents).

It reads channel_state/, build/results/, build/excuses.json and the repository (recipes, distro.yaml,
git): never a channel. A main cell's status comes from the newest artifact in main that has a result for
that (release, variant); without one it is ``not-applicable`` when the pins don't admit the release (or
the package needs a GPU and the variant is cpu) and ``not-tested`` otherwise. A page links only to other
pages (GitHub profiles, files and searches): its stylesheet and logs are files beside it, it has no script.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote_plus

from conda_distro.config import DistroRepo
from conda_distro.distribution import Distribution, load_distribution
from conda_distro.enduser.snapshots import SNAPSHOTS_DIR, SnapshotRecord, SnapshotStore, files_of
from conda_distro.engine.gpu import variant_label
from conda_distro.errors import UsageError
from conda_distro.gate.excuses import Excuse, Excuses, read_excuses
from conda_distro.graph import RecipeGraph
from conda_distro.reports.facts import Facts, PackageFacts, gather
from conda_distro.reports.unmaintained import Entry, RetiredEntry, UnmaintainedReport, evaluate
from conda_distro.reports.watch import read_report as read_watch_report
from conda_distro.state.ledger import ArtifactEntry, latest_tests, newest_artifact
from conda_distro.state.results import TestStatus
from conda_distro.util.dates import parse_as_of
from conda_distro.util.fsutil import atomic_write_bytes, atomic_write_text
from conda_distro.util.gitutil import find_repo, origin_url
from conda_distro.util.layout import clash
from conda_distro.util.safetext import shown
from conda_distro.util.templating import render, static
from conda_distro.vocab import Target, Variant

CellStatus = Literal["passed", "failed", "blocked", "not-applicable", "not-tested", "flaky"]
CELL_STATUSES: tuple[CellStatus, ...] = ("passed", "failed", "blocked", "not-applicable", "not-tested", "flaky")
CELL_LABELS = {"passed": "pass", "failed": "fail", "blocked": "blocked", "not-applicable": "n/a",
               "not-tested": "untested", "flaky": "flaky"}


#: the title .github/workflows/release-sweep.yml gives a release's tracking issue
SWEEP_ISSUE_TITLE = "PyTorch {release} release sweep"
LOG_TAIL = 256 << 10  # bytes of a log copied next to the page (its end: where the failure is)


@dataclass(frozen=True)
class StatusOptions:
    out: Path
    root: Path | None = None
    as_of: str | None = None  # YYYY-MM-DD; default today (UTC)
    repo_url: str | None = None  # https://github.com/OWNER/REPO for recipe links; default: the origin remote


@dataclass
class StatusResult:
    written: list[Path]
    exit_code: int = 0
    progress: list[ReleaseProgress] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": True, "written": [str(p) for p in self.written], "progress": [p.to_dict() for p in self.progress]}

    def text_lines(self) -> list[str]:
        lines = [f"wrote {p}" for p in self.written]
        for p in self.progress:
            lines.append(p.headline + (": " + "; ".join(f"{lag.name} ({lag.why})" for lag in p.lagging)
                                       if p.lagging else ""))
        return lines


@dataclass(frozen=True)
class Cell:
    package: str
    release: str
    variant: str
    status: CellStatus
    artifact: str | None = None
    date: dt.datetime | None = None
    source: str = "main"  # main | staging
    reason: str | None = None  # why it failed or is blocked (build/results/)
    log: str | None = None  # the test log as the build recorded it (a path on the machine that built it)
    log_href: str | None = None  # the copy beside the page (set when the page is written)
    gpu: bool | None = None  # cuda: False = tested without a GPU ("cuda (no GPU)"); None: unknown / cpu

    @property
    def label(self) -> str:
        return CELL_LABELS[self.status] + (" (no GPU)" if self.no_gpu and self.status in ("passed", "failed") else "")

    @property
    def no_gpu(self) -> bool:
        return Variant(self.variant).cuda and self.gpu is False

    @property
    def anchor(self) -> str:
        return f"fail-{self.source}-{self.package}-{self.release}-{self.variant}"

    @property
    def title(self) -> str:
        where = f"{self.package} on pytorch {self.release} {variant_label(self.variant, self.gpu)} in {self.source}"
        if self.artifact:
            text = f"{where}: {self.status} on {self.date:%Y-%m-%d}, {self.artifact.split('/')[-1]}"
            return text + (f": {shown(self.reason, 'text')}" if self.reason and self.status != "passed" else "")
        if self.status == "not-applicable":
            return f"{where}: not applicable (its pins do not admit this release or variant)"
        if self.status == "blocked" and self.reason:
            return f"{where}: blocked: {shown(self.reason, 'text')}"
        return f"{where}: no test result in channel_state/"


@dataclass(frozen=True)
class StagedRow:
    """The newest build in staging that is not in main, under its package's main row; or, for a package
    with nothing in main nor staging whose distribution dependencies fail, the build that `build` blocks
    (``waits_for``: no artifact, blocked cells)."""

    artifact: str | None
    version: str | None
    passed: bool  # every latest result passed
    cells: list[Cell]
    waits_for: tuple[str, ...] = ()
    #: the promotion gate's verdict on it (build/excuses.json; the hold classes of conda_distro.gate.holds), and
    #: what it groups it under and advises; None: the gate has not judged this build
    verdict: str | None = None
    group: str = ""
    advice: tuple[str, ...] = ()

    @property
    def promotable(self) -> bool:
        """`promote` takes it: the gate said so, or (not judged yet) every test passed."""
        return self.verdict == "promote" if self.verdict is not None else self.passed and not self.waits_for

    @property
    def label(self) -> str:
        """What the gate says of it, in the words of the excuses (never "awaiting promotion" for a build the
        gate holds)."""
        if self.waits_for:
            return f"not built: waits for {', '.join(self.waits_for)}"
        if self.verdict == "promote":
            return "awaiting promotion"
        if self.verdict == "waiting":
            return f"waiting: {self.group}" if self.group else "waiting"
        if self.verdict is not None:
            word = "held permanently" if self.verdict == "held-permanently" else "held"
            return f"{word}: {self.group}" if self.group else word
        if self.passed:
            return "passed: not judged by the promotion gate yet (`conda-distro excuses`)"
        return "held: a test failed" if any(c.status == "failed" for c in self.cells) else "not fully tested"


@dataclass
class PackageRow:
    name: str
    maintainers: list[str]
    newest: ArtifactEntry | None
    cells: list[Cell]
    flag: Entry | None = None
    retired: RetiredEntry | None = None
    dependencies: list[str] = field(default_factory=list)
    dependents: list[str] = field(default_factory=list)
    level: int | None = None
    staged: StagedRow | None = None
    recipe_path: str | None = None
    recipe_url: str | None = None
    pulls_url: str | None = None  # its open pull requests (a GitHub search)

    @property
    def state(self) -> str:
        """For colouring the dependency view: retired | retire | remove-recipe | ping | pending | ok | absent
        (nothing in main)."""
        if self.retired:
            return "retired"
        if self.flag:
            return self.flag.action.value
        return "ok" if self.newest else "absent"

    def effective(self, release: str, variant: str) -> Cell:
        """The newest result known for (release, variant): staging's build when it has one, else main's."""
        main = next(c for c in self.cells if (c.release, c.variant) == (release, variant))
        if self.staged is not None:
            staged = next(c for c in self.staged.cells if (c.release, c.variant) == (release, variant))
            if staged.status not in ("not-tested", "not-applicable"):
                return staged
        return main


@dataclass(frozen=True)
class Lag:
    """A package of the distribution that does not admit and pass a release, and why."""

    name: str
    why: str  # pins exclude it | failing | blocked | not tested (upstream has no build) | not tested yet

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "why": self.why}


@dataclass(frozen=True)
class ReleaseProgress:
    """"2.6.0: 7 of 10 packages of the distribution admit and pass": of every package of the distribution
    that depends on pytorch (retired ones left out), how many admit the release (their newest build's pins,
    staging's when there is one) and pass it in every variant they are tested in; how many of those pass it
    with their build in main; and each of the others with why it lags."""

    release: str
    passing: int
    total: int
    in_main: int
    lagging: list[Lag] = field(default_factory=list)
    tracking_url: str | None = None  # the release sweep's tracking issue, for a release a sweep added

    @property
    def percent(self) -> int:
        return round(100 * self.passing / self.total) if self.total else 100

    @property
    def failing(self) -> list[str]:
        return [lag.name for lag in self.lagging if lag.why in ("failing", "blocked")]

    @property
    def untested(self) -> list[str]:
        return [lag.name for lag in self.lagging if lag.why.startswith("not tested")]

    @property
    def headline(self) -> str:
        return f"{self.release}: {self.passing} of {self.total} packages of the distribution admit and pass"

    def to_dict(self) -> dict[str, Any]:
        return {"release": self.release, "passing": self.passing, "total": self.total, "in_main": self.in_main,
                "headline": self.headline, "lagging": [lag.to_dict() for lag in self.lagging]}


@dataclass(frozen=True)
class Node:
    name: str
    x: int
    y: int
    state: str


@dataclass(frozen=True)
class Edge:
    source: Node
    target: Node

    @property
    def path(self) -> str:
        x1, y1 = self.source.x + NODE_W, self.source.y + NODE_H // 2
        x2, y2 = self.target.x, self.target.y + NODE_H // 2
        mid = (x1 + x2) // 2
        return f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"


NODE_W, NODE_H, COL_W, ROW_H, PAD = 150, 28, 210, 40, 16


@dataclass(frozen=True)
class Drawing:
    """The RecipeGraph levels laid out left (dependencies) to right (dependents)."""

    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int


@dataclass
class StatusPage:
    facts: Facts
    report: UnmaintainedReport
    rows: list[PackageRow]
    drawing: Drawing
    progress: list[ReleaseProgress] = field(default_factory=list)
    excuses: Excuses | None = None
    snapshots: list[SnapshotRecord] = field(default_factory=list)  # newest first
    #: when the page was made (shown in its header: a page is a snapshot, and readers must see how old)
    generated: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    def never_built(self) -> list[tuple[str, tuple[str, ...]]]:
        """Packages with nothing in main nor staging that `build` does not attempt because a dependency
        fails or is blocked: (package, the dependencies it waits for). The gate has no candidate for them,
        so the excuses alone would leave them out."""
        return [(r.name, r.staged.waits_for) for r in self.rows
                if r.staged is not None and r.staged.artifact is None and r.staged.waits_for]

    def forced(self) -> list[tuple[str, ArtifactEntry]]:
        """Artifacts in main that a ``force`` hint of hints.yaml promoted past the gate: (package, entry)."""
        return [(p.name, a) for p in self.facts.packages.values() for a in p.in_main if a.forced_by]
    watch: dict[str, Any] | None = None  # the last `watch` report (build/watch/report.json)

    def counts(self) -> dict[str, int]:
        """Cells by status, main and staging rows together."""
        out: dict[str, int] = {s: 0 for s in CELL_STATUSES}
        for row in self.rows:
            for c in row.cells + (row.staged.cells if row.staged else []):
                out[c.status] += 1
        return out

    def failures(self) -> list[Cell]:
        """Every failed cell (main, then staging), package by package."""
        return [c for row in self.rows for c in row.cells + (row.staged.cells if row.staged else [])
                if c.status == "failed"]

    def logs(self) -> list[Cell]:
        """Cells whose log the page links to: failures, and the regressions of the excuses."""
        return self.failures()


# ---------------------------------------------------------------------------------------------
# building the page (pure)


def make_cell(pkg: PackageFacts, release: str, variant: str, facts: Facts) -> Cell:
    target = Target(release, Variant(variant))
    tested = [a for a in pkg.in_main if target in latest_tests(a)]
    if tested:
        a = newest_artifact(tested)
        assert a is not None  # tested is not empty
        t = latest_tests(a)[target]
        run = facts.results[a.artifact].latest().get(target) if a.artifact in facts.results else None
        same = run if run is not None and run.status == t.status else None  # the ledger keeps no reason or log: the build's results do
        return Cell(pkg.name, release, variant, t.status, a.artifact, t.date,
                    reason=same.reason if same else None, log=same.log if same else None, gpu=t.gpu)
    gpu_only = not Variant(variant).cuda and pkg.name in facts.cuda_only
    not_admitted = pkg.admitted is not None and release not in pkg.admitted
    if gpu_only or not_admitted or not pkg.tracks_pytorch:
        return Cell(pkg.name, release, variant, "not-applicable")
    return Cell(pkg.name, release, variant, "not-tested")


def _staged_status(status: TestStatus) -> CellStatus:
    """A staged test's cell: an infrastructure error is no verdict on the package, so it reads not-tested."""
    return "not-tested" if status == "error" else status


def staged_row(pkg: PackageFacts, main: list[Cell], excuse: Excuse | None = None) -> StagedRow | None:
    """The staging row: the staged build's latest results; without one, what main's cell says when that
    is not-applicable, else not-tested. Its label is the gate's verdict (``excuse``) when it has one."""
    b = pkg.staged
    if b is None:
        return None
    cells = []
    for m in main:
        t = b.tests.get(Target(m.release, Variant(m.variant)))
        cells.append(Cell(pkg.name, m.release, m.variant, _staged_status(t.status), b.artifact, t.date, "staging", t.reason, t.log,
                          gpu=t.gpu)
                     if t else Cell(pkg.name, m.release, m.variant,
                                    "not-applicable" if m.status == "not-applicable" else "not-tested",
                                    source="staging"))
    if excuse is None:
        return StagedRow(b.artifact, b.version, b.promotable, cells)
    return StagedRow(b.artifact, b.version, b.promotable, cells, verdict=excuse.verdict,
                     group="" if excuse.verdict == "promote" else excuse.title, advice=tuple(excuse.advice))


def make_rows(facts: Facts, report: UnmaintainedReport, repo: RepoLinks | None = None,
              excuses: Excuses | None = None) -> list[PackageRow]:
    judged: dict[tuple[str, str], Excuse] = {(e.name, e.new_version): e for e in (excuses.candidates if excuses else ())}
    flags = {e.name: e for e in report.packages}
    retired = {r.name: r for r in report.retired}
    level_of = {n: i for i, level in enumerate(facts.graph.levels()) for n in level}
    rows = []
    for name, pkg in facts.packages.items():
        cells = [make_cell(pkg, r.release, v, facts) for r in facts.releases for v in facts.variants]
        in_graph = name in facts.graph.g
        rows.append(PackageRow(name, pkg.maintainers, pkg.newest, cells, flags.get(name), retired.get(name),
                        sorted(facts.graph.dependencies(name)) if in_graph else [],
                        sorted(facts.graph.dependents(name)) if in_graph else [], level_of.get(name),
                        staged_row(pkg, cells, judged.get((name, pkg.staged.version)) if pkg.staged else None),
                        pkg.recipe_path,
                        repo.file(pkg.recipe_path) if repo and pkg.recipe_path else None,
                        repo.pulls(name) if repo and pkg.recipe_path else None))
    return rows


def blocked_rows(facts: Facts, rows: list[PackageRow]) -> None:
    """A package with nothing in main and no build in staging whose distribution dependencies fail or are
    blocked on a release × variant is blocked there (`build` does not attempt it): give it a staging row
    saying so, instead of "untested". Dependencies first, so a block passes on to dependents."""
    by = {r.name: r for r in rows}
    for name in facts.graph.order():
        row = by.get(name)
        if row is None or row.newest is not None or row.staged is not None or row.retired:
            continue
        parents = [by[d] for d in sorted(facts.graph.dependencies(name)) if d in by]
        cells, waits = [], set()
        for m in row.cells:
            bad = [p.name for p in parents if p.effective(m.release, m.variant).status in ("failed", "blocked")] \
                if m.status != "not-applicable" else []
            waits.update(bad)
            cells.append(Cell(name, m.release, m.variant, "blocked", source="staging",
                              reason=f"not built: {', '.join(bad)} fails or is blocked here") if bad else
                         Cell(name, m.release, m.variant, m.status, source="staging"))
        if waits:
            row.staged = StagedRow(None, None, False, cells, tuple(sorted(waits)))


#: (package, release, variant) -> why upstream cannot serve a test of it, or None (it can, or unknown)
Untestable = Callable[[str, str, str], "str | None"]


def _lag(row: PackageRow, release: str, variants: list[str], untestable: Untestable | None) -> str | None:
    """Why a package does not admit and pass ``release`` (None: it does)."""
    cells = [row.effective(release, v) for v in variants]
    applicable = [c for c in cells if c.status != "not-applicable"]
    if not applicable:
        return "pins exclude it"
    if all(c.status == "passed" for c in applicable):
        return None
    if any(c.status == "failed" for c in applicable):
        return "failing"
    if any(c.status == "blocked" for c in applicable):
        return "blocked"
    if untestable is not None and any(untestable(row.name, release, c.variant) for c in applicable
                                      if c.status == "not-tested"):
        return "not tested (upstream has no build)"
    return "not tested yet"


def release_progress(facts: Facts, rows: list[PackageRow], repo: RepoLinks | None = None,
                     untestable: Untestable | None = None) -> list[ReleaseProgress]:
    counted = [row for row in rows if not (row.retired and row.newest is None)
               and (facts.packages[row.name].tracks_pytorch if row.name in facts.packages else True)]
    out = []
    for rd in facts.releases:
        passing = in_main = 0
        lagging = []
        for row in counted:
            why = _lag(row, rd.release, facts.variants, untestable)
            if why is not None:
                lagging.append(Lag(row.name, why))
                continue
            passing += 1
            main = [c for c in row.cells if c.release == rd.release and c.status != "not-applicable"]
            in_main += bool(main) and all(c.status == "passed" for c in main)
        out.append(ReleaseProgress(rd.release, passing, len(counted), in_main, lagging,
                                   repo.sweep_issue(rd.release) if repo and rd.added_later else None))
    return out


# ---------------------------------------------------------------------------------------------
# links


@dataclass(frozen=True)
class RepoLinks:
    """Links into the repository on GitHub: files (``{url}/blob/{ref}/{path}``) and searches of its pull
    requests and issues (GitHub's search cannot filter pull requests by the files they change: a package's
    link finds the open ones that name it, in their title, body or comments; the sweep's PRs are titled
    ``NAME: admit pytorch VER`` and check-pr's sticky comment names every package a PR affects)."""

    url: str
    ref: str

    def file(self, path: str) -> str:
        return f"{self.url}/blob/{self.ref}/{path}"

    def pulls(self, name: str) -> str:
        return f"{self.url}/pulls?q={quote_plus(f'is:pr is:open {name}')}"

    def sweep_issue(self, release: str) -> str:
        """The release sweep's tracking issue (the release-sweep workflow titles it so)."""
        query = 'is:issue in:title "' + SWEEP_ISSUE_TITLE.format(release=release) + '"'
        return f"{self.url}/issues?q={quote_plus(query)}"


_GITHUB_REMOTE = re.compile(r"^(?:https://github\.com/|git@github\.com:|ssh://git@github\.com/)"
                            r"(?P<repo>[\w.-]+/[\w.-]+?)(?:\.git)?/?$")


def repo_links(root: Path, url: str | None) -> RepoLinks | None:
    """``--repo-url`` (or the ``origin`` remote when it is on GitHub) at the checked-out commit."""
    ref = "HEAD"
    remote = None
    repo = find_repo(root, with_commit=True)
    if repo is not None:  # else: not a repository, no commit: links at HEAD, or none
        ref = repo.head.commit.hexsha
        remote = origin_url(repo)
    if url:
        if not re.fullmatch(r"https://[\w.-]+(?::\d+)?/[\w./-]+", url.strip()):
            raise UsageError(f"'{url}' is not a repository URL", field="--repo-url",
                             hint="give the repository's web address, e.g. https://github.com/OWNER/REPO")
        return RepoLinks(url.strip().rstrip("/"), ref)
    m = _GITHUB_REMOTE.match(remote or "")
    return RepoLinks(f"https://github.com/{m.group('repo')}", ref) if m else None


def profile_url(handle: str) -> str:
    """A maintainer's GitHub profile (``org/team``: the team's page)."""
    if "/" in handle:
        org, team = handle.split("/", 1)
        return f"https://github.com/orgs/{org}/teams/{team}"
    return f"https://github.com/{handle}"


def ordered_levels(facts: Facts) -> list[list[str]]:
    """RecipeGraph levels, each sorted by the mean position of its dependencies (fewer crossing edges)."""
    pos: dict[str, int] = {}
    out: list[list[str]] = []
    for level in facts.graph.levels():
        def key(name: str) -> tuple[float, str]:
            parents = [pos[p] for p in facts.graph.dependencies(name) if p in pos]
            return (sum(parents) / len(parents) if parents else float("inf"), name)

        level = sorted(level, key=key) if out else level
        pos.update({n: j for j, n in enumerate(level)})
        out.append(level)
    return out


def draw(facts: Facts, rows: list[PackageRow]) -> Drawing:
    state = {r.name: r.state for r in rows}
    levels = ordered_levels(facts)
    nodes: dict[str, Node] = {}
    for i, level in enumerate(levels):
        for j, name in enumerate(level):
            nodes[name] = Node(name, PAD + i * COL_W, PAD + j * ROW_H, state.get(name, "absent"))
    edges = [Edge(nodes[u], nodes[v]) for u, v in sorted(facts.graph.g.edges)]
    width = PAD * 2 + max(len(levels) - 1, 0) * COL_W + NODE_W
    height = PAD * 2 + max((len(level) for level in levels), default=0) * ROW_H
    return Drawing(list(nodes.values()), edges, width, height)


def pending_excuses(facts: Facts, excuses: Excuses | None) -> Excuses | None:
    """The excuses of candidates not in main yet: those `promote` promoted since it wrote the file are left
    out (the file is the gate's view before it promoted them)."""
    if excuses is None:
        return None
    in_main = {a.artifact for pkg in facts.packages.values() for a in pkg.in_main}
    return excuses.model_copy(update={"candidates": [c for c in excuses.candidates
                                                     if not (c.artifacts and set(c.artifacts) <= in_main)]})


def build_page(facts: Facts, excuses: Excuses | None = None, repo: RepoLinks | None = None,
               untestable: Untestable | None = None) -> StatusPage:
    excuses = pending_excuses(facts, excuses)
    report = evaluate(facts)
    rows = make_rows(facts, report, repo, excuses)
    blocked_rows(facts, rows)
    return StatusPage(facts, report, rows, draw(facts, rows), release_progress(facts, rows, repo, untestable), excuses)


def untestable_of(dist: Distribution) -> Untestable | None:
    """Which tests upstream cannot serve (no pytorch build of the release and variant, or none of a lockstep
    package the recipe needs, itself or through its distribution dependencies); None when upstream cannot
    be read (nothing is then said of it)."""
    from conda_distro.engine.releases import availability_if_readable

    available = availability_if_readable(dist.distro)
    if available is None:
        return None
    lockstep = set(dist.config.pytorch.lockstep)
    by_name = {r.name: r for r in dist.recipes.values()}
    graph = RecipeGraph.from_recipes(dist.recipes)

    def needs(name: str) -> set[str]:
        names = {name} | (graph.ancestors(name) if name in graph.g else set())
        return {d for n in names if n in by_name for d in by_name[n].dep_names("host", "run") if d in lockstep}

    def why(name: str, release: str, variant: str) -> str | None:
        return available.why_not(Target(release, Variant(variant)), needs(name))

    return why


def render_page(page: StatusPage, log_links: dict[str, str] | None = None) -> str:
    return render("status.html.j2", page=page, facts=page.facts, report=page.report, labels=CELL_LABELS,
                  statuses=CELL_STATUSES, node_w=NODE_W, node_h=NODE_H, profile=profile_url,
                  log_links=log_links or {})


# ---------------------------------------------------------------------------------------------
# the command


PAGE_FILES = ("index.html", "style.css")
LOGS_DIR = "logs"


def _check_out(out: Path, distro: DistroRepo) -> Path:
    """``--out`` must be a folder (or not exist yet) of its own: not the repository, nor one of its reserved
    places (:mod:`conda_distro.util.layout`), nor a local channel."""
    why = clash(out, distro.root)
    channels = [(f"channels.{k}", r) for k in ("staging", "main") if not distro.is_anaconda(r := getattr(distro.config.channels, k))]
    channels += [(f"channels.upstream ('{u}')", u) for u in distro.config.channels.upstream if distro.is_local_ref(u)]
    for name, ref in channels if why is None else ():
        ch, where = distro.resolve_local(ref).resolve(), out.resolve()
        if where == ch or where.is_relative_to(ch) or ch.is_relative_to(where):
            why = f"it is, lies inside or holds the channel of {name}"
    if why:
        raise UsageError(f"the page cannot be written to {out}: {why}", field="--out",
                         hint="pass a folder of its own, such as site/")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a folder", field="--out", hint="pass a folder to write the page into")
    for name in PAGE_FILES:
        target = out / name
        if target.exists() and not target.is_file():
            raise UsageError(f"{target} exists and is not a file; the page cannot be written there", path=target,
                             field="--out", hint=f"move {target} away or pass another folder")
    return out


def _log_source(log: str, root: Path, build_dir: Path) -> Path | None:
    """The file a recorded log path names, when it is a regular file of the build's log folder
    (``build/logs/``, check-pr's ``build/pr/<ref>/logs/``; a relative path is relative to the repository)
    reached without a symbolic link; None otherwise. A results or excuses file can name any path: only
    logs are copied next to the page, never ``/etc/passwd`` or a link out of the log folder."""
    try:
        src = Path(log) if Path(log).is_absolute() else root / log
        if src.is_symlink() or not src.is_file():
            return None
        real, build = src.resolve(), build_dir.resolve()
    except (OSError, ValueError):  # (ValueError: an embedded NUL)
        return None
    parts = real.relative_to(build).parts if real.is_relative_to(build) else ()
    in_logs = (len(parts) >= 2 and parts[0] == "logs") or (len(parts) >= 4 and parts[0] == "pr" and parts[2] == "logs")
    return real if in_logs else None


def _log_copies(page: StatusPage, root: Path, build_dir: Path) -> dict[str, str]:
    """recorded log path -> page-relative copy (``logs/<package>/<file>``), for every log the page links to
    that exists on this machine in the build's log folder (:func:`_log_source`)."""
    paths = [(c.package, c.log) for c in page.logs() if c.log]
    if page.excuses:
        paths += [(r.package, r.log) for c in page.excuses.candidates for r in c.regressions if r.log]
    out: dict[str, str] = {}
    for package, log in paths:
        src = _log_source(log, root, build_dir)
        if log in out or src is None:
            continue
        rel, n = f"{LOGS_DIR}/{_safe(package)}/{_safe(src.name)}", 2
        while rel in out.values():  # two logs of one package with the same file name
            rel, n = f"{LOGS_DIR}/{_safe(package)}/{n}-{_safe(src.name)}", n + 1
        out[log] = rel
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^\w.+-]", "_", name).lstrip(".") or "_"


def _write(path: Path, data: str | bytes) -> None:
    try:
        if isinstance(data, bytes):
            atomic_write_bytes(path, data)
        else:
            atomic_write_text(path, data)
    except OSError as exc:
        raise UsageError(f"cannot write the page: {exc.strerror}", path=path, field="--out",
                         hint="pass a folder you can write to") from None


def _tail(path: Path) -> bytes:
    """The end of the log ``path``: a regular file, opened without following a symbolic link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        size = fh.seek(0, 2)
        fh.seek(max(0, size - LOG_TAIL))
        data = fh.read(LOG_TAIL)
    return (b"[... the beginning of the log is cut ...]\n" + data) if size > LOG_TAIL else data


def _snapshot_files(snapshots: list[SnapshotRecord], build_dir: Path, out: Path) -> list[Path]:
    """Each snapshot's lockfiles and SBOM, copied to ``snapshots/<name>/`` beside the page (what exists on
    this machine; regular files only, read without following a symbolic link)."""
    written = []
    for s in snapshots:
        base = files_of(s, build_dir)
        for rel in [*s.lockfiles.values(), *([s.sbom] if s.sbom else [])]:
            try:
                data = _read_regular(base / rel)
            except OSError:
                continue
            _write(out / SNAPSHOTS_DIR / s.name / rel, data)
            written.append(out / SNAPSHOTS_DIR / s.name / rel)
    return written


def _read_regular(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return fh.read()


def write_status(options: StatusOptions) -> StatusResult:
    as_of = parse_as_of(options.as_of)
    dist = load_distribution(options.root)
    out = _check_out(options.out, dist.distro)
    excuses = read_excuses(dist.distro.build_dir)
    stale = frozenset(b.artifact for b in excuses.stale) if excuses else frozenset()
    page = build_page(gather(dist, as_of, sweeps=False, skip=stale), excuses, repo_links(dist.root, options.repo_url),
                      untestable_of(dist))
    page.snapshots = list(reversed(SnapshotStore(dist.distro.state_dir).all()))
    page.watch = read_watch_report(dist.distro.build_dir)
    logs = _log_copies(page, dist.root, dist.distro.build_dir)
    html, css = render_page(page, logs), static("style.css")
    written = _snapshot_files(page.snapshots, dist.distro.build_dir, out)
    for name, text in zip(PAGE_FILES, (html, css), strict=True):
        _write(out / name, text)
        written.append(out / name)
    for src, rel in sorted(logs.items(), key=lambda kv: kv[1]):
        path = _log_source(src, dist.root, dist.distro.build_dir)  # (again: just before it is read)
        try:
            if path is None:
                continue
            data = _tail(path)
        except OSError:
            continue
        _write(out / rel, data)
        written.append(out / rel)
    return StatusResult(written, progress=page.progress)
