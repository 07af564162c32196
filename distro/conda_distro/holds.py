"""What the promotion gate says about an artifact it does not promote: a named reason and the details
(its data types only; :mod:`conda_distro.promote` decides, :mod:`conda_distro.excuses` reports)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from conda_distro.channels.base import ChannelFile


class HoldReason(str, enum.Enum):  # noqa: UP042 -- StrEnum would change str()/format() of members (output bytes)
    TEST_FAILED = "test-failed"
    NOT_TESTED = "not-tested"
    DEPENDENCY_NOT_IN_MAIN = "dependency-not-in-main"
    ALREADY_IN_MAIN = "already-in-main"
    SHA256_MISMATCH = "sha256-mismatch"
    RETIRED = "retired"
    NOT_FROM_THIS_CHECKOUT = "not-from-this-checkout"  # built or tested from other recipes than this checkout's
    REGRESSION = "regression"  # a dependent in main passed before and fails with it
    UNINSTALLABLE = "uninstallable"  # a package in main could no longer be installed
    WAITING = "waiting"  # infrastructure errors, or re-tests still to run
    BLOCKED_BY_HINT = "blocked-by-hint"
    NOT_OWNER = "not-owner"  # its name belongs to another recipe than the one it was built from

    @property
    def is_failure(self) -> bool:
        """Held for a reason that makes the command exit 1 (not a mere no-op)."""
        return self not in (HoldReason.ALREADY_IN_MAIN, HoldReason.RETIRED)


@dataclass(frozen=True)
class Held:
    file: ChannelFile
    reason: HoldReason
    detail: str
    blocked_by: tuple[str, ...] = ()  # the packages (or hint) that hold it
    regressions: tuple[dict, ...] = ()  # {package, pytorch, variant, log}
    maintainers: tuple[str, ...] = ()  # who to tell: its own, and the broken dependents'

    @property
    def artifact(self) -> str:
        return self.file.artifact

    def to_dict(self) -> dict[str, Any]:
        return {"artifact": self.artifact, "name": self.file.name, "reason": self.reason.value, "detail": self.detail,
                "blocked_by": list(self.blocked_by), "regressions": [dict(r) for r in self.regressions],
                "maintainers": list(self.maintainers)}
