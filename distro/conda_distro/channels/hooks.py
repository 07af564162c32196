"""TEST HOOK ONLY: simulated crashes for the crash-safety tests, and a trace of the steps passed.

When the environment variable ``CONDA_DISTRO_TEST_CRASH_AT`` equals the name of a step that the code
passes through, the process kills itself with SIGKILL right there (no cleanup, no finally blocks), the
way a power cut or an OOM kill would. When ``CONDA_DISTRO_TEST_TRACE`` names a file, each step passed
appends ``<step> <time.monotonic()>`` to it (the clock is the system's monotonic clock, the same in every
process): ``bench/bench_kill9.py`` uses it to kill a command at random moments *within* one of its
phases (the sweep's commits and branches). Nothing else reads these variables; unset, they cost two
lookups.
"""

from __future__ import annotations

import os
import signal
import time

TEST_CRASH_ENV = "CONDA_DISTRO_TEST_CRASH_AT"
TEST_TRACE_ENV = "CONDA_DISTRO_TEST_TRACE"


def crash_point(step: str) -> None:
    """Test hook: record ``step`` in ``$CONDA_DISTRO_TEST_TRACE`` (when set), and die with SIGKILL here
    if ``$CONDA_DISTRO_TEST_CRASH_AT == step``."""
    trace = os.environ.get(TEST_TRACE_ENV)
    if trace:
        with open(trace, "a", encoding="utf-8") as fh:
            fh.write(f"{step} {time.monotonic():.6f}\n")
    if os.environ.get(TEST_CRASH_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)
