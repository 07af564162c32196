"""The typer application object and the options every command shares."""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, runtime_checkable

import typer
import typer.core

# the one default of --lock-timeout (conda_distro.state.locks is stdlib-only: the CLI still starts without the library)
from conda_distro.state.locks import DEFAULT_LOCK_TIMEOUT  # noqa: F401 - re-exported to the command modules

if TYPE_CHECKING:
    from rich.console import Console

# `conda-distro --help` lists the commands in the order of the flow: set up, propose and check a recipe,
# the PR gate, build and promote, check what users get, release day, reports. Others come last.
FLOW_ORDER = ("sandbox", "propose", "lint", "graph", "solve", "check-pr", "build", "upload", "promote", "excuses", "prune",
              "verify-channel", "sweep", "report", "status", "retire")


class _FlowOrder(typer.core.TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:
        names = list(super().list_commands(ctx))
        rank = {n: i for i, n in enumerate(FLOW_ORDER)}
        return sorted(names, key=lambda n: (rank.get(n, len(rank)), names.index(n)))


app = typer.Typer(
    name="conda-distro",
    help="Run an integration-tested conda distribution of PyTorch-ecosystem packages.",
    cls=_FlowOrder,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

def _version(value: bool) -> None:
    if value:
        from conda_distro import __version__

        sys.stdout.write(f"conda-distro {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", help="Print the tool's version and exit.",
                                          callback=_version, is_eager=True)] = False,
) -> None:
    """Run an integration-tested conda distribution of PyTorch-ecosystem packages."""


RootOpt = Annotated[
    Path | None,
    typer.Option("--root", help="The distribution repository (default: nearest folder at or above the current one holding distro.yaml).",
                 file_okay=False, show_default=False),
]

AsOfOpt = Annotated[str | None, typer.Option(
    "--as-of", metavar="YYYY-MM-DD", help="As of this day (default: today, UTC).", show_default=False)]


class _LazyConsole:
    """A rich ``Console``, created on first use: importing rich is a good part of a bare ``--help``."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._kwargs)
        return getattr(self._console, name)



stderr = _LazyConsole(stderr=True, highlight=False, soft_wrap=True)


class Format(enum.StrEnum):
    """Every output format of the tool; each command accepts its own subset (the ``Literal`` aliases below).
    ``--format json`` prints ``result.to_dict()``, ``markdown`` the document ``result.markdown()``, any other
    format the lines ``result.<name>_lines()`` (``text_lines``, ``github_lines``, ``dot_lines``, …)."""

    text = "text"
    json = "json"
    markdown = "markdown"
    github = "github"
    dot = "dot"
    github_matrix = "github-matrix"
    github_runners = "github-runners"


TextJson = Literal[Format.text, Format.json]
TextJsonMarkdown = Literal[Format.text, Format.json, Format.markdown]
LintFormat = Literal[Format.text, Format.json, Format.github]
GraphFormat = Literal[Format.text, Format.json, Format.dot, Format.github_matrix, Format.github_runners]

FormatOpt = Annotated[TextJson, typer.Option("--format", help="Output format.")]


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


class Result(Protocol):
    """What every library function a command calls returns (a typed result of its own); results with more
    formats add ``markdown()`` or ``<format>_lines()``, and ``notices`` (stderr lines) where they have any."""

    @property
    def exit_code(self) -> int: ...

    def to_dict(self) -> dict: ...

    def text_lines(self) -> list[str]: ...


@runtime_checkable
class MarkdownResult(Protocol):
    """A result with a markdown form (the commands that accept ``--format markdown``)."""

    def markdown(self) -> str: ...


def emit(result: Result, format: Format) -> int:
    """The one way a command prints: the result's notices (recipes left out, and why) on stderr, then the
    result in ``format`` on stdout; returns the result's exit code.

    A result whose input could not be read raises its error (for the one error handler,
    ``conda_distro.cli.main``) from whatever form it cannot give: check-pr's gate still prints its markdown
    comment, then raises from ``exit_code``."""
    for line in getattr(result, "notices", ()):
        sys.stderr.write(line + "\n")
    if format is Format.json:
        print_json(result.to_dict())
    elif format is Format.markdown:
        if not isinstance(result, MarkdownResult):
            raise TypeError(f"{type(result).__name__} has no markdown form")
        sys.stdout.write(result.markdown())
    else:
        for line in getattr(result, f"{format.name}_lines")():
            out(line)
    return int(result.exit_code)


def warn_no_sandbox(no_sandbox: bool) -> None:
    """``--no-sandbox`` (build, check-pr, sweep) always says what it gives up, on stderr."""
    if no_sandbox:
        from conda_distro.engine.sandbox import NO_SANDBOX_WARNING

        sys.stderr.write(NO_SANDBOX_WARNING + "\n")
