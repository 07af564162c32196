"""Command-line interface. Thin: each command builds an options object and calls the library.

Errors are turned into messages and exit codes here, and only here.
Command modules import the library inside their command functions, never at module level, so that
`conda-distro --help` starts without loading it (tests/test_cli_start.py, bench/bench_cli_start.py).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import re
import sys
from typing import Any

from conda_distro.cli.app import app, stderr
from conda_distro.errors import DistroError, ExitCode, FileSystemError, GitError, UsageError
from conda_distro.util.secret import MaskingStream, mask, masked_excepthook

# Each module registers its commands on ``app``.
from conda_distro.cli import lint_cmd, graph_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import sandbox_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import promote_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import prune_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import build_cmd, solve_cmd, sweep_cmd, verify_cmd, checkpr_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import propose_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import report_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import snapshots_cmd, rollback_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import fanout_cmd  # noqa: E402,F401  isort: skip
from conda_distro.cli import watch_cmd  # noqa: E402,F401  isort: skip


#: a run of this many characters without a space in a message is shortened (a 5,000-digit "version")
_LONG_WORD = re.compile(r"\S{300,}")


def _shorten(text: str) -> str:
    return _LONG_WORD.sub(lambda m: f"{m.group()[:80]}…({len(m.group())} characters)", text)


def print_error(exc: DistroError) -> None:
    text = _shorten(mask(str(exc)))
    if stderr.is_terminal:
        from rich.text import Text

        stderr.print(Text.assemble(("error:", "bold red"), " ", text), highlight=False)
    else:
        sys.stderr.write(f"error: {text}\n")
    if exc.hint:
        sys.stderr.write(f"hint: {_shorten(mask(exc.hint))}\n")


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


def _tolerant(stream: Any) -> None:
    """A character the stream's encoding lacks (``LANG=C``, ``PYTHONIOENCODING=ascii``) is written as an
    escape (``\\u2026``) rather than failing the command."""
    with contextlib.suppress(AttributeError, ValueError, OSError):
        stream.reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    """Run one command. Everything it prints goes through a stream that masks the secrets (API tokens)
    read so far, whatever printed it. Refused before anything runs (exit 2): a closed standard output
    (``>&-``: the result could not be printed, and the next file opened would take its place) and an
    argument holding a NUL character."""
    if sys.stderr is None:  # nothing can be said: refuse quietly
        return int(ExitCode.BAD_INPUT)
    saved = sys.stdout, sys.stderr
    _tolerant(sys.stdout)
    _tolerant(sys.stderr)
    if sys.stdout is None:
        sys.stderr.write("error: standard output is closed: the result could not be printed\n"
                         "hint: send it to a file or to /dev/null instead of closing it (>&-)\n")
        return int(ExitCode.BAD_INPUT)
    sys.stdout, sys.stderr = MaskingStream(sys.stdout), MaskingStream(sys.stderr)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = saved


def _check_argv(argv: list[str]) -> None:
    """An argument holding a NUL character cannot be a path or a name (the OS refuses it): exit 2 naming it."""
    for i, arg in enumerate(argv):
        if "\0" in arg:
            flag = arg.split("=", 1)[0] if arg.startswith("--") else (argv[i - 1] if i and argv[i - 1].startswith("-") else None)
            shown = arg.replace("\0", "\\0")
            raise UsageError(f"argument {shown!r} holds a NUL character", field=flag,
                             hint="pass a path or name without NUL characters")


@functools.cache
def command() -> Any:
    """The click command typer builds from ``app``, built once per process.

    Not ``app(...)``: ``Typer.__call__`` rebuilds the whole command tree from the functions' signatures on
    every call (about 50 ms, most of an in-process run of a command that stops at bad input) and replaces
    ``sys.excepthook`` with its own, which prints through the hook it found at import, unmasked.
    Commands registered after the first call are not seen; every module registers its commands on import.
    """
    from typer.main import get_command

    from conda_distro.cli.app import guessable

    return guessable(get_command(app))


def _main(argv: list[str] | None) -> int:
    try:
        _check_argv(sys.argv[1:] if argv is None else argv)
        rv = command().main(args=argv, prog_name="conda-distro", standalone_mode=False)
    except DistroError as exc:
        print_error(exc)
        return int(exc.exit_code)
    except BrokenPipeError:  # the reader of stdout went away (`| head`): the rest is not wanted
        _discard_stdout()
        return int(ExitCode.FAILURES)
    except OSError as exc:  # a file the machine refused (EFBIG, ENOSPC, EACCES, ...): say which one
        if exc.filename is None and exc.errno not in FileSystemError.RUN_FAILURES:
            raise  # no file named, no full disk or size limit: a bug to fix where it happens, not to hide here
        err = FileSystemError.of(exc)
        print_error(err)
        return int(err.exit_code)
    except ImportError as exc:  # gitpython refuses to load without a git binary (or with a bad GIT_PYTHON_*)
        if "git executable" not in str(exc) and "GIT_PYTHON" not in str(exc):
            raise
        print_error(GitError("git is not installed (or not on PATH); this command needs it",
                             hint="install git (e.g. apt-get install git) or put it on PATH; "
                                  + str(exc).strip().splitlines()[0][:200]))
        return int(ExitCode.BAD_INPUT)
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


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush does not fail on the closed pipe."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def entrypoint() -> None:
    from conda_distro.util.exitguard import guard_exit

    sys.excepthook = masked_excepthook  # a traceback, should one ever escape, shows no secret
    guard_exit()  # the exit waits for py-rattler's native threads to leave Python (else: SIGABRT at exit)
    code = main()
    # The interpreter runs one last garbage collection over every object at exit; with a loaded
    # distribution of thousands of recipes that alone takes most of a second. The process is ending,
    # so leave what is alive out of it (atexit handlers and file flushing are unaffected).
    gc.freeze()
    sys.exit(code)
