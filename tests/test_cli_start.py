"""The CLI starts without loading the library: commands import their dependencies when they run.

`conda-distro --help` must stay well under 0.3 s (issue 10); the time itself is measured by
bench/bench_cli_start.py, never here. What is asserted is the structure that makes it fast: which
libraries a bare import and every command's `--help` load.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conda_distro.cli import main

# Libraries that take tens to hundreds of ms to import; none is needed to parse arguments or print help.
HEAVY = ("networkx", "rattler", "rattler_build", "rich", "ruamel", "yaml", "git", "jinja2", "filelock",
         "binstar_client")
COMMANDS = ["sandbox", "propose", "lint", "graph", "solve", "check-pr", "build", "upload", "promote", "excuses",
            "prune", "verify-channel", "sweep", "report", "status", "retire", "watch", "sandbox create", "sandbox publish-release",
            "sandbox publish-package",
            "report unmaintained", "sweep report"]  # in flow order (cli.app.FLOW_ORDER)


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return set(json.loads(proc.stdout.splitlines()[-1]))


def test_importing_the_cli_loads_no_heavy_library():
    """Not even pydantic or click: typer brings its own copy of click, and needs pydantic only to convert
    a command's parameters."""
    import importlib.util

    loaded = _loaded_after("import conda_distro.cli")
    avoidable = {*HEAVY, "pydantic", *(["click"] if importlib.util.find_spec("typer._click") else [])}
    assert not loaded & avoidable, sorted(loaded & avoidable)


def test_importing_the_cli_loads_no_library_module_of_ours():
    probe = ("import conda_distro.cli, sys\n"
             "print(sorted(m for m in sys.modules if m.startswith('conda_distro.') "
             "and not m.startswith('conda_distro.cli')))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    # the error tree, the secret masking every output of the CLI goes through and the locks' default
    # timeout (all stdlib-only), and the rooms holding them (their __init__.py import nothing)
    assert proc.stdout.strip() == ("['conda_distro.errors', 'conda_distro.state', 'conda_distro.state.locks', "
                                   "'conda_distro.util', 'conda_distro.util.secret']")


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_of_every_command_works_without_the_library(command):
    argv = [*command.split(), "--help"]
    loaded = _loaded_after(
        "import contextlib, io\nfrom conda_distro.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main({argv!r}) == 0")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    if command == "":  # the bare `conda-distro --help` converts no parameters: typer leaves pydantic alone
        assert "pydantic" not in loaded


def _click_command(path: list[str]):
    import typer.main

    from conda_distro.cli.app import app

    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]
    return cmd


@pytest.mark.parametrize("command", COMMANDS)
def test_help_text_is_the_command_docstring(command, capsys):
    """Help texts did not change with the import structure: each command's docstring is its help, and
    every option is listed."""
    cmd = _click_command(command.split())
    assert main([*command.split(), "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith(f"Usage: conda-distro {command} ")
    assert " ".join(cmd.help.split()) in text
    for param in cmd.params:
        for opt in param.opts if param.param_type_name == "option" else ():
            assert opt in text, opt


def test_top_level_help_lists_every_command_in_flow_order(capsys):
    assert main(["--help"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == [c for c in COMMANDS if " " not in c]


def test_one_lock_timeout_default_for_every_command():
    """build, sweep, promote and retire take --lock-timeout's default from conda_distro.state.locks, the one place
    it is defined."""
    from conda_distro.engine.run import BuildOptions
    from conda_distro.gate.promote import PromoteOptions
    from conda_distro.gate.prune import PruneOptions
    from conda_distro.gate.retire import RetireOptions
    from conda_distro.state import locks
    from conda_distro.sweep import SweepOptions

    defaults = {_click_command([c]).params[[p.name for p in _click_command([c]).params].index("lock_timeout")].default
                for c in ("build", "sweep", "promote", "retire", "prune")}
    assert defaults == {locks.DEFAULT_LOCK_TIMEOUT}
    assert {BuildOptions().lock_timeout, SweepOptions(release="1.0.0").lock_timeout, PromoteOptions().lock_timeout,
            RetireOptions(name="x", reason="y").lock_timeout, PruneOptions().lock_timeout} == {locks.DEFAULT_LOCK_TIMEOUT}


def test_commands_still_run_their_library_code(tmp_path, capsys):
    """A lazily imported command really runs: lint --list-checks reads the check registry."""
    assert main(["lint", "--list-checks", "--format", "json"]) == 0
    checks = json.loads(capsys.readouterr().out)["checks"]
    assert checks and all({"id", "severity", "fixable", "explanation"} <= set(c) for c in checks)
