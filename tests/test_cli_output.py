"""What the terminal shows (issue 14): rattler-build's own progress bars stay out of it, every option has a
help text, commands are listed in the order of the flow."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conda_distro.cli import main as cli_main

BARS = re.compile(r"installing packages|Compressing|solving")

CHILD = textwrap.dedent("""\
    import sys, tempfile
    from rattler_build import Stage0Recipe, VariantConfig
    from conda_distro.util.rattler_env import native_tool_config, run_build, run_tests
    mode, work = sys.argv[1], sys.argv[2]
    recipe = Stage0Recipe.from_yaml('''
    package: {name: hello, version: "0.1"}
    build: {noarch: generic, script: ["mkdir -p $PREFIX/share", "echo hi > $PREFIX/share/hello"]}
    tests: [{script: ["test -f $PREFIX/share/hello"]}]
    ''', recipe_dir=tempfile.mkdtemp(dir=work))
    out = f"{work}/out"
    for v in recipe.render(VariantConfig()):
        if mode == "raw":  # rattler-build called directly, as before
            res = v.run_build(tool_config=native_tool_config(), output_dir=out, channels=[f"file://{out}"])
        else:
            res = run_build(v, output_dir=out, channels=[out])
            run_tests(res.packages[0], channels=[out], log=f"{work}/tests.log")
    print("DONE", flush=True)
    """)


def run_on_a_terminal(args: list[str], cwd: Path) -> str:
    """Run a command with stdout and stderr on a pseudo-terminal (as an interactive user would); return all
    it printed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=cwd,
                            env={**os.environ, "COLUMNS": "120", "TERM": "xterm"}, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=300)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_rattler_build_progress_bars_go_to_the_log_not_the_terminal(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    raw = tmp_path / "raw"
    raw.mkdir()
    shown = run_on_a_terminal([sys.executable, str(script), "raw", str(raw)], tmp_path)
    assert "DONE" in shown
    assert BARS.search(shown), "rattler-build drew no progress bars on a terminal: this test proves nothing"

    routed = tmp_path / "routed"
    routed.mkdir()
    shown = run_on_a_terminal([sys.executable, str(script), "routed", str(routed)], tmp_path)
    assert "DONE" in shown
    assert not BARS.search(shown), shown[-2000:]
    assert (routed / "out" / "rattler-build-stderr.log").is_file() and (routed / "tests.log").is_file()
    assert list((routed / "out" / "noarch").glob("hello-0.1-*.conda"))  # it did build


def _commands():
    import typer.main

    from conda_distro.cli.app import app

    return typer.main.get_command(app)


def test_every_option_has_a_help_text():
    missing = []

    def walk(group, prefix: str) -> None:
        for name in group.list_commands(None):
            cmd = group.get_command(None, name)
            for p in cmd.params:
                if p.param_type_name == "option" and not (getattr(p, "help", None) or "").strip():
                    missing.append(f"{prefix}{name} {'/'.join(p.opts)}")
            if hasattr(cmd, "list_commands"):
                walk(cmd, f"{prefix}{name} ")

    walk(_commands(), "")
    assert missing == []


def test_commands_are_listed_in_flow_order(capsys):
    from conda_distro.cli.app import FLOW_ORDER

    assert cli_main(["--help"]) == 0
    text = capsys.readouterr().out
    listed = [m.group(1) for m in re.finditer(r"^  ([a-z][a-z-]+)\s", text.split("Commands:")[1], re.M)]
    known = [c for c in FLOW_ORDER if c in listed]
    assert listed[:len(known)] == known  # the flow first; a command the list does not know comes last
    assert known[:4] == ["sandbox", "propose", "lint", "graph"]
    assert known.index("check-pr") < known.index("build") < known.index("promote") < known.index("verify-channel")
    assert known.index("verify-channel") < known.index("sweep") < known.index("report") < known.index("retire")


@pytest.mark.parametrize("command", [["build"], ["check-pr"], ["sweep"]])
def test_jobs_option_explains_itself(command, capsys):
    assert cli_main([*command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert re.search(r"-j, --jobs INTEGER RANGE \S* ?How many packages", text) or "--jobs" in text
    assert "How many packages" in text
