"""The typer application object and the options every command shares."""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
import typer.core

# `conda-distro --help` lists the commands in the order of the flow: set up, propose and check a recipe,
# the PR gate, build and promote, check what users get, release day, reports. Others come last.
FLOW_ORDER = ("sandbox", "propose", "lint", "graph", "solve", "check-pr", "build", "upload", "promote", "excuses",
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
    Optional[Path],
    typer.Option("--root", help="The distribution repository (default: nearest folder at or above the current one holding distro.yaml).",
                 file_okay=False, show_default=False),
]

AsOfOpt = Annotated[Optional[str], typer.Option(
    "--as-of", metavar="YYYY-MM-DD", help="As of this day (default: today, UTC).", show_default=False)]


class _LazyConsole:
    """A rich ``Console``, created on first use: importing rich is a good part of a bare ``--help``."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._console = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._kwargs)
        return getattr(self._console, name)


# conda_distro.channels.locking.DEFAULT_LOCK_TIMEOUT, repeated so that the CLI starts without importing the
# library (tests/test_cli_start.py checks the two agree)
DEFAULT_LOCK_TIMEOUT = 600.0

stderr = _LazyConsole(stderr=True, highlight=False, soft_wrap=True)


class TextJson(str, enum.Enum):
    text = "text"
    json = "json"


FormatOpt = Annotated[TextJson, typer.Option("--format", help="Output format.")]


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def emit(result: Any, format: TextJson) -> None:
    """Print a result object: its ``to_dict()`` as JSON, or its ``text_lines()``."""
    if format is TextJson.json:
        print_json(result.to_dict())
    else:
        for line in result.text_lines():
            out(line)


def report_unreadable(dist: Any) -> int:
    """Print every recipe that cannot be read or rendered to stderr (file:line, rattler-build's message)
    and the recipes blocked by them; returns how many were unreadable."""
    for e in dist.errors:
        sys.stderr.write(f"error: {e}\n")
    for name, by in sorted(dist.blocked_by_broken().items()):
        sys.stderr.write(f"blocked: {name} depends on unreadable recipe {by}\n")
    return len(dist.errors)


def warn_no_sandbox(no_sandbox: bool) -> None:
    """``--no-sandbox`` (build, check-pr, sweep) always says what it gives up, on stderr."""
    if no_sandbox:
        from conda_distro.engine.sandbox import NO_SANDBOX_WARNING

        sys.stderr.write(NO_SANDBOX_WARNING + "\n")
