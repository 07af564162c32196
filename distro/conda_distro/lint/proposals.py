"""The proposal lint: :func:`lint_proposals` runs the ``proposal-*`` checks
(:mod:`conda_distro.lint.proposal_checks`) over proposals/*.yaml; ``lint`` and ``check-pr`` call it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from conda_distro.distribution import Distribution
from conda_distro.errors import ProposalError
from conda_distro.lint.base import CHECKS, Finding
from conda_distro.lint.context import LintContext
from conda_distro.lint.proposal_checks import ProposalCheck, ProposalContext, ProposalInvalid
from conda_distro.proposal.load import load_proposals

INVALID_CHECK = ProposalInvalid.id  # what a proposal that cannot be loaded is reported as


def _invalid_finding(exc: ProposalError, ctx: LintContext) -> Finding:
    path = Path(exc.path) if exc.path else ctx.distro.proposals_dir
    field_note = f" (field '{exc.field}')" if exc.field else ""
    return Finding(recipe=path.stem, check=INVALID_CHECK, severity="error", message=exc.message + field_note,
                   path=ctx.relpath(path), line=exc.line, hint=exc.hint)


def lint_proposals(dist: Distribution, ctx: LintContext | None = None, *, names: Iterable[str] = (),
                   checks: Iterable[Any] | None = None) -> list[Finding]:
    """Run the ``proposal-*`` checks over proposals/*.yaml (or the named ones).

    ``checks``: the selected check instances (``lint --check``); proposal checks among them run, others
    are ignored. Malformed proposals come back as ``proposal-invalid`` findings, whose check is ``fatal``
    (lint exits 2). Findings are on the proposals/<name>.yaml path, sorted by path and line.
    """
    ctx = ctx or LintContext(dist.distro, names=set(dist.recipes))
    selected: list[ProposalCheck] = [c for c in (checks if checks is not None else (CHECKS[k]() for k in sorted(CHECKS)))
                                     if isinstance(c, ProposalCheck)]
    loaded = load_proposals(dist.distro, names=names)
    findings = [_invalid_finding(e, ctx) for e in loaded.errors]
    pctx = ProposalContext(ctx, dist)
    for name in sorted(loaded.proposals):
        proposal = loaded.proposals[name]
        for check in selected:
            findings.extend(check.proposal_findings(proposal, pctx))
    findings.sort(key=lambda f: (f.path, f.line or 0, f.check))
    return findings


def has_fatal(findings: Iterable[Finding]) -> bool:
    """Any finding that means the input is malformed (exit 2)?"""
    return any(CHECKS[f.check].fatal for f in findings if f.check in CHECKS)
