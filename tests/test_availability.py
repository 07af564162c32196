"""Test targets upstream cannot serve (issue 13's real world: PyPI has no CPU torch for 2.14/2.15, no
torchvision for 2.15, and only CUDA torchvision wheels).

A release × variant with no pytorch build upstream, or with no build of a lockstep package
(distro.yaml ``pytorch.lockstep``, e.g. torchvision) that a package needs, cannot be installed by anyone:
the package is not tested there, promote does not require it, verify-channel skips it, and every output
says why. Records are real repodata read by rattler; the end-to-end test builds on the sandbox world.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
from support.helpers import run_cli_at

from conda_distro.channels import ChannelFile
from conda_distro.channels.depends import distribution_closure, lockstep_of_files
from conda_distro.config import DistroRepo, load_config
from conda_distro.engine.releases import Target, upstream_availability
from conda_distro.gate.installability import write_channel
from conda_distro.gate.promote import HoldReason, PlanInputs, TestMatrix, plan_gate
from conda_distro.state.results import ArtifactResults
from conda_distro.state.results import TestRecord as Run
from conda_distro.upstream.pypi import _lockstep_pin, wheel_is_cuda

RELEASES = ("2.4.1", "2.5.1", "2.6.0")
VARIANTS = ("cpu", "cuda")
T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def rec(name, version, build, depends=()) -> ChannelFile:
    return ChannelFile("linux-64", f"{name}-{version}-{build}.conda", name, version, build, 0, "0" * 64, tuple(depends))


def distro_at(tmp_path: Path, records: list[ChannelFile], lockstep=("visionlib",)) -> DistroRepo:
    write_channel(records, tmp_path / "upstream")
    (tmp_path / "recipes").mkdir(exist_ok=True)
    (tmp_path / "distro.yaml").write_text(
        "name: t\nchannels:\n  upstream: [./upstream]\n  staging: build/staging\n  main: build/main\n"
        f"pytorch:\n  name: pytorch\n  releases: {json.dumps(list(RELEASES))}\n  variants: [cpu, cuda]\n"
        f"  lockstep: {json.dumps(list(lockstep))}\nplatforms: [linux-64]\n")
    return load_config(tmp_path)


UPSTREAM = [
    rec("pytorch", "2.4.1", "cpu_0"), rec("pytorch", "2.4.1", "cuda_0", ["__cuda"]),
    rec("pytorch", "2.5.1", "cuda_0", ["__cuda"]),  # no cpu build of 2.5.1; nothing of 2.6.0
    # the lockstep package: a cuda build for 2.4.1 and one for 2.5.1 that (wrongly for lockstep) pins 2.4
    rec("visionlib", "0.19.1", "cuda_0", ["pytorch >=2.4.0,<2.5.0a0 cuda*", "__cuda"]),
    rec("visionlib", "0.20.0", "cuda_0", ["pytorch >=2.4.0,<2.5.0a0 cuda*", "__cuda"]),
]


def test_availability_reads_pytorch_and_lockstep_builds_from_upstream(tmp_path):
    a = upstream_availability(distro_at(tmp_path, UPSTREAM))
    assert set(a.missing) == {Target("2.5.1", "cpu"), Target("2.6.0", "cpu"), Target("2.6.0", "cuda")}
    assert a.missing[Target("2.5.1", "cpu")] == "no cpu build of pytorch 2.5.1 in the upstream channels"
    # a cuda-only visionlib serves no cpu target; the 2.5.1 one's pin does not admit 2.5.1
    assert set(a.lockstep_missing["visionlib"]) == {Target("2.4.1", "cpu"), Target("2.5.1", "cuda")}
    assert a.why_not(Target("2.4.1", "cuda"), {"visionlib"}) is None
    assert a.why_not(Target("2.4.1", "cpu")) is None  # a package not needing visionlib can be tested
    assert "no cpu build of visionlib for pytorch 2.4.1" in a.why_not(Target("2.4.1", "cpu"), {"visionlib"})
    # with no lockstep declared, only pytorch counts
    b = upstream_availability(distro_at(tmp_path, UPSTREAM, lockstep=()))
    assert b.lockstep_missing == {} and b.missing == a.missing


def test_lockstep_needs_follow_distribution_dependencies():
    seg = rec("segkit", "1.0", "pyh_0", ["modelzoo >=1", "pytorch >=2.4"])
    zoo = rec("modelzoo", "2.0", "pyh_0", ["visionlib >=0.19", "pytorch >=2.4"])
    plain = rec("plainkit", "1.0", "pyh_0", ["pytorch >=2.4"])
    of = lockstep_of_files([seg, zoo, plain], ["visionlib"])
    assert of(seg) == of(zoo) == {"visionlib"} and of(plain) == frozenset()
    assert lockstep_of_files([seg], [])(seg) == frozenset()


def test_closures_read_specs_as_rattler_does_and_survive_cycles():
    """Repros: an entry written without a space (``visionlib>=0.19``) was not read as visionlib; and a
    dependency circle cut a closure short, depending on which name was asked first (the memo of a name
    still being walked was read as complete)."""
    zoo = rec("modelzoo", "2.0", "pyh_0", ["visionlib>=0.19", "pytorch >=2.4"])
    assert lockstep_of_files([zoo], ["visionlib"])(zoo) == {"visionlib"}
    a = rec("appkit", "1.0", "pyh_0", ["basekit >=1"])
    b = rec("basekit", "1.0", "pyh_0", ["corekit >=1"])
    c = rec("corekit", "1.0", "pyh_0", ["basekit >=1", "leafkit", "visionlib"])
    d = rec("leafkit", "1.0", "pyh_0", ["pytorch >=2.4"])
    for order in (["corekit", "appkit"], ["appkit", "corekit"], ["basekit", "appkit"]):
        closure = distribution_closure([a, b, c, d])
        got = {name: closure(name) for name in order}
        assert got["appkit"] == {"basekit", "corekit", "leafkit"}, order
    of = lockstep_of_files([a, b, c, d], ["visionlib"])
    assert of(c) == of(b) == of(a) == {"visionlib"} and of(d) == frozenset()


def _runs(f: ChannelFile, pairs, status="passed", reason=None) -> list[Run]:
    return [Run(name=f.name, artifact=f.artifact, pytorch=r, variant=v, status=status, date=T0, reason=reason,
                log=f"/logs/{f.name}") for r, v in pairs]


def test_promote_requires_only_what_upstream_can_serve(tmp_path):
    a = upstream_availability(distro_at(tmp_path, UPSTREAM))
    zoo = rec("modelzoo", "2.0", "pyh_0", ["visionlib >=0.19", "pytorch >=2.4,<2.7"])
    plain = rec("plainkit", "1.0", "pyh_0", ["pytorch >=2.4,<2.7"])
    of = lockstep_of_files([zoo, plain], ["visionlib"])
    matrix = TestMatrix("pytorch", RELEASES, VARIANTS, a, of)
    assert matrix.required(plain) == [("2.4.1", "cpu"), ("2.4.1", "cuda"), ("2.5.1", "cuda")]
    assert matrix.required(zoo) == [("2.4.1", "cuda")]
    # what the engine recorded before (blocked: no pytorch build) does not hold a package back
    res = {plain.artifact: ArtifactResults(artifact=plain.artifact, name=plain.name, version=plain.version,
                                           sha256=plain.sha256, depends=list(plain.depends), tests=[
        *_runs(plain, matrix.required(plain)),
        *_runs(plain, [("2.5.1", "cpu")], "blocked", "no cpu build of pytorch 2.5.1 in the upstream channels")]),
        zoo.artifact: ArtifactResults(artifact=zoo.artifact, name=zoo.name, version=zoo.version, sha256=zoo.sha256,
                                      depends=list(zoo.depends), tests=_runs(zoo, [("2.4.1", "cuda")]))}
    plan = plan_gate(PlanInputs({plain.artifact: plain, zoo.artifact: zoo}, {}, res, {}, matrix, evidence={},
                                hints=None, today=dt.date(2026, 11, 20), maintainers={}))
    assert sorted(f.name for f in plan.promote) == ["modelzoo", "plainkit"], [h.to_dict() for h in plan.held]
    # without availability (upstream unknown) every admitted pair is required: zoo waits for the rest
    plan = plan_gate(PlanInputs({zoo.artifact: zoo}, {}, res, {}, TestMatrix("pytorch", RELEASES, VARIANTS),
                                evidence={}, hints=None, today=dt.date(2026, 11, 20), maintainers={}))
    assert plan.held and plan.held[0].reason is HoldReason.NOT_TESTED


def test_lockstep_pin_matches_only_its_minor_and_variant():
    from rattler import MatchSpec, PackageRecord  # noqa: F401  (MatchSpec.matches takes records)

    spec = MatchSpec(_lockstep_pin("2.13.0", "cuda"))
    assert str(spec.version) == ">=2.13.0,<2.14.0a0" and str(spec.build) == "cuda*"
    assert _lockstep_pin("2.14.1", "cpu") == "pytorch >=2.14.0,<2.15.0a0 cpu*"


def _wheel(path: Path, files: dict[str, str]) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def test_a_cuda_lockstep_wheel_is_recognised(tmp_path):
    cu = _wheel(tmp_path / "visionlib-0.28.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                {"visionlib/version.py": "__version__ = '0.28.0+cu130'\n", "visionlib/__init__.py": ""})
    bundled = _wheel(tmp_path / "b.whl", {"visionlib/version.py": "__version__ = '0.28.0'\n",
                                          "visionlib.libs/libcudart.faf08d9a.so.13": "x"})
    cpu = _wheel(tmp_path / "c.whl", {"visionlib/version.py": "__version__ = '0.28.0+cpu'\n",
                                      "visionlib.libs/libjpeg.so.8": "x"})
    assert wheel_is_cuda(cu, "visionlib") and wheel_is_cuda(bundled, "visionlib")
    assert not wheel_is_cuda(cpu, "visionlib")
    torch_cpu = _wheel(tmp_path / "t.whl", {"torch/version.py": "__version__ = '2.13.0+cpu'\ncuda = None\n"})
    torch_cu = _wheel(tmp_path / "u.whl", {"torch/version.py": "__version__ = '2.13.0'\ncuda: Optional[str] = '13.0'\n"})
    assert not wheel_is_cuda(torch_cpu, "torch") and wheel_is_cuda(torch_cu, "torch")


@pytest.mark.slow
def test_a_target_upstream_lacks_is_not_tested_required_or_verified(sandbox_world, capsys):
    """The sandbox world with the cpu pytorch 2.6.0 removed from upstream: build does not test there
    (and says why), promote promotes what passed everywhere else, verify-channel skips the target."""
    from conda_distro.util.rattler_env import index_channel

    up = sandbox_world / "upstream"
    gone = [p for p in (up / "linux-64").glob("pytorch-2.6.0-*.conda") if "cpu" in p.name] + \
           [p for p in (up / "noarch").glob("pytorch-2.6.0-*.conda") if "cpu" in p.name]
    assert gone, sorted(p.name for p in up.rglob("pytorch-*"))
    for p in gone:
        p.unlink()
    index_channel(up)
    code, out, _ = run_cli_at(capsys, sandbox_world, "build", "tensorutils", "--dry-run", "--format", "json")
    assert code == 0, out
    plan = json.loads(out)
    pkgs = {p["name"]: p for p in plan["plan"]["packages"]} if "plan" in plan else {p["name"]: p for p in plan["packages"]}
    tu = pkgs["tensorutils"]
    assert {"pytorch": "2.6.0", "variant": "cpu"} not in tu["tests"]
    assert tu["not_tested"] == [{"pytorch": "2.6.0", "variant": "cpu",
                                 "why": "no cpu build of pytorch 2.6.0 in the upstream channels"}]
    code, out, _ = run_cli_at(capsys, sandbox_world, "build", "tensorutils", "--jobs", "2")
    assert "not tested (upstream has no build to test with" in out
    assert "tensorutils: pytorch 2.6.0 cpu: no cpu build of pytorch 2.6.0" in out
    assert "blocked" not in out.split("not tested")[0].split("failures:")[0], out
    code, out, _ = run_cli_at(capsys, sandbox_world, "promote", "--format", "json")
    doc = json.loads(out)
    promoted = {p["artifact"].split("/")[-1].rsplit("-", 2)[0] for p in doc["promoted"]}
    assert "tensorutils" in promoted, doc
    code, out, _ = run_cli_at(capsys, sandbox_world, "verify-channel", "--format", "json")
    res = {(r["pytorch"], r["variant"]): r for r in json.loads(out)["results"]}
    assert res[("2.6.0", "cpu")]["skipped"] == "no cpu build of pytorch 2.6.0 in the upstream channels"
    assert res[("2.6.0", "cpu")]["ok"] and res[("2.6.0", "cuda")]["ok"] and not res[("2.6.0", "cuda")].get("skipped")
    assert code == 0, out
    shutil.rmtree(sandbox_world / "build" / "work", ignore_errors=True)


def test_a_lockstep_entry_that_is_no_package_name_is_bad_input(tmp_path):
    from conda_distro.errors import DistroError, ExitCode

    with pytest.raises(DistroError) as err:
        distro_at(tmp_path, UPSTREAM, lockstep=("Torch Vision",))
    assert err.value.exit_code == ExitCode.BAD_INPUT
    assert "lockstep" in str(err.value) and "'Torch Vision' is not a conda package name" in str(err.value)
