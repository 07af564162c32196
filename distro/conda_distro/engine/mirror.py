"""Remote upstream channels, mirrored locally for the sandboxes (which have no network).

A build or test sandbox never sees a remote channel. Before a sandbox runs, the orchestrator (which runs
no recipe code) asks the engines what its environments install (:mod:`.needs`), downloads every such
record of a remote upstream channel into a content-addressed store, and gives the sandbox, in the place
of each remote channel, a **mirror view**: a local channel made for that one sandbox, holding exactly
those records (hard links into the store), indexed with rattler's indexer, with the ``depends`` and
``constrains`` the remote channel serves (its repodata patches) put back over what the files say. The
channel list keeps its order, so strict priority works as before: the mirror of upstream channel N stands
where channel N stood (a remote channel with nothing needed still gets its empty mirror there).

A view holds what the remote channel serves *now* and nothing older: a record the channel has since
removed or patched is never served from a mirror left by an earlier run. Views live in the sandbox's
private folder and go with it.

The store, ``$CONDA_DISTRO_CACHE/mirror/pkgs/<sha256>/<file name>``, keeps each package file once,
checked against the channel's sha256 (or md5) before it is kept, and never downloaded past the size the
channel gives for it (a server sending more is refused without filling the disk); a file used again has its time
renewed, and :func:`prune` (run at the start of every build) removes files unused for
:data:`KEEP_DAYS` days, then the least recently used ones past :data:`MAX_BYTES`, and parts left by a
download killed with -9.

Credentials for a private channel stay outside: solves and downloads happen here, and a view holds
package files and repodata only (no URL of the remote channel is shown to the sandbox).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast
from urllib.parse import unquote, urlparse

from filelock import FileLock, Timeout

from conda_distro.config import Limits
from conda_distro.errors import ConfigError, DistroError
from conda_distro.util.cachedir import default_cache_dir
from conda_distro.util.fsutil import atomic_write_text, link_or_copy, open_regular, read_bounded_text, remove_stale
from conda_distro.util.rattler_env import index_channel

if TYPE_CHECKING:
    from conda_distro.config import DistroRepo
    from conda_distro.engine.needs import NeededRecord

KEEP_DAYS = 30  # a mirrored file unused this long is removed
MAX_BYTES = 50 << 30  # past this, the least recently used files go first
FETCH_TIMEOUT = 300  # seconds without progress before a download is given up
PART_AGE = 86400  # a part file this old was left by a download killed with -9
LOCK = ".lock"  # in a store entry's folder: held while its file is fetched
#: seconds a unit waits for another process's download of the same file (the build limit: a download
#: that takes longer than a whole build is stuck, and the unit fails as infrastructure naming the lock)
LOCK_TIMEOUT = Limits().build_timeout
MAX_ENTRY_BYTES = 1 << 20  # an indexer entry (entry.json) larger than this is not one
ENTRY = "entry.json"  # in a store entry's folder: the indexer's repodata entry for its file
MAX_WANTED = 50  # specs remembered per package (what a sandbox needed beyond the solves)


class MirrorError(Exception):
    """A record could not be mirrored (download failed, bytes not the channel's): infrastructure."""


_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_TOKEN = re.compile(r"/t/[^/\s]+")


def shown_url(text: str) -> str:
    """``text`` (a URL, or a message holding URLs) fit to print: no ``user:password@``, no anaconda.org
    ``/t/<token>`` segment."""
    return _TOKEN.sub("/t/***", _USERINFO.sub("", text))


@dataclass(frozen=True)
class RemoteChannel:
    """An upstream channel that is not a local folder: ``ref`` as distro.yaml writes it, ``url`` as the
    channel list holds it, ``base`` the base URL rattler gives its records (ends with ``/``)."""

    index: int
    ref: str
    url: str
    base: str

    @property
    def slug(self) -> str:
        """The mirror view's folder name: the channel's last path segment and a hash of its URL."""
        name = re.sub(r"[^A-Za-z0-9._+-]", "_", urlparse(self.base).path.rstrip("/").rsplit("/", 1)[-1]).lstrip(".")
        return f"{name or 'channel'}-{hashlib.sha256(self.base.encode()).hexdigest()[:12]}"

    @property
    def field(self) -> str:
        return f"channels.upstream.{self.index}"

    def owns(self, rec: NeededRecord) -> bool:
        chan = rec.channel.rstrip("/") + "/" if rec.channel else ""
        return chan == self.base or (not chan and rec.url.startswith(self.base))


def _base_url(url: str) -> str:
    from rattler import Channel

    return str(Channel(url).base_url).rstrip("/") + "/"


def remote_upstreams(distro: DistroRepo) -> tuple[RemoteChannel, ...]:
    """The upstream channels a sandbox cannot read directly (everything but ``file://``)."""
    out = []
    for i, (ref, url) in enumerate(zip(distro.config.channels.upstream, distro.upstream_urls, strict=True)):
        if not url.startswith("file://"):
            out.append(RemoteChannel(i, ref, url, _base_url(url)))
    return tuple(out)


def check_reachable(distro: DistroRepo, remotes: Sequence[RemoteChannel]) -> None:
    """Every remote upstream channel answers (its repodata can be read); :class:`ConfigError` (exit 2)
    naming the first that does not."""
    import asyncio

    from rattler import Gateway, Subdir

    name = distro.config.pytorch.name
    for ch in remotes:
        try:
            asyncio.run(Gateway().query([ch.url], [Subdir(s) for s in distro.subdirs], [name], recursive=False))
        except Exception as exc:  # noqa: BLE001 - rattler raises several fetch errors
            why = shown_url(str(exc).splitlines()[0]) if str(exc) else type(exc).__name__
            where = "" if ch.url == ch.ref else f" ({shown_url(ch.url)})"
            raise ConfigError(f"upstream channel '{shown_url(ch.ref)}' cannot be reached{where}: {why}",
                              path=distro.path, field=ch.field,
                              hint="build and test sandboxes have no network: what their environments need is "
                                   "mirrored from the upstream channels first, so each must answer (check the "
                                   "URL, the network, and credentials for a private channel)") from None


def store_root() -> Path:
    return default_cache_dir().expanduser().absolute() / "mirror"


@dataclass(frozen=True)
class Mirroring:
    """How one run's sandboxes get the remote upstream channels: the store and the channels to mirror."""

    store: MirrorStore
    remotes: tuple[RemoteChannel, ...]


def mirroring(distro: DistroRepo) -> Mirroring | None:
    """The mirroring of ``distro``'s remote upstream channels (None when every one is local), after
    checking that each answers (:func:`check_reachable`, exit 2)."""
    remotes = remote_upstreams(distro)
    if not remotes:
        return None
    check_reachable(distro, remotes)
    return Mirroring(MirrorStore(), remotes)


class MirrorStore:
    """The content-addressed store of mirrored package files, and the views made from it."""

    def __init__(self, root: Path | None = None, *, lock_timeout: float = LOCK_TIMEOUT) -> None:
        self.root = root or store_root()
        self.pkgs = self.root / "pkgs"
        self.lock_timeout = lock_timeout

    # -------------------------------------------------------------- files

    def fetch(self, rec: NeededRecord) -> Path:
        """``rec``'s file in the store (downloaded when missing, checked against the channel's sha256
        or md5). Raises :class:`MirrorError`."""
        key = rec.sha256 or (f"md5-{rec.md5}" if rec.md5 else None)
        if key is None or not re.fullmatch(r"(md5-)?[0-9a-f]{32,64}", key):
            raise MirrorError(f"{rec.file_name}: the channel gives no sha256 or md5 for it, so its bytes cannot be checked")
        name = re.sub(r"[^A-Za-z0-9._+-]", "_", rec.file_name).lstrip(".") or "package"
        dest = self.pkgs / key / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(dest.parent / LOCK), timeout=self.lock_timeout)
        try:
            lock.acquire()  # units running at once download a file once
        except Timeout:
            raise MirrorError(f"{rec.file_name}: another process has been downloading it for over "
                              f"{self.lock_timeout:g} s and still holds {dest.parent / LOCK}; stop that process "
                              "(the lock is released when it ends) and run again") from None
        try:
            if dest.is_file() and not dest.is_symlink():
                with contextlib.suppress(OSError):
                    os.utime(dest)  # used now: kept by prune
                return dest
            return self._download(rec, dest)
        finally:
            lock.release()

    def _download(self, rec: NeededRecord, dest: Path) -> Path:
        fd, tmp = tempfile.mkstemp(prefix=".part-", dir=self.pkgs)
        try:
            sha, md5 = hashlib.sha256(), hashlib.md5()  # noqa: S324 - md5 only where the channel gives nothing else
            got_bytes = 0
            with os.fdopen(fd, "wb") as out, _open(rec.url) as src:
                while chunk := src.read(1 << 20):
                    got_bytes += len(chunk)
                    if rec.size and got_bytes > rec.size:  # bounded: never more than the channel says
                        raise MirrorError(f"{rec.file_name} from {shown_url(rec.url)} is larger than the {rec.size} "
                                          "bytes the channel says")
                    sha.update(chunk)
                    md5.update(chunk)
                    out.write(chunk)
            got = sha.hexdigest() if rec.sha256 else md5.hexdigest()
            want = rec.sha256 or rec.md5
            if got != want:
                raise MirrorError(f"{rec.file_name} from {shown_url(rec.url)} has {'sha256' if rec.sha256 else 'md5'} "
                                  f"{got}, but the channel says {want}")
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
        except OSError as exc:
            raise MirrorError(f"cannot download {rec.file_name} from {shown_url(rec.url)}: {exc}") from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return dest

    # -------------------------------------------------------------- views

    def views(self, folder: Path, remotes: Sequence[RemoteChannel], records: Iterable[NeededRecord]) -> dict[str, Path]:
        """One view channel per remote channel under ``folder`` (remote URL -> its view), holding the
        ``records`` that channel serves. Raises :class:`MirrorError`."""
        by_channel: dict[str, list[NeededRecord]] = {ch.url: [] for ch in remotes}
        for rec in records:
            owner = next((ch for ch in remotes if ch.owns(rec)), None)
            if owner is not None and all(r.url != rec.url for r in by_channel[owner.url]):
                by_channel[owner.url].append(rec)
        out: dict[str, Path] = {}
        for ch in remotes:
            view = folder / ch.slug
            shutil.rmtree(view, ignore_errors=True)
            recs = by_channel[ch.url]
            index_channel(view, subdirs=sorted({r.subdir for r in recs} - {"noarch"}) or ["linux-64"])  # (empty)
            entries: dict[str, dict[str, dict]] = {}
            for rec in recs:
                stored = self.fetch(rec)
                link_or_copy(stored, view / rec.subdir / rec.file_name)
                entries.setdefault(rec.subdir, {})[rec.file_name] = {
                    **self._entry(rec, stored), "depends": list(rec.depends), "constrains": list(rec.constrains)}
            _add_entries(view, entries)
            out[ch.url] = view
        return out

    def _entry(self, rec: NeededRecord, stored: Path) -> dict:
        """The repodata entry rattler's indexer writes for the stored file, indexed once per file and kept
        beside it (a view is made of such entries: no file is read again)."""
        cached = stored.parent / ENTRY
        if cached.is_file():
            with contextlib.suppress(OSError, ValueError, DistroError):  # (not a regular file: index again)
                entry = json.loads(read_bounded_text(cached, MAX_ENTRY_BYTES))
                if isinstance(entry, dict):
                    return entry
        with tempfile.TemporaryDirectory(prefix=".index-", dir=self.pkgs) as tmp:
            channel = Path(tmp)
            (channel / rec.subdir).mkdir(parents=True)
            link_or_copy(stored, channel / rec.subdir / rec.file_name)
            index_channel(channel, subdirs=[rec.subdir] if rec.subdir != "noarch" else [])
            doc = json.loads((channel / rec.subdir / "repodata.json").read_text(encoding="utf-8"))
        entry = (doc.get("packages.conda") or {}).get(rec.file_name) or (doc.get("packages") or {}).get(rec.file_name)
        if not isinstance(entry, dict):
            raise MirrorError(f"rattler's indexer made no entry for {rec.file_name}: it is not a readable package")
        # a temp file of its own: the tests of one package index the same new file side by side, in
        # threads of one process (a name made of the pid alone let one rename take another's file)
        atomic_write_text(cached, json.dumps(entry))
        return entry

    # -------------------------------------------------------------- what rattler-build asked for beyond our solves

    def want(self, package: str, specs: Iterable[str]) -> None:
        """Remember ``specs`` that a sandbox of ``package`` needed and its mirror lacked: the next
        attempt solves them too (:meth:`wanted`)."""
        path = self._wanted_file(package)
        path.parent.mkdir(parents=True, exist_ok=True)
        # the package's tests remember side by side: read, add and write under one lock, or one's specs are lost
        with FileLock(str(path.parent / LOCK), timeout=self.lock_timeout):  # (one file for every package)
            have = self.wanted(package)
            new = [s for s in dict.fromkeys(specs) if s and s not in have]
            if new:
                atomic_write_text(path, json.dumps((have + new)[-MAX_WANTED:]))

    def wanted(self, package: str) -> list[str]:
        """What sandboxes of ``package`` needed beyond the solves (read: kept by :meth:`prune` for
        another :data:`KEEP_DAYS`)."""
        path = self._wanted_file(package)
        try:
            data = json.loads(read_bounded_text(path, 65535))  # (a FIFO or device: refused, not read)
            os.utime(path)
        except (OSError, ValueError, DistroError):
            return []
        return [s for s in data if isinstance(s, str)] if isinstance(data, list) else []

    def _wanted_file(self, package: str) -> Path:
        return self.root / "wanted" / (re.sub(r"[^A-Za-z0-9._-]", "_", package).lstrip(".") + ".json")

    # -------------------------------------------------------------- cleanup

    def prune(self, keep_days: float = KEEP_DAYS, max_bytes: int = MAX_BYTES) -> list[Path]:
        """Remove files unused for ``keep_days``, then the least recently used past ``max_bytes``, and
        part files of killed downloads. Returns what was removed."""
        now = time.time()
        removed: list[Path] = []
        for stale in (self.root / "wanted").glob("*.json") if (self.root / "wanted").is_dir() else ():
            with contextlib.suppress(OSError):
                if now - stale.stat().st_mtime > keep_days * 86400:
                    stale.unlink()
                    removed.append(stale)
        if not self.pkgs.is_dir():
            return removed
        # part files of killed downloads, and the temp files of entry / wanted writers killed with -9
        wanted_temps = (self.root / "wanted").glob(".*.tmp") if (self.root / "wanted").is_dir() else ()
        removed += remove_stale([*self.pkgs.glob(".part-*"), *self.pkgs.glob(f"*/.{ENTRY}.*.tmp"), *wanted_temps], PART_AGE)
        entries: list[tuple[float, int, Path]] = []
        for folder in self.pkgs.iterdir():
            if not folder.is_dir() or folder.is_symlink():
                continue
            files = [f for f in folder.iterdir() if f.is_file() and f.name not in (LOCK, ENTRY) and not f.name.startswith(".")]
            if not files:  # a download that failed (or was killed) left only its lock
                with contextlib.suppress(OSError):
                    if now - folder.stat().st_mtime > PART_AGE:
                        shutil.rmtree(folder)
                        removed.append(folder)
                continue
            st = [f.stat() for f in files]
            entries.append((max(s.st_mtime for s in st), sum(s.st_size for s in st), folder))
        total = sum(size for _, size, _ in entries)
        for used, size, folder in sorted(entries):
            if now - used > keep_days * 86400 or total > max_bytes:
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
                total -= size
        return removed


def _open(url: str) -> BinaryIO:
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return cast(BinaryIO, open_regular(unquote(parsed.path), error=MirrorError))  # closed by the caller's with
    if parsed.scheme in ("http", "https"):
        return cast(BinaryIO, urllib.request.urlopen(url, timeout=FETCH_TIMEOUT))  # noqa: S310 - scheme checked
    raise MirrorError(f"cannot download {shown_url(url)}: only http, https and file URLs can be mirrored")


def _add_entries(view: Path, entries: dict[str, dict[str, dict]]) -> None:
    """Put the entries (subdir -> file name -> repodata entry) into the view's repodata, as the indexer
    would have, but with the ``depends``/``constrains`` the channel serves: the indexer reads them from
    the files, and a channel may serve others (its repodata patches, e.g. an upper bound added later)."""
    for sub, files in entries.items():
        path = view / sub / "repodata.json"
        doc = json.loads(path.read_text(encoding="utf-8"))
        for fn, entry in files.items():
            doc.setdefault("packages.conda" if fn.endswith(".conda") else "packages", {})[fn] = entry
        tmp = path.with_name(".repodata.json.tmp")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)


__all__ = ["KEEP_DAYS", "MAX_BYTES", "MirrorError", "MirrorStore", "Mirroring", "RemoteChannel", "check_reachable",
           "mirroring", "remote_upstreams", "shown_url", "store_root"]
