"""TEST HOOK ONLY: simulated crashes for the crash-safety tests.

When the environment variable ``CONDA_DISTRO_TEST_CRASH_AT`` equals the name of a step that the code
passes through, the process kills itself with SIGKILL right there (no cleanup, no finally blocks), the
way a power cut or an OOM kill would. Nothing else reads this variable; unset, it costs one lookup.
"""

from __future__ import annotations

import os
import signal

TEST_CRASH_ENV = "CONDA_DISTRO_TEST_CRASH_AT"


def crash_point(step: str) -> None:
    """Test hook: die with SIGKILL here if ``$CONDA_DISTRO_TEST_CRASH_AT == step``."""
    if os.environ.get(TEST_CRASH_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)
