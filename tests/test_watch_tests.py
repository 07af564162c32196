"""A package with several tests: `build` records each test's environment (results schema 4,
``environments``) and `watch` compares every one of them before it reuses an outcome (a record of the
first test's environment alone, as older results have, is not enough). tests/data/verdicts/twotests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.helpers import run_json_at
from test_verdicts import promote_with_upstream_libs, publish

from conda_distro.engine.backends import environments_of
from conda_distro.reports import watch as watch_mod

TABLE = ("\n╭─────────┬─────────┬───────┬─────────┬──────╮\n│ Package ┆ Version ┆ Build ┆ Channel ┆ Size │\n"
         "╞═════════╪═════════╪═══════╪═════════╪══════╡\n│ {n}     ┆ 1.0     ┆ h_0   ┆ up      ┆ 1 B  │\n"
         "╰─────────┴─────────┴───────┴─────────┴──────╯")


def test_environments_are_rattler_builds_own_tables_in_order():
    done = "✔ Successfully updated the test environment"
    output = [TABLE.format(n="python"), "", done, "+ script of test 0",
              # what a test script prints arrives a line at a time: a table it prints is never one
              *TABLE.format(n="forged").splitlines(), done,
              TABLE.format(n="helperlib"), done]
    assert environments_of(output) == [{"python": "python-1.0-h_0"}, {"helperlib": "helperlib-1.0-h_0"}]
    assert environments_of(["│ a ┆ 1 ┆ h │", "no table"]) == []


@pytest.mark.slow
def test_each_test_environment_is_recorded_and_watch_reuses_only_when_every_one_is_unchanged(
        built_world: Path, capsys, tmp_path: Path):
    world = built_world
    promote_with_upstream_libs(world, tmp_path, capsys, "twotests")

    # the build recorded both test environments, each rattler-build's own (the forged table is not one)
    [res_file] = (world / "build" / "results").glob("*twotests-*.json")
    res = json.loads(res_file.read_text())
    assert res["schema_version"] == 4
    runs = [t for t in res["tests"] if not t.get("baseline")]
    assert len(runs) == 2
    for t in runs:
        first, second = t["environments"]
        assert "arraylib" in first and "helperlib" not in first, t["environments"]
        assert second["helperlib"].startswith("helperlib-1.0.0-") and second["arraylib"] == first["arraylib"]
        assert "twotests" not in first and t["environment"] == first
        assert "9.9.9" not in json.dumps(t)

    # the first watch takes both targets from the build: every test's environment is today's
    code, first = run_json_at(capsys, world, "watch", "twotests")
    assert code == 0 and (first["checked"], first["reused"], first["tested"]) == (2, 2, 0), first
    state = watch_mod.read_state(world / "build")
    assert all(len(e["envs"]) == 2 and e["from_build"] for e in state.values()), state

    # a record of the first test's environment alone (results before schema 4) is not enough for a
    # package with two: tested again, never taken
    for t in res["tests"]:
        t.pop("environments", None)
    res["schema_version"] = 3
    res_file.write_text(json.dumps(res))
    (world / "build" / "watch" / "state.json").unlink()
    code, again = run_json_at(capsys, world, "watch", "twotests")
    assert code == 0 and (again["checked"], again["reused"], again["tested"]) == (2, 0, 2), again
    code, again = run_json_at(capsys, world, "watch", "twotests")  # nothing changed: reused
    assert code == 0 and (again["checked"], again["reused"], again["tested"]) == (2, 2, 0), again

    # an update only the second test installs breaks it: not reused, broken, the culprit named
    publish(world, tmp_path, "helperlib", "1.0.1", "def other(x):\n    return x\n", capsys)
    code, out = run_json_at(capsys, world, "watch", "twotests")
    assert code == 1 and out["tested"] == 2 and out["reused"] == 0, out
    assert {(b["pytorch"], b["variant"]) for b in out["broken"]} == {("2.6.0", "cpu"), ("2.6.0", "cuda")}
    for b in out["broken"]:
        assert set(b["changed"]) == {"helperlib"} and b["culprit"][0].startswith("helperlib helperlib-1.0.0-")
        assert b["maintainers"] == ["two-ann"]
