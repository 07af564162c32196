"""The fast tier (``pytest -m "not slow"``) builds no sandbox world: collection refuses a test that uses
one without the ``slow`` mark (tests/support/worlds.py), and every marker must be declared (``--strict-markers``)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture()
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    """A test run of its own, with this suite's world fixtures and pyproject's pytest settings."""
    pytester.syspathinsert(HERE)
    pytester.makeconftest('pytest_plugins = ["support.worlds"]\n')
    pytester.makeini("[pytest]\nmarkers =\n    slow: end-to-end\naddopts = --strict-markers\n")
    return pytester


def test_a_world_test_without_the_slow_mark_is_refused_at_collection(inner):
    inner.makepyfile(test_w="def test_uses_a_world(sandbox_world):\n    pass\n"
                            "def test_cheap():\n    pass\n")
    res = inner.runpytest("--collect-only", "-m", "not slow")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*must be marked @pytest.mark.slow*",
                              "*test_w.py::test_uses_a_world (uses sandbox_template, sandbox_world)*"])


def test_a_module_names_its_own_world_fixtures(inner):
    inner.makepyfile(test_w="import pytest\nSANDBOX_FIXTURES = ('mine',)\n"
                            "@pytest.fixture\ndef mine():\n    return 1\n"
                            "def test_uses_mine(mine):\n    pass\n")
    res = inner.runpytest("--collect-only")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*test_w.py::test_uses_mine (uses mine)*"])


def test_marked_world_tests_are_deselected_by_the_fast_tier(inner):
    inner.makepyfile(test_w="import pytest\n@pytest.mark.slow\ndef test_uses_a_world(sandbox_world):\n    pass\n"
                            "def test_cheap():\n    pass\n")
    res = inner.runpytest("-m", "not slow")
    res.assert_outcomes(passed=1, deselected=1)


def test_an_undeclared_marker_is_an_error(inner):
    inner.makepyfile(test_w="import pytest\n@pytest.mark.slwo\ndef test_typo():\n    pass\n")
    res = inner.runpytest()
    assert res.ret == pytest.ExitCode.INTERRUPTED
    res.stdout.fnmatch_lines(["*'slwo' not found in `markers` configuration option*"])


def test_the_suite_declares_slow_and_runs_with_strict_markers():
    import tomllib

    ini = tomllib.loads((HERE.parent / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in ini["addopts"].split()
    assert [m.split(":")[0] for m in ini["markers"]] == ["slow"]


def test_a_test_that_hangs_fails_with_its_stack_instead_of_stalling_the_run(pytester: pytest.Pytester):
    """The suite's per-test time limit (pyproject: ``timeout``): a test blocked on a FIFO no one writes to
    (the hang that once stalled the whole CI run) fails, its stack printed, and the run goes on."""
    import tomllib

    ini = tomllib.loads((HERE.parent / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert 0 < int(ini["timeout"]) <= 1800
    pytester.makepyfile(test_h="import os\n"
                            "def test_blocks(tmp_path):\n"
                            "    os.mkfifo(tmp_path / 'f')\n"
                            "    (tmp_path / 'f').read_bytes()\n"
                            "def test_after():\n    pass\n")
    res = pytester.runpytest_subprocess("--timeout", "2")
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*read_bytes*", "*Failed: Timeout*"])
