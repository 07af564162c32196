"""The fan-out's plan (pure data) and the checks every reader makes of a shard's bundle.

The end-to-end contract (the workflows run job by job on the sandbox world give the single machine's
verdict, comment and promoted set) is tests/test_fanout_contract.py (slow)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conda_distro.errors import ShardError
from conda_distro.fanout.bundle import MANIFEST, Checkout, read_bundles
from conda_distro.fanout.plan import COMPILED_WEIGHT, STATIC_COSTS, ShardSpec, make_shards, unit_package, units_of
from conda_distro.graph import RecipeGraph
from conda_distro.state.provenance import recipe_digest


def _graph(edges: list[tuple[str, str]], nodes: list[str] = ()) -> RecipeGraph:
    g: nx.DiGraph[str] = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_edges_from(edges)
    return RecipeGraph(g)


def _check_invariants(graph: RecipeGraph, affected: list[str], plan, spec: ShardSpec,
                      builds: dict[str, list[str]] | None = None) -> None:
    owner = plan.owner()
    units = units_of(affected, builds or {})
    assert sorted(owner) == sorted(units)  # every unit (a package, or one minor's build) in exactly one shard
    assert sum(len(s.packages) for s in plan.shards) == len(units)
    for u, v in graph.g.subgraph(affected).edges:
        # every unit of a dependency is built by an earlier stage, or (folded levels) by the same shard, before
        for uu in (x for x in units if unit_package(x) == u):
            for vv in (x for x in units if unit_package(x) == v):
                su, sv = plan.shard(owner[uu]), plan.shard(owner[vv])
                assert su.stage < sv.stage or (su.id == sv.id and su.packages.index(uu) < sv.packages.index(vv)), (uu, vv)
    assert len(plan.stages) <= spec.stages
    assert all(len(s) <= spec.runners for s in plan.stages)
    for s in plan.shards:  # a shard's inputs: exactly the earlier shards holding one of its packages' ancestors
        needed = {owner[x] for n in s.names for a in graph.ancestors(n) for x in units if unit_package(x) == a}
        assert set(s.inputs) == {i for i in needed if plan.shard(i).stage < s.stage}


def test_levels_become_stages_and_big_levels_split():
    graph = _graph([("a", "x"), ("b", "x"), ("x", "y")], ["a", "b", "c", "d", "e"])
    plan = make_shards(graph, graph.names, {}, ShardSpec(runners=2, per_shard=1, stages=6))
    assert [[s.packages for s in stage] for stage in plan.stages] == \
        [[("a", "c", "e"), ("b", "d")], [("x",)], [("y",)]]
    # a shard takes only the earlier shards holding its dependencies (direct or not): y needs x, a, b; not c, e
    assert plan.earlier("s2-0") == [*plan.stages[0], *plan.stages[1]] and plan.earlier("s0-1") == []
    assert plan.earlier("s1-0") == plan.stages[0] and plan.shard("s2-0").download == "shard-{s0-0,s0-1,s1-0}"
    side = make_shards(_graph([("a", "x"), ("c", "z")], ["a", "c"]), ["a", "c", "x", "z"], {},
                       ShardSpec(runners=2, per_shard=1, stages=6))
    assert [(s.id, s.packages, s.inputs, s.download) for s in side.stages[1]] == \
        [("s1-0", ("x",), ("s0-0",), "shard-s0-0"), ("s1-1", ("z",), ("s0-1",), "shard-s0-1")]
    # one runner per stage: one shard each; enough runners, 2 per shard: 3 shards for 5 packages
    assert [len(s) for s in make_shards(graph, graph.names, {}, ShardSpec(runners=1, per_shard=1)).stages] == [1, 1, 1]
    assert len(make_shards(graph, graph.names, {}, ShardSpec(runners=10, per_shard=2)).stages[0]) == 3


def test_a_slow_package_gets_a_shard_of_its_own():
    graph = _graph([], ["big", "n1", "n2", "n3", "n4"])
    plan = make_shards(graph, graph.names, {"big": COMPILED_WEIGHT}, ShardSpec(runners=2, per_shard=4))
    assert sorted(s.packages for s in plan.stages[0]) == [("big",), ("n1", "n2", "n3", "n4")]


def test_a_compiled_package_builds_on_shards_of_their_own():
    """The unit of fan-out is one build: a package built per PyTorch minor × variant is one unit per build,
    and its units go to different shards of its level, so the level's slowest shard is one build."""
    graph = _graph([("ext", "user")], ["ext", "n1", "n2", "user"])
    builds = {"ext": ["cuda=none,pytorch=2.5", "cuda=12,pytorch=2.5", "cuda=none,pytorch=2.6"]}
    spec = ShardSpec(runners=4, per_shard=4)
    plan = make_shards(graph, graph.names, {"ext": COMPILED_WEIGHT}, spec, builds)
    assert sorted(s.packages for s in plan.stages[0]) == [
        ("ext@0:cuda=none,pytorch=2.5",), ("ext@1:cuda=12,pytorch=2.5",), ("ext@2:cuda=none,pytorch=2.6",), ("n1", "n2")]
    assert [s.names for s in plan.stages[1]] == [("user",)]
    _check_invariants(graph, graph.names, plan, spec, builds)
    # one runner: the three builds in one shard, in order; a single build is the whole package
    one = make_shards(graph, graph.names, {"ext": COMPILED_WEIGHT}, ShardSpec(runners=1), builds)
    assert one.stages[0][0].packages == ("ext@0:cuda=none,pytorch=2.5", "ext@1:cuda=12,pytorch=2.5",
                                         "ext@2:cuda=none,pytorch=2.6", "n1", "n2")
    assert make_shards(graph, graph.names, {}, spec, {"ext": ["pytorch=2.5"]}).owner()["ext"] == "s0-0"


def _heavy_level(compiled: int, noarch: int):
    """One level: ``compiled`` packages built cpu and cuda (two units each) and ``noarch`` noarch ones, with
    the planner's static estimates (two targets: one cpu, one cuda)."""
    names = [f"c{i:02d}" for i in range(compiled)] + [f"n{i:02d}" for i in range(noarch)]
    builds = {f"c{i:02d}": ["cuda_compiler_version=None", "cuda_compiler_version=12.4"] for i in range(compiled)}
    weights = {n: COMPILED_WEIGHT for n in builds}
    costs = {n: STATIC_COSTS.estimate(False, cpu_tests=1, cuda_tests=1) for n in names if n not in builds}
    for n in builds:
        costs[f"{n}@0:cuda_compiler_version=None"] = STATIC_COSTS.estimate(True, False, cpu_tests=1)
        costs[f"{n}@1:cuda_compiler_version=12.4"] = STATIC_COSTS.estimate(True, True, cuda_tests=1)
    return _graph([], names), builds, weights, costs


@pytest.mark.parametrize(("compiled", "noarch", "runners"), [(49, 105, 20), (27, 60, 20), (9, 60, 5), (27, 60, 5)])
def test_cuda_builds_take_a_free_core_before_any_shard_doubles_up(compiled, noarch, runners):
    """A level of many cuda builds and many noarch packages (the first case: release day's stage 0 at
    N = 300, K = 20): the cuda builds (the heaviest units) go one per core of the runners' shards before
    any shard holds more cuda builds than its cores, and the shards' counts differ by at most one; the
    cpu builds and noarch packages fill in around them. Packed by the weights alone (a cuda build
    weighing as much as a cpu one), 9 of those 20 shards got 5 cuda builds on 4 cores and 10 none."""
    graph, builds, weights, costs = _heavy_level(compiled, noarch)
    spec = ShardSpec(runners=runners, per_shard=4, cores=4)
    plan = make_shards(graph, graph.names, weights, spec, builds, costs)
    assert len(plan.stages[0]) == runners  # as many shards as before: the count is the weights', bounded by runners
    cuda = [sum(u.endswith("12.4") for u in s.packages) for s in plan.stages[0]]
    assert sum(cuda) == compiled and max(cuda) - min(cuda) <= 1
    if compiled <= runners * spec.cores:
        assert max(cuda) <= spec.cores  # one per core while any core is free
    else:
        assert min(cuda) >= spec.cores  # every core has one before a shard doubles up
    _check_invariants(graph, graph.names, plan, spec, builds)
    if (compiled, runners) == (49, 20):
        before = make_shards(graph, graph.names, weights, spec, builds)  # no costs: by the weights, as before
        assert sorted(sum(u.endswith("12.4") for u in s.packages) for s in before.stages[0]).count(5) == 9


def test_the_packing_is_deterministic():
    """Same input, same shards: whatever order the packages come in (every job recomputes the plan and
    they must agree), and the output format is the one the workflows read."""
    graph, builds, weights, costs = _heavy_level(13, 41)
    spec = ShardSpec(runners=7, per_shard=3, cores=4)
    plan = make_shards(graph, graph.names, weights, spec, builds, costs)
    again = make_shards(graph, list(reversed(graph.names)), dict(reversed(weights.items())), spec,
                        dict(reversed(builds.items())), dict(reversed(costs.items())))
    assert plan.to_dict() == again.to_dict()
    assert plan.github_lines(8) == again.github_lines(8)
    assert set(plan.stages[0][0].to_dict()) == {"shard", "stage", "packages", "inputs"}


def test_deep_levels_fold_into_the_last_stage_as_whole_pieces():
    chain = [(f"c{i}", f"c{i + 1}") for i in range(5)]  # c0 -> ... -> c5: six levels
    graph = _graph([*chain, ("c2", "side"), ("z0", "z1"), ("z1", "z2"), ("z2", "z3")])
    spec = ShardSpec(runners=4, per_shard=1, stages=3)
    plan = make_shards(graph, graph.names, {}, spec)
    assert len(plan.stages) == 3
    last = {s.packages for s in plan.stages[2]}
    assert ("c2", "c3", "side", "c4", "c5") in last or ("c2", "c3", "c4", "c5", "side") in last
    assert ("z2", "z3") in last
    _check_invariants(graph, graph.names, plan, spec)


def test_the_plan_as_github_outputs():
    graph = _graph([("a", "b")])
    plan = make_shards(graph, ["a", "b"], {}, ShardSpec(runners=2, per_shard=1, stages=3))
    out = dict(line.split("=", 1) for line in plan.github_lines(3))
    assert json.loads(out["stage-0"]) == {"include": [{"shard": "s0-0", "stage": 0, "packages": "a", "inputs": ""}]}
    assert json.loads(out["stage-1"])["include"][0]["inputs"] == "shard-s0-0"
    assert out["count-2"] == "0" and json.loads(out["stage-2"]) == {"include": []} and out["shards"] == "2"
    assert make_shards(graph, [], {}, ShardSpec()).shards == []


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 30).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n),
    st.integers(1, 5), st.integers(1, 4), st.integers(1, 5), st.sets(st.integers(0, n - 1)),
    st.integers(1, 3))))
def test_any_graph_is_cut_into_shards_that_respect_its_order(case):
    n, pairs, runners, per_shard, stages, compiled, minors = case
    edges = [(f"p{min(a, b):02d}", f"p{max(a, b):02d}") for a, b in pairs if a != b]  # acyclic: low -> high
    graph = _graph(edges, [f"p{i:02d}" for i in range(n)])
    spec = ShardSpec(runners=runners, per_shard=per_shard, stages=stages)
    weights = {f"p{i:02d}": COMPILED_WEIGHT for i in compiled}
    affected = graph.names[::2] + graph.names[1::3]
    affected = graph.order(set(affected))
    builds = {f"p{i:02d}": [f"pytorch=2.{m}" for m in range(minors)] for i in compiled}
    plan = make_shards(graph, affected, weights, spec, builds)
    _check_invariants(graph, affected, plan, spec, builds)
    assert plan.to_dict() == make_shards(graph, list(reversed(affected)), weights, spec, builds).to_dict()  # deterministic
    costs = {u: STATIC_COSTS.estimate(unit_package(u) in weights, u.endswith("=2.1")) for u in units_of(affected, builds)}
    packed = make_shards(graph, affected, weights, spec, builds, costs)  # packed by estimated costs
    _check_invariants(graph, affected, packed, spec, builds)
    assert [len(st) for st in packed.stages] == [len(st) for st in plan.stages]  # as many shards as by weights
    assert packed.to_dict() == make_shards(graph, list(reversed(affected)), weights, spec, builds, costs).to_dict()


# --- bundles: what a reader refuses


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A checkout with two recipe folders (only their digests matter to the checks)."""
    for name in ("a", "b"):
        (tmp_path / "recipes" / name).mkdir(parents=True)
        (tmp_path / "recipes" / name / "recipe.yaml").write_text(f"package: {{name: {name}, version: '1.0'}}\n")
    return tmp_path


def _bundle(root: Path, out: Path, shard: str, package: str, run: str = "r1", head: str = "c" * 40,
            minor: str | None = None, index: int = 0) -> Path:
    """A bundle as a shard job writes it: one artifact of ``package``, its results file, a passed test;
    ``minor``: the unit ``package@index:pytorch=minor`` (its build for that PyTorch minor, tested on that minor's
    release)."""
    art = f"noarch/{package}-1.0-{'pt' + minor.replace('.', '') + '_' if minor else ''}0.conda"
    data = f"the {package} package {minor}".encode()
    (out / "channel" / "noarch").mkdir(parents=True)
    (out / "channel" / art).write_bytes(data)
    recipe = f"recipes/{package}"
    digest = recipe_digest(root / recipe)
    test = {"name": package, "artifact": art, "pytorch": f"{minor or '2.5'}.1", "variant": "cpu", "status": "passed",
            "date": "2026-01-01T00:00:00Z", "recipes": {recipe: digest}, "commit": head}
    (out / "results").mkdir()
    (out / "results" / f"{art.replace('/', '__')}.json").write_text(json.dumps(
        {"schema_version": 2, "artifact": art, "name": package, "version": "1.0", "sha256": _sha(data),
         "recipe": recipe, "recipe_hash": digest, "commit": head, "tests": [test]}))
    (out / MANIFEST).write_text(json.dumps(
        {"bundle_version": 1, "run": run, "shard": shard, "head": head,
         "packages": [f"{package}@{index}:pytorch={minor}" if minor else package], "files": {art: _sha(data)},
         "builds": [{"name": package, "version": "1.0", "artifact": art, "sha256": _sha(data), "status": "built",
                     "variant": {"pytorch": minor} if minor else {}}], "tests": [test]}))
    return out


def _read(root: Path, bundles: Path, run: str = "r1", builds: dict[str, list[str]] | None = None):
    graph = _graph([("a", "b")])
    plan = make_shards(graph, ["a", "b"], {}, ShardSpec(runners=2, per_shard=1), builds)
    checkout = Checkout(run=run, head="c" * 40, root=root, outputs={"a": frozenset({"a"}), "b": frozenset({"b"})},
                        build_dir=root / "build")
    return read_bundles(bundles, plan, plan.shards, checkout)


def test_honest_bundles_are_read(repo, tmp_path):
    _bundle(repo, tmp_path / "dl" / "shard-s0-0", "s0-0", "a")
    _bundle(repo, tmp_path / "dl" / "shard-s1-0", "s1-0", "b")
    got = _read(repo, tmp_path / "dl")
    assert [b.manifest.shard for b in got] == ["s0-0", "s1-0"]
    assert [t.status for b in got for t in b.manifest.tests] == ["passed", "passed"]


def _tamper_file(b: Path) -> None:
    (b / "channel/noarch/a-1.0-0.conda").write_bytes(b"another content")


def _tamper_json(b: Path, path: str, edit) -> None:
    doc = json.loads((b / path).read_text())
    edit(doc)
    (b / path).write_text(json.dumps(doc))


TAMPER = {
    "another run": (lambda b: _tamper_json(b, MANIFEST, lambda d: d.update(run="r0")), "made by run 'r0'"),
    "another commit": (lambda b: _tamper_json(b, MANIFEST, lambda d: d.update(head="d" * 40)), "built from commit"),
    "another shard's package": (lambda b: _tamper_json(b, MANIFEST, lambda d: d.update(packages=["b"])),
                                "this run's plan gives it a"),
    "an altered file": (_tamper_file, "is not the file its manifest's sha256 names"),
    "an extra file": (lambda b: (b / "channel/noarch/b-1.0-0.conda").write_bytes(b"x"), "its files and its manifest differ"),
    "a symlink": (lambda b: (b / "results/link.json").symlink_to("/etc/hostname"), "other than regular files"),
    "a stray folder": (lambda b: (b / ".git").mkdir(), "unexpected entry '.git'"),
    "another recipe": (lambda b: _tamper_json(b, "results/noarch__a-1.0-0.conda.json",
                                              lambda d: d.update(recipe_hash="0" * 64)), "not this checkout's recipes/a"),
    "a test with other recipes": (lambda b: _tamper_json(b, "results/noarch__a-1.0-0.conda.json",
                                                         lambda d: d["tests"][0].update(recipes={"recipes/a": "0" * 64})),
                                  "recipes that are not this checkout's: recipes/a"),
    "a passed test the results do not hold": (lambda b: _tamper_json(b, MANIFEST, lambda d: d["tests"][0].update(
        status="failed")), "is not in its results"),
    "a build of another package": (lambda b: _tamper_json(b, MANIFEST, lambda d: d["builds"][0].update(name="b")),
                                   "a build record of 'b'"),
    "an artifact of another name": (lambda b: _tamper_json(b, "results/noarch__a-1.0-0.conda.json",
                                                           lambda d: d.update(name="b")), "which none of its packages produces"),
    "an unreadable manifest": (lambda b: (b / MANIFEST).write_text("{"), "unreadable shard manifest"),
    "missing": (lambda b: shutil.rmtree(b), "the bundle of shard s0-0 (a) is missing"),
    "twice": (lambda b: shutil.copytree(b, b.with_name("copy")), "two bundles of shard 's0-0'"),
}


@pytest.mark.parametrize("case", sorted(TAMPER))
def test_a_bundle_that_is_not_what_this_run_made_is_refused(case, repo, tmp_path):
    b = _bundle(repo, tmp_path / "dl" / "shard-s0-0", "s0-0", "a")
    _bundle(repo, tmp_path / "dl" / "shard-s1-0", "s1-0", "b")
    tamper, words = TAMPER[case]
    tamper(b)
    with pytest.raises(ShardError) as err:
        _read(repo, tmp_path / "dl")
    assert words in str(err.value), str(err.value)
    assert err.value.hint and err.value.exit_code == 2


# --- a package built per minor, split over shards


SPLIT = {"a": ["pytorch=2.4", "pytorch=2.5"]}


def _split_bundles(repo: Path, dl: Path) -> list[Path]:
    return [_bundle(repo, dl / "shard-s0-0", "s0-0", "a", minor="2.4"),
            _bundle(repo, dl / "shard-s0-1", "s0-1", "a", minor="2.5", index=1), _bundle(repo, dl / "shard-s1-0", "s1-0", "b")]


def test_a_package_built_per_minor_is_read_from_the_shards_of_its_builds(repo, tmp_path):
    _split_bundles(repo, tmp_path / "dl")
    got = _read(repo, tmp_path / "dl", builds=SPLIT)
    assert [(b.manifest.shard, b.manifest.packages) for b in got] == \
        [("s0-0", ["a@0:pytorch=2.4"]), ("s0-1", ["a@1:pytorch=2.5"]), ("s1-0", ["b"])]
    assert [r.variant for b in got for r in b.manifest.builds] == [{"pytorch": "2.4"}, {"pytorch": "2.5"}, {}]


SPLIT_TAMPER = {
    # the shard of a@2.4 speaks for the 2.5 build (which the shard of a@2.5 also holds)
    "another unit's build": (lambda b: _tamper_json(b, MANIFEST, lambda d: d["builds"][0].update(variant={"pytorch": "2.5"})),
                             "a build record of 'a' (pytorch=2.5), which is not one of its units"),
    "another unit's test": (lambda b: _tamper_json(b, MANIFEST, lambda d: d["tests"][0].update(
        artifact="noarch/a-1.0-pt25_0.conda")), "is not in its results"),
    "no build of its unit": (lambda b: _tamper_json(b, MANIFEST, lambda d: d.update(builds=[])),
                             "no build record of 'a' (pytorch=2.4)"),
}


@pytest.mark.parametrize("case", sorted(SPLIT_TAMPER))
def test_a_shard_speaks_only_for_its_own_builds(case, repo, tmp_path):
    first = _split_bundles(repo, tmp_path / "dl")[0]
    tamper, words = SPLIT_TAMPER[case]
    tamper(first)
    with pytest.raises(ShardError) as err:
        _read(repo, tmp_path / "dl", builds=SPLIT)
    assert words in str(err.value), str(err.value)
    assert "s0-0" in str(err.value) and err.value.exit_code == 2


def test_a_shard_runs_only_its_units_builds():
    """`build` restricted to a shard's units (engine.plan.restrict): a whole package as planned; a unit
    ``NAME@I:K=V`` only that build (unit 0 also what has no such key)."""
    from dataclasses import replace

    from conda_distro.engine.backends import VariantSpec
    from conda_distro.engine.plan import BuildPlan, PackagePlan, VariantPlan, restrict
    from conda_distro.vocab import Target, Variant

    def pkg(name: str, minors: list[str]) -> PackagePlan:
        specs = [VariantSpec(name, "1.0", f"pt{m.replace('.', '')}_0", 0, "linux-64", {"pytorch": m} if m else {})
                 for m in minors]
        targets = tuple(Target(r, Variant(v)) for r in ("2.4.1", "2.5.1") for v in ("cpu", "cuda"))
        return PackagePlan(name, Path(name), "1.0", (), (), tuple(VariantPlan(s, "h", "build") for s in specs), targets)

    plan = BuildPlan((pkg("ext", ["2.4", "2.5"]), pkg("other", ["2.4", "2.5"]), pkg("pure", [""])), (), (), "rattler-build")
    got = restrict(plan, ("ext@1:pytorch=2.5", "pure"))
    assert [p.name for p in got.packages] == ["ext", "pure"]
    ext = got.packages[0]
    assert [v.spec.variant for v in ext.variants] == [{"pytorch": "2.5"}]
    assert ext.targets == plan.packages[0].targets  # an artifact is tested on the targets it admits
    assert got.packages[1] == plan.packages[2]
    both = restrict(plan, ("ext@0:pytorch=2.4", "ext@1:pytorch=2.5")).packages[0]
    assert len(both.variants) == 2
    # unit 0 also re-tests what has no pytorch key (a file from main)
    main = replace(plan.packages[0], variants=(*plan.packages[0].variants,
                                               VariantPlan(VariantSpec("ext", "0.9", "0", 0, "linux-64"), "m", "from-main")))
    assert [v.action for v in restrict(replace(plan, packages=(main,)), ("ext@0:pytorch=2.4",)).packages[0].variants] == \
        ["build", "from-main"]
    assert [v.action for v in restrict(replace(plan, packages=(main,)), ("ext@1:pytorch=2.5",)).packages[0].variants] == \
        ["build"]


def test_two_shards_never_hold_the_same_file(repo, tmp_path):
    """The fan-in checks every build, test and file came from exactly one shard: unit 0 of a split package
    may re-test files that no build of its own made, but not a file another shard holds."""
    first, second, _ = _split_bundles(repo, tmp_path / "dl")
    other = "noarch/a-1.0-pt25_0.conda"
    shutil.copyfile(second / "channel" / other, first / "channel" / other)
    shutil.copyfile(second / "results" / "noarch__a-1.0-pt25_0.conda.json", first / "results" / "noarch__a-1.0-pt25_0.conda.json")
    _tamper_json(first, MANIFEST, lambda d: d["files"].update(json.loads((second / MANIFEST).read_text())["files"]))
    with pytest.raises(ShardError) as err:
        _read(repo, tmp_path / "dl", builds=SPLIT)
    assert "shards s0-0 and s0-1 both hold the file noarch/a-1.0-pt25_0.conda" in str(err.value), str(err.value)


@pytest.mark.parametrize("releases", [(), ("2.6.0", "2.7.0")])
def test_a_fanned_out_sweep_sweeps_one_release(releases):
    """`fanout plan|shard|merge --flow sweep` take exactly one --pytorch (the release swept): bad input,
    exit 2, before anything is read or written."""
    from conda_distro.errors import UsageError
    from conda_distro.fanout.flows import FanoutOptions, merge_build, plan_run, run_shard

    for call, extra in ((plan_run, {}), (run_shard, {"shard": "s0-0", "out": Path("out")}),
                        (merge_build, {"bundles": Path("dl")})):
        with pytest.raises(UsageError) as err:
            call(FanoutOptions(flow="sweep", pytorch=releases, **extra))
        assert err.value.exit_code == 2 and "one release" in str(err.value)


def test_a_unit_tells_a_build_without_a_key_from_one_with_it():
    """``K=`` in a unit is a key its build does not have: the cpu build of a minor (no cuda key) and its
    cuda build are two units, each running and speaking for its own build only."""
    from conda_distro.engine.backends import VariantSpec
    from conda_distro.engine.plan import BuildPlan, PackagePlan, VariantPlan, restrict
    from conda_distro.fanout.bundle import owned_by
    from conda_distro.fanout.plan import Shard
    from conda_distro.state.results import BuildRecord

    cpu, cuda = {"pytorch": "2.4"}, {"pytorch": "2.4", "cuda_compiler_version": "13.0"}
    specs = [VariantSpec("ext", "1.0", b, 0, "linux-64", v) for b, v in (("cpu_0", cpu), ("cuda_0", cuda))]
    plan = BuildPlan((PackagePlan("ext", Path("ext"), "1.0", (), (), tuple(VariantPlan(s, "h", "build") for s in specs), ()),),
                     (), (), "rattler-build")
    units = ("ext@0:cuda_compiler_version=,pytorch=2.4", "ext@1:cuda_compiler_version=13.0,pytorch=2.4")
    assert [[v.spec.build_string for v in restrict(plan, (u,)).packages[0].variants] for u in units] == [["cpu_0"], ["cuda_0"]]
    checkout = Checkout(run="r", head=None, root=Path("."), outputs={"ext": frozenset({"ext"})}, build_dir=Path("b"))
    records = [BuildRecord(name="ext", version="1.0", status="built", variant=v) for v in (cpu, cuda)]
    owns = [owned_by(Shard(f"s0-{i}", 0, (u,)), checkout) for i, u in enumerate(units)]
    assert [[o.build(r) for r in records] for o in owns] == [[True, False], [False, True]]
