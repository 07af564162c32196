"""A test the kernel (or anyone outside) kills is an infrastructure error, not a verdict on the package;
test environments go to a RAM disk only while memory has room for them.

The repro (issue 13's real world): two builds with two jobs each put ~11 GB of PyTorch test environments
into RAM disks, the kernel's OOM killer ended gpytorch's test on pytorch 2.15.0 (cuda) with SIGKILL, and
the run recorded it as gpytorch *failing* there.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from conda_distro.engine.backends import KILLED_WHY, RattlerBuildBackend, file_sink
from conda_distro.engine.backends import TestJob as Job  # (renamed: pytest would try to collect a Test* class)
from conda_distro.util import rattler_env


def _package_with_test(out: Path, name: str, script: str) -> Path:
    from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig

    recipe_dir = out.parent / "recipes" / name
    recipe_dir.mkdir(parents=True, exist_ok=True)
    text = textwrap.dedent(f"""\
        package: {{name: {name}, version: "1.0"}}
        build:
          noarch: generic
          script: ["mkdir -p $PREFIX/share/{name}"]
        tests:
          - script: [{json.dumps(script)}]
        """)
    (variant,) = Stage0Recipe.from_yaml(text, recipe_dir=recipe_dir).render(VariantConfig())
    with rattler_env.rattler_env():
        res = variant.run_build(tool_config=ToolConfiguration(test_strategy="skip"), output_dir=str(out),
                                channels=[out.as_uri()])
    return Path(res.packages[0])


@pytest.mark.parametrize("script, error", [("sh -c 'kill -9 $$'", True), ("exit 1", False), ("true", False)])
def test_a_test_killed_by_sigkill_is_an_infrastructure_error(tmp_path, script, error):
    out = tmp_path / "channel"
    name = {"sh -c 'kill -9 $$'": "killedpkg", "exit 1": "failingpkg", "true": "passingpkg"}[script]
    artifact = _package_with_test(out, name, script)
    outcome = RattlerBuildBackend().test(Job(artifact, (out.as_uri(),), "", file_sink(tmp_path / "test.log")))
    assert outcome.error is error
    if error:
        assert not outcome.ok and KILLED_WHY in outcome.message and "status 137" in outcome.message
        assert "--retry-errors" in (tmp_path / "test.log").read_text()
    else:
        assert outcome.ok is (script == "true")


def test_a_ram_disk_takes_test_environments_only_while_memory_has_room(monkeypatch):
    monkeypatch.delenv(rattler_env.SCRATCH_VAR, raising=False)
    if not (os.path.isdir(rattler_env.SHM) and os.access(rattler_env.SHM, os.W_OK)):
        pytest.skip("no writable /dev/shm here")
    monkeypatch.setattr(rattler_env, "memory_available", lambda: 1 << 30)  # 1 GiB left
    assert not rattler_env.ram_has_room() and rattler_env.scratch_dir() is None
    monkeypatch.setattr(rattler_env, "memory_available", lambda: 64 << 30)
    assert rattler_env.ram_has_room()
    st = os.statvfs(rattler_env.SHM)
    assert rattler_env.scratch_dir() == (rattler_env.SHM if st.f_bavail * st.f_frsize >= rattler_env.SHM_MIN_FREE else None)
    monkeypatch.setattr(rattler_env, "memory_available", lambda: None)  # unknown: as before
    assert rattler_env.ram_has_room()
    monkeypatch.undo()
    avail = rattler_env.memory_available()
    assert avail is None or avail > 0
