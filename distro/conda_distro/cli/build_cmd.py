"""`conda-distro build` and `conda-distro upload`."""

from __future__ import annotations

from typing import Annotated

import typer

from conda_distro.cli.app import (
    DEFAULT_LOCK_TIMEOUT,
    Format,
    FormatOpt,
    JobsOpt,
    NoSandboxOpt,
    RootOpt,
    app,
    emit,
    lock_timeout_opt,
    warn_no_sandbox,
)


@app.command()
def build(
    names: Annotated[list[str] | None, typer.Argument(
            help="Packages that changed (their reverse dependencies are built too).", show_default=False)] = None,
    all_: Annotated[bool, typer.Option("--all", help="Build and test every package.")] = False,
    changed_since: Annotated[str | None, typer.Option("--changed-since",
            help="Git ref: build recipes changed since it, and their dependents.")] = None,
    pytorch: Annotated[list[str] | None, typer.Option("--pytorch", help="Test only against this release (repeatable).")] = None,
    variant: Annotated[list[str] | None, typer.Option("--variant",
            help="Test only this variant, cpu or cuda (repeatable; default: every variant of distro.yaml). CI runs "
                 "each on the runner distro.yaml's ci.runners names.")] = None,
    jobs: JobsOpt = None,
    engine: Annotated[str, typer.Option("--engine", help="rattler-build (default) or conda-build (when on PATH).")] = "rattler-build",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; build nothing.")] = False,
    retry_errors: Annotated[bool, typer.Option("--retry-errors",
            help="Run again the tests that ended in an infrastructure error (worker killed, channel unreadable), and "
                 "nothing else that is up to date.")] = False,
    no_sandbox: NoSandboxOpt = False,
    lock_timeout: Annotated[float, lock_timeout_opt(
            "a sweep of the repository and another build into the same staging channel")] = DEFAULT_LOCK_TIMEOUT,
    root: RootOpt = None,
    format: FormatOpt = Format.text,
) -> int:
    """Build affected packages into staging in dependency order, then test each artifact against every
    supported release × variant its pins admit."""
    warn_no_sandbox(no_sandbox)
    from conda_distro.cli.progress import progress_sink
    from conda_distro.engine.run import BuildOptions
    from conda_distro.engine.run import build as run_build

    return emit(run_build(BuildOptions(
        names=tuple(names or ()), all=all_, changed_since=changed_since, pytorch=tuple(pytorch or ()), jobs=jobs,
        engine=engine, dry_run=dry_run, sandbox=not no_sandbox, lock_timeout=lock_timeout,
        retry_errors=retry_errors, variants=tuple(variant or ()), root=root,
        progress=progress_sink())), format)


@app.command()
def upload(root: RootOpt = None, format: FormatOpt = Format.text) -> int:
    """Upload the local builds to the anaconda.org staging label (channels.staging: anaconda://OWNER[/LABEL]),
    with the token from ANACONDA_API_TOKEN. Files already there with the same sha256 are skipped."""
    from conda_distro.engine.run import UploadOptions
    from conda_distro.engine.run import upload as run_upload

    return emit(run_upload(UploadOptions(root=root)), format)
