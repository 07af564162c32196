"""`conda-distro build`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from conda_distro.cli.app import DEFAULT_LOCK_TIMEOUT, FormatOpt, RootOpt, TextJson, app, out, print_json, report_unreadable, warn_no_sandbox

if TYPE_CHECKING:
    from conda_distro.engine.run import BuildRun


def print_build_text(run: BuildRun) -> None:
    if run.report is None:
        out("plan (dry run; nothing built):")
        for p in run.plan.packages:
            out(f"  {p.name} {p.version}")
            for v in p.variants:
                out(f"    {v.action:14} {v.spec.artifact}")
            out(f"    test against: {', '.join(str(t) for t in p.targets) or '(no supported release admitted)'}")
        return
    rep = run.report
    out("builds:")
    for b in rep.builds:
        out(f"  {b.status:16} {b.artifact or b.name}" + (f"  ({b.reason})" if b.reason else ""))
    out("tests:")
    for t in rep.tests:
        extra = f"  {t.reason}" if t.status != "passed" and t.reason else ""
        log = f"  log: {t.log}" if t.status == "failed" and t.log else ""
        out(f"  {t.status:8} {t.artifact}  pytorch {t.pytorch} ({t.variant}){' [unchanged]' if t.cached else ''}{extra}{log}")
    n_fail = sum(t.status != "passed" for t in rep.tests) + sum(b.status in ("failed", "blocked") for b in rep.builds)
    out("ok" if rep.ok else f"FAILED: {n_fail} failed or blocked build/test(s)")


@app.command()
def build(
    names: Annotated[Optional[list[str]], typer.Argument(help="Packages that changed (their reverse dependencies are built too).", show_default=False)] = None,
    all_: Annotated[bool, typer.Option("--all", help="Build and test every package.")] = False,
    changed_since: Annotated[Optional[str], typer.Option("--changed-since", help="Git ref: build recipes changed since it, and their dependents.")] = None,
    pytorch: Annotated[Optional[list[str]], typer.Option("--pytorch", help="Test only against this release (repeatable).")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Packages built/tested at once (processes).")] = 1,
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
                           lock_timeout=lock_timeout, retry_errors=retry_errors)
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
