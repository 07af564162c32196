"""The sweep's journal: what an interrupted ``sweep`` needs to be rolled back or finished.

``build/sweep/pytorch-VER.journal.json`` is written (atomically) before the sweep writes any file and
removed when it is done. A rerun that finds it:

* phase ``edited`` (killed while editing, building or reverting): puts every file the sweep wrote back
  as it was before the sweep, provided nobody changed it since, then sweeps again (builds already in
  staging are reused);
* phase ``committing`` (killed while making the branches): the commit objects exist; creates each
  branch that is not there yet at its recorded commit, puts the edited files back as they were before
  the sweep, and reports the recorded result.

Before either, the git lock files the interrupted sweep's git commands can have left are removed when
no git process runs in the repository (:func:`conda_distro.sweep.git.recover_git`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from conda_distro.errors import DistroError, GitError
from conda_distro.state.document import StateDocument, first_problem
from conda_distro.util.fsutil import atomic_write_text
from conda_distro.util.jsonio import read_json
from conda_distro.util.yamlio import read_yaml_text

PHASES = ("edited", "committing")


#: the only files a sweep edits, so the only paths its journal and its record of uncommitted edits may name
_SWEPT_FILE = re.compile(r"^(distro\.yaml|recipes/[A-Za-z0-9_][A-Za-z0-9_.-]*/recipe\.yaml)$")


def check_swept_paths(paths: list[str], source: Path, root: Path | None = None) -> None:
    """Every path ``source`` (a journal or a record of uncommitted edits) names must be one of the files a
    sweep edits (``distro.yaml``, ``recipes/NAME/recipe.yaml``, relative to the repository); with ``root``,
    it must also lie inside the repository once symbolic links are followed. A rollback or commit never
    writes anywhere else."""
    for rel in paths:
        inside = _SWEPT_FILE.match(rel) is not None and ".." not in rel.split("/")
        if inside and root is not None:
            inside = (root / rel).resolve().is_relative_to(root.resolve())
        if not inside:
            raise DistroError(f"names {rel!r}, which is not a file a sweep edits (distro.yaml or "
                              "recipes/NAME/recipe.yaml inside the repository): refused", path=source,
                              field="originals", hint="delete this file; restore recipes/ and distro.yaml from "
                              "git (git checkout -- recipes distro.yaml) if a sweep left them edited")


def journal_path(build_dir: Path, release: str) -> Path:
    return build_dir / "sweep" / f"pytorch-{release}.journal.json"


class SweepJournal(StateDocument):
    DOCUMENT = "sweep journal"

    release: str
    phase: Literal["edited", "committing"] = "edited"
    commit: bool = False
    originals: dict[str, str] = Field(default_factory=dict)  # path (relative to the root) -> text before the sweep
    written: dict[str, str] = Field(default_factory=dict)  # path -> text the sweep wrote
    branch: str | None = None  # sweep/pytorch-VER (None: a late admission, package branches only)
    base: str | None = None  # the commit the branch starts from
    tip: str | None = None  # its last commit (made before the branch exists)
    start: str | None = None  # the branch (or commit) checked out when the sweep began: it returns there
    result: dict[str, Any] | None = None  # the sweep's report, given back when a rerun finishes the commits

    def to_text(self) -> str:
        return self.model_dump_json(indent=1) + "\n"

    def save(self, build_dir: Path) -> None:
        self.write(journal_path(build_dir, self.release))

    def delete(self, build_dir: Path) -> None:
        journal_path(build_dir, self.release).unlink(missing_ok=True)


def find_journal(build_dir: Path) -> SweepJournal | None:
    """The journal of an unfinished sweep, if any (there is at most one: a sweep refuses to start
    while another's is unfinished)."""
    folder = build_dir / "sweep"
    found = sorted(folder.glob("pytorch-*.journal.json")) if folder.is_dir() else []
    if not found:
        return None
    path = found[0]
    try:
        doc = read_json(path, "sweep", error=DistroError)
        SweepJournal.check_version(doc, path, hint="finish it with the conda-distro that was interrupted, or "
                                                   "restore recipes/ and distro.yaml from git and delete this file")
        journal = SweepJournal.model_validate(doc)
        if journal.phase == "committing" and not (journal.tip and isinstance(journal.result, dict)):
            raise ValueError("the committing phase lacks its tip or result")
        check_swept_paths([*journal.originals, *journal.written], path)
    except (OSError, ValueError, TypeError) as exc:
        raise DistroError(f"the journal of an interrupted sweep cannot be read: {first_problem(exc)}", path=path,
                          hint="restore recipes/ and distro.yaml from git (git checkout -- recipes distro.yaml), "
                               "delete this file, and rerun the sweep") from None
    return journal


def roll_back(journal: SweepJournal, root: Path) -> list[str]:
    """Put every file the interrupted sweep wrote back as it was before it. Refuses (nothing written)
    when a file holds neither the sweep's text nor the original: someone changed it since."""
    check_swept_paths([*journal.originals, *journal.written], journal_path(root / "build", journal.release), root)
    todo = []
    for rel, original in journal.originals.items():
        path = root / rel
        current = read_yaml_text(path) if path.exists() else None
        if current == original:
            continue
        if current != journal.written.get(rel):
            raise GitError(f"{rel} was changed after the sweep of pytorch {journal.release} was interrupted",
                           path=path, hint=f"keep or discard that change (git checkout -- {rel}), delete "
                                           f"{journal_path(Path('build'), journal.release)} and rerun the sweep")
        todo.append(rel)
    for rel in todo:
        atomic_write_text(root / rel, journal.originals[rel])
    return todo


def uncommitted_path(build_dir: Path, release: str) -> Path:
    return build_dir / "sweep" / f"pytorch-{release}.uncommitted.json"


class UncommittedEdits(StateDocument):
    """What a sweep without ``--commit`` left in the work tree (distro.yaml and the bumped recipes), so
    that a later ``sweep --commit`` of the same release commits exactly that instead of answering
    "nothing to do". Written when such a sweep ends; removed once committed or found stale."""

    DOCUMENT = "record of uncommitted sweep edits"

    release: str
    originals: dict[str, str] = Field(default_factory=dict)  # path -> text before the sweep
    written: dict[str, str] = Field(default_factory=dict)  # path -> text the sweep left

    def to_text(self) -> str:
        return self.model_dump_json(indent=1) + "\n"

    def save(self, build_dir: Path) -> None:
        self.write(uncommitted_path(build_dir, self.release))

    def delete(self, build_dir: Path) -> None:
        uncommitted_path(build_dir, self.release).unlink(missing_ok=True)

    @classmethod
    def load(cls, build_dir: Path, release: str) -> UncommittedEdits | None:
        path = uncommitted_path(build_dir, release)
        try:
            doc = read_json(path, "sweep", error=DistroError)
            cls.check_version(doc, path, hint="delete it and commit the sweep's edits yourself (or discard them and "
                                              "sweep again)")
            edits = cls.model_validate(doc)
            check_swept_paths([*edits.originals, *edits.written], path)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            raise DistroError(f"the record of an uncommitted sweep cannot be read: {first_problem(exc)}", path=path,
                              hint="delete it and commit the sweep's edits yourself (or discard them and sweep again)") from None
        return edits

    def changed_since(self, root: Path) -> list[str]:
        """Files that no longer hold the text the sweep left."""
        out = []
        for rel, text in self.written.items():
            path = root / rel
            if not path.exists() or read_yaml_text(path) != text:
                out.append(rel)
        return out
