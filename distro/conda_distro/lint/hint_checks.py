"""Checks on hints.yaml (the promotion gate's reviewed hints, :mod:`conda_distro.gate.hints`). Ids start with
``hint-``; each docstring is the help. They run once over the file (:func:`lint_hints`), not per recipe.

"Today" is the day lint runs (UTC) unless ``lint --as-of YYYY-MM-DD`` says otherwise, as for the reports.
"""

from __future__ import annotations

import datetime as dt
import difflib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from conda_distro.errors import ConfigError
from conda_distro.gate.hints import HINTS_FILE, Hint, HintSet, load_hints
from conda_distro.lint.base import FileCheck, Finding, Problem, Severity
from conda_distro.lint.context import LintContext

if TYPE_CHECKING:  # pragma: no cover
    from conda_distro.distribution import Distribution

INVALID_CHECK = "hint-invalid"


@dataclass
class HintContext:
    """What hint checks need: the lint context, the day, and the names the distribution knows."""

    lint: LintContext
    dist: Distribution
    today: dt.date

    @cached_property
    def known(self) -> set[str]:
        """Package names with a recipe (any output of it; an unreadable recipe by its folder) or a
        channel_state/ record."""
        names = {n for r in self.dist.recipes.values() for n in (r.name, *r.output_names)}
        names |= {Path(e.path).parent.name for e in self.dist.errors if e.path}
        state = self.lint.distro.state_dir
        if state.is_dir():
            names |= {p.stem for p in state.glob("*.json")}
        return names


class HintCheck(FileCheck):
    """Base of the hint checks: implement ``check(hint, hctx)``."""

    def check(self, hint: Hint, hctx: HintContext) -> Iterable[Problem]:  # pragma: no cover - abstract
        raise NotImplementedError

    def hint_findings(self, hint: Hint, hctx: HintContext) -> Iterator[Finding]:
        for p in self.check(hint, hctx):
            yield Finding(recipe=hint.package, check=self.id, severity=self.severity.value, message=p.message,
                          path=HINTS_FILE, line=p.line or hint.line, hint=p.hint or self.hint or None)


class HintInvalid(HintCheck):
    """hints.yaml is valid YAML with only the known keys (did-you-mean on typos): a list under ``hints:``
    of {action: block|unblock|force|force-badtest|urgent, package, version (optional), by: a GitHub handle,
    reason, expires: YYYY-MM-DD}. Reported by the loader; lint exits 2, as promote would."""

    id = INVALID_CHECK
    fatal = True
    hint = "see the comment at the top of hints.yaml"

    def check(self, hint: Hint, hctx: HintContext) -> Iterable[Problem]:
        return ()  # findings come from the load error (lint_hints)


class HintExpired(HintCheck):
    """A hint past its ``expires`` day does nothing any more: promote ignores it. Remove it, or renew it
    (a new expiry date, reviewed like the first one)."""

    id = "hint-expired"
    severity = Severity.WARNING

    def check(self, hint: Hint, hctx: HintContext) -> Iterable[Problem]:
        if not hint.is_active(hctx.today):
            days = (hctx.today - hint.expires).days
            yield Problem(f"hint '{hint.describe()}' expired {days} day(s) ago and does nothing",
                          hint=f"remove it, or renew it with a later 'expires:' if @{hint.by}'s reason still "
                               f"holds ({hint.reason.strip()})")


class HintUnknownPackage(HintCheck):
    """A hint names a package the distribution does not have: no recipe builds it and channel_state/ has
    no record of it (a typo, or a package that was removed)."""

    id = "hint-unknown-package"
    severity = Severity.WARNING

    def check(self, hint: Hint, hctx: HintContext) -> Iterable[Problem]:
        if hint.package not in hctx.known:
            close = difflib.get_close_matches(hint.package, sorted(hctx.known), n=1, cutoff=0.6)
            yield Problem(f"hint '{hint.describe()}' names '{hint.package}': no recipe builds it and "
                          "channel_state/ has no record of it",
                          hint=f"did you mean '{close[0]}'?" if close else "fix the package name, or remove the hint")


def lint_hints(dist: Distribution, ctx: LintContext, *, today: dt.date, names: Iterable[str] = (),
               checks: Iterable[object] = ()) -> list[Finding]:
    """Run the selected ``hint-*`` checks over hints.yaml (``names``: only hints about those packages).
    A malformed file is one ``hint-invalid`` finding (fatal: lint exits 2) naming its line and field."""
    selected = [c for c in checks if isinstance(c, HintCheck)]
    if not selected:
        return []
    try:
        hints: HintSet = load_hints(dist.distro.root)
    except ConfigError as exc:
        if not any(isinstance(c, HintInvalid) for c in selected):
            raise
        field_note = f" (field '{exc.field}')" if exc.field else ""
        return [Finding(recipe="hints", check=INVALID_CHECK, severity="error", message=exc.message + field_note,
                        path=HINTS_FILE, line=exc.line, hint=exc.hint)]
    wanted = set(names)
    hctx = HintContext(ctx, dist, today)
    findings = [f for h in hints.hints if not wanted or h.package in wanted
                for c in selected for f in c.hint_findings(h, hctx)]
    return sorted(findings, key=lambda f: (f.line or 0, f.check))
