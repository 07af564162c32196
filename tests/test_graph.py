"""RecipeGraph and `conda-distro graph`: order, levels, affected sets, cycles, formats, --changed-since."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import git
import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.helpers import run_cli

from conda_distro.distribution import load_distribution
from conda_distro.errors import GitError, GraphError
from conda_distro.graph import RecipeGraph
from conda_distro.util.gitutil import changed_files, changed_recipes

# base -> mid-a, mid-b (a diamond) -> top;  base -> solo;  lonely has no distribution deps.
# mid-b depends on base through host only; top pins both mids.
EDGES = {
    "base": [],
    "mid-a": ["base >=1,<2"],
    "mid-b": [],
    "top": ["mid-a >=1,<2", "mid-b >=1,<2"],
    "solo": ["base >=1,<2"],
    "lonely": [],
}
HOST = {"mid-b": ["base"]}


@pytest.fixture()
def distro_root(make_distro, clean_recipe) -> Path:
    return make_distro({n: clean_recipe(n, run=deps, host=HOST.get(n, ())) for n, deps in EDGES.items()})


def graph_json(capsys, root: Path, *argv: str) -> dict:
    code, out, _ = run_cli(capsys, "graph", "--root", str(root), "--format", "json", *argv)
    assert code == 0
    return json.loads(out)


def test_order_and_levels(distro_root):
    g = RecipeGraph.from_recipes(load_distribution(distro_root).recipes)
    assert sorted(g.g.edges) == [("base", "mid-a"), ("base", "mid-b"), ("base", "solo"), ("mid-a", "top"), ("mid-b", "top")]
    assert g.order() == ["base", "lonely", "mid-a", "mid-b", "solo", "top"]
    assert g.levels() == [["base", "lonely"], ["mid-a", "mid-b", "solo"], ["top"]]
    assert g.dependencies("top") == {"mid-a", "mid-b"} and g.dependents("base") == {"mid-a", "mid-b", "solo"}
    assert g.ancestors("top") == {"base", "mid-a", "mid-b"} and g.descendants("mid-a") == {"top"}


@pytest.mark.parametrize("changed,affected", [
    (["base"], ["base", "mid-a", "mid-b", "solo", "top"]),
    (["mid-b"], ["mid-b", "top"]),
    (["top"], ["top"]),
    (["solo", "mid-a"], ["mid-a", "solo", "top"]),
    (["lonely"], ["lonely"]),
    ([], []),
    (["not-a-recipe"], []),
])
def test_affected_is_changed_plus_reverse_deps_in_order(distro_root, changed, affected):
    g = RecipeGraph.from_recipes(load_distribution(distro_root).recipes)
    assert g.affected(changed) == affected


def test_graph_json(distro_root, capsys):
    doc = graph_json(capsys, distro_root)
    assert doc["order"] == ["base", "lonely", "mid-a", "mid-b", "solo", "top"]
    assert doc["levels"] == [["base", "lonely"], ["mid-a", "mid-b", "solo"], ["top"]]
    assert doc["affected"] == doc["order"] and doc["changed"] is None
    doc = graph_json(capsys, distro_root, "--affected-by", "mid-b", "--affected-by", "solo")
    assert doc["affected"] == ["mid-b", "solo", "top"] and doc["changed"] == ["mid-b", "solo"]
    assert doc["order"] == ["base", "lonely", "mid-a", "mid-b", "solo", "top"]


def test_graph_text(distro_root, capsys):
    code, out, _ = run_cli(capsys, "graph", "--root", str(distro_root), "--affected-by", "mid-a")
    assert code == 0
    assert "level 0: base, lonely" in out and "level 2: top" in out
    assert "affected (2): mid-a, top" in out


def test_affected_by_unknown_name(distro_root, capsys):
    code, out, err = run_cli(capsys, "graph", "--root", str(distro_root), "--affected-by", "mid-c", "--format", "json")
    assert code == 2 and out == ""
    assert "no recipe named 'mid-c'" in err and "did you mean 'mid-" in err


def test_cycle_is_reported_by_name(make_distro, clean_recipe, capsys):
    root = make_distro({
        "a": clean_recipe("a", run=["b >=1,<2"]),
        "b": clean_recipe("b", run=["c >=1,<2"]),
        "c": clean_recipe("c", host=["a"]),
        "d": clean_recipe("d", run=["a >=1,<2"]),
    })
    # edges point from a dependency to its dependent: c needs a, b needs c, a needs b
    with pytest.raises(GraphError, match=r"dependency cycle: a -> c -> b -> a"):
        RecipeGraph.from_recipes(load_distribution(root).recipes)
    code, out, err = run_cli(capsys, "graph", "--root", str(root))
    assert code == 2 and out == ""
    assert "dependency cycle: a -> c -> b -> a" in err and "break the cycle" in err


def test_two_cycles_report_the_first_by_name(make_distro, clean_recipe):
    root = make_distro({
        "x": clean_recipe("x", run=["y >=1,<2"]), "y": clean_recipe("y", run=["x >=1,<2"]),
        "p": clean_recipe("p", run=["q >=1,<2"]), "q": clean_recipe("q", run=["p >=1,<2"]),
    })
    with pytest.raises(GraphError, match=r"dependency cycle: p -> q -> p"):
        RecipeGraph.from_recipes(load_distribution(root).recipes)


def test_dot_format(distro_root, capsys):
    code, out, _ = run_cli(capsys, "graph", "--root", str(distro_root), "--format", "dot", "--affected-by", "mid-b")
    assert code == 0
    assert out.startswith("digraph distribution {") and out.rstrip().endswith("}")
    assert '"base" -> "mid-a";' in out and '"mid-b" -> "top";' in out
    assert '"top" [style=filled' in out and '"mid-b" [style=filled' in out and '"base";' in out


def test_github_matrix_shards(distro_root, capsys):
    code, out, _ = run_cli(capsys, "graph", "--root", str(distro_root), "--format", "github-matrix", "--shards", "2")
    assert code == 0
    matrix = json.loads(out)
    assert [m["shard"] for m in matrix["include"]] == [0, 1]
    levels = [json.loads(m["levels"]) for m in matrix["include"]]
    assert levels[0] == [["base"], ["mid-a", "solo"], ["top"]] and levels[1] == [["lonely"], ["mid-b"], []]
    together = sorted(n for m in matrix["include"] for n in m["packages"].split())
    assert together == sorted(EDGES)
    code, out, _ = run_cli(capsys, "graph", "--root", str(distro_root), "--format", "github-matrix", "--shards", "4",
                           "--affected-by", "top")
    assert [m["packages"] for m in json.loads(out)["include"]] == ["top"]
    code, _, err = run_cli(capsys, "graph", "--root", str(distro_root), "--shards", "0")
    assert code == 2


def test_graph_reports_unreadable_recipes_and_carries_on(distro_root, capsys):
    """An unreadable recipe is reported (file:line, message) with the recipes blocked by it; the graph
    of the others is still drawn; exit 1. Naming the unreadable recipe is bad input (exit 2)."""
    (distro_root / "recipes" / "mid-a" / "recipe.yaml").write_text("package: {name: mid-a\n")
    code, out, err = run_cli(capsys, "graph", "--root", str(distro_root))
    assert code == 1 and "level 0:" in out
    assert "recipes/mid-a/recipe.yaml:2" in err and "invalid YAML" in err
    code, out, err = run_cli(capsys, "graph", "--root", str(distro_root), "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and "mid-a" not in doc["order"]
    assert [u["recipe"] for u in doc["unreadable"]] == ["mid-a"] and doc["unreadable"][0]["line"] == 2
    blocked = {b["name"]: b["by"] for b in doc["blocked"]}
    assert blocked and set(blocked.values()) == {"mid-a"}
    assert run_cli(capsys, "graph", "--root", str(distro_root), "--affected-by", "mid-a")[0] == 2


# ---------------------------------------------------------------------------------------------
# --changed-since on a real git repository


@pytest.fixture()
def repo(distro_root) -> git.Repo:
    r = git.Repo.init(distro_root)
    with r.config_writer() as cw:
        cw.set_value("user", "name", "Test").set_value("user", "email", "test@example.org")
    r.index.add([str(p.relative_to(distro_root)) for p in distro_root.rglob("*") if p.is_file() and ".git" not in p.parts])
    r.index.commit("distribution")
    r.create_tag("base-commit")
    return r


def test_changed_since_a_commit(repo, distro_root, capsys):
    recipe = distro_root / "recipes" / "mid-b" / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace("  number: 0\n", "  number: 1\n"))
    assert changed_recipes(distro_root, "HEAD") == ["mid-b"]
    doc = graph_json(capsys, distro_root, "--changed-since", "HEAD")
    assert doc["changed"] == ["mid-b"] and doc["affected"] == ["mid-b", "top"]

    repo.index.add(["recipes/mid-b/recipe.yaml"])
    repo.index.commit("bump mid-b")
    assert changed_recipes(distro_root, "HEAD") == []
    assert changed_recipes(distro_root, "base-commit") == ["mid-b"]
    assert graph_json(capsys, distro_root, "--changed-since", "HEAD")["affected"] == []
    doc = graph_json(capsys, distro_root, "--changed-since", "HEAD~1", "--affected-by", "solo")
    assert doc["changed"] == ["mid-b", "solo"] and doc["affected"] == ["mid-b", "solo", "top"]


def test_changed_since_sees_untracked_and_ignores_other_files(repo, distro_root, clean_recipe, capsys):
    new = distro_root / "recipes" / "newpkg" / "recipe.yaml"
    new.parent.mkdir()
    new.write_text(clean_recipe("newpkg", run=["base >=1,<2"]))
    (distro_root / "README.md").write_text("docs\n")
    (distro_root / "recipes" / "base" / "build.sh").write_text("echo\n")  # a file beside a recipe counts
    assert changed_recipes(distro_root, "HEAD") == ["base", "newpkg"]
    assert "README.md" in changed_files(distro_root, "HEAD")
    doc = graph_json(capsys, distro_root, "--changed-since", "base-commit")
    assert doc["affected"] == ["base", "mid-a", "mid-b", "newpkg", "solo", "top"]


def test_changed_since_in_a_subfolder_of_the_repository(tmp_path, make_distro, clean_recipe, capsys):
    outer = tmp_path / "outer"
    root = make_distro({"a": clean_recipe("a"), "b": clean_recipe("b", run=["a >=1,<2"])}, name="outer/distro")
    r = git.Repo.init(outer)
    with r.config_writer() as cw:
        cw.set_value("user", "name", "Test").set_value("user", "email", "test@example.org")
    (outer / "other" / "recipes" / "zzz").mkdir(parents=True)
    (outer / "other" / "recipes" / "zzz" / "recipe.yaml").write_text("x: 1\n")
    r.index.add([str(p.relative_to(outer)) for p in outer.rglob("*") if p.is_file() and ".git" not in p.parts])
    r.index.commit("init")
    (root / "recipes" / "a" / "recipe.yaml").write_text(clean_recipe("a", version="1.3.0"))
    (outer / "other" / "recipes" / "zzz" / "recipe.yaml").write_text("x: 2\n")
    assert changed_recipes(root, "HEAD") == ["a"]
    assert graph_json(capsys, root, "--changed-since", "HEAD")["affected"] == ["a", "b"]


def test_changed_since_bad_ref_or_no_repository(repo, distro_root, tmp_path, make_distro, clean_recipe, capsys):
    code, out, err = run_cli(capsys, "graph", "--root", str(distro_root), "--changed-since", "no-such-ref")
    assert code == 2 and out == "" and "unknown git reference 'no-such-ref'" in err
    with pytest.raises(GitError):
        changed_recipes(distro_root, "HEAD~5")
    plain = make_distro({"a": clean_recipe("a")}, name="not-a-repo")
    code, out, err = run_cli(capsys, "graph", "--root", str(plain), "--changed-since", "HEAD")
    assert code == 2 and "not inside a git repository" in err


# ---------------------------------------------------------------------------------------------
# properties


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))),
    st.integers(1, 5))
def test_order_levels_affected_shards_are_consistent(spec, nshards):
    n, pairs = spec
    g = nx.DiGraph()
    names = [f"p{i:02d}" for i in range(n)]
    g.add_nodes_from(names)
    g.add_edges_from((names[min(a, b)], names[max(a, b)]) for a, b in pairs if a != b)  # low -> high: a DAG
    rg = RecipeGraph(g)
    rg.check_acyclic()
    order = rg.order()
    pos = {name: i for i, name in enumerate(order)}
    assert sorted(order) == names and all(pos[u] < pos[v] for u, v in g.edges)
    levels = rg.levels()
    level_of = {name: i for i, lv in enumerate(levels) for name in lv}
    assert all(level_of[u] < level_of[v] for u, v in g.edges)
    assert all(lv == sorted(lv) for lv in levels)
    changed = names[: max(1, n // 5)]
    affected = rg.affected(changed)
    expected = set(changed).union(*(nx.descendants(g, c) for c in changed))
    assert set(affected) == expected and all(pos[a] < pos[b] for a, b in itertools.pairwise(affected))
    shards = rg.shards(affected, nshards)
    assert len(shards) == nshards
    flat = sorted(x for shard in shards for lv in shard for x in lv)
    assert flat == sorted(affected)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 12))
def test_any_ring_is_a_cycle(n):
    names = [f"r{i:02d}" for i in range(n)]
    g = nx.DiGraph(list(zip(names, names[1:] + names[:1], strict=True)))
    with pytest.raises(GraphError) as info:
        RecipeGraph(g).check_acyclic()
    assert info.value.message == "dependency cycle: " + " -> ".join([*names, names[0]])
