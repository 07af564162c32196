"""verify-channel solves as conda does: conda's strict channel priority (a name main has is never taken
from upstream; rattler's own Strict still does), pip added to python records unless
add_pip_as_python_dependency is off, and the MatchSpecs the docs show users are conda syntax that
rattler's strict parser reads with the meaning the docs give them.

Repros: main holding pytorch 2.5.1 only, ``pytorch ==2.6.0`` passed with rattler's Strict and is
unsatisfiable for conda; the sandbox's upstream had no pip, so a conda user with default settings could
install nothing; ``"pytorch=2.9=cuda*"`` in the README means exactly 2.9 to conda.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest

from conda_distro.enduser.conda_solve import ADD_PIP_ENV, CondaSettings, CondaSolver
from conda_distro.util.rattler_env import index_channel
from conda_distro.vocab import virtual_packages

REPO = Path(__file__).resolve().parents[1]
PLATFORMS = ["linux-64"]


@pytest.fixture(scope="module")
def upstream() -> Path:
    from conda_distro.sandbox.cache import ensure_upstream_cached
    from conda_distro.sandbox.upstream import DEFAULT_RELEASES

    return ensure_upstream_cached(DEFAULT_RELEASES).path


def channel_with(tmp: Path, upstream: Path, keep) -> Path:
    """A local channel holding the upstream package files ``keep(filename)`` accepts (hard links)."""
    for sub in ("noarch", "linux-64"):
        (tmp / sub).mkdir(parents=True, exist_ok=True)
        for f in (upstream / sub).glob("*.conda"):
            if keep(f.name):
                shutil.copy2(f, tmp / sub / f.name)
    index_channel(tmp)
    return tmp


def names(records) -> dict[str, str]:
    return {r.name.normalized: str(r.version) for r in records}


@pytest.mark.slow
def test_a_name_main_has_is_never_taken_from_upstream_unlike_rattlers_strict(tmp_path, upstream):
    from rattler import ChannelPriority, solve
    from rattler.exceptions import SolverError

    main = channel_with(tmp_path / "main", upstream, lambda fn: fn.startswith("pytorch-2.5.1-cpu"))
    channels = [main.as_uri(), upstream.as_uri()]
    # rattler's Strict: main has pytorch, but not 2.6.0 -> it takes 2.6.0 from upstream
    got = asyncio.run(solve(channels, ["pytorch ==2.6.0"], platforms=[*PLATFORMS, "noarch"], virtual_packages=virtual_packages(False),
                            channel_priority=ChannelPriority.Strict, add_pip_as_python_dependency=True))
    assert names(got)["pytorch"] == "2.6.0"
    # conda's strict priority: unsatisfiable
    with CondaSolver(channels, PLATFORMS) as solver:
        with pytest.raises(SolverError):
            solver.solve(["pytorch ==2.6.0"], cuda=False)
        ok = solver.solve(["pytorch ==2.5.1"], cuda=False)
        torch = next(r for r in ok if r.name.normalized == "pytorch")
        assert str(torch.url).startswith(main.as_uri()) and str(torch.build).startswith("cpu")
        # what main lacks still comes from upstream, and installs from there
        py = next(r for r in ok if r.name.normalized == "python")
        assert str(py.url).startswith(upstream.as_uri())
        # on a machine with a GPU: main has no cuda build of pytorch, and conda takes none from upstream
        gpu = next(r for r in solver.solve(["pytorch ==2.5.1"], cuda=True) if r.name.normalized == "pytorch")
        assert str(gpu.build).startswith("cpu") and str(gpu.url).startswith(main.as_uri())


@pytest.mark.slow
def test_pip_comes_with_python_unless_the_user_turns_it_off(tmp_path, upstream):
    from rattler.exceptions import SolverError

    with CondaSolver([upstream.as_uri()], PLATFORMS) as solver:
        got = names(solver.solve(["python"], cuda=False))
        assert set(got) == {"python", "pip"}, got
    with CondaSolver([upstream.as_uri()], PLATFORMS, CondaSettings(add_pip_as_python_dependency=False)) as solver:
        assert set(names(solver.solve(["python"], cuda=False))) == {"python"}
    # an upstream without pip (the sandbox's before): nothing with python installs for a default conda user
    nopip = channel_with(tmp_path / "nopip", upstream, lambda fn: not fn.startswith("pip-"))
    with CondaSolver([nopip.as_uri()], PLATFORMS) as solver, pytest.raises(SolverError, match="pip"):
        solver.solve(["pytorch ==2.5.1"], cuda=False)


def test_the_users_setting_is_read_as_conda_reads_it():
    assert CondaSettings.of_user(None, {}).add_pip_as_python_dependency is True
    assert CondaSettings.of_user(None, {ADD_PIP_ENV: "false"}).add_pip_as_python_dependency is False
    assert CondaSettings.of_user(None, {ADD_PIP_ENV: "True"}).add_pip_as_python_dependency is True
    assert CondaSettings.of_user(False, {ADD_PIP_ENV: "true"}).add_pip_as_python_dependency is False


# ---------------------------------------------------------------------------------------------
# the MatchSpecs shown to users

SPEC_RE = re.compile(r'"((?:pytorch|torchvision)(?:[ =\[][^"]*)?)"')  # a quoted spec (not a file name)


def doc_specs() -> list[tuple[str, str]]:
    out = []
    for doc in (REPO / "README.md", REPO / "docs" / "use-the-channel.md", REPO / "docs" / "end-users.md"):
        for spec in SPEC_RE.findall(doc.read_text(encoding="utf-8")):
            out.append((doc.name, spec))
    return out


def test_the_docs_show_matchspecs_and_each_parses_strictly():
    from rattler import MatchSpec

    specs = doc_specs()
    assert len(specs) >= 4, specs
    for doc, spec in specs:
        assert MatchSpec(spec, strict=True).name.normalized in ("pytorch", "torchvision"), (doc, spec)


@pytest.mark.parametrize("spec,version,build,matches", [
    ("pytorch 2.9.* cuda*", "2.9.1", "cuda129_h1_200", True),
    ("pytorch 2.9.* cuda*", "2.9.1", "cpu_h1_0", False),
    ("pytorch * cpu*", "2.10.0", "cpu_h1_0", True),
    ("pytorch=2.9=cuda*", "2.9.1", "cuda129_h1_200", False),  # conda: version exactly 2.9 (2.9.0)
])
def test_what_a_spec_means(spec, version, build, matches):
    from rattler import BuildString, MatchSpec, PackageName, PackageRecord, VersionWithSource

    record = PackageRecord(PackageName("pytorch"), VersionWithSource(version), BuildString(build), 0, "linux-64")
    assert MatchSpec(spec).matches(record) is matches
