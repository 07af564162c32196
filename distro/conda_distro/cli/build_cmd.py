"""`conda-distro build`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from conda_distro.cli.app import DEFAULT_LOCK_TIMEOUT, FormatOpt, RootOpt, TextJson, app, out, print_json, report_unreadable, warn_no_sandbox

if TYPE_CHECKING:
    from conda_distro.engine.run import BuildRun


CELL = {"passed": "pass", "failed": "FAIL", "blocked": "blocked"}


def _rkey(release: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in release.split("."))


def _cell(statuses: list[str]) -> str:
    """One package's results against one release × variant (several artifacts: the worst)."""
    for s in ("failed", "blocked", "passed"):
        if s in statuses:
            return CELL[s]
    return "–"


def _build_word(statuses: list[str]) -> str:
    for s in ("failed", "blocked", "built", "skipped-existing"):
        if s in statuses:
            word = "skipped" if s == "skipped-existing" else s
            n = statuses.count(s)
            return word if n == len(statuses) == 1 or s in ("failed", "blocked") else f"{n} {word}"
    return "–"


def _where(pairs: list[tuple[str, str]]) -> str:
    """[(2.4.1, cpu), (2.4.1, cuda), (2.5.1, cpu)] -> "2.4.1 (cpu, cuda), 2.5.1 (cpu)"."""
    by: dict[str, list[str]] = {}
    for r, v in sorted(pairs, key=lambda rv: (_rkey(rv[0]), rv[1])):
        by.setdefault(r, []).append(v)
    return ", ".join(f"{r} ({', '.join(vs)})" for r, vs in by.items())


def _variant_head(report, release: str, variant: str) -> str:
    """``cuda (no GPU)`` when this release's cuda tests ran on a machine without a working GPU."""
    from conda_distro.gpu import variant_label

    seen = {t.gpu for t in report.tests if (t.pytorch, t.variant) == (release, variant) and t.gpu is not None}
    return variant_label(variant, False if seen == {False} else None)


def build_table(report) -> list[str]:
    """The final output of `build`: one row per package (build status, then each release × variant), then
    each failure once per package and reason with the releases it hit and one log, then the verdict."""
    names: list[str] = []
    for rec in [*report.builds, *report.tests]:
        if rec.name not in names:
            names.append(rec.name)
    targets = sorted({(t.pytorch, t.variant) for t in report.tests}, key=lambda rv: (_rkey(rv[0]), rv[1]))
    version = {b.name: b.version for b in report.builds}
    head = ["package", "version", "build", *(f"{r} {_variant_head(report, r, v)}" for r, v in targets)]
    rows = [head]
    for name in names:
        cells = [_cell([t.status for t in report.tests if t.name == name and (t.pytorch, t.variant) == rv])
                 for rv in targets]
        rows.append([name, version.get(name, ""), _build_word([b.status for b in report.builds if b.name == name]),
                     *cells])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    problems: list[str] = []
    for b in report.builds:
        if b.status == "failed":
            problems.append(f"  {b.name} {b.version}: build failed" + (f": {b.reason}" if b.reason else "")
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
                where = "pytorch " + _where([(t.pytorch, t.variant) for t in tests])
            line = f"  {name} {version.get(name, '')}: {status} on {where}" + (f": {reason}" if reason else "")
            log = next((t.log for t in tests if t.log), None)
            problems.append(line + (f"\n      log: {log}" if log else ""))
    if problems:
        lines += ["", "failures:", *problems]
    bad = [n for n in names if any(r.name == n and r.status in ("failed", "blocked")
                                   for r in [*report.builds, *report.tests])]
    counts = {s: sum(t.status == s for t in report.tests) for s in ("passed", "failed", "blocked")}
    cached = sum(t.cached for t in report.tests)
    tail = f"{counts['passed']} tests passed" + (f"; {cached} results reused, their inputs unchanged" if cached else "")
    if report.ok:
        lines += ["", f"ok: {len(names)} package(s), {tail}"]
    else:
        lines += ["", f"FAILED: {len(bad)} of {len(names)} package(s) failed or blocked "
                      f"({counts['failed']} tests failed, {counts['blocked']} blocked; {tail})"]
    return lines


def print_build_text(run: BuildRun) -> None:
    if run.report is None:
        out("plan (dry run; nothing built):")
        for p in run.plan.packages:
            out(f"  {p.name} {p.version}")
            for v in p.variants:
                out(f"    {v.action:14} {v.spec.artifact}")
            out(f"    test against: {', '.join(str(t) for t in p.targets) or '(no supported release admitted)'}")
            for t, why in p.unavailable:
                out(f"    not tested:   {t} ({why})")
        return
    for line in build_table(run.report):
        out(line)
    untested = [(p.name, t, why) for p in run.plan.packages for t, why in p.unavailable]
    if untested:
        out("")
        out("not tested (upstream has no build to test with; not required by promote):")
        for name, t, why in untested:
            out(f"  {name}: pytorch {t.pytorch} {t.variant}: {why}")


@app.command()
def build(
    names: Annotated[Optional[list[str]], typer.Argument(help="Packages that changed (their reverse dependencies are built too).", show_default=False)] = None,
    all_: Annotated[bool, typer.Option("--all", help="Build and test every package.")] = False,
    changed_since: Annotated[Optional[str], typer.Option("--changed-since", help="Git ref: build recipes changed since it, and their dependents.")] = None,
    pytorch: Annotated[Optional[list[str]], typer.Option("--pytorch", help="Test only against this release (repeatable).")] = None,
    variant: Annotated[Optional[list[str]], typer.Option("--variant", help="Test only this variant, cpu or cuda (repeatable; default: every variant of distro.yaml). CI runs each on the runner distro.yaml's ci.runners names.")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="How many packages to build and test at once (one worker process each).")] = 1,
    engine: Annotated[str, typer.Option("--engine", help="rattler-build (default) or conda-build (when on PATH).")] = "rattler-build",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; build nothing.")] = False,
    retry_errors: Annotated[bool, typer.Option("--retry-errors", help="Run again the tests that ended in an infrastructure error (worker killed, channel unreadable), and nothing else that is up to date.")] = False,
    no_sandbox: Annotated[bool, typer.Option("--no-sandbox", help="Run build and test scripts unsandboxed (no bubblewrap); never in CI.")] = False,
    lock_timeout: Annotated[float, typer.Option("--lock-timeout", min=0, help="Seconds to wait for another build or sweep into the same staging channel.")] = DEFAULT_LOCK_TIMEOUT,
    root: RootOpt = None,
    format: FormatOpt = TextJson.text,
) -> int:
    """Build affected packages into staging in dependency order, then test each artifact against every
    supported release × variant its pins admit."""
    warn_no_sandbox(no_sandbox)
    from conda_distro.distribution import load_distribution
    from conda_distro.engine.run import BuildOptions, run_build
    from conda_distro.progress import make_reporter

    dist = load_distribution(root, strict=False)
    options = BuildOptions(names=tuple(names or ()), all=all_, changed_since=changed_since, pytorch=tuple(pytorch or ()),
                           jobs=jobs, engine=engine, dry_run=dry_run, sandbox=not no_sandbox,
                           lock_timeout=lock_timeout, retry_errors=retry_errors,
                           variants=tuple(variant or ()))
    run = run_build(dist, options, make_reporter() if not dry_run else None)
    if format is TextJson.json:
        print_json(run.to_dict())
    else:
        report_unreadable(dist)
        print_build_text(run)
    return run.exit_code


@app.command()
def upload(root: RootOpt = None, format: FormatOpt = TextJson.text) -> int:
    """Upload the local builds to the anaconda.org staging label (channels.staging: anaconda://OWNER[/LABEL]),
    with the token from ANACONDA_API_TOKEN. Files already there with the same sha256 are skipped."""
    from conda_distro.distribution import load_distribution
    from conda_distro.engine.run import upload_staging

    uploaded = upload_staging(load_distribution(root))
    if format is TextJson.json:
        print_json({"uploaded": uploaded})
    else:
        for a in uploaded:
            out(f"on staging: {a}")
    return 0
