"""The fan-out's cost model (``bench/bench_scale.py``): a compiled build on a runner's cores and where the
generated distribution puts its compiled packages. The model is pure arithmetic over the real shards
(`fanout.plan.make_shards`); the benchmark itself runs by hand (docs/scale-out.md)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from bench_scale import (  # noqa: E402
    COMPILED_LEVELS,
    Costs,
    Run,
    compiled_build_time,
    layered_graph,
    place_compiled,
    runs_of,
    shard_work,
    unit_steps,
)


def test_a_compiled_build_on_more_cores_gains_only_its_parallel_compiles():
    # one compile at a time (the measured recipes): a 4-core runner builds no faster than one core
    assert compiled_build_time(1800.0, 4, parallel=0.7, width=1) == 1800.0
    assert compiled_build_time(1800.0, 1, parallel=0.7, width=3) == 1800.0
    # three compiles side by side at most: 30 % serial + 70 % / 3, whether the runner has 3 cores or 8
    assert compiled_build_time(1800.0, 4, parallel=0.7, width=3) == pytest.approx(540.0 + 420.0)
    assert compiled_build_time(1800.0, 8, parallel=0.7, width=3) == compiled_build_time(1800.0, 3, 0.7, 3)
    # fewer cores than the backend allows: the cores bound it
    assert compiled_build_time(1000.0, 2, parallel=1.0, width=8) == pytest.approx(500.0)


def test_a_shards_compiled_build_takes_its_time_on_the_runners_cores():
    graph = layered_graph(20)
    name = graph.levels()[0][0]
    run = Run(graph, [name], {name}, targets=2, compiled_builds=2, n_recipes=20, cpu_targets=1)
    units = [f"{name}@1:build=1"]  # its second build: the cuda one (as `shards_of` names the units)
    serial = Costs(render=0.0, build=10.0, target=5.0, job=0.0, compiled_build=300.0, compiled_build_cuda=1000.0)
    assert unit_steps(units[0], run, serial, cores=4) == (1000.0, [5.0])
    assert shard_work(units, run, serial, cores=4) == shard_work(units, run, serial, cores=1) == 1005.0
    ninja = Costs(render=0.0, build=10.0, target=5.0, job=0.0, compiled_build=300.0, compiled_build_cuda=1000.0,
                  compiled_parallel=0.5, compiled_width=4)
    assert shard_work(units, run, ninja, cores=4) == pytest.approx(500.0 + 125.0 + 5.0)
    assert shard_work(units, run, ninja, cores=1) == 1005.0


def test_compiled_packages_sit_where_the_ecosystems_do():
    graph = layered_graph(300)
    levels = graph.levels()
    assert [len(lv) for lv in levels] == sorted((len(lv) for lv in levels), reverse=True)  # roots the most
    compiled = place_compiled(graph, 60, random.Random(1))
    per_level = [len(compiled & set(lv)) for lv in levels]
    total = sum(COMPILED_LEVELS.values())
    assert per_level[:2] == [round(60 * COMPILED_LEVELS[0] / total), round(60 * COMPILED_LEVELS[1] / total)]
    assert sum(per_level) == 60 and not any(per_level[2:])
    # a level too small for its share: the rest goes to the lowest levels with room
    small = layered_graph(12, depth=3)  # levels of 6 + 3 + 3
    sizes = [len(lv) for lv in small.levels()]
    crowded = place_compiled(small, 11, random.Random(0), {1: 1})
    assert [len(crowded & set(lv)) for lv in small.levels()] == [sizes[0], sizes[1], 11 - sizes[0] - sizes[1]]
    # anywhere (the model before the placement was checked): any level
    anywhere = place_compiled(graph, 60, random.Random(1), None)
    assert len(anywhere) == 60 and any(anywhere & set(lv) for lv in levels[2:])


def test_release_day_builds_every_compiled_package_for_the_new_minor_on_levels_0_and_1():
    _, _, day = runs_of(300, "layered")
    levels = day.graph.levels()
    assert len(day.compiled) == 60 and day.compiled <= set(levels[0]) | set(levels[1])
    assert day.compiled_builds == 2 and set(day.affected) == set(day.graph.names)


# --- bench_scale_real.py --release-day: release day predicted from a world's day-before logs

DAY_BEFORE = ["2.13.0", "2.14.1"]
COMPILED = Path(__file__).resolve().parent / "data" / "compiled"


def _log(logs: Path, package: str, name: str, seconds: float) -> None:
    """A log that lasts ``seconds``: written now, its last write ``seconds`` after its creation."""
    f = logs / package / name
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("log\n")
    born = int(subprocess.run(["stat", "-c", "%W", str(f)], capture_output=True, text=True, timeout=60, check=True).stdout)
    if born <= 0:
        pytest.skip("this file system keeps no creation time (the logs' steps are measured from it)")
    os.utime(f, (born + seconds, born + seconds))


def _day_world(make_distro, clean_recipe, logs: Path, scatter_cuda: float = 900.0, ok_test: float = 40.0) -> Path:
    """The day before 2.15.0: ``pure`` and ``dep`` (on pure) pinned below it, ``ok`` admitting it already,
    the compiled ``host-minor``; their day-before logs (noarch: a build, then 2.13.0 cpu / cuda and 2.14.1
    cuda tests; host-minor: 2.13 cpu, 2.13 cuda and 2.14 cuda builds, each tested)."""
    root = make_distro({"pure": clean_recipe("pure", pytorch="pytorch >=2.13,<2.15"),
                        "dep": clean_recipe("dep", pytorch="pytorch >=2.13,<2.15", run=["pure"]),
                        "ok": clean_recipe("ok", pytorch="pytorch >=2.13,<2.16")},
                       {"pytorch": {"releases": DAY_BEFORE}}, variants=True, name=logs.name)
    shutil.copytree(COMPILED / "host-minor", root / "recipes" / "host-minor")
    for pkg in ("pure", "dep", "ok"):
        _log(logs, pkg, "pyh1_0.build.log", 20.0)
        for target, secs in (("2.13.0-cpu", 30.0), ("2.13.0-cuda", 60.0), ("2.14.1-cuda", 60.0)):
            _log(logs, pkg, f"pyh1_0.{target}.test.log", ok_test if pkg == "ok" else secs)
    for build, secs, target in (("cpu_py311_ha_0", 300.0, "2.13.0-cpu"), ("cuda_py311_hb_200", scatter_cuda, "2.13.0-cuda"),
                                ("cuda_py311_hc_200", scatter_cuda + 100.0, "2.14.1-cuda")):
        _log(logs, "host-minor", f"{build}.build.log", secs)
        _log(logs, "host-minor", f"{build}.{target}.test.log", 50.0)
    return root


def test_release_day_prediction_follows_the_sweep_plan_and_the_logs(make_distro, clean_recipe, tmp_path):
    from bench_scale_real import log_costs, log_steps, predict_day

    logs = tmp_path / "logs"
    world = _day_world(make_distro, clean_recipe, logs)
    costs = log_costs(log_steps(logs))
    # a compiled build's minor from the releases its build string was tested on; its row's mean
    assert costs["host-minor"]["build_cuda 2.14"] == pytest.approx(1000.0, abs=2)
    assert costs["host-minor"]["build_cuda"] == pytest.approx(950.0, abs=2)
    pred = predict_day(world, logs, "2.15.0", ("cuda",), 2)
    assert pred["bumped"] == ["dep", "pure"] and pred["compiled"] == ["host-minor"]
    assert set(pred["sweep"]) == {"pure", "dep", "ok", "host-minor"}
    # the sweep: host-minor's new cuda build (the earlier minors' mean) is the longest chain; ok: tests only
    assert pred["sweep"]["host-minor"]["build"] == pytest.approx(950.0, abs=2)
    assert pred["sweep"]["ok"]["build"] == 0.0
    # the build on main: the bumped packages only, on the day before's targets, their builds reused
    assert set(pred["build_on_main"]) == {"pure", "dep"}
    assert pred["build_on_main"]["pure"]["targets"] == ["2.13.0/cpu", "2.13.0/cuda", "2.14.1/cuda"]
    assert pred["headline"] == pytest.approx(sum(pred["stages"].values()))

    # a longer compiled build lengthens the sweep by as much (it is the longest chain); main is unchanged
    logs2 = tmp_path / "logs2"
    longer = predict_day(_day_world(make_distro, clean_recipe, logs2, scatter_cuda=1900.0), logs2, "2.15.0", ("cuda",), 2)
    assert longer["stages"]["sweep"] == pytest.approx(pred["stages"]["sweep"] + 1000.0, abs=4)
    assert longer["stages"]["build"] == pytest.approx(pred["stages"]["build"], abs=2)
    # a package with no bumped file (ok admits the release) adds nothing to the build on main
    logs3 = tmp_path / "logs3"
    slow_ok = predict_day(_day_world(make_distro, clean_recipe, logs3, ok_test=400.0), logs3, "2.15.0", ("cuda",), 2)
    assert slow_ok["stages"]["build"] == pytest.approx(pred["stages"]["build"], abs=2)
    assert slow_ok["sweep"]["ok"]["tests"][0] == pytest.approx(400.0, abs=2)


def test_release_day_compare_reads_bench_release_days_output(tmp_path, capsys):
    from bench_scale_real import main, parse_measured

    out = """release day on the real world (PyTorch from PyPI): 2.13.0, 2.14.1 in main, 2.15.0 appears upstream (2 cores, jobs 2)
  setup (not counted): world + build + promote at 2.13.0, 2.14.1: 5123.4 s (60 artifacts in main)
  release appears upstream                           12.5 s
  sweep --commit (build + test the affected set)   1862.6 s
  automerge (merge the passing packages' PRs)         0.1 s
  build on main (--changed-since, jobs 2)          1132.7 s
  promote (the gate)                                  2.6 s
headline: release appearing -> last passing package promoted: 3010.5 s (target < 3600 s: ok)
sweep: 15 bumped, 2 unchanged; automerged: a, b
"""
    meas = parse_measured(out)
    assert meas == {"stages": {"release": 12.5, "sweep": 1862.6, "automerge": 0.1, "build": 1132.7, "promote": 2.6},
                    "headline": 3010.5}
    pred = {"made": "now", "world": "w", "logs": "l", "release": "2.15.0", "new_targets": ["cuda"], "slots": 2,
            "stages": {"release": 30.0, "sweep": 2000.0, "automerge": 30.0, "build": 1000.0, "promote": 10.0},
            "headline": 3070.0, "sweep": {}, "bumped": [], "compiled": [], "build_on_main": {}, "steps": 0,
            "no_cost_for": []}
    (tmp_path / "pred.json").write_text(json.dumps(pred))
    (tmp_path / "measured.txt").write_text(out)
    assert main(["--compare", str(tmp_path / "measured.txt"), "--out", str(tmp_path / "pred.json")]) == 0
    text = capsys.readouterr().out
    assert "| sweep | 2000.0 s | 1862.6 s | +7% |" in text and "**+2%**" in text
    far = {**pred, "headline": 4000.0}
    (tmp_path / "pred.json").write_text(json.dumps(far))
    assert main(["--compare", str(tmp_path / "measured.txt"), "--out", str(tmp_path / "pred.json")]) == 1


def test_table_costs_are_the_logs_medians_and_the_slowest_compiled_package(tmp_path):
    """bench_scale.py's --real-costs FILE from a run's logs: medians of noarch builds and test targets; a
    compiled build per row as long as the slowest compiled package's; a later run's logs left out."""
    from bench_scale_real import main

    logs = tmp_path / "keep" / "world" / "build" / "logs"
    for pkg, build, cuda in (("a", 4.0, 20.0), ("b", 6.0, 30.0), ("c", 50.0, 90.0)):
        _log(logs, pkg, "pyh1_0.build.log", build)
        _log(logs, pkg, "pyh1_0.2.13.0-cuda.test.log", cuda)
        _log(logs, pkg, "pyh1_0.2.13.0-cpu.test.log", cuda / 2)
    for pkg, cpu, cuda in (("fast", 30.0, 100.0), ("slow", 200.0, 500.0)):
        _log(logs, pkg, "cpu_py311_ha_0.build.log", cpu)
        _log(logs, pkg, "cuda_py311_hb_200.build.log", cuda)
        _log(logs, pkg, "cuda_py311_hb_200.2.13.0-cuda.test.log", 10.0)
    out = tmp_path / "costs.json"
    assert main(["--table-costs", str(logs), "--out", str(out)]) == 0
    costs = json.loads(out.read_text())["costs"]
    assert costs == {"build": 6.0, "target": 20.0, "target_cpu": 15.0, "build_fixed": 25.0,
                     "compiled_build": 200.0, "compiled_build_cuda": 500.0}
    # in a release day's --keep folder only the day before's logs count (those before setup-build.json)
    (tmp_path / "keep" / "setup-build.json").write_text("{}")
    after_them = time.time() + 1000  # (the logs above end up to 500 s from now: their last writes are set ahead)
    os.utime(tmp_path / "keep" / "setup-build.json", (after_them, after_them))
    _log(logs, "slow", "cuda_py311_hz_200.build.log", 9000.0)
    assert main(["--table-costs", str(logs), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["costs"]["compiled_build_cuda"] == 500.0
    # a folder without logs: a clear error (exit 2), nothing written
    empty, none = tmp_path / "empty", tmp_path / "none.json"
    empty.mkdir()
    with pytest.raises(SystemExit) as exc:
        main(["--table-costs", str(empty), "--out", str(none)])
    assert exc.value.code == 2 and not none.exists()


def test_a_blind_prediction_runs_a_shards_steps_on_its_sandboxes():
    """A stage of the measured PR gate from per-package costs: on one sandbox the sum of the steps (the
    shards before `--jobs`), on two a package's tests side by side after its build (pr.yml's
    `fanout shard --jobs "$(nproc)"`); the plan and fan-in from the other runs."""
    from bench_scale_real import blind_predict

    run = {"stages": [{"job": "level-0", "seconds": 80.0, "packages": ["a", "b"], "split": {"a": (1, 3), "b": (0, 1)}}]}
    other = {"plan": 1.0, "fanin": 2.0}
    costs = {"a": {"build": 4.0, "cpu": 10.0, "cuda": 30.0}, "b": {"build": 6.0, "cuda": 20.0}}
    one, (stages, missing) = blind_predict(run, costs, [other], setup=25.0, cores=1)
    assert one == 3.0 + 25.0 + (4 + 10 + 3 * 30) + (6 + 20) and not missing
    two, _ = blind_predict(run, costs, [other], setup=25.0, cores=2)
    assert 3.0 + 25.0 + (4 + 10 + 3 * 30 + 6 + 20) / 2 <= two < one
    _, (_, missing) = blind_predict(run, {"a": costs["a"]}, [other], setup=25.0, cores=2)
    assert missing == ["b build", "b cuda"]
