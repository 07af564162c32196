"""`conda-distro check-pr`'s entry point: the gate (:mod:`conda_distro.checkpr.check`) run with progress, and
what it prints (:class:`PrGate`: text, JSON or the PR comment of :mod:`conda_distro.checkpr.comment`)."""

from __future__ import annotations

from dataclasses import dataclass

from conda_distro.checkpr.check import CheckPrOptions, CheckPrResult, check_pr
from conda_distro.checkpr.comment import error_report, to_markdown, to_text
from conda_distro.errors import DistroError


@dataclass
class PrGate:
    """What `conda-distro check-pr` prints: the gate's result as text, JSON or a PR comment; or, when its
    input cannot be read, the error (exit 2), which still gets a PR comment saying what to do."""

    result: CheckPrResult | None
    log_url: str | None = None
    error: DistroError | None = None
    comment: str = ""  # the error's PR comment

    @property
    def exit_code(self) -> int:
        """The gate's exit code; a gate stopped by bad input raises its error (after its PR comment)."""
        return int(self._result().exit_code)

    def to_dict(self) -> dict:
        return self._result().to_dict()

    def text_lines(self) -> list[str]:
        return to_text(self._result(), self.log_url).rstrip("\n").split("\n")

    def markdown(self) -> str:
        text = self.comment if self.error is not None else to_markdown(self._result(), self.log_url)
        return text.rstrip("\n") + "\n"

    def _result(self) -> CheckPrResult:
        """The gate's result; a gate without one holds the error that stopped it."""
        if self.result is None:
            raise self.error or RuntimeError("a PrGate holds a result or an error")
        return self.result


def run_check_pr(options: CheckPrOptions) -> PrGate:
    """`conda-distro check-pr`: :func:`~conda_distro.checkpr.check.check_pr` with progress; bad input is kept (with
    its PR comment) in the result, for the CLI to print and exit 2 with."""
    try:
        return PrGate(check_pr(options, options.progress), options.log_url)
    except DistroError as exc:
        return PrGate(None, error=exc, comment=error_report(exc, options.base, options.root).markdown())
