"""`conda-distro solve` on the sandbox world: co-installability per release × variant (real rattler solves)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from support.helpers import run_cli_at, run_json_at, upstream_pytorch_builds

from conda_distro.distribution import load_distribution


def matrix(root: Path) -> list[tuple[str, str]]:
    cfg = load_distribution(root).config.pytorch
    return [(r, v) for r in cfg.releases for v in cfg.variants]


def recipe_versions(root: Path) -> dict[str, str]:
    return {r.name: r.version for r in load_distribution(root).recipes.values()}


def solution(result: dict) -> dict[str, tuple[str, str]]:
    """name -> (version, build) of a solve result's packages ("name version build")."""
    out = {}
    for p in result["packages"]:
        name, version, build = p.split()
        out[name] = (version, build)
    return out


def requested_names(result: dict) -> set[str]:
    return {s.split()[0] for s in result["requested"]} - {"pytorch"}


def add_recipe(root: Path, name: str, run: list[str], *, like: str = "tensorutils") -> None:
    """A copy of ``like``'s recipe named ``name`` with these run requirements."""
    text = (root / "recipes" / like / "recipe.yaml").read_text().replace(like, name)
    head, rest = text.split("  run:\n", 1)
    _, tail = rest.split("\ntests:", 1)
    (root / "recipes" / name).mkdir()
    (root / "recipes" / name / "recipe.yaml").write_text(
        head + "  run:\n" + "".join(f"    - {r}\n" for r in run) + "\ntests:" + tail)


@pytest.mark.slow
def test_the_sandbox_solves_for_every_release_and_variant(sandbox_world, capsys):
    code, doc = run_json_at(capsys, sandbox_world, "solve")
    assert code == 0 and doc["ok"] is True
    assert [(r["pytorch"], r["variant"]) for r in doc["results"]] == matrix(sandbox_world)
    versions = recipe_versions(sandbox_world)
    builds = upstream_pytorch_builds(sandbox_world)
    for r in doc["results"]:
        assert {"pytorch", "variant", "ok", "packages", "conflict"} <= set(r)
        assert r["ok"] is True and r["conflict"] is None and r["conflicting"] == []
        lockstep_ok = r["pytorch"].startswith("2.5.")  # visionkit pins pytorch >=2.5,<2.6
        expected = set(versions) if lockstep_ok else set(versions) - {"visionkit"}
        assert requested_names(r) == expected
        got = solution(r)
        # exactly the release, in the variant's build (cuda builds depend on __cuda)
        assert got["pytorch"] == (r["pytorch"], builds[(r["pytorch"], r["variant"])])
        assert got["pytorch"][1].startswith(r["variant"])
        for name in expected:
            assert got[name][0] == versions[name]
        assert ("visionkit" in got) == lockstep_ok


@pytest.mark.slow
def test_text_output(sandbox_world, capsys):
    code, out, _ = run_cli_at(capsys, sandbox_world, "solve", "--pytorch", "2.6.0")
    assert code == 0
    assert out.splitlines() == [f"pytorch 2.6.0 ({v}): ok — 10 distribution package(s)" for v in ("cpu", "cuda")]


@pytest.mark.slow
def test_a_conflict_names_the_package_and_the_clashing_spec(sandbox_world, capsys):
    # admitted on 2.6.0 only (its own pytorch pin), where it needs a metrickit that does not exist
    add_recipe(sandbox_world, "badpin", ["python >=3.10", "pytorch >=2.6,<2.7", "metrickit >=9,<10"])
    code, doc = run_json_at(capsys, sandbox_world, "solve")
    assert code == 1 and doc["ok"] is False
    for r in doc["results"]:
        if r["pytorch"] != "2.6.0":
            assert r["ok"] and "badpin" not in requested_names(r)
            continue
        assert r["ok"] is False and r["packages"] == []
        assert r["conflicting"] == ["badpin"]
        assert "metrickit >=9,<10" in r["conflict"]
        assert "badpin" in r["conflict"].splitlines()[0]
    code, out, _ = run_cli_at(capsys, sandbox_world, "solve")
    assert code == 1
    assert "pytorch 2.6.0 (cuda): CONFLICT" in out and "metrickit >=9,<10" in out


@pytest.mark.slow
def test_cuda_only_package_conflicts_in_the_cpu_variant_only(sandbox_world, capsys):
    add_recipe(sandbox_world, "gpuonly", ["python >=3.10", "pytorch >=2.4,<2.7", "__cuda >=12"])
    code, doc = run_json_at(capsys, sandbox_world, "solve", "--pytorch", "2.4.1")
    assert code == 1
    by_variant = {r["variant"]: r for r in doc["results"]}
    assert by_variant["cuda"]["ok"] is True and "gpuonly" in solution(by_variant["cuda"])
    cpu = by_variant["cpu"]
    assert cpu["ok"] is False and cpu["conflicting"] == ["gpuonly"] and "__cuda" in cpu["conflict"]


@pytest.mark.slow
def test_solve_from_staging_uses_the_built_artifacts(built_world, capsys):
    staged = {p.name for p in (built_world / "build/channels/staging/noarch").glob("*.conda")}
    code, doc = run_json_at(capsys, built_world, "solve", "--from", "staging")
    assert code == 0 and doc["ok"] is True
    assert [(r["pytorch"], r["variant"]) for r in doc["results"]] == matrix(built_world)
    builds = upstream_pytorch_builds(built_world)
    for r in doc["results"]:
        got = solution(r)
        assert got["pytorch"] == (r["pytorch"], builds[(r["pytorch"], r["variant"])])
        assert "quantserve" not in requested_names(r)  # never built
        assert requested_names(r) == {f.split("-")[0] for f in staged} - ({"visionkit"} if r["pytorch"] != "2.5.1" else set())
        for name in requested_names(r):
            version, build = got[name]
            assert f"{name}-{version}-{build}.conda" in staged
    # main is still empty: there is nothing to solve there yet
    code, out, err = run_cli_at(capsys, built_world, "solve", "--from", "main")
    assert code == 2 and "does not exist" in err


@pytest.mark.slow
def test_libmamba_without_libmambapy_is_bad_input(sandbox_world, capsys):
    if importlib.util.find_spec("libmambapy") is not None:
        pytest.skip("libmambapy is importable here")
    code, out, err = run_cli_at(capsys, sandbox_world, "solve", "--solver", "libmamba")
    assert code == 2 and out == ""
    assert "libmambapy" in err and "hint:" in err and "--solver rattler" in err


@pytest.mark.slow
@pytest.mark.parametrize(("args", "message"), [
    (["--pytorch", "9.9.9"], "9.9.9"),
    (["--solver", "bogus"], "unknown solver"),
    (["--from", "nowhere"], "unknown source"),
])
def test_bad_input_exits_2(sandbox_world, capsys, args, message):
    code, out, err = run_cli_at(capsys, sandbox_world, "solve", *args)
    assert code == 2 and message in err and out == ""
    assert not (sandbox_world / "build").exists()


def test_unreadable_upstream_is_bad_input_not_a_traceback(make_distro, clean_recipe, capsys):
    root = make_distro({"foo": clean_recipe("foo")}, {"channels": {"upstream": ["./no-such-channel"]}})
    code, out, err = run_cli_at(capsys, root, "solve")
    assert code == 2 and "Traceback" not in err
    assert "cannot read the channels" in err and "channels.upstream" in err
