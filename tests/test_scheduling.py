"""How a build run uses the machine's cores: the package heading the longest chain of dependents starts
first, and sandboxes (builds and tests, of any unit) never exceed ``--jobs`` at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from conda_distro.engine.executor import critical_path
from conda_distro.engine.plan import BuildPlan, PackagePlan
from conda_distro.engine.unit import Slots, _in_slot


def _pkg(name: str, closure: tuple[str, ...] = ()) -> PackagePlan:
    return PackagePlan(name=name, recipe=Path("recipes") / name, version="1.0", deps=closure[-1:], closure=closure,
                       variants=(), targets=())


def test_the_head_of_the_longest_chain_outranks_packages_nothing_waits_for():
    # the sandbox world's shape on release day: two leaves first in dependency order, then a chain
    plan = BuildPlan(packages=(
        _pkg("fastquant"), _pkg("hookprofiler"), _pkg("metrickit"),
        _pkg("tensorutils", ("metrickit",)),
        _pkg("layerkit", ("metrickit", "tensorutils")),
        _pkg("trainloop", ("layerkit", "metrickit", "tensorutils")),
        _pkg("evalsuite", ("layerkit", "metrickit", "tensorutils", "trainloop")),
    ), levels=(), targets=(), engine="rattler-build")
    depth = critical_path(plan)
    assert depth == {"fastquant": 1, "hookprofiler": 1, "metrickit": 5, "tensorutils": 4, "layerkit": 3,
                     "trainloop": 2, "evalsuite": 1}
    ready = [p for p in plan.packages if not p.closure]
    assert [p.name for p in sorted(ready, key=lambda p: -depth[p.name])][0] == "metrickit"


def test_a_dependency_outside_the_plan_does_not_count():
    plan = BuildPlan(packages=(_pkg("layerkit", ("metrickit",)),), levels=(), targets=(), engine="rattler-build")
    assert critical_path(plan) == {"layerkit": 1}


def test_slots_never_let_more_sandboxes_run_than_jobs():
    slots = Slots.of(2)
    lock = threading.Lock()
    now, peak = [0], [0]

    def sandbox() -> None:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.2)
        with lock:
            now[0] -= 1

    threads = [threading.Thread(target=_in_slot, args=(slots, sandbox)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread is still waiting for a slot"
    assert peak[0] == 2  # both slots used, never a third
