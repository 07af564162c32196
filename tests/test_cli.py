"""The command line: entry points, exit codes, output formats of lint and graph."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.helpers import run_cli


def subprocess_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["NO_COLOR"] = "1"
    return env


def test_python_dash_m_help():
    p = subprocess.run([sys.executable, "-m", "conda_distro", "--help"], capture_output=True, text=True,
                       env=subprocess_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    assert "lint" in p.stdout and "graph" in p.stdout and "Usage" in p.stdout


def test_console_script_and_exit_codes(make_distro, clean_recipe):
    script = Path(sys.executable).parent / "conda-distro"
    if not script.exists():
        pytest.skip("the conda-distro console script is not installed next to this interpreter")
    root = make_distro({"good": clean_recipe("good")})
    ok = subprocess.run([str(script), "lint", "--root", str(root)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "0 error(s), 0 warning(s)" in ok.stdout
    (root / "recipes" / "bad").mkdir()
    (root / "recipes" / "bad" / "recipe.yaml").write_text(clean_recipe("bad", run=["numpy"]))
    bad = subprocess.run([str(script), "lint", "--root", str(root), "--format", "json"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and json.loads(bad.stdout)["errors"] == 1
    usage = subprocess.run([str(script), "lint", "--format", "xml"], capture_output=True, text=True, timeout=120)
    assert usage.returncode == 2 and "xml" in usage.stderr


def test_help_lists_the_commands(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    for command in ("lint", "graph"):
        assert re.search(rf"^\s*│?\s*{command}\b", out, re.M), out


def test_command_help(capsys):
    code, out, _ = run_cli(capsys, "lint", "--help")
    assert code == 0 and "--fix" in out and "--format" in out and "--root" in out
    code, out, _ = run_cli(capsys, "graph", "--help")
    assert code == 0 and "--affected-by" in out and "--changed-since" in out


@pytest.mark.parametrize("argv", [[], ["no-such-command"], ["lint", "--no-such-flag"], ["lint", "--format", "xml"],
                                  ["graph", "--format", "yaml"], ["graph", "--shards", "x"]])
def test_usage_errors_exit_2(argv, capsys, make_distro, clean_recipe):
    root = make_distro({"a": clean_recipe("a")})
    code, out, _ = run_cli(capsys, *argv, *(["--root", str(root)] if argv[:1] in (["lint"], ["graph"]) else []))
    assert code == 2


def test_exit_codes_0_1_2(make_distro, clean_recipe, capsys):
    root = make_distro({"a": clean_recipe("a")})
    assert run_cli(capsys, "lint", "--root", str(root))[0] == 0
    warn = make_distro({"a": clean_recipe("a").replace("  summary: The a test package\n", "")}, name="warn")
    code, out, _ = run_cli(capsys, "lint", "--root", str(warn))
    assert code == 0 and "0 error(s), 1 warning(s)" in out  # warnings alone do not fail
    err = make_distro({"a": clean_recipe("a", run=["numpy"])}, name="err")
    assert run_cli(capsys, "lint", "--root", str(err))[0] == 1
    bad = make_distro({"a": clean_recipe("a", run=["numpy >=1,,<2"])}, name="bad")
    assert run_cli(capsys, "lint", "--root", str(bad))[0] == 1  # an unreadable recipe is a finding
    assert run_cli(capsys, "lint", "a", "--root", str(bad))[0] == 2  # ... and bad input when named
    assert run_cli(capsys, "lint", "--root", str(root / "nowhere"))[0] == 2


def test_lint_json_shape(make_distro, clean_recipe, capsys):
    text = clean_recipe("a", run=["numpy"]).replace("  summary: The a test package\n", "")
    root = make_distro({"a": text, "b": clean_recipe("b")})
    code, out, err = run_cli(capsys, "lint", "--root", str(root), "--format", "json")
    assert code == 1
    doc = json.loads(out)  # one JSON document on stdout
    assert {"findings", "errors", "warnings"} <= set(doc)
    assert (doc["errors"], doc["warnings"]) == (1, 1)
    assert len(doc["findings"]) == 2
    for f in doc["findings"]:
        assert {"recipe", "check", "severity", "message", "path", "line"} <= set(f)
        assert f["recipe"] == "a" and f["path"] == "recipes/a/recipe.yaml"
        assert f["severity"] in ("error", "warning") and isinstance(f["line"], int)
    by_check = {f["check"]: f for f in doc["findings"]}
    assert by_check["run-dep-unbounded"]["severity"] == "error"
    assert text.splitlines()[by_check["run-dep-unbounded"]["line"] - 1].strip() == "- numpy"
    assert by_check["summary-missing"]["severity"] == "warning"


def test_lint_text_output(make_distro, clean_recipe, capsys):
    root = make_distro({"a": clean_recipe("a", run=["numpy"])})
    code, out, _ = run_cli(capsys, "lint", "--root", str(root))
    assert code == 1
    assert re.search(r"^recipes/a/recipe.yaml:\d+: error: \[run-dep-unbounded\] run requirement 'numpy' has no upper bound$",
                     out, re.M)
    assert "    hint: add an upper bound" in out and out.rstrip().endswith("1 error(s), 0 warning(s)")


def test_lint_github_annotations(make_distro, clean_recipe, capsys):
    text = clean_recipe("a", run=["numpy"]).replace("  summary: The a test package\n", "")
    root = make_distro({"a": text})
    code, out, _ = run_cli(capsys, "lint", "--root", str(root), "--format", "github")
    assert code == 1
    lines = out.strip().splitlines()
    assert len(lines) == 2
    line = text.splitlines().index("    - numpy") + 1
    assert f"::error file=recipes/a/recipe.yaml,line={line},title=run-dep-unbounded::run requirement 'numpy'" in lines[0]
    assert lines[1].startswith("::warning file=recipes/a/recipe.yaml,line=") and "title=summary-missing::" in lines[1]
    assert all(re.fullmatch(r"::(error|warning) file=[^,]+(,line=\d+)?,title=[a-z0-9-]+::[^\n]+", ln) for ln in lines)


def test_github_annotations_escape_newlines_and_percent(make_distro, clean_recipe, capsys):
    text = clean_recipe("a", extra="skip-lints: ['100% custom']")
    root = make_distro({"a": text})
    code, out, _ = run_cli(capsys, "lint", "--root", str(root), "--format", "github")
    assert code == 0 and "100%25 custom" in out and "100% custom" not in out


def test_list_checks(capsys):
    from conda_distro.lint import CHECKS

    code, out, _ = run_cli(capsys, "lint", "--list-checks")
    assert code == 0
    for cid in CHECKS:
        assert re.search(rf"^{re.escape(cid)} \((error|warning)", out, re.M)
    assert "build-number-missing (error, fixable)" in out
    code, out, _ = run_cli(capsys, "lint", "--list-checks", "--format", "json")
    rows = json.loads(out)["checks"]
    assert {r["id"] for r in rows} == set(CHECKS)
    assert all(r["explanation"] and r["severity"] in ("error", "warning") for r in rows)


def test_graph_json_shape(make_distro, clean_recipe, capsys):
    root = make_distro({"a": clean_recipe("a"), "b": clean_recipe("b", run=["a >=1,<2"])})
    code, out, _ = run_cli(capsys, "graph", "--root", str(root), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert {"order", "levels", "affected"} <= set(doc)
    assert doc == {"ok": True, "order": ["a", "b"], "levels": [["a"], ["b"]],
                   "edges": [{"from": "a", "to": "b", "via": ["a"]}], "affected": ["a", "b"], "changed": None,
                   "unreadable": [], "blocked": []}


def test_json_mode_keeps_stdout_clean_on_errors(tmp_path, capsys):
    (tmp_path / "distro.yaml").write_text("name: x\n")
    code, out, err = run_cli(capsys, "graph", "--root", str(tmp_path), "--format", "json")
    assert code == 2 and out == "" and "distro.yaml" in err and "pytorch" in err


def test_errors_print_message_and_hint(tmp_path, capsys):
    code, out, err = run_cli(capsys, "lint", "--root", str(tmp_path))
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "\nhint: " in err


def test_version(capsys):
    import tomllib

    from conda_distro import __version__

    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out == f"conda-distro {__version__}\n"
    pyproject = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == __version__


def test_every_json_document_says_ok(make_distro, clean_recipe, capsys, tmp_path):
    """spec §2: every JSON document has a top-level ok, true exactly when the exit code is 0."""
    root = make_distro({"a": clean_recipe("a"), "b": clean_recipe("b", run=["numpy"])})
    for args in (["lint"], ["graph"], ["report", "unmaintained"], ["status", "--out", str(tmp_path / "st")],
                 ["propose", "newpkg", "--maintainer", "octocat", "--version", "1.0.0"]):
        code, out, err = run_cli(capsys, *args, "--root", str(root), "--format", "json")
        doc = json.loads(out)
        assert doc["ok"] is (code == 0), (args, code, err)
