"""The text of a build run: the dry run's plan, or the table of results (one row per package, a column per
release × variant), each failure once with one log, the verdict, and the targets nobody could test against.

A failure's reason is text from recipe code (a script's last output line, a solver's words about the
recipe's requirements): it is shown through :func:`conda_distro.util.safetext.shown` (``text``: no escape
sequences or control characters, no mentions, one bounded line)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conda_distro.engine.gpu import variant_label
from conda_distro.util.safetext import shown
from conda_distro.vocab import Target

if TYPE_CHECKING:
    from conda_distro.engine.executor import ExecutionResult
    from conda_distro.engine.plan import BuildPlan
    from conda_distro.state.results import BuildRecord, TestRecord


CELL = {"passed": "pass", "failed": "FAIL", "error": "error", "blocked": "blocked", "flaky": "flaky"}


def _rkey(release: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in release.split("."))


def _cell(statuses: list[str]) -> str:
    """One package's results against one release × variant (several artifacts: the worst)."""
    for s in ("failed", "error", "blocked", "flaky", "passed"):
        if s in statuses:
            return CELL[s]
    return "–"


def _build_word(statuses: list[str]) -> str:
    for s in ("failed", "error", "blocked", "built", "skipped-existing"):
        if s in statuses:
            word = "skipped" if s == "skipped-existing" else s
            n = statuses.count(s)
            return word if n == len(statuses) == 1 or s in ("failed", "error", "blocked") else f"{n} {word}"
    return "–"


def _where(pairs: list[Target]) -> str:
    """[(2.4.1, cpu), (2.4.1, cuda), (2.5.1, cpu)] -> "2.4.1 (cpu, cuda), 2.5.1 (cpu)"; each variant once (a
    package of several artifacts is tested once per artifact)."""
    by: dict[str, list[str]] = {}
    for r, v in sorted(set(pairs), key=lambda rv: (_rkey(rv[0]), rv[1])):
        by.setdefault(r, []).append(v)
    return ", ".join(f"{r} ({', '.join(vs)})" for r, vs in by.items())


def _variant_head(report: ExecutionResult, release: str, variant: str) -> str:
    """``cuda (no GPU)`` when this release's cuda tests ran on a machine without a working GPU."""
    seen = {t.gpu for t in report.tests if t.target == (release, variant) and t.gpu is not None}
    return variant_label(variant, False if seen == {False} else None)


def build_table(report: ExecutionResult) -> list[str]:
    """The final output of `build`: one row per package (build status, then each release × variant), then
    each failure once per package and reason with the releases it hit and one log, then the verdict."""
    names: list[str] = []
    records: list[BuildRecord | TestRecord] = [*report.builds, *report.tests]
    for rec in records:
        if rec.name not in names:
            names.append(rec.name)
    targets = sorted({t.target for t in report.tests}, key=lambda rv: (_rkey(rv[0]), rv[1]))
    version = {b.name: b.version for b in report.builds}
    head = ["package", "version", "build", *(f"{r} {_variant_head(report, r, v)}" for r, v in targets)]
    rows = [head]
    for name in names:
        cells = [_cell([t.status for t in report.tests if t.name == name and t.target == rv])
                 for rv in targets]
        rows.append([name, version.get(name, ""), _build_word([b.status for b in report.builds if b.name == name]),
                     *cells])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    problems: list[str] = []
    for b in report.builds:
        if b.status in ("failed", "error"):
            word = "build failed" if b.status == "failed" else "build stopped (error)"
            problems.append(f"  {b.name} {b.version}: {word}" + (f": {_reason(b.reason)}" if b.reason else "")
                            + (f"\n      log: {b.log}" if b.log else ""))
    for name in names:
        groups: dict[tuple[str, str], list] = {}
        for t in report.tests:
            if t.name == name and t.status != "passed":
                groups.setdefault((t.status, t.reason or ""), []).append(t)
        for (status, reason), tests in groups.items():
            if status == "blocked" and any(b.name == name and b.status == "blocked" for b in report.builds):
                where = "everything"
            else:
                where = "pytorch " + _where([t.target for t in tests])
            line = f"  {name} {version.get(name, '')}: {status} on {where}" + (f": {_reason(reason)}" if reason else "")
            log = next((t.log for t in tests if t.log), None)
            problems.append(line + (f"\n      log: {log}" if log else ""))
    if problems:
        lines += ["", "failures:", *problems]
    bad = [n for n in names if any(r.name == n and r.status in ("failed", "error", "blocked")
                                   for r in records)]
    counts = {s: sum(t.status == s for t in report.tests) for s in ("passed", "failed", "error", "blocked")}
    cached = sum(t.cached for t in report.tests)
    tail = f"{counts['passed']} tests passed" + (f"; {cached} results reused, their inputs unchanged" if cached else "")
    if report.ok:
        lines += ["", f"ok: {len(names)} package(s), {tail}"]
    else:
        lines += ["", f"FAILED: {len(bad)} of {len(names)} package(s) failed or blocked "
                      f"({counts['failed']} tests failed, "
                      + (f"{counts['error']} could not finish (infrastructure error), " if counts["error"] else "")
                      + f"{counts['blocked']} blocked; {tail})"]
    return lines


def _reason(text: str) -> str:
    """A failure's reason as a terminal shows it (text from recipe code: see the module docstring)."""
    return shown(" ".join(text.split()), "text")


def plan_lines(plan: BuildPlan) -> list[str]:
    """What a dry run would build, and against which releases it would test."""
    lines = ["plan (dry run; nothing built):"]
    for p in plan.packages:
        lines.append(f"  {p.name} {p.version}")
        for v in p.variants:
            lines.append(f"    {v.action:14} {v.spec.artifact}")
        for artifact, why in p.not_built:
            lines.append(f"    {'not built':14} {artifact} ({why})")
        lines.append(f"    test against: {', '.join(str(t) for t in p.targets) or '(no supported release admitted)'}")
        for t, why in p.unavailable:
            lines.append(f"    not tested:   {t} ({why})")
    return lines


def untested_lines(plan: BuildPlan) -> list[str]:
    """After the table: the targets nobody could test against (upstream has no build of them), and the builds
    not made because upstream cannot serve their host environment, per package."""
    untested = [(p.name, t, why) for p in plan.packages for t, why in p.unavailable]
    not_built = [(p.name, a, why) for p in plan.packages for a, why in p.not_built]
    out: list[str] = []
    if untested:
        out += ["", "not tested (upstream has no build to test with; not required by promote):",
                *(f"  {name}: pytorch {t.release} {t.variant}: {why}" for name, t, why in untested)]
    if not_built:
        out += ["", "not built (upstream cannot serve the build's host environment):",
                *(f"  {name}: {artifact}: {why}" for name, artifact, why in not_built)]
    return out
