"""Main's packages as `conda-distro watch` reads them: a local folder, or a remote channel.

A local main (a folder) is read as it is: its repodata lists the files, which lie beside it.

A remote main (``anaconda://OWNER[/LABEL]``, the production setting, read at ``anaconda.conda_url``) is
read the way the sandboxes read a remote upstream channel (:mod:`conda_distro.engine.mirror`):

* its ``repodata.json`` of every subdir is downloaded once per watch (at most what a local channel's may
  hold, :data:`conda_distro.util.jsonio.MAX_BYTES`, :data:`READ_TIMEOUT` seconds without progress), and validated as a local channel's is;
* each file the watch re-tests is downloaded into the mirror store (one lock per file, with a timeout),
  and kept only when its bytes have the sha256 the repodata gives; a file whose bytes differ is refused
  (an ``error`` of that package, never a verdict): nothing the file contains decides what is tested or
  what passed;
* the sandboxes read main through a mirror view as they read remote upstream channels: what a test
  environment installs from main is fetched and checked the same way.

The files re-tested are linked into a folder of the watch's private work folder (the sandbox's read-only
"staging"), which goes with it.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conda_distro.channels.base import ChannelFile
from conda_distro.channels.local import LocalChannel
from conda_distro.channels.repodata import parse_repodata
from conda_distro.errors import ChannelError, UsageError
from conda_distro.util.fsutil import link_or_copy
from conda_distro.util.jsonio import MAX_BYTES, loads_checked

READ_TIMEOUT = 120  # seconds without progress before a repodata download is given up


class MainFileError(Exception):
    """A file of main could not be had with the bytes main's repodata names (not fetched, another sha256)."""


@dataclass
class WatchMain:
    """Main as the watch reads it: ``url`` for solves and sandboxes, ``files`` by artifact, ``folder``
    where the files re-tested lie (a sandbox's read-only staging), ``remote`` the mirror's view of a
    remote main (None: main is local)."""

    ref: str
    url: str
    files: dict[str, ChannelFile]
    folder: Path
    remote: Any = None  # engine.mirror.RemoteChannel
    store: Any = None  # engine.mirror.MirrorStore

    def path_of(self, f: ChannelFile) -> Path:
        """The file of ``f`` on this machine. A remote one is fetched into the mirror store, checked against
        the sha256 main's repodata gives, and linked into :attr:`folder`. Raises :class:`MainFileError`."""
        if self.remote is None:
            path = self.folder / f.subdir / f.filename
            if not path.is_file():
                raise MainFileError(f"{f.artifact}: main's repodata lists it but the file is missing")
            return path
        from conda_distro.engine.mirror import MirrorError
        from conda_distro.engine.needs import NeededRecord

        if not f.sha256:
            raise MainFileError(f"{f.artifact}: main's repodata gives no sha256 for it, so its bytes cannot be checked")
        rec = NeededRecord(url=f"{self.remote.base}{f.subdir}/{f.filename}", file_name=f.filename, subdir=f.subdir,
                           channel=self.remote.base, sha256=f.sha256, size=f.size)
        try:
            stored = Path(self.store.fetch(rec))
        except MirrorError as exc:
            raise MainFileError(f"main's {exc}") from None
        dest = self.folder / f.subdir / f.filename
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists():
            link_or_copy(stored, dest)
        return dest


def open_main(dist: Any) -> WatchMain:
    """``dist``'s main channel for the watch. A local main must exist with packages in it; a remote one must
    answer (its :attr:`WatchMain.folder` is then set by the caller: a folder of its own private one).
    Errors (exit 2) name ``channels.main``."""
    ref = dist.config.channels.main
    distro = dist.distro
    if not distro.is_anaconda(ref):
        from conda_distro.engine.run import main_channel

        folder = main_channel(dist)
        if folder is None or not (folder / "noarch" / "repodata.json").is_file():
            raise UsageError("watch needs a main channel with packages in it", field="channels.main",
                             hint="promote something first (`conda-distro promote`)")
        return WatchMain(ref, folder.as_uri(), LocalChannel(folder, subdirs=distro.subdirs).list_files(), folder)
    from rattler import Channel

    from conda_distro.engine.mirror import MirrorStore, RemoteChannel, shown_url

    url = distro.channel_url(ref)
    remote = RemoteChannel(-1, ref, url, str(Channel(url).base_url).rstrip("/") + "/")
    files: dict[str, ChannelFile] = {}
    answered = False
    for subdir in distro.subdirs:
        doc = read_repodata(f"{remote.base}{subdir}/repodata.json", ref)
        if doc is None:
            continue
        answered = True
        files.update(parse_repodata(Path(f"{shown_url(remote.base)}{subdir}/repodata.json"), subdir, doc))
    if not answered:
        raise ChannelError(f"the main channel '{ref}' ({shown_url(url)}) serves no repodata.json for any of "
                           f"{', '.join(distro.subdirs)}", field="channels.main",
                           hint="check channels.main and anaconda.conda_url in distro.yaml, and promote something first")
    if not files:
        raise UsageError(f"the main channel '{ref}' holds no packages", field="channels.main",
                         hint="promote something first (`conda-distro promote`)")
    return WatchMain(ref, url, files, distro.build_dir / "watch" / "main", remote, MirrorStore())


def read_repodata(url: str, ref: str) -> dict[str, Any] | None:
    """One subdir's repodata of the remote channel ``ref`` (main, or an upstream channel bisection reads), bounded
    (None: the server has none for it, HTTP 404)."""
    from conda_distro.engine.mirror import shown_url

    def fail(why: str) -> ChannelError:
        return ChannelError(f"cannot read the main channel '{ref}': {shown_url(url)}: {why}", field="channels.main",
                            hint="check channels.main and anaconda.conda_url in distro.yaml, and the network")

    limit = MAX_BYTES["repodata"]
    try:
        with urllib.request.urlopen(url, timeout=READ_TIMEOUT) as resp:  # noqa: S310 - an http(s) channel URL
            data = resp.read(limit + 1)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise fail(f"HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        raise fail(str(exc) or type(exc).__name__) from None
    if len(data) > limit:
        raise fail(f"larger than {limit >> 20} MiB")
    try:
        doc = loads_checked(data)
    except ValueError as exc:
        raise fail(f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise fail("not a JSON object")
    return doc


__all__ = ["MainFileError", "WatchMain", "open_main", "read_repodata"]
