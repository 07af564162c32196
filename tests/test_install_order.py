"""One model of which build gets installed: the gate orders builds as rattler's solver does.

Two builds of one version and build number that differ in build string and timestamp: rattler installs
the newer one (its candidate order ends on the timestamp, not the build string). The order in
:mod:`conda_distro.channels.order` is checked against ``rattler.solve`` on channels of repodata records,
and the gate is checked on real packages built with rattler-build: it waits for, and accepts, the re-test
against the build the solver installs, so the candidate does not wait forever.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import textwrap
import time
from pathlib import Path

import pytest
import rattler
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conda_distro.channels import ChannelFile, LocalChannel
from conda_distro.channels.order import InstallOrder, pool_of
from conda_distro.channels.repodata import timestamp_ms
from conda_distro.gate.installability import write_channel, write_records
from conda_distro.gate.promote import HoldReason, PlanInputs, TestMatrix, plan_gate
from conda_distro.state.results import ArtifactResults
from conda_distro.state.results import TestRecord as Run

RELEASES = ("2.5.1",)
PAIRS = [("2.5.1", "cpu"), ("2.5.1", "cuda")]
T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def cf(name, version="1.0", build="h0_0", *, bn=0, ts=None, depends=(), tf=()) -> ChannelFile:
    return ChannelFile("noarch", f"{name}-{version}-{build}.conda", name, version, build, bn, "0" * 64,
                       tuple(depends), timestamp=ts, track_features=tuple(tf))


def solver_pick(files: list[ChannelFile], spec: str, name: str, tmp: Path) -> str:
    """The build of ``name`` rattler installs for ``spec`` from a channel holding ``files``."""
    channel = write_channel(files, tmp / f"ch-{time.monotonic_ns()}")
    records = asyncio.run(rattler.solve([channel.as_uri()], [spec], platforms=["linux-64", "noarch"]))
    return next(str(r.build) for r in records if r.name.normalized == name)


BAR = [cf("bar", "1.0", "b1_0", ts=1), cf("bar", "2.0", "b2_0", ts=1)]
CASES = {
    # name: (files of foo, extra files) -- foo's builds differ in what the case names
    "newer timestamp, lower build string": ([cf("foo", build="ha_0", ts=2_000), cf("foo", build="hz_0", ts=1_000)], []),
    "newer timestamp, higher build string": ([cf("foo", build="ha_0", ts=1_000), cf("foo", build="hz_0", ts=2_000)], []),
    "newer timestamp in milliseconds": ([cf("foo", build="ha_0", ts=1_700_000_000_000),
                                                   cf("foo", build="hz_0", ts=1_600_000_000_000)], []),
    "build number over timestamp": ([cf("foo", build="ha_1", bn=1, ts=1_000), cf("foo", build="hz_0", ts=9_000)], []),
    "version over build number": ([cf("foo", "1.1", "ha_0", ts=1), cf("foo", "1.0", "hz_5", bn=5, ts=9)], []),
    "track_features last": ([cf("foo", "1.1", "ha_0", ts=9, tf=("mkl",)), cf("foo", "1.0", "hz_0", ts=1)], []),
    "dependency reaching the higher version first": (
        [cf("foo", build="ha_0", ts=9_000, depends=["bar <2"]), cf("foo", build="hz_0", ts=1_000, depends=["bar >=2"])],
        BAR),
    "no timestamp against one": ([cf("foo", build="ha_0"), cf("foo", build="hz_0", ts=1_000)], []),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_order_picks_what_rattler_installs(case, tmp_path):
    foo, extra = CASES[case]
    files = foo + extra
    ours = InstallOrder(pool_of(files)).best(foo)
    assert ours is not None and ours.build == solver_pick(files, "foo", "foo", tmp_path)


# repodata timestamps as channels hold them: milliseconds, or seconds in older indexes (2000-2100)
TIMESTAMPS = st.one_of(st.integers(946_684_800, 4_102_444_800), st.integers(946_684_800_000, 4_102_444_800_000))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["1.0", "1.1", "2.0"]), st.integers(0, 2), TIMESTAMPS), min_size=1,
                max_size=6, unique_by=lambda t: timestamp_ms(t[2])))  # rattler keeps the channel's order on a tie
def test_the_order_agrees_with_rattler_on_random_builds(tmp_path, builds):
    """Records with raw repodata timestamps (seconds or milliseconds), read back by our channel reader."""
    folder = tmp_path / f"ch-{time.monotonic_ns()}"
    write_records([{"fn": f"foo-{v}-h{i:02d}_{bn}.conda", "name": "foo", "version": v, "build": f"h{i:02d}_{bn}",
                    "build_number": bn, "depends": [], "subdir": "noarch", "sha256": "0" * 64, "timestamp": ts}
                   for i, (v, bn, ts) in enumerate(builds)], folder)
    files = list(LocalChannel(folder).list_files().values())
    records = asyncio.run(rattler.solve([folder.as_uri()], ["foo"], platforms=["linux-64", "noarch"]))
    assert InstallOrder().best(files).build == next(str(r.build) for r in records)


# ---------------------------------------------------------------------------------------------
# the gate, on real packages


def build(out: Path, name: str, version: str, string: str, run: list[str]) -> Path:
    """One noarch package built with rattler-build into the channel folder ``out`` with the build string
    ``string`` (so that two builds of one version differ only in build string and timestamp)."""
    from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig

    recipe_dir = out.parent / "recipes" / f"{name}-{version}-{string}"
    recipe_dir.mkdir(parents=True, exist_ok=True)
    text = textwrap.dedent(f"""\
        package: {{name: {name}, version: "{version}"}}
        build:
          number: 0
          string: {string}
          noarch: generic
          script: ["mkdir -p $PREFIX/share/{name}", "echo {string} > $PREFIX/share/{name}/BUILD"]
        requirements:
          run: {json.dumps(run)}
        """)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", "/usr/bin:/bin")  # engine-notes gotcha 6
        (variant,) = Stage0Recipe.from_yaml(text, recipe_dir=recipe_dir).render(VariantConfig())
        res = variant.run_build(tool_config=ToolConfiguration(test_strategy="skip"), output_dir=str(out),
                                channels=[out.as_uri()])
    return Path(res.packages[0])


def ident(f: ChannelFile) -> str:
    return f"{f.name}-{f.version}-{f.build}"


def passed(f: ChannelFile, against: dict[str, ChannelFile] | None = None) -> ArtifactResults:
    return ArtifactResults(artifact=f.artifact, name=f.name, version=f.version, sha256=f.sha256, depends=list(f.depends),
                           tests=[Run(name=f.name, artifact=f.artifact, pytorch=r, variant=v, status="passed", date=T0,
                                      against={n: ident(x) for n, x in (against or {}).items()}) for r, v in PAIRS])


def test_the_gate_retests_against_the_build_the_solver_installs(tmp_path):
    """tensorkit 1.2 and audiokit 0.9 (depends on tensorkit) in main; staging holds two builds of
    tensorkit 1.3, ``hz_0`` built first and ``ha_0`` a second later. The solver installs ``ha_0`` (newer),
    though ``hz_0`` has the higher build string: the gate must ask for audiokit's re-test with ``ha_0``,
    and accept it once it ran (as `build` records it), instead of waiting forever for one with ``hz_0``."""
    main_dir, staging_dir, upstream = tmp_path / "main", tmp_path / "staging", tmp_path / "upstream"
    build(upstream, "pytorch", "2.5.1", "cpu_0", [])
    build(main_dir, "tensorkit", "1.2", "h0_0", ["pytorch >=2.4,<2.7"])
    build(main_dir, "audiokit", "0.9", "h0_0", ["tensorkit >=1.2,<2", "pytorch >=2.4,<2.7"])
    build(staging_dir, "tensorkit", "1.3", "hz_0", ["pytorch >=2.4,<2.7"])
    time.sleep(1.1)  # rattler-build stamps whole seconds
    build(staging_dir, "tensorkit", "1.3", "ha_0", ["pytorch >=2.4,<2.7"])
    staging, main = LocalChannel(staging_dir).list_files(), LocalChannel(main_dir).list_files()
    hz, ha = (staging[f"noarch/tensorkit-1.3-{b}.conda"] for b in ("hz_0", "ha_0"))
    assert ha.timestamp and hz.timestamp and ha.timestamp > hz.timestamp
    tk12, ak = main["noarch/tensorkit-1.2-h0_0.conda"], main["noarch/audiokit-0.9-h0_0.conda"]
    # what rattler installs for audiokit from main ∪ staging (staging first, as a build's test environment)
    records = asyncio.run(rattler.solve([staging_dir.as_uri(), main_dir.as_uri(), upstream.as_uri()],
                                        ["audiokit", "pytorch ==2.5.1"],
                                        platforms=["linux-64", "noarch"]))
    installed = next(str(r.build) for r in records if r.name.normalized == "tensorkit")
    assert installed == "ha_0"
    assert InstallOrder().best([hz, ha]) == ha

    def plan(retested_with: ChannelFile):
        res = [passed(hz), passed(ha), passed(tk12),
               ArtifactResults(**{**passed(ak, {"tensorkit": tk12}).model_dump(),
                                  "tests": [*passed(ak, {"tensorkit": tk12}).tests,
                                            *passed(ak, {"tensorkit": retested_with}).tests]})]
        return plan_gate(PlanInputs(staging, main, {r.artifact: r for r in res}, {},
                                    TestMatrix("pytorch", RELEASES, ("cpu", "cuda"))))

    # re-tested with the build the solver installs: the gate accepts it and promotes both builds
    p = plan(ha)
    assert {f.build for f in p.promote} == {"ha_0", "hz_0"} and not p.held
    assert {(r.dependent.name, r.candidates, r.verdict.value) for r in p.retests} == \
        {("audiokit", (ha.artifact,), "pass")}
    # re-tested with the other build (what a build-string order predicted): not the environment users
    # get, so the gate still waits, and its advice names the test to run
    p = plan(hz)
    (h,) = [h for h in p.held if h.file == ha]
    assert h.reason is HoldReason.WAITING and "audiokit" in h.detail and "tensorkit-1.3-ha_0" in h.detail
