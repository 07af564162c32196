"""Flaky tests the promotion gate met: named, never blocking, their maintainers told.

A test is ``flaky`` when it passed and failed on the same inputs (the confirmation runs of
:mod:`conda_distro.engine.confirm`): a candidate's own test, or a dependent's re-test with the candidates
(or its baseline run with main's packages, :class:`conda_distro.gate.revdeps.RetestVerdict` ``flaky``). It holds
nothing back and is never taken as a pass; each one is listed (promote's ``flaky``, the excuses, the status
page) with its maintainers and a suggested ``force-badtest`` hint (which makes the gate ignore that
package's failing tests as a dependent until its fix ships). Pure functions of the plan's data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from conda_distro.channels.base import ChannelFile
from conda_distro.state.results import ArtifactResults


@dataclass(frozen=True)
class FlakyTest:
    package: str
    version: str
    pytorch: str
    variant: str
    detail: str
    log: str | None = None
    #: the candidate (artifact) whose re-test it was; None: the candidate's own test
    candidate: str | None = None
    maintainers: tuple[str, ...] = ()

    @property
    def advice(self) -> str:
        who = " ".join(f"@{m}" for m in self.maintainers)
        return (f"tell {who or 'its maintainers'} that {self.package}'s test is flaky; a `force-badtest` hint "
                f"(package: {self.package}, version: '{self.version}') makes the gate ignore its failures meanwhile")

    def to_dict(self) -> dict[str, Any]:
        return {"package": self.package, "version": self.version, "pytorch": self.pytorch, "variant": self.variant,
                "detail": self.detail, "log": self.log, "candidate": self.candidate,
                "maintainers": list(self.maintainers), "advice": self.advice}


def flaky_tests(candidates: Iterable[ChannelFile], results: Mapping[str, ArtifactResults], retests: Iterable[Any],
                maintainers: Mapping[str, tuple[str, ...]]) -> list[FlakyTest]:
    """Every flaky test behind the plan: the candidates' own (their latest run per release × variant) and
    the dependents' re-tests (:class:`conda_distro.gate.revdeps.Retest`) judged ``flaky``."""
    out: list[FlakyTest] = []
    for f in candidates:
        res = results.get(f.artifact)
        if res is None or res.sha256 != f.sha256:
            continue
        for (r, v), t in sorted(res.latest().items()):
            if t.status == "flaky":
                att = t.attempts or []
                out.append(FlakyTest(f.name, f.version, r, v, f"passed {att.count('passed')} of {len(att)} runs on "
                                     f"the same inputs" + (f"; it failed with: {t.reason}" if t.reason else ""), t.log,
                                     None, tuple(maintainers.get(f.name, ()))))
    for rt in retests:
        if rt.verdict.value == "flaky":
            d = rt.dependent
            for c in rt.candidates or (None,):
                out.append(FlakyTest(d.name, d.version, rt.pytorch, rt.variant, rt.detail, rt.log, c,
                                     tuple(maintainers.get(d.name, ()))))
    return out
