"""The CLI holds no logic (issue 15): each command builds one options object (the root travels in it), calls
one library function, and hands the typed result to one ``emit()``, which prints it (text, JSON, markdown,
…) and returns the result's exit code. The logic the commands used to hold is in the library, tested here
without the CLI."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from support.helpers import run_cli

import conda_distro.cli
from conda_distro.cli.app import Format
from conda_distro.errors import RecipeError

CLI = Path(conda_distro.cli.__file__).parent
COMMAND_FILES = sorted(p for p in CLI.glob("*_cmd.py"))
DECORATORS = {"app", "sandbox_app", "report_app", "sweep_app"}


def _commands() -> list[tuple[str, ast.FunctionDef]]:
    out = []
    for path in COMMAND_FILES:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any(
                    isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr in ("command", "callback")
                    and isinstance(d.func.value, ast.Name) and d.func.value.id in DECORATORS
                    for d in node.decorator_list):
                out.append((f"{path.name}:{node.name}", node))
    return out


COMMANDS = _commands()


def test_every_command_is_found():
    # promote_cmd holds promote, excuses and retire; build_cmd build and upload; sandbox_cmd two; report_cmd two;
    # sweep_cmd the sweep (the group's callback: `sweep` runs it) and `sweep report`; prune_cmd prune
    assert len(COMMANDS) == 20, [n for n, _ in COMMANDS]


@pytest.mark.parametrize("name,func", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_a_command_builds_options_calls_the_library_once_and_emits(name, func):
    body = [s for s in func.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]  # docstring
    *rest, last = body
    # no branch, loop or error handling: what the command does is the library's
    for stmt in rest:
        assert isinstance(stmt, (ast.ImportFrom, ast.Import, ast.Expr, ast.Assign)), (name, ast.unparse(stmt))
        if isinstance(stmt, ast.Expr):  # only the --no-sandbox warning
            assert ast.unparse(stmt.value).startswith("warn_no_sandbox("), (name, ast.unparse(stmt))
    # the last statement: return emit(<one library call>(<one options object>), format)
    assert isinstance(last, ast.Return) and isinstance(last.value, ast.Call), (name, ast.unparse(last))
    emit = last.value
    assert ast.unparse(emit.func) == "emit" and len(emit.args) == 2 and ast.unparse(emit.args[1]) == "format", name
    call = emit.args[0]
    assert isinstance(call, ast.Call) and len(call.args) == 1 and not call.keywords, (name, ast.unparse(call))
    options = call.args[0]
    assert isinstance(options, ast.Call) and ast.unparse(options.func).endswith("Options"), (name, ast.unparse(options))


@pytest.mark.parametrize("path", COMMAND_FILES, ids=[p.name for p in COMMAND_FILES])
def test_command_modules_print_nothing_themselves_and_define_no_format(path):
    tree = ast.parse(path.read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert not names & {"print", "print_json", "out", "load_distribution", "open_distro"}, sorted(names)
    assert "sys.stdout" not in path.read_text()
    enums = [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
             and any(ast.unparse(b).endswith("Enum") for b in n.bases)]
    assert enums == [], enums  # one format enum: cli.app.Format


def test_one_format_enum_holds_every_format_a_command_accepts():
    assert [f.value for f in Format] == ["text", "json", "markdown", "github", "dot", "github-matrix", "github-runners"]


def test_a_format_a_command_does_not_accept_is_a_usage_error(make_distro, clean_recipe, capsys):
    root = make_distro({"a": clean_recipe("a")})
    code, out, err = run_cli(capsys, "solve", "--root", str(root), "--format", "markdown")
    assert code == 2 and out == "" and "'markdown' is not one of 'text', 'json'" in err


# --- what moved out of the CLI into the library -----------------------------------------------------


def test_graph_report_computes_the_affected_set_and_shards(make_distro, clean_recipe):
    from conda_distro.graph import GraphOptions, GraphResult, graph_report

    root = make_distro({"a": clean_recipe("a"), "b": clean_recipe("b", run=["a >=1,<2"]), "c": clean_recipe("c")})
    report = graph_report(GraphOptions(root=root, affected_by=("a",), shards=2))
    assert isinstance(report, GraphResult)
    assert report.changed == ["a"] and report.affected == ["a", "b"] and report.exit_code == 0
    matrix = json.loads(report.github_matrix_lines()[0])
    assert [json.loads(m["levels"]) for m in matrix["include"]] == [[["a"], ["b"]]]
    assert report.text_lines()[-2:] == ["changed: a", "affected (2): a, b"]


def test_graph_report_of_the_runners_reads_no_recipe(make_distro, clean_recipe):
    from conda_distro.ci import RunnerPlan
    from conda_distro.graph import GraphOptions, graph_report

    root = make_distro({"a": clean_recipe("a", run=["numpy >=1,,<2"])})  # unreadable: never read here
    plan = graph_report(GraphOptions(root=root, runners=True))
    assert isinstance(plan, RunnerPlan) and plan.exit_code == 0
    assert set(json.loads(plan.github_runners_lines()[0])) == {"build", "tests", "count", "automerge"}


def test_github_matrix_has_one_entry_per_non_empty_shard():
    from conda_distro.ci import github_matrix

    doc = github_matrix([[["a"], ["b", "c"]], [[], []], [["d"]]])
    assert doc == {"include": [{"shard": 0, "levels": '[["a"], ["b", "c"]]', "packages": "a b c"},
                               {"shard": 2, "levels": '[["d"]]', "packages": "d"}]}


def test_check_names_accepts_unreadable_recipes_and_rejects_misspelt_ones(make_distro, clean_recipe):
    from conda_distro.distribution import load_distribution

    root = make_distro({"alpha": clean_recipe("alpha"), "broken": clean_recipe("broken", run=["numpy >=1,,<2"])})
    dist = load_distribution(root, strict=False)
    assert "broken" not in dist.recipes and dist.errors  # it is unreadable ...
    dist.check_names(["alpha", "broken"])  # ... and still a recipe lint can be asked about
    with pytest.raises(RecipeError) as info:
        dist.check_names(["alpah"])
    assert "no recipe named 'alpah'" in info.value.message and info.value.hint == "did you mean 'alpha'?"


def test_unreadable_recipes_are_notices_on_stderr_and_exit_1(make_distro, clean_recipe, capsys):
    from conda_distro.distribution import load_distribution

    root = make_distro({"a": clean_recipe("a", run=["numpy >=1,,<2"]), "b": clean_recipe("b", run=["a >=1,<2"])})
    notices = load_distribution(root, strict=False).notices()
    assert len(notices) == 2 and notices[0].startswith("error: ") and "recipe.yaml" in notices[0]
    assert notices[1] == "blocked: b depends on unreadable recipe a"
    for fmt in ("text", "json"):
        code, out, err = run_cli(capsys, "graph", "--root", str(root), "--format", fmt)
        assert code == 1 and err.splitlines() == notices, fmt
        if fmt == "json":
            assert json.loads(out)["ok"] is False
