"""One error tree for the whole tool, and the exit codes, defined once.

Every error a user can cause derives from :class:`DistroError`: it carries the file and field
(or line) it is about and a hint saying what to do. The CLI turns any of them into exit code 2
in one place (``conda_distro.cli``); helpers never call ``sys.exit``.
"""

from __future__ import annotations

import enum
import errno
from pathlib import Path


class ExitCode(enum.IntEnum):
    """Stable exit codes of every command."""

    OK = 0
    FAILURES = 1  # the command ran and found failures
    BAD_INPUT = 2  # bad input or usage; nothing was written


class DistroError(Exception):
    """Base of every user-facing error. ``exit_code`` is always BAD_INPUT unless a child says otherwise."""

    exit_code = ExitCode.BAD_INPUT

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        field: str | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.field = field
        self.line = line
        self.hint = hint

    @property
    def location(self) -> str:
        """``file:line (field)`` as far as known."""
        parts = []
        if self.path:
            parts.append(self.path + (f":{self.line}" if self.line else ""))
        if self.field:
            parts.append(f"field '{self.field}'")
        return ", ".join(parts)

    def __str__(self) -> str:
        loc = self.location
        return f"{loc}: {self.message}" if loc else self.message

    def to_dict(self) -> dict:
        return {
            "error": type(self).__name__,
            "message": self.message,
            "path": self.path,
            "field": self.field,
            "line": self.line,
            "hint": self.hint,
        }


class ConfigError(DistroError):
    """distro.yaml is missing, malformed or has bad values."""


class RecipeError(DistroError):
    """A recipe.yaml cannot be read or understood."""


class GraphError(DistroError):
    """The dependency graph is not a DAG, or names an unknown package."""


class GitError(DistroError):
    """A git reference or repository problem."""


class UsageError(DistroError):
    """Bad combination of command-line arguments."""


class EngineUnavailableError(DistroError):
    """An optional backend (conda-build, libmambapy) was asked for but is not installed."""


class ChannelError(DistroError):
    """A channel cannot be read or written."""


class LedgerError(DistroError):
    """A channel_state/ file is corrupt or has the wrong schema."""


class ProposalError(DistroError):
    """A proposals/*.yaml file is malformed."""


class LockTimeoutError(DistroError):
    """Another process holds the lock for too long."""


class FileSystemError(DistroError):
    """The machine refused an operation on a named file (the CLI turns any ``OSError`` naming a file into
    this). A write stopped by a file size limit (``ulimit -f``), a full disk or quota, or an I/O error is a
    failure of the run (exit 1: fix the machine and rerun; promote, retire and build converge); anything
    else (no such file, permission denied, not a folder, ...) is bad input (exit 2)."""

    RUN_FAILURES = frozenset({errno.EFBIG, errno.ENOSPC, errno.EDQUOT, errno.EIO})
    _HINTS = {errno.EFBIG: "a file size limit stopped the write (`ulimit -f`); raise it and rerun",
              errno.ENOSPC: "the disk is full; free space and rerun",
              errno.EDQUOT: "the disk quota is used up; free space and rerun",
              errno.EACCES: "this user may not do that here; check the permissions",
              errno.EROFS: "the file system is read-only"}

    @classmethod
    def of(cls, exc: OSError) -> FileSystemError:
        code = exc.errno
        name = errno.errorcode.get(code, str(code)) if code is not None else type(exc).__name__
        what = exc.strerror or str(exc)
        err = cls(f"{what} ({name})" if exc.filename else f"a write failed: {what} ({name})", path=exc.filename,
                  hint=cls._HINTS.get(code or 0, "check the file and rerun"))
        if code in cls.RUN_FAILURES:
            err.exit_code = ExitCode.FAILURES
        return err


class BridgeError(DistroError):
    """The PyPI bridge cannot resolve, download or convert what it was asked for (conda_distro.upstream)."""


class ShardError(DistroError):
    """The shards of a fanned-out run do not add up: a bundle is missing, comes from another run or
    checkout, speaks for a package another shard owns, or its files differ from its sha256s. Nothing
    is merged (fail closed)."""
