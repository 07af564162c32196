"""Command-line interface. Thin: each command builds an options object and calls the library.

Errors are turned into messages and exit codes here, and only here.
Command modules import the library inside their command functions, never at module level, so that
`conda-distro --help` starts without loading it (tests/test_cli_start.py, bench/bench_cli_start.py).
"""

from __future__ import annotations

import functools
import gc
import sys
from typing import Any

from conda_distro.cli.app import app, stderr
from conda_distro.errors import DistroError, ExitCode
from conda_distro.secret import MaskingStream, mask, masked_excepthook

# Each module registers its commands on ``app``.
from conda_distro.cli import lint_cmd, graph_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import sandbox_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import promote_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import build_cmd, solve_cmd, sweep_cmd, verify_cmd, checkpr_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import propose_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import report_cmd  # noqa: E402,F401  isort: skip


def print_error(exc: DistroError) -> None:
    text = mask(str(exc))
    if stderr.is_terminal:
        from rich.text import Text

        stderr.print(Text.assemble(("error:", "bold red"), " ", text), highlight=False)
    else:
        sys.stderr.write(f"error: {text}\n")
    if exc.hint:
        sys.stderr.write(f"hint: {mask(exc.hint)}\n")


def _click_exceptions():
    """click's exception classes: typer (>= 0.2x) vendors its own copy of click as ``typer._click``; an
    older typer uses click itself, which it has then imported already (so no import of click here)."""
    mods = [sys.modules["click"].exceptions] if "click" in sys.modules else []
    try:
        from typer._click import exceptions as vendored
        mods.append(vendored)
    except ImportError:  # pragma: no cover - older typer uses click itself
        pass

    def grab(name: str) -> tuple[type, ...]:
        return tuple(getattr(m, name) for m in mods if hasattr(m, name))

    return grab("ClickException"), grab("Exit"), grab("Abort")


CLICK_ERRORS, CLICK_EXIT, CLICK_ABORT = _click_exceptions()


def main(argv: list[str] | None = None) -> int:
    """Run one command. Everything it prints goes through a stream that masks the secrets (API tokens)
    read so far, whatever printed it."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = MaskingStream(sys.stdout), MaskingStream(sys.stderr)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = saved


@functools.cache
def command() -> Any:
    """The click command typer builds from ``app``, built once per process.

    Not ``app(...)``: ``Typer.__call__`` rebuilds the whole command tree from the functions' signatures on
    every call (about 50 ms, most of an in-process run of a command that stops at bad input) and replaces
    ``sys.excepthook`` with its own, which prints through the hook it found at import, unmasked.
    Commands registered after the first call are not seen; every module registers its commands on import.
    """
    from typer.main import get_command

    return get_command(app)


def _main(argv: list[str] | None) -> int:
    try:
        rv = command().main(args=argv, prog_name="conda-distro", standalone_mode=False)
    except DistroError as exc:
        print_error(exc)
        return int(exc.exit_code)
    except CLICK_ERRORS as exc:  # usage errors, including a bare `conda-distro` (help shown)
        exc.show()
        return int(ExitCode.BAD_INPUT)
    except CLICK_EXIT as exc:
        return exc.exit_code
    except CLICK_ABORT:
        sys.stderr.write("aborted\n")
        return 130
    except KeyboardInterrupt:
        return 130
    return int(rv) if isinstance(rv, int) else 0


def entrypoint() -> None:
    sys.excepthook = masked_excepthook  # a traceback, should one ever escape, shows no secret
    code = main()
    # The interpreter runs one last garbage collection over every object at exit; with a loaded
    # distribution of thousands of recipes that alone takes most of a second. The process is ending,
    # so leave what is alive out of it (atexit handlers and file flushing are unaffected).
    gc.freeze()
    sys.exit(code)
