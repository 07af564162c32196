"""The one discipline of every document the tool keeps on disk (``channel_state/``, ``build/``): the ledger,
test results, retirement and snapshot records, the excuses file, the sweep's report, journal and record of
uncommitted edits, prune's journal; and the owners file beside them.

* **Strict.** Every model of such a document derives from :class:`StrictModel`: a key the tool does not
  know is an error naming the file and the field (the files are ours: an unknown key is a typo, a hand
  edit or another tool's file, never something to ignore).
* **Versioned.** Every document derives from :class:`StateDocument`: it carries ``schema_version``, the
  shape it was written in. A reader reads every version up to its own (:attr:`StateDocument.SCHEMA_VERSION`)
  and refuses a newer one, before anything else is checked, with "written by a newer conda-distro"
  (:meth:`StateDocument.check_version`). A document written before it carried the field is read as the
  current version (every field added since has a default), so old files keep being read.
* **Written one way.** :meth:`StateDocument.write`: the current version stamped, then one atomic write
  (:func:`conda_distro.util.fsutil.atomic_write_text`: a temp file beside it, renamed over it, so a kill
  leaves the old file or the new one, never half of one).
* **Never written empty.** Before the write, the text is parsed as its readers parse it
  (:meth:`StateDocument.check_text`): an empty text, or one that does not parse into a mapping, is refused
  with an error naming the file, and the file on disk stays as it was. A reader fails closed on such a
  file (an empty results file held a gate); the refusal names the writer that made it instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from conda_distro.errors import DistroError
from conda_distro.util.fsutil import atomic_write_text


def first_problem(exc: Exception) -> str:
    """One line for a refused document: a validation error's first problem with its field (pydantic's own
    text spans lines and links its website); any other error's text."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"{'.'.join(map(str, first['loc'])) or 'the document'}: {first['msg']}"
    return str(exc)


class StrictModel(BaseModel):
    """A part of a document the tool keeps: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")


class StateDocument(StrictModel):
    """A whole document the tool keeps (one file): strict, versioned, written atomically."""

    #: the version this conda-distro writes (and the newest it reads)
    SCHEMA_VERSION: ClassVar[int] = 1
    #: how a refusal names the document ("ledger", "results", ...)
    DOCUMENT: ClassVar[str] = "document"

    schema_version: int = Field(default=1, ge=1)

    @classmethod
    def check_version(cls, data: Any, path: Path, *, error: type[DistroError] = DistroError,
                      hint: str = "upgrade conda-distro") -> None:
        """Refuse ``data`` (the parsed file ``path``) when its ``schema_version`` is newer than this reader's
        or below 1. Called before validation: a newer document's new keys are not the error to show."""
        version = data.get("schema_version") if isinstance(data, dict) else None
        if not isinstance(version, int) or isinstance(version, bool):
            return  # absent: the current version; not a number: the model's own error names the field
        if version > cls.SCHEMA_VERSION:
            raise error(f"written by a newer conda-distro ({cls.DOCUMENT} schema {version}; this one reads up to "
                        f"{cls.SCHEMA_VERSION})", path=path, field="schema_version", hint=hint)
        if version < 1:
            raise error(f"unsupported schema_version {version}", path=path, field="schema_version",
                        hint=f"this conda-distro reads {cls.DOCUMENT} schema 1 to {cls.SCHEMA_VERSION}")

    def stamped(self) -> Self:
        """This document at the version this conda-distro writes."""
        if self.schema_version == self.SCHEMA_VERSION:
            return self
        return self.model_copy(update={"schema_version": self.SCHEMA_VERSION})

    def to_text(self) -> str:
        """The file's text: JSON, two spaces of indent, a final newline (a document may write another form)."""
        return self.model_dump_json(indent=2) + "\n"

    @classmethod
    def parse_text(cls, text: str) -> Any:
        """The file's text parsed as its readers parse it: JSON (a document written in another form says how)."""
        return json.loads(text)

    @classmethod
    def check_text(cls, text: str, path: Path) -> None:
        """Refuse to write ``text`` to ``path`` when it is empty or does not parse into a mapping: a
        :class:`DistroError` naming the file (nothing is written; the file on disk stays as it was)."""
        why = None
        if not text.strip():
            why = "the text is empty"
        else:
            try:
                data = cls.parse_text(text)
            except Exception as exc:  # noqa: BLE001 - json and YAML raise several types
                why = f"the text does not parse ({str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__})"
            else:
                if not isinstance(data, dict) or not data:
                    why = "the text is not a mapping of fields"
        if why is not None:
            raise DistroError(f"refusing to write the {cls.DOCUMENT}: {why}", path=path,
                              hint="a bug in conda-distro: the file was left as it was; report it with the command "
                                   "that ran")

    def write(self, path: Path) -> None:
        """Write the document (stamped with the current version) to ``path`` atomically, after
        :meth:`check_text`."""
        text = self.stamped().to_text()
        self.check_text(text, path)
        atomic_write_text(path, text)
