"""TEST HOOK ONLY: simulated crashes for the crash-safety tests, and a trace of the steps passed.

When the environment variable ``CONDA_DISTRO_TEST_CRASH_AT`` equals the name of a step that the code
passes through, the process kills itself with SIGKILL right there (no cleanup, no finally blocks), the
way a power cut or an OOM kill would. When ``CONDA_DISTRO_TEST_TRACE`` names a file, each step passed
appends ``<step> <time.monotonic()>`` to it (the clock is the system's monotonic clock, the same in every
process): ``bench/bench_kill9.py`` uses it to kill a command at random moments *within* one of its
phases (the sweep's commits and branches). When ``CONDA_DISTRO_TEST_PAUSE_AT`` equals the step, the
process waits there (holding whatever locks it holds) until the file named by
``CONDA_DISTRO_TEST_RESUME`` exists (at most ten minutes): the lock tests run a second command against
it. Nothing else reads these variables; unset, they cost three lookups.
"""

from __future__ import annotations

import os
import signal
import time

TEST_CRASH_ENV = "CONDA_DISTRO_TEST_CRASH_AT"
TEST_TRACE_ENV = "CONDA_DISTRO_TEST_TRACE"
TEST_PAUSE_ENV = "CONDA_DISTRO_TEST_PAUSE_AT"
TEST_RESUME_ENV = "CONDA_DISTRO_TEST_RESUME"


def crash_point(step: str) -> None:
    """Test hook: record ``step`` in ``$CONDA_DISTRO_TEST_TRACE`` (when set), wait here if
    ``$CONDA_DISTRO_TEST_PAUSE_AT == step``, and die with SIGKILL here if ``$CONDA_DISTRO_TEST_CRASH_AT == step``."""
    trace = os.environ.get(TEST_TRACE_ENV)
    if trace:
        with open(trace, "a", encoding="utf-8") as fh:
            fh.write(f"{step} {time.monotonic():.6f}\n")
    if os.environ.get(TEST_PAUSE_ENV) == step:
        resume = os.environ.get(TEST_RESUME_ENV, "")
        end = time.monotonic() + 600
        while resume and not os.path.exists(resume) and time.monotonic() < end:
            time.sleep(0.05)
    if os.environ.get(TEST_CRASH_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)
