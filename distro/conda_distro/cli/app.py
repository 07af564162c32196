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
FLOW_ORDER = ("sandbox", "propose", "lint", "graph", "solve", "check-pr", "build", "fanout", "upload", "promote", "excuses",
              "prune", "verify-channel", "watch", "snapshots", "rollback", "sweep", "report", "status", "retire")


class _FlowOrder(typer.core.TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:
        names = list(super().list_commands(ctx))
        rank = {n: i for i, n in enumerate(FLOW_ORDER)}
        return sorted(names, key=lambda n: (rank.get(n, len(rank)), names.index(n)))


#: ``-h`` as well as ``--help``, on every command (subcommands inherit it from the top context)
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="conda-distro",
    context_settings=HELP_OPTIONS,
    help="Run an integration-tested conda distribution of PyTorch-ecosystem packages.",
    cls=_FlowOrder,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

#: the placeholder help shows for an option's or argument's value, by parameter name (default: the name in
#: capitals); a choice shows its choices (``[text|json]``)
METAVARS = {"changed_since": "REF", "base": "REF", "pytorch": "VERSION", "lock_timeout": "SECONDS", "root": "DIR",
            "out": "DIR", "keep": "DIR", "jobs": "N", "shards": "N", "author": "'NAME <EMAIL>'", "log_url": "URL",
            "maintainer": "HANDLE", "homepage": "URL", "repository": "URL", "by": "PERSON", "check": "CHECK_ID",
            "affected_by": "NAME", "from_": "WHERE", "names": "NAME", "license": "SPDX_ID", "reason": "TEXT",
            "summary": "TEXT"}


class _Argument(typer.core.TyperArgument):
    """An argument shown as its capitalised metavar (``NAME``, ``[NAME]...``), without a Python type."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")


def _json_alias(args: list[str]) -> list[str]:
    """``--json`` is ``--format json`` (arguments after ``--`` are left alone)."""
    end = args.index("--") if "--" in args else len(args)
    return [("--format=json" if a == "--json" and i < end else a) for i, a in enumerate(args)]


def _choices(p: Any) -> list[str]:
    desc = getattr(p, "type_descriptor", None)
    return [str(c) for c in (desc.choices or ())] if desc is not None and desc.is_choice else []


def _json_option() -> Any:
    """The ``--json`` flag as help lists it (``_json_alias`` turns it into ``--format=json`` before parsing)."""
    from typer.main import get_command

    probe = typer.Typer()

    @probe.command()
    def _probe(json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False) -> None: ...

    option = next(p for p in get_command(probe).params if p.name == "json")
    option.expose_value = False
    return option


def guessable(cmd: Any) -> Any:
    """What people guess, on every command of the tree built from ``app``: metavars in capitals instead of
    Python types (``--pytorch VERSION``, ``NAME...``), and ``--json`` wherever ``--format`` takes ``json``."""
    for p in cmd.params:
        if isinstance(p, typer.core.TyperArgument) and not isinstance(p, _Argument):
            p.__class__ = _Argument
        if p.metavar is None and not getattr(p, "is_flag", False) and p.name:
            choices = _choices(p)
            p.metavar = ("[" + "|".join(str(c) for c in choices) + "]") if choices else METAVARS.get(p.name, p.name.upper())
    fmt = next((p for p in cmd.params if p.name == "format"), None)
    if fmt is not None and "json" in _choices(fmt):
        cmd.params.insert(cmd.params.index(fmt) + 1, _json_option())
        parse = cmd.parse_args
        cmd.parse_args = lambda ctx, args, _parse=parse: _parse(ctx, _json_alias(list(args)))
    for sub in getattr(cmd, "commands", {}).values():
        guessable(sub)
    return cmd


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

NoSandboxOpt = Annotated[bool, typer.Option("--no-sandbox",
                                            help="Run build and test scripts unsandboxed (no bubblewrap); never in CI.")]


def lock_timeout_opt(waits_for: str) -> Any:
    """The ``--lock-timeout`` option (default :data:`DEFAULT_LOCK_TIMEOUT`), its help naming what a command
    waits for: ``Annotated[float, lock_timeout_opt("...")] = DEFAULT_LOCK_TIMEOUT``."""
    return typer.Option("--lock-timeout", min=0, max=86400, help=f"Seconds to wait, in all, for {waits_for}.")


AsOfOpt = Annotated[str | None, typer.Option(
    "--as-of", metavar="YYYY-MM-DD", help="As of this day (default: today, UTC).", show_default=False)]


class _LazyConsole:
    """A rich ``Console``, created on first use: importing rich is a good part of a bare ``--help``."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._console: Console | None = None

    def _get(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._kwargs)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)



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

#: ``--jobs``/``-j`` of build, check-pr and sweep (None: what the machine holds, decided by the library)
JobsOpt = Annotated[int | None, typer.Option(
    "--jobs", "-j", min=1, max=256, show_default=False,
    help="How many packages to build and test at once (one worker process each; default: one per core, "
         "no more than the available memory holds at 2 GB each).")]


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
