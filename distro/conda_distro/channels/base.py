"""The channel interface every backend implements, and the record of one file in a channel.

A channel is where conda packages live: the *staging* channel builds land in, the *main* channel users
install from. Promotion and retirement only talk to channels through :class:`Channel`, so the local
folder backend and the anaconda.org backend are interchangeable (composition, no inheritance).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from conda_distro.state.locks import Deadline

#: A progress sink: receives one short human-readable line per step (the CLI sends them to stderr).
Progress = Callable[[str], None]


def no_progress(_: str) -> None:
    """The default progress sink: says nothing."""


@dataclass(frozen=True)
class ChannelFile:
    """One package file in a channel, as its repodata (or the anaconda.org API) describes it."""

    subdir: str
    filename: str
    name: str
    version: str
    build: str
    build_number: int
    sha256: str
    depends: tuple[str, ...] = ()
    size: int | None = field(default=None, compare=False)
    #: when it was built, in milliseconds since the epoch (repodata's ``timestamp``; None: not recorded).
    #: The solver prefers the newest of builds that tie on everything else (:mod:`conda_distro.channels.order`)
    timestamp: int | None = field(default=None, compare=False)
    #: repodata's ``track_features``: the solver ranks a build that has any below every build without
    track_features: tuple[str, ...] = field(default=(), compare=False)

    @cached_property
    def artifact(self) -> str:
        """``<subdir>/<filename>``: the key used by the results store and the ledger."""
        return f"{self.subdir}/{self.filename}"


def newest_by_name(files: Iterable[ChannelFile]) -> dict[str, list[ChannelFile]]:
    """The files of the newest version of each name (all its builds: variants, subdirs), by conda's
    version order."""
    from rattler import Version

    by_name: dict[str, list[ChannelFile]] = {}
    for f in files:
        by_name.setdefault(f.name, []).append(f)
    out = {}
    for name, fs in by_name.items():
        versions = [Version(f.version) for f in fs]
        top = max(versions)
        out[name] = [f for f, v in zip(fs, versions, strict=True) if v == top]
    return out


@dataclass(frozen=True)
class FileProblem:
    """A file of a channel that does not match the channel's own index (found by :meth:`Channel.audit`)."""

    artifact: str
    kind: str  # file-missing | file-sha256-differs | not-indexed
    detail: str


@dataclass(frozen=True)
class ChannelAudit:
    """What :meth:`Channel.audit` found: a channel URL rattler can install from holding exactly the
    audited files, and every file that does not match the index."""

    url: str
    problems: list[FileProblem]


def split_artifact(artifact: str) -> tuple[str, str]:
    """``"noarch/foo-1.0-h0_0.conda"`` -> ``("noarch", "foo-1.0-h0_0.conda")``."""
    subdir, _, filename = artifact.partition("/")
    return subdir, filename


@runtime_checkable
class Channel(Protocol):
    """What promotion and retirement need from a channel backend."""

    #: The reference as written in distro.yaml (a path or ``anaconda://OWNER[/LABEL]``).
    ref: str

    def describe(self) -> str:
        """A short human name for messages (never includes a secret)."""

    def list_files(self) -> dict[str, ChannelFile]:
        """Every published file, keyed by artifact (``<subdir>/<filename>``). A channel that does not
        exist yet is empty."""

    def audit(self, workdir: Path) -> ChannelAudit:
        """Check every file against the index (sha256 of the bytes, files the index names but lacks,
        files it does not name); ``workdir`` is a fresh folder the check may download into."""

    def lock(self, timeout: float | Deadline) -> AbstractContextManager[None]:
        """Serialise writers of this channel (promote, retire: :func:`conda_distro.state.locks.main_lock`); raises
        LockTimeoutError after ``timeout`` seconds."""

    def check_source(self, source: Channel) -> None:
        """Raise ChannelError (before anything is written) if files cannot be copied from ``source``."""

    def recover(self, source: Channel, keep: set[str], progress: Progress = no_progress) -> None:
        """Clean up what an interrupted write left behind (partial files, unindexed copies)."""

    def receive(self, source: Channel, files: Sequence[ChannelFile], progress: Progress = no_progress) -> None:
        """Copy ``files`` from ``source`` in, each verified against its sha256. Never overwrites a file."""

    def publish(self, progress: Progress = no_progress) -> None:
        """Make received files visible to installers (local: re-index; anaconda.org: nothing to do)."""

    def withdraw(self, files: Sequence[ChannelFile], progress: Progress = no_progress) -> list[str]:
        """Take ``files`` out of the channel (retirement). Returns where they went, one line each."""
