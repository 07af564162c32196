"""`status --out DIR`: a static status page (``index.html`` + ``style.css``, no external assets, no JS).

It shows a package × release × variant matrix, each cell one of :data:`CELL_STATUSES` and carrying
``data-package``/``data-release``/``data-variant``/``data-status`` attributes; maintainers; the newest
version in main and when it was promoted; the `report unmaintained` flags; retirements; and a dependency
view (an inline SVG of the RecipeGraph levels plus a table of dependencies and dependents).

It reads only channel_state/ and the repository (recipes, distro.yaml, git): never a channel, so CI can
publish it from a plain checkout. A cell's status comes from the newest artifact in main that has a result
for that (release, variant); without one it is ``not-applicable`` when the pins don't admit the release
(or the package needs a GPU and the variant is cpu) and ``not-tested`` otherwise.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from conda_distro.distribution import load_distribution
from conda_distro.errors import UsageError
from conda_distro.ledger import ArtifactEntry
from conda_distro.reports.facts import Facts, PackageFacts, gather, latest_tests, newest_artifact, parse_as_of
from conda_distro.reports.render import render, static
from conda_distro.reports.unmaintained import Entry, RetiredEntry, UnmaintainedReport, evaluate
from conda_distro.yamlio import atomic_write_text

CellStatus = Literal["passed", "failed", "blocked", "not-applicable", "not-tested"]
CELL_STATUSES: tuple[CellStatus, ...] = ("passed", "failed", "blocked", "not-applicable", "not-tested")
CELL_LABELS = {"passed": "pass", "failed": "fail", "blocked": "blocked", "not-applicable": "n/a",
               "not-tested": "untested"}


@dataclass(frozen=True)
class StatusOptions:
    out: Path
    root: Path | None = None
    as_of: str | None = None  # YYYY-MM-DD; default today (UTC)


@dataclass
class StatusResult:
    written: list[Path]

    def to_dict(self) -> dict[str, Any]:
        return {"ok": True, "written": [str(p) for p in self.written]}

    def text_lines(self) -> list[str]:
        return [f"wrote {p}" for p in self.written]


@dataclass(frozen=True)
class Cell:
    package: str
    release: str
    variant: str
    status: CellStatus
    artifact: str | None = None
    date: dt.datetime | None = None

    @property
    def label(self) -> str:
        return CELL_LABELS[self.status]

    @property
    def title(self) -> str:
        where = f"{self.package} on pytorch {self.release} ({self.variant})"
        if self.artifact:
            return f"{where}: {self.status} on {self.date:%Y-%m-%d}, {self.artifact.split('/')[-1]}"
        if self.status == "not-applicable":
            return f"{where}: not applicable (its pins do not admit this release or variant)"
        return f"{where}: no test result in channel_state/"


@dataclass
class Row:
    name: str
    maintainers: list[str]
    newest: ArtifactEntry | None
    cells: list[Cell]
    flag: Entry | None = None
    retired: RetiredEntry | None = None
    dependencies: list[str] = field(default_factory=list)
    dependents: list[str] = field(default_factory=list)
    level: int | None = None

    @property
    def state(self) -> str:
        """For colouring the dependency view: retired | retire | ping | ok | absent (nothing in main)."""
        if self.retired:
            return "retired"
        if self.flag:
            return self.flag.action.value
        return "ok" if self.newest else "absent"


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
    rows: list[Row]
    drawing: Drawing

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in CELL_STATUSES}
        for row in self.rows:
            for c in row.cells:
                out[c.status] += 1
        return out


# ---------------------------------------------------------------------------------------------
# building the page (pure)


def make_cell(pkg: PackageFacts, release: str, variant: str, facts: Facts) -> Cell:
    tested = [a for a in pkg.in_main if (release, variant) in latest_tests(a)]
    if tested:
        a = newest_artifact(tested)
        t = latest_tests(a)[(release, variant)]
        return Cell(pkg.name, release, variant, t.status, a.artifact, t.date)
    gpu_only = variant == "cpu" and pkg.name in facts.cuda_only
    not_admitted = pkg.admitted is not None and release not in pkg.admitted
    if gpu_only or not_admitted or not pkg.tracks_pytorch:
        return Cell(pkg.name, release, variant, "not-applicable")
    return Cell(pkg.name, release, variant, "not-tested")


def make_rows(facts: Facts, report: UnmaintainedReport) -> list[Row]:
    flags = {e.name: e for e in report.packages}
    retired = {r.name: r for r in report.retired}
    level_of = {n: i for i, level in enumerate(facts.graph.levels()) for n in level}
    rows = []
    for name, pkg in facts.packages.items():
        cells = [make_cell(pkg, r.release, v, facts) for r in facts.releases for v in facts.variants]
        in_graph = name in facts.graph.g
        rows.append(Row(name, pkg.maintainers, pkg.newest, cells, flags.get(name), retired.get(name),
                        sorted(facts.graph.dependencies(name)) if in_graph else [],
                        sorted(facts.graph.dependents(name)) if in_graph else [], level_of.get(name)))
    return rows


def ordered_levels(facts: Facts) -> list[list[str]]:
    """RecipeGraph levels, each sorted by the mean position of its dependencies (fewer crossing edges)."""
    pos: dict[str, int] = {}
    out = []
    for level in facts.graph.levels():
        def key(name: str) -> tuple[float, str]:
            parents = [pos[p] for p in facts.graph.dependencies(name) if p in pos]
            return (sum(parents) / len(parents) if parents else float("inf"), name)

        level = sorted(level, key=key) if out else level
        pos.update({n: j for j, n in enumerate(level)})
        out.append(level)
    return out


def draw(facts: Facts, rows: list[Row]) -> Drawing:
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


def build_page(facts: Facts) -> StatusPage:
    report = evaluate(facts)
    rows = make_rows(facts, report)
    return StatusPage(facts, report, rows, draw(facts, rows))


def render_page(page: StatusPage) -> str:
    return render("status.html.j2", page=page, facts=page.facts, report=page.report, labels=CELL_LABELS,
                  statuses=CELL_STATUSES, node_w=NODE_W, node_h=NODE_H)


# ---------------------------------------------------------------------------------------------
# the command


PAGE_FILES = ("index.html", "style.css")


def _check_out(out: Path) -> Path:
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a folder", field="--out", hint="pass a folder to write the page into")
    for name in PAGE_FILES:
        target = out / name
        if target.exists() and not target.is_file():
            raise UsageError(f"{target} exists and is not a file; the page cannot be written there", path=target,
                             field="--out", hint=f"move {target} away or pass another folder")
    return out


def write_status(options: StatusOptions) -> StatusResult:
    as_of = parse_as_of(options.as_of)
    out = _check_out(options.out)
    page = build_page(gather(load_distribution(options.root), as_of, sweeps=False))
    html, css = render_page(page), static("style.css")
    written = []
    for name, text in zip(PAGE_FILES, (html, css)):
        try:
            atomic_write_text(out / name, text)
        except OSError as exc:
            raise UsageError(f"cannot write the page: {exc.strerror}", path=out / name, field="--out",
                             hint="pass a folder you can write to") from None
        written.append(out / name)
    return StatusResult(written)
