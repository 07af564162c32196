"""What the promotion gate says about an artifact it does not promote: a named reason and the details
(its data types only; :mod:`conda_distro.gate.promote` decides, :mod:`conda_distro.gate.excuses` reports)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from conda_distro.channels.base import ChannelFile


class HoldClass(enum.StrEnum):
    """What a hold asks of people: the one classification promote's exit code, the excuses' verdicts and the
    status page's staging rows all read (:attr:`HoldReason.hold_class`)."""

    DONE = "done"  # nothing to do: the same file is in main
    STALE = "stale"  # can never be promoted (superseded, other recipes, a reverted try, retired): `prune` removes it
    WAITING = "waiting"  # a build (a test, a re-test, a retry) decides it
    FAILURE = "failure"  # a test fails, a dependent regresses, main would lose installability, a dependency is held
    PERMANENT = "permanent"  # needs a decision: a block hint, a build number bump, the owner of its name

    @property
    def verdict(self) -> str:
        """The excuses' word for it (``stale`` and ``done`` builds are no candidates)."""
        return {HoldClass.WAITING: "waiting", HoldClass.FAILURE: "held-temporarily",
                HoldClass.PERMANENT: "held-permanently"}.get(self, self.value)

    @property
    def counts(self) -> bool:
        """Makes `promote` (and `excuses`) exit 1: a hold a person can act on. Stale builds do not: they can
        never be promoted, whatever anyone does, and `prune` removes them; done ones are no-ops."""
        return self in (HoldClass.WAITING, HoldClass.FAILURE, HoldClass.PERMANENT)


class HoldReason(enum.StrEnum):
    """Why the gate holds a candidate (a closed vocabulary: ``str()`` and JSON give the value)."""

    TEST_FAILED = "test-failed"
    NOT_TESTED = "not-tested"
    DEPENDENCY_NOT_IN_MAIN = "dependency-not-in-main"
    ALREADY_IN_MAIN = "already-in-main"
    SHA256_MISMATCH = "sha256-mismatch"
    RETIRED = "retired"
    NOT_FROM_THIS_CHECKOUT = "not-from-this-checkout"  # built from recipes this checkout does not have
    TESTED_WITH_OTHER_RECIPES = "tested-with-other-recipes"  # built here, but its tests saw other recipes
    SUPERSEDED = "superseded"  # a newer build of its name (of this checkout) is in staging or main
    REVERTED = "reverted"  # built from a recipe edit this checkout reverted (a sweep's failed try)
    REGRESSION = "regression"  # a dependent in main passed before and fails with it
    UNINSTALLABLE = "uninstallable"  # a package in main could no longer be installed
    WAITING = "waiting"  # infrastructure errors, or re-tests still to run
    BLOCKED_BY_HINT = "blocked-by-hint"
    NOT_OWNER = "not-owner"  # its name belongs to another recipe than the one it was built from
    NO_TESTS = "no-tests"  # no test ran on any release × variant (fail closed: only a `force` hint lets it go)

    @property
    def hold_class(self) -> HoldClass:
        return _CLASS[self]

    @property
    def is_failure(self) -> bool:
        """Held for a reason that makes the command exit 1 (a hold a person can act on)."""
        return self.hold_class.counts

    @property
    def description(self) -> str:
        """What the reason means, in one line."""
        return _DESCRIPTION[self]


_CLASS = {
    HoldReason.ALREADY_IN_MAIN: HoldClass.DONE,
    HoldReason.RETIRED: HoldClass.STALE, HoldReason.NOT_FROM_THIS_CHECKOUT: HoldClass.STALE,
    HoldReason.SUPERSEDED: HoldClass.STALE, HoldReason.REVERTED: HoldClass.STALE,
    HoldReason.WAITING: HoldClass.WAITING, HoldReason.NOT_TESTED: HoldClass.WAITING,
    HoldReason.TESTED_WITH_OTHER_RECIPES: HoldClass.WAITING,
    HoldReason.TEST_FAILED: HoldClass.FAILURE, HoldReason.REGRESSION: HoldClass.FAILURE,
    HoldReason.UNINSTALLABLE: HoldClass.FAILURE, HoldReason.DEPENDENCY_NOT_IN_MAIN: HoldClass.FAILURE,
    HoldReason.BLOCKED_BY_HINT: HoldClass.PERMANENT, HoldReason.SHA256_MISMATCH: HoldClass.PERMANENT,
    HoldReason.NOT_OWNER: HoldClass.PERMANENT, HoldReason.NO_TESTS: HoldClass.PERMANENT,
}

_DESCRIPTION = {
    HoldReason.TEST_FAILED: "its own tests fail",
    HoldReason.NOT_TESTED: "not tested (or not against every release and variant it must pass)",
    HoldReason.NO_TESTS: "no test ran on any release × variant: nothing says it works (fail closed)",
    HoldReason.DEPENDENCY_NOT_IN_MAIN: "a dependency is neither in main nor promoted with it",
    HoldReason.ALREADY_IN_MAIN: "the same file is in main",
    HoldReason.SHA256_MISMATCH: "main has another file of the same name",
    HoldReason.RETIRED: "its package was retired from main",
    HoldReason.NOT_FROM_THIS_CHECKOUT: "built from recipes this checkout does not have",
    HoldReason.TESTED_WITH_OTHER_RECIPES: "tested with other recipes than this checkout's",
    HoldReason.SUPERSEDED: "a newer build of its name is in staging or main",
    HoldReason.REVERTED: "built from a recipe edit this checkout reverted",
    HoldReason.REGRESSION: "a dependent in main passed before and fails with it",
    HoldReason.UNINSTALLABLE: "a package in main could no longer be installed",
    HoldReason.WAITING: "waits for tests, re-tests or a retry of an infrastructure error",
    HoldReason.BLOCKED_BY_HINT: "a block hint in hints.yaml",
    HoldReason.NOT_OWNER: "its name belongs to another recipe",
}

PRUNE_ADVICE = "`conda-distro prune` removes it from staging (it can never be promoted)"


def default_advice(reason: HoldReason, name: str, blocked_by: tuple[str, ...] = ()) -> str:
    """What to do about a hold, when the gate has nothing more precise: each, followed, unblocks it
    (``tests/test_holds_advice.py`` follows every one)."""
    others = " ".join(sorted({b for b in blocked_by if not b.startswith("hint:")}))
    if reason.hold_class is HoldClass.STALE:
        return PRUNE_ADVICE
    return {
        HoldReason.ALREADY_IN_MAIN: "nothing: it is in main",
        HoldReason.TEST_FAILED: f"fix recipes/{name} (or the package) so that its tests pass, then "
                                f"`conda-distro build {name}`; or a `force` hint in hints.yaml",
        HoldReason.NOT_TESTED: f"`conda-distro build {name}`",
        HoldReason.TESTED_WITH_OTHER_RECIPES: f"`conda-distro build {name}` re-tests it with this checkout's recipes",
        HoldReason.WAITING: f"`conda-distro build {' '.join(sorted({name, *others.split()}))}`",
        HoldReason.REGRESSION: f"fix {name} or make {others or 'the dependents'} work with it, then `conda-distro build "
                               f"{' '.join(sorted({name, *others.split()}))}`; or a `force-badtest` hint for the dependent",
        HoldReason.UNINSTALLABLE: f"change the pins of {name} so that {others or 'main'} stays installable, then "
                                  f"`conda-distro build {name}`",
        HoldReason.DEPENDENCY_NOT_IN_MAIN: "its dependency is held: follow that hold's advice (`conda-distro excuses`), "
                                           "then `conda-distro promote` takes both",
        HoldReason.BLOCKED_BY_HINT: f"remove the block hint on {name} from hints.yaml (or add an `unblock` hint)",
        HoldReason.SHA256_MISMATCH: f"bump build.number in recipes/{name}/recipe.yaml, then `conda-distro build {name}`",
        HoldReason.NOT_OWNER: f"build {name} from the recipe that owns the name, or change package_owners.yaml",
        HoldReason.NO_TESTS: f"give recipes/{name}/recipe.yaml a `tests:` section that runs (then `conda-distro build "
                             f"{name}`), or a `force` hint in hints.yaml",
    }[reason]


@dataclass(frozen=True)
class Held:
    file: ChannelFile
    reason: HoldReason
    detail: str
    blocked_by: tuple[str, ...] = ()  # the packages (or hint) that hold it
    regressions: tuple[dict, ...] = ()  # {package, pytorch, variant, log}
    maintainers: tuple[str, ...] = ()  # who to tell: its own, and the broken dependents'
    advice: str = ""  # what to do (empty: :func:`default_advice`)
    policy: str = ""  # the id of the check that holds it (:mod:`conda_distro.gate.policies`)
    #: the candidate's further holds, in the gate's order (each check's hold is kept: none hides another)
    also: tuple[Held, ...] = ()

    @property
    def artifact(self) -> str:
        return self.file.artifact

    @property
    def hold_class(self) -> HoldClass:
        return self.reason.hold_class

    @property
    def what_to_do(self) -> str:
        return self.advice or default_advice(self.reason, self.file.name, self.blocked_by)

    @property
    def holds(self) -> tuple[Held, ...]:
        """Every hold of the artifact, this one (the first in the gate's order) first."""
        return (self, *self.also)

    def with_also(self, more: Sequence[Held]) -> Held:
        return dataclasses.replace(self, also=(*self.also, *(x for m in more for x in m.holds)))

    def reason_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "reason": self.reason.value, "class": self.hold_class.value,
                "description": self.reason.description, "detail": self.detail, "advice": self.what_to_do}

    def to_dict(self) -> dict[str, Any]:
        return {"artifact": self.artifact, "name": self.file.name, "reason": self.reason.value, "detail": self.detail,
                "class": self.hold_class.value, "advice": self.what_to_do,
                "blocked_by": list(self.blocked_by), "regressions": [dict(r) for r in self.regressions],
                "maintainers": list(self.maintainers), "policy": self.policy,
                "reasons": [h.reason_dict() for h in self.holds]}
