"""A local channel: a folder with ``noarch/`` and ``<platform>/`` subfolders, indexed by rattler.

Crash safety (what a reader of the channel can see at any instant):

* a package file appears under its final name only once it is complete, fsynced and verified against
  its sha256 (written as a hidden ``.<name>.<pid>.part`` first, then hard-linked to the final name, so an
  existing file is never overwritten);
* ``repodata.json`` is rewritten only after the files it will name are in place, and atomically
  (rattler's ``index_fs`` writes a temp file and renames it; verified with strace);
* files leave the channel (retirement) only after a repodata without them is in place.

So repodata never names a missing or different file. What an interrupted run leaves behind (parts,
files copied but not yet indexed) is cleaned up by :meth:`LocalChannel.recover` on the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from conda_distro.channels.base import Channel, ChannelAudit, ChannelFile, FileProblem, Progress, no_progress
from conda_distro.channels.hooks import crash_point
from conda_distro.channels.repodata import parse_repodata
from conda_distro.errors import ChannelError
from conda_distro.state.locks import LOCK_NAME, Deadline, main_lock
from conda_distro.util.fsutil import atomic_write_text, naming, open_regular, sha256_regular
from conda_distro.util.jsonio import read_json
from conda_distro.util.rattler_env import INDEXER_TEMP

PART_SUFFIX = ".part"
PACKAGE_SUFFIXES = (".conda", ".tar.bz2")
REPODATA = "repodata.json"
STALE_INDEX_FILES = ("repodata.json.zst", "repodata_shards.msgpack.zst", "repodata.json.bz2")
_CHUNK = 1 << 20
_COPY_THREADS = 8
_SUBDIR_RE = re.compile(r"^(noarch|[a-z]+-[a-z0-9]+)$")


def sha256_of(path: Path) -> str:
    """The sha256 of the regular file ``path`` (a FIFO or device in its place: :class:`ChannelError`,
    without reading it, so a file swapped by recipe code or another user cannot hang the command)."""
    return sha256_regular(path, error=ChannelError)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_hashed(src: Path, dst: Path) -> str:
    """Copy ``src`` to a new file ``dst`` (fsynced, mode 0644) and return the sha256 of what was written
    (``src`` not a regular file, such as a FIFO: :class:`ChannelError` before ``dst`` is made, nothing read)."""
    h = hashlib.sha256()
    with naming(dst), open_regular(src, error=ChannelError) as fin, open(dst, "xb") as fout:
        while chunk := fin.read(_CHUNK):
            h.update(chunk)
            fout.write(chunk)
        fout.flush()
        os.fchmod(fout.fileno(), 0o644)
        os.fsync(fout.fileno())
    return h.hexdigest()


def is_subdir_name(name: str) -> bool:
    """``noarch`` or a platform like ``linux-64`` (not rattler-build's ``bld``/``broken``/``src_cache``)."""
    return bool(_SUBDIR_RE.match(name))


def _is_package(name: str) -> bool:
    return name.endswith(PACKAGE_SUFFIXES) and not name.startswith(".")


def read_repodata(path: Path) -> dict[str, Any]:
    hint = ("re-index the channel: for main, delete the file and run `conda-distro promote` (it indexes main again from "
            "its files, keeping every file channel_state/ records); for staging, delete it and run `conda-distro build --all`")
    try:
        data = read_json(path, "repodata", error=ChannelError, hint=hint)
    except FileNotFoundError:
        raise ChannelError("cannot read: no such file", path=path, hint=hint) from None
    if not isinstance(data, dict):
        raise ChannelError("channel index is not a JSON object", path=path)
    return data


class LocalChannel:
    """A channel that is a folder on this machine (the embedded default)."""

    def __init__(self, path: Path, *, ref: str | None = None, subdirs: Sequence[str] = ("noarch",),
                 retired_dir: Path | None = None) -> None:
        self.path = Path(path)
        self.ref = ref or str(path)
        self.subdirs = tuple(dict.fromkeys([*subdirs, "noarch"]))
        self.retired_dir = retired_dir or self.path.parent / "retired"

    def __repr__(self) -> str:
        return f"LocalChannel({str(self.path)!r})"

    def describe(self) -> str:
        return str(self.path)

    # -- reading --------------------------------------------------------------------------------

    def indexed_subdirs(self) -> list[str]:
        if not self.path.is_dir():
            return []
        return sorted(p.parent.name for p in self.path.glob(f"*/{REPODATA}") if is_subdir_name(p.parent.name))

    def list_files(self) -> dict[str, ChannelFile]:
        out: dict[str, ChannelFile] = {}
        for subdir in self.indexed_subdirs():
            path = self.path / subdir / REPODATA
            out.update(parse_repodata(path, subdir, read_repodata(path)))  # validated: names file, record, field
        return out

    def file_path(self, f: ChannelFile) -> Path:
        return self.path / f.subdir / f.filename

    def unindexed_files(self) -> list[str]:
        """Package files on disk that no repodata.json names (left by an interrupted write)."""
        indexed = set(self.list_files())
        found = []
        for subdir in self.subdirs_on_disk():
            for p in (self.path / subdir).iterdir():
                if _is_package(p.name) and f"{subdir}/{p.name}" not in indexed:
                    found.append(f"{subdir}/{p.name}")
        return sorted(found)

    def subdirs_on_disk(self) -> list[str]:
        if not self.path.is_dir():
            return []
        return sorted(p.name for p in self.path.iterdir() if p.is_dir() and is_subdir_name(p.name))

    def audit(self, workdir: Path | None = None) -> ChannelAudit:
        """Every file the index names is there with the index's sha256 (read in full), and every
        package file in the channel is named by the index. Installers read the channel itself."""
        listed = self.list_files()
        with ThreadPoolExecutor(max_workers=_COPY_THREADS) as pool:  # hashing releases the GIL
            found = list(pool.map(self._check_file, sorted(listed.values(), key=lambda f: f.artifact)))
        problems = [p for p in found if p is not None]
        problems += [FileProblem(a, "not-indexed", "a package file in the channel that its index does not name")
                     for a in self.unindexed_files()]
        return ChannelAudit(self.path.as_uri(), problems)

    def _check_file(self, f: ChannelFile) -> FileProblem | None:
        path = self.file_path(f)
        if not path.is_file():
            return FileProblem(f.artifact, "file-missing", f"the index names it but {path} does not exist")
        actual = sha256_of(path)
        if actual == f.sha256:
            return None
        return FileProblem(f.artifact, "file-sha256-differs",
                           f"index sha256 {f.sha256[:12] or '(none)'}…, file {actual[:12]}… ({path.stat().st_size} "
                           "bytes" + (f", index says {f.size})" if f.size is not None else ")"))

    # -- writing --------------------------------------------------------------------------------

    def lock(self, timeout: float | Deadline) -> AbstractContextManager[None]:
        return main_lock(self.path / LOCK_NAME, timeout, f"channel {self.describe()}")

    def check_source(self, source: Channel) -> None:
        if not isinstance(source, LocalChannel):
            raise ChannelError(
                f"cannot copy from {source.describe()} into the local channel {self.describe()}",
                field="channels.staging",
                hint="staging and main must be both local folders or both anaconda:// channels",
            )

    def recover(self, source: Channel, keep: set[str], progress: Progress = no_progress) -> None:
        """Remove partial files; move unindexed package files not in ``keep`` out of the channel (into the
        retired folder), so a later index never publishes them by accident. Callers keep what channel_state/
        records in main (:meth:`~conda_distro.state.ledger.Ledger.in_main_artifacts`) unless they mean to
        take it out: with an index deleted to be rebuilt, every file is unindexed."""
        for subdir in self.subdirs_on_disk():
            for p in (self.path / subdir).glob(f".*{PART_SUFFIX}"):
                progress(f"removing partial file {p.name} left by an interrupted run")
                p.unlink(missing_ok=True)
        for artifact in self.unindexed_files():
            if artifact not in keep:
                dest = self._move_out(self.path / artifact, artifact.split("/")[0])
                progress(f"moved unindexed {artifact} out of the channel to {dest}")

    def receive(self, source: Channel, files: Sequence[ChannelFile], progress: Progress = no_progress) -> None:
        """Two phases: every file is copied to a hidden part and verified first (a mismatch aborts with
        nothing placed); then each part is linked to its final name, which never overwrites."""
        self.check_source(source)
        assert isinstance(source, LocalChannel)
        self.ensure_layout()
        staged = self._stage_all(source, files)
        for i, (f, part) in enumerate(staged):
            os.link(part, self.file_path(f))
            part.unlink()
            if i == 0:
                crash_point("promote-after-first-file")
        for subdir in sorted({f.subdir for f, _ in staged}):
            _fsync_dir(self.path / subdir)
        progress(f"copied {len(staged)} file(s) into {self.describe()}"
                 + (f" ({len(files) - len(staged)} already there)" if len(files) != len(staged) else ""))

    def _stage_all(self, source: LocalChannel, files: Sequence[ChannelFile]) -> list[tuple[ChannelFile, Path]]:
        """Phase 1 over a few threads (copy, hash and fsync release the GIL; the fsyncs overlap).
        If any file fails, every part is removed and the first error is raised."""
        with ThreadPoolExecutor(max_workers=max(1, min(_COPY_THREADS, len(files)))) as pool:
            futures = [(f, pool.submit(self._stage_one, source, f)) for f in files]
        errors = [exc for _, fut in futures if (exc := fut.exception()) is not None]
        staged = [(f, part) for f, fut in futures if fut.exception() is None and (part := fut.result()) is not None]
        if errors:
            for _, part in staged:
                part.unlink(missing_ok=True)
            raise errors[0]
        return staged

    def _stage_one(self, source: LocalChannel, f: ChannelFile) -> Path | None:
        dest = self.file_path(f)
        if dest.exists():
            actual = sha256_of(dest)
            if actual != f.sha256:
                raise ChannelError(
                    f"{f.artifact} already exists in {self.describe()} with a different sha256 "
                    f"({actual[:12]}…, expected {f.sha256[:12]}…); a file is never overwritten", path=dest,
                    hint="move the stray file away and run promote again")
            return None  # copied by an interrupted run and verified then: only needs indexing
        part = dest.with_name(f".{f.filename}.{os.getpid()}{PART_SUFFIX}")
        try:
            actual = _copy_hashed(source.file_path(f), part)
        except FileNotFoundError:
            part.unlink(missing_ok=True)
            raise ChannelError(f"{f.artifact} is listed in the staging index but missing on disk",
                               path=source.file_path(f), hint=f"rebuild it with `conda-distro build {f.name}`") from None
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        if actual != f.sha256:
            part.unlink(missing_ok=True)
            raise ChannelError(
                f"{f.artifact} in staging does not match the sha256 its index records "
                f"({actual[:12]}… on disk, {f.sha256[:12]}… recorded); nothing was promoted",
                path=source.file_path(f), hint="the staging file changed after it was tested: rebuild and re-test it")
        return part

    def ensure_layout(self) -> None:
        for subdir in self.subdirs:
            (self.path / subdir).mkdir(parents=True, exist_ok=True)

    def publish(self, progress: Progress = no_progress) -> None:
        """Re-index: rattler writes each repodata.json to a temp file and renames it into place."""
        from rattler.index import index_fs

        self.ensure_layout()
        shutil.rmtree(self.path / INDEXER_TEMP, ignore_errors=True)  # (an index killed with -9 left its temps there)
        try:
            asyncio.run(index_fs(self.path, force=False, write_zst=False, write_shards=False))
        except Exception as exc:  # noqa: BLE001 - rattler raises several types; the old index stays valid
            raise ChannelError(f"indexing {self.describe()} failed: {exc}", path=self.path,
                               hint="a package file in the channel is unreadable; move it away and rerun") from None
        with contextlib.suppress(OSError):
            (self.path / INDEXER_TEMP).rmdir()  # (the indexer leaves it behind, empty)
        for subdir in self.subdirs_on_disk():
            self._drop_stale_index(self.path / subdir)
            if (self.path / subdir / REPODATA).exists():
                _fsync_dir(self.path / subdir)
        progress(f"indexed {self.describe()}")

    @staticmethod
    def _drop_stale_index(folder: Path) -> None:
        """Compressed or sharded indexes from an earlier indexer would go stale (engine-notes gotcha 4)."""
        for name in STALE_INDEX_FILES:
            (folder / name).unlink(missing_ok=True)
        if (folder / "shards").is_dir():
            shutil.rmtree(folder / "shards", ignore_errors=True)

    def withdraw(self, files: Sequence[ChannelFile], progress: Progress = no_progress) -> list[str]:
        """Retire: first a repodata without the files, then the files out, then a fresh index."""
        self._unlist(files)
        crash_point("retire-after-unlist")
        moved = [str(self._move_out(self.file_path(f), f.subdir)) for f in files if self.file_path(f).exists()]
        self.publish(progress)
        progress(f"moved {len(moved)} file(s) to {self.retired_dir}")
        return moved

    def remove(self, files: Sequence[ChannelFile], progress: Progress = no_progress) -> list[str]:
        """Delete ``files`` from the channel for good (`prune`: staging builds that can never be promoted):
        first a repodata without them, then the files, then a fresh index; so the index never names a
        missing file, and a run killed anywhere is completed by running it again. Only a file whose index
        record and bytes have the sha256 of ``files`` is touched (a build made since under the same name is
        left alone). Returns the artifacts deleted."""
        self._unlist(files, exact=True)
        crash_point("prune-after-unlist")
        gone = []
        for f in files:
            path = self.file_path(f)
            if path.is_file() and sha256_of(path) == f.sha256:
                path.unlink()
                gone.append(f.artifact)
        crash_point("prune-after-delete")
        if files:
            self.publish(progress)
        return gone

    def _unlist(self, files: Sequence[ChannelFile], exact: bool = False) -> None:
        by_subdir: dict[str, set[str]] = {}
        for f in files:
            by_subdir.setdefault(f.subdir, set()).add(f.filename)
        sha = {(f.subdir, f.filename): f.sha256 for f in files}
        for subdir, names in sorted(by_subdir.items()):
            path = self.path / subdir / REPODATA
            if exact and not path.is_file():
                continue  # nothing indexed there (any more)
            data = read_repodata(path)
            changed = False
            for key in ("packages", "packages.conda"):
                section = data.get(key) or {}
                kept = {k: v for k, v in section.items() if k not in names
                        or (exact and (v or {}).get("sha256") != sha[(subdir, k)])}
                changed |= len(kept) != len(section)
                data[key] = kept
            if changed or not exact:
                atomic_write_text(path, json.dumps(data, separators=(",", ":"), sort_keys=True))

    def _move_out(self, path: Path, subdir: str) -> Path:
        target_dir = self.retired_dir / subdir
        target_dir.mkdir(parents=True, exist_ok=True)
        dest, n = target_dir / path.name, 1
        while dest.exists():
            dest, n = target_dir / f"{path.name}.{n}", n + 1
        shutil.move(str(path), str(dest))
        return dest
