"""The fan-out's cost model (``bench/bench_scale.py``): a compiled build on a runner's cores and where the
generated distribution puts its compiled packages. The model is pure arithmetic over the real shards
(`fanout.plan.make_shards`); the benchmark itself runs by hand (docs/scale-out.md)."""

from __future__ import annotations

import random
import sys
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
