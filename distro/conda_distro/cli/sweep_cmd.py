"""`conda-distro sweep` (release day, late admission) and `conda-distro sweep report` (read-only)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
import typer.core

from conda_distro.cli.app import (
    DEFAULT_LOCK_TIMEOUT,
    Format,
    JobsOpt,
    NoSandboxOpt,
    RootOpt,
    TextJsonMarkdown,
    app,
    emit,
    lock_timeout_opt,
    warn_no_sandbox,
)


class _SweepGroup(typer.core.TyperGroup):
    """``sweep`` runs the sweep itself (the group's callback); ``sweep report`` is its one subcommand, and
    then the sweep does not run. The usage line says both."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return ["--pytorch VER [OPTIONS]", "|", "report --pytorch VER [--format F]"]

    def invoke(self, ctx: Any) -> Any:
        if getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", None):  # `sweep report ...`
            callback, self.callback = self.callback, None
            try:
                return super().invoke(ctx)
            finally:
                self.callback = callback
        return super().invoke(ctx)


sweep_app = typer.Typer(name="sweep", cls=_SweepGroup, invoke_without_command=True, no_args_is_help=False,
                        add_completion=False, rich_markup_mode=None, subcommand_metavar="[report]")
app.add_typer(sweep_app, name="sweep")

PytorchOpt = Annotated[str | None, typer.Option("--pytorch", metavar="VER", show_default=False,
                                                help="The PyTorch release, e.g. 2.7.0 (required).")]


@sweep_app.callback()
def sweep(
    pytorch: PytorchOpt = None,
    package: Annotated[str | None, typer.Option("--package", metavar="NAME", show_default=False,
            help="Admit this one package to a release distro.yaml lists already (a package fixed after release "
                 "day: its pins still leave the release out).")] = None,
    commit: Annotated[bool, typer.Option("--commit",
            help="Make a git branch sweep/pytorch-VER with one commit per package (release day), and a branch "
                 "sweep/pytorch-VER-NAME per bumped package, then return to the current branch. After a run "
                 "without --commit, commits what that run left.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run",
            help="Print the plan (as a real run would, marked dry); edit, build and commit nothing. The release must "
                 "be published upstream.")] = False,
    no_build: Annotated[bool, typer.Option("--no-build", help="Edit only; skip building and testing.")] = False,
    jobs: JobsOpt = None,
    no_sandbox: NoSandboxOpt = False,
    author: Annotated[str, typer.Option("--author", help="Commit author 'Name <email>'.")] = "conda-distro bot <bot@conda-distro.invalid>",
    lock_timeout: Annotated[float, lock_timeout_opt(
            "another sweep, a build, promote or retire of this repository (and for a build into the same staging "
            "channel)")] = DEFAULT_LOCK_TIMEOUT,
    root: RootOpt = None,
    format: Annotated[TextJsonMarkdown, typer.Option("--format",
            help="text, json or markdown (PR and tracking-issue bodies).")] = Format.text,
) -> int:
    """Release-day sweep: admit a PyTorch release, widening pins where tests allow.

    A release distro.yaml does not list: release day (the release is added, every pin that leaves it out
    is widened, built and tested). A release it lists: late admission of the packages whose pins still
    leave it out and whose dependencies admit it (all of them, or --package NAME). A release swept and
    not merged yet, or with nothing to admit: exit 2 naming `sweep report --pytorch VER`, which prints
    the release's report and changes nothing.

    Exit 0 when the sweep ran, even when packages failed (their statuses say so; JSON `ok` is false);
    2 on bad input."""
    from conda_distro.cli.progress import progress_sink
    from conda_distro.sweep import SweepOptions
    from conda_distro.sweep import sweep as run_sweep

    warn_no_sandbox(no_sandbox)
    return emit(run_sweep(SweepOptions(release=pytorch or "", commit=commit, dry_run=dry_run, build=not no_build, jobs=jobs,
                                       author=author, sandbox=not no_sandbox, lock_timeout=lock_timeout, root=root,
                                       package=package, progress=progress_sink())),
                format)


@sweep_app.command("report")
def report(
    pytorch: PytorchOpt = None,
    root: RootOpt = None,
    format: Annotated[TextJsonMarkdown, typer.Option("--format",
            help="text, json or markdown (the tracking issue and PR bodies, after the state).")] = Format.text,
) -> int:
    """Print a release's sweep report and change nothing: where the release stands (from the repository),
    the packages whose pins still leave it out and what each waits for, and the last sweep's report as
    saved under build/sweep/, with the command to run next."""
    from conda_distro.sweep.report import SweepReportOptions, sweep_report

    return emit(sweep_report(SweepReportOptions(release=pytorch or "", root=root)), format)
