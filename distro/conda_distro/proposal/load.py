"""Loading proposals: the line-aware :class:`Proposal`, :func:`load_proposal` / :func:`load_proposals`,
and which proposals a change touches."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from conda_distro.config import DistroRepo
from conda_distro.errors import DistroError, ProposalError
from conda_distro.proposal.schema import PROPOSALS_DIR, ProposalData
from conda_distro.util.gitutil import changed_files
from conda_distro.util.validation import to_error
from conda_distro.util.yamlio import LDict, LList, load_fast, load_fast_file


@dataclass(frozen=True)
class Proposal:
    """A loaded proposal: the validated data plus where it lives and on which lines its keys are."""

    path: Path
    data: ProposalData
    doc: LDict = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.data.name

    def line_of(self, key: str) -> int:
        return self.doc.line_of(key) if key in self.doc else 1

    def maintainer_line(self, index: int) -> int:
        items = self.doc.get("maintainers")
        if isinstance(items, LList) and index < len(items):
            item = items[index]
            return item.line_of("handle") if isinstance(item, LDict) else items.line_of(index)
        return self.line_of("maintainers")

    def consent_line(self, index: int) -> int:
        items = self.doc.get("maintainers")
        if isinstance(items, LList) and index < len(items) and isinstance(items[index], LDict) and "consent" in items[index]:
            return items[index].line_of("consent")
        return self.maintainer_line(index)


@dataclass
class ProposalSet:
    """All proposals of a distribution; unreadable ones are in ``errors`` (lint reports them)."""

    proposals: dict[str, Proposal] = field(default_factory=dict)  # by file stem (= name)
    errors: list[ProposalError] = field(default_factory=list)

    def raise_errors(self) -> None:
        if self.errors:
            first = self.errors[0]
            if len(self.errors) > 1:
                first.hint = (first.hint + "; " if first.hint else "") + \
                    f"{len(self.errors) - 1} more proposal error(s): run `conda-distro lint`"
            raise first


def parse_proposal(text: str, path: Path) -> Proposal:
    """Parse proposal text. Raises :class:`ProposalError` naming file, field and line."""
    try:
        doc = load_fast(text, path=path)
    except DistroError as exc:
        raise ProposalError(exc.message, path=path, line=exc.line, hint=exc.hint) from None
    return _validate(doc, path)


def load_proposal(path: Path) -> Proposal:
    try:
        doc = load_fast_file(path)
    except DistroError as exc:
        raise ProposalError(exc.message, path=path, line=exc.line, hint=exc.hint) from None
    return _validate(doc, path)


def _validate(doc: Any, path: Path) -> Proposal:
    if not isinstance(doc, LDict):
        raise ProposalError("a proposal must be a YAML mapping (name:, maintainers:, ...)", path=path,
                            line=getattr(doc, "line", 1), hint="start from `conda-distro propose NAME --maintainer HANDLE`")
    try:
        data = ProposalData.model_validate(doc)
    except ValidationError as exc:
        raise to_error(exc, doc, path, root=ProposalData, error=ProposalError, see="see proposals/README.md") from None
    if path.stem != data.name:
        raise ProposalError(f"the file is {path.name} but the proposal names '{data.name}'", path=path,
                            field="name", line=doc.line_of("name"),
                            hint=f"rename the file to {data.name}.yaml or fix 'name:'")
    return Proposal(path, data, doc)


def proposal_paths(distro: DistroRepo) -> list[Path]:
    folder = distro.proposals_dir
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))  # (the reader refuses a FIFO, a folder)


def load_proposals(distro: DistroRepo, *, strict: bool = False, names: Iterable[str] = ()) -> ProposalSet:
    """Every proposals/*.yaml (or the named ones). ``strict`` raises the first malformed one."""
    wanted = set(names)
    out = ProposalSet()
    for path in proposal_paths(distro):
        if wanted and path.stem not in wanted:
            continue
        try:
            out.proposals[path.stem] = load_proposal(path)
        except ProposalError as exc:
            out.errors.append(exc)
    if strict:
        out.raise_errors()
    return out


def proposal_names(root: Path, paths: Iterable[str]) -> list[str]:
    """Names of the proposals/<name>.yaml files among changed ``paths`` that still exist."""
    names = set()
    for p in paths:
        parts = p.split("/")
        if len(parts) == 2 and parts[0] == PROPOSALS_DIR and parts[1].endswith((".yaml", ".yml")) \
                and (root / p).is_file():
            names.add(Path(parts[1]).stem)
    return sorted(names)


def changed_proposals(root: Path, ref: str) -> list[str]:
    """Names of proposals/<name>.yaml added or changed since ``ref`` (git)."""
    return proposal_names(root, changed_files(root, ref))
