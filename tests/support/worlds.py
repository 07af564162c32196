"""Session-wide sandbox worlds for the end-to-end tests (a pytest plugin, see conftest.py).

* ``sandbox_template`` — one pristine sandbox world per test run (the upstream channel comes from the
  sandbox cache), shared by pytest-xdist workers through a file lock.
* ``built_template`` — that world after ``build --all --jobs 2``: built once per run; its report is
  kept in ``build/report.json``.
* ``sandbox_world`` / ``built_world`` — per-test copies that a test may change freely. Package files
  are hard-linked to the template; a test that changes one in place calls :func:`own_copy` first.
* ``private_rattler_cache`` (autouse) — each test process gets its own rattler package cache.

Every test that uses a world is marked ``slow``: the fast tier (``pytest -m "not slow"``) builds no
sandbox world. Collection fails on a test that would (:func:`pytest_collection_modifyitems`); a test
module whose own fixtures make a world or its upstream channel names them in ``SANDBOX_FIXTURES``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

REPORT = Path("build") / "report.json"
# the fixtures below that make (or copy) a sandbox world
WORLD_FIXTURES = frozenset({"sandbox_template", "built_template", "sandbox_world", "built_world", "built_report"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses a sandbox world must be marked ``slow``: the fast tier builds none."""
    unmarked = []
    for item in items:
        module = getattr(item, "module", None)
        world = WORLD_FIXTURES | frozenset(getattr(module, "SANDBOX_FIXTURES", ()))
        used = world & set(getattr(item, "fixturenames", ()))
        if used and item.get_closest_marker("slow") is None:
            unmarked.append(f"{item.nodeid} (uses {', '.join(sorted(used))})")
    if unmarked:
        raise pytest.UsageError("tests that use a sandbox world must be marked @pytest.mark.slow:\n  "
                                + "\n  ".join(unmarked))


def copy_world(src: Path, dst: Path) -> Path:
    """A copy of the world ``src`` at ``dst`` that a test (or a benchmark: bench_kill9, bench_scale) may change
    freely; package files are hard-linked (see :func:`own_copy` before changing one in place)."""

    def copy(s: str, d: str) -> str:
        if s.endswith((".conda", ".tar.bz2")):
            try:
                os.link(s, d)
                return d
            except OSError:
                pass
        return shutil.copy2(s, d)

    shutil.copytree(src, dst, symlinks=True, copy_function=copy)
    return dst


def own_copy(path: Path) -> Path:
    """Give ``path`` an inode of its own before a test changes it in place: worlds hard-link their
    packages to the session's templates, and an in-place write would change the template for every
    later test (and for tests running at the same time in other workers)."""
    tmp = path.with_name(path.name + ".own")
    shutil.copy2(path, tmp)
    os.replace(tmp, path)
    return path


def _shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder shared by all xdist workers of this run (each worker has its own basetemp below it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session", autouse=True)
def private_rattler_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A rattler package cache of this test process's own (``RATTLER_CACHE_DIR``).

    Every build of a sandbox recipe makes a file with the same name (e.g.
    ``metrickit-0.5.1-pyh4616a5c_0.conda``) but other content (timestamps). rattler's package cache is
    keyed by file name and re-extracts an entry when the sha256 differs, so worlds tested at the same
    time by other xdist workers (or by another test run on the machine) would re-extract each other's
    entries while in use. Tests within one process run one after another, so one cache per process is safe.
    """
    path = tmp_path_factory.mktemp("rattler-cache")
    with pytest.MonkeyPatch.context() as mp:  # session-wide: the function-scoped ``monkeypatch`` cannot
        mp.setenv("RATTLER_CACHE_DIR", str(path))
        yield path


@pytest.fixture(scope="session")
def sandbox_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from conda_distro.sandbox.world import SandboxOptions, create_sandbox

    shared = _shared(tmp_path_factory)
    path = shared / "sandbox-template"
    with FileLock(str(shared / "sandbox-template.lock")):
        if not (path / ".git").is_dir():
            create_sandbox(SandboxOptions(path=path, force=True))
    return path


@pytest.fixture(scope="session")
def built_template(sandbox_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from conda_distro.distribution import load_distribution
    from conda_distro.engine.run import BuildOptions, run_build

    shared = _shared(tmp_path_factory)
    path = shared / "built-template"
    with FileLock(str(shared / "built-template.lock")):
        if not (path / REPORT).is_file():
            shutil.rmtree(path, ignore_errors=True)
            copy_world(sandbox_template, path)
            run = run_build(load_distribution(path), BuildOptions(all=True, jobs=2))
            (path / REPORT).write_text(json.dumps(run.to_dict(), indent=1))
    return path


@pytest.fixture()
def sandbox_world(sandbox_template: Path, tmp_path: Path) -> Path:
    return copy_world(sandbox_template, tmp_path / "world")


@pytest.fixture()
def built_world(built_template: Path, tmp_path: Path) -> Path:
    return copy_world(built_template, tmp_path / "built")


@pytest.fixture(scope="session")
def built_report(built_template: Path) -> dict:
    """The JSON report of the session's `build --all`."""
    return json.loads((built_template / REPORT).read_text())
