"""What the promotion gate decides from (pure data): the release × variant test matrix, and
:class:`PlanInputs`, everything :func:`conda_distro.gate.promote.plan_gate` and its policies
(:mod:`conda_distro.gate.policies`) read: staging, main, the test results, retirements, hints, owners."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from conda_distro.channels import ChannelFile
from conda_distro.channels.depends import parse_dep
from conda_distro.config import DistroConfig
from conda_distro.engine.releases import Availability
from conda_distro.gate.installability import InstallabilityResult
from conda_distro.gate.staleness import Stale
from conda_distro.recipe.specs import admits
from conda_distro.state.ledger import Retirement
from conda_distro.state.owners import Owner
from conda_distro.state.results import ArtifactResults
from conda_distro.util.dates import utcnow
from conda_distro.vocab import Target, Variant


@dataclass(frozen=True)
class TestMatrix:
    """The supported releases × variants of distro.yaml, and which of them an artifact must pass."""

    __test__ = False  # not a pytest class

    pytorch: str
    releases: tuple[str, ...]
    variants: tuple[Variant, ...]
    #: what upstream can serve (None: unknown): a pair with no pytorch build, or none of a lockstep package
    #: the artifact needs, is not required (nobody can install the artifact with it)
    available: Availability | None = None
    lockstep_of: Callable[[ChannelFile], frozenset[str]] = field(default=lambda f: frozenset(), compare=False)

    @classmethod
    def from_config(cls, config: DistroConfig, available: Availability | None,
                    lockstep_of: Callable[[ChannelFile], frozenset[str]]) -> TestMatrix:
        return cls(config.pytorch.name, tuple(config.pytorch.releases), tuple(config.pytorch.variants), available,
                   lockstep_of)

    def required(self, f: ChannelFile) -> list[Target] | None:
        """(release, variant) pairs the artifact's own pytorch pin admits and upstream can serve; None when
        it has no pytorch dependency. A cuda-only artifact (depends on ``__cuda``) needs only the cuda variant."""
        pairs = self.admitted(f)
        if pairs is None or self.available is None:
            return pairs
        needs = self.lockstep_of(f)
        return [t for t in pairs if self.available.why_not(t, needs) is None]

    def admitted(self, f: ChannelFile) -> list[Target] | None:
        deps = [d for d in (parse_dep(t) for t in f.depends) if d is not None]
        pins = [d for d in deps if d.name == self.pytorch]
        if not pins:
            return None
        variants = [Variant(v) for v in self.variants if Variant(v).cuda or not any(d.name == "__cuda" for d in deps)]
        return [Target(r, v) for r in self.releases if all(admits(p.version, r) for p in pins) for v in variants]


def pairs_text(pairs: Sequence[Target]) -> str:
    """``pytorch 2.5.0 cpu, pytorch 2.5.0 cuda``"""
    return ", ".join(f"pytorch {r} {v}" for r, v in pairs)


class HintLookup(Protocol):
    """What the gate asks of hints.yaml (:mod:`conda_distro.gate.hints`)."""

    def find(self, action: str, name: str, version: str, today: dt.date) -> Any: ...


class InstallabilityCheck(Protocol):
    def check(self, main: Mapping[str, ChannelFile], candidates: Sequence[ChannelFile],
              pairs: Sequence[Target]) -> InstallabilityResult: ...


@dataclass(frozen=True)
class PlanInputs:
    staging: Mapping[str, ChannelFile]
    main: Mapping[str, ChannelFile]
    results: Mapping[str, ArtifactResults]
    retired: Mapping[str, Retirement]
    matrix: TestMatrix
    #: sha256 of the staging files as they are on disk (local staging), re-checked against the results
    on_disk: Mapping[str, str] | None = None
    #: this checkout's recipe input hashes ({recipe folder: hash, None when absent}) of every recipe the
    #: results name; None: provenance is not checked (a plan made without a checkout)
    recipes: Mapping[str, str | None] | None = None
    #: main's test evidence from the ledger: artifact -> {(release, variant): status}
    evidence: Mapping[str, Mapping[Target, str]] = field(default_factory=dict)
    hints: HintLookup | None = None
    today: dt.date = field(default_factory=lambda: utcnow().date())
    #: package name -> its recipe's maintainers
    maintainers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: main ∪ candidates may not install less than main (None: not checked)
    installability: InstallabilityCheck | None = None
    #: package name -> the recipe that owns it (conda_distro.state.owners), None for a name several recipes
    #: declare and none owns; None: ownership is not checked (a plan made without a checkout)
    owners: Mapping[str, Owner | None] | None = None
    #: staging builds that can never be promoted from this checkout (conda_distro.gate.staleness)
    stale: Mapping[str, Stale] = field(default_factory=dict)
    #: what promote says about hints.yaml besides applying it (an expired hint does nothing: say so)
    hint_notes: tuple[str, ...] = ()


def hint_for(inputs: PlanInputs, action: str, f: ChannelFile) -> Any:
    """The hint of ``action`` (hints.yaml) that applies to ``f`` today, or None."""
    return inputs.hints.find(action, f.name, f.version, inputs.today) if inputs.hints is not None else None


def hint_text(h: Any) -> str:
    line = f" (hints.yaml:{h.line})" if getattr(h, "line", None) else ""
    return f"{h.action} hint by {h.by}{line}: {h.reason}"
