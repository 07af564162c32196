"""Temp-folder hygiene: no command leaves anything in the temp dir.

rattler-build's ``Stage0Recipe.from_yaml`` without a ``recipe_dir`` writes the recipe into a new
``rattler_build_*`` folder of the temp dir and never removes it: one per recipe rendered without the cache
(6,478 after one test run and one 5,000-recipe lint). Each command below runs in a process of its own
with ``TMPDIR`` set to a private, empty folder, with a cold render cache (every recipe is rendered), and
must leave that folder empty.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import git
import pytest

from conda_distro.recipe.model import _PACKED  # the classes a packed model cache holds
from conda_distro.util.cachedir import PackedCache

GEN = Path(__file__).parents[1] / "bench" / "gen_recipes.py"


def run_in(tmp: Path, cache: Path, *argv: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp), "CONDA_DISTRO_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-m", "conda_distro", *argv], capture_output=True, text=True, env=env,
                          timeout=900)
    assert done.returncode in ok, (argv, done.returncode, done.stderr[-2000:])
    return done


def entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_lint_and_graph_of_many_recipes_leave_no_temp_folder(tmp_path: Path):
    spec = importlib.util.spec_from_file_location("gen_recipes", GEN)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    root = tmp_path / "distro"
    names = gen.generate(60, root)
    tmp, cache = tmp_path / "tmp", tmp_path / "cache"
    tmp.mkdir()
    run_in(tmp, cache, "lint", "--root", str(root))
    run_in(tmp, cache, "graph", "--root", str(root))
    # every recipe was rendered (cold cache): the distribution's packed models hold one entry per recipe
    [pack] = [p for p in (cache / "render" / "packs").glob("*.pack") if not p.name.startswith("lint")]
    assert len(PackedCache(pack, allowed=_PACKED).load()) >= len(names)
    assert entries(tmp) == []  # (before the fix: one rattler_build_* folder per recipe)


@pytest.mark.slow
def test_build_check_pr_and_sweep_leave_no_temp_folder(sandbox_world: Path, tmp_path: Path):
    from conda_distro.sandbox import PublishOptions, publish_release

    tmp, cache = tmp_path / "tmp", tmp_path / "cache"
    tmp.mkdir()
    run_in(tmp, cache, "build", "tensorutils", "--pytorch", "2.6.0", "--root", str(sandbox_world))
    assert entries(tmp) == []
    rel = sandbox_world / "recipes" / "tensorutils" / "recipe.yaml"
    rel.write_text(rel.read_text().replace("  number: 0", "  number: 1", 1))
    repo = git.Repo(sandbox_world)
    repo.git.add("-A")
    repo.index.commit("tensorutils: rebuild")
    run_in(tmp, cache, "check-pr", "--base", "HEAD~1", "--no-build", "--root", str(sandbox_world))
    assert entries(tmp) == []
    publish_release(PublishOptions(world=sandbox_world, version="2.7.0"))
    run_in(tmp, cache, "sweep", "--pytorch", "2.7.0", "--commit", "--no-build", "--root", str(sandbox_world))
    run_in(tmp, cache, "sweep", "report", "--pytorch", "2.7.0", "--root", str(sandbox_world))
    assert entries(tmp) == []
