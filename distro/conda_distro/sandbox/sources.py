"""Recipe sources, fetched once into a cache and checked against the recipes' sha256.

The recipes name PyPI sdists by the conda-forge URL convention
(``https://pypi.org/packages/source/<x>/<name>/<name>-<version>.tar.gz``), which returns 404 from
machines that reach PyPI only through its index. The file itself is found on PyPI's simple index (its
JSON form, PEP 691: every file of a project with its sha256): the one whose sha256 is the recipe's. It is
downloaded by that URL, checked against the sha256 while it streams, and kept under
``<cache>/sources/<sha256>/<filename>``, so a file is fetched once for every world and a recipe whose
sha256 PyPI does not have is reported (never silently built from other bytes). The real world's lock
records that URL, so later runs download it directly. No build backend runs: pip's way
(``pip download --no-binary``) prepares each sdist's metadata by running its build backend on the host,
and an sdist's backend is code from outside.

rattler-build 0.73 keys its own source cache (``<output>/src_cache/``) by a hash of the URL it was
given, so a pre-filled entry cannot stand for the recipe's https URL; the real world therefore points
each recipe's ``url:`` at the cached file (``file://``), keeping its ``sha256:`` (rattler-build still
checks it): the bytes built are the ones the recipe names.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from conda_distro.errors import BridgeError
from conda_distro.upstream.names import normalize

_PYPI_SOURCE = re.compile(r"/packages/source/[^/]/(?P<project>[^/]+)/(?P<file>[^/]+)$")
SIMPLE_INDEX = "https://pypi.org/simple/{project}/"
TIMEOUT_S = 120.0
MAX_SDIST_BYTES = 1 << 30


@dataclass(frozen=True)
class SourceRequest:
    """One recipe's url source."""

    recipe: Path  # recipe.yaml
    line: int  # the line of its `url:`
    url: str  # as rendered
    sha256: str
    version: str

    @property
    def project(self) -> str:
        m = _PYPI_SOURCE.search(self.url)
        if not m:
            raise BridgeError(f"'{self.url}' is not a PyPI sdist URL", path=self.recipe, line=self.line,
                              field="source.url", hint="the real world fetches PyPI sdists only")
        return m.group("project")


@dataclass(frozen=True)
class SourceFile:
    request: SourceRequest
    path: Path  # the cached file
    url: str  # where it is downloaded from
    fetched: bool


def cached(cache: Path, sha256: str) -> Path | None:
    d = cache / sha256
    files = sorted(p for p in d.glob("*") if not p.name.startswith(".")) if d.is_dir() else []
    return files[0] if len(files) == 1 else None


def locate(r: SourceRequest) -> tuple[str, str]:
    """(URL, file name) of the file with the recipe's sha256 on PyPI's simple index (module docstring)."""
    project = normalize(r.project)
    req = urllib.request.Request(SIMPLE_INDEX.format(project=project),
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310 - a fixed https URL
            doc = json.loads(resp.read())
    except (OSError, ValueError) as exc:
        raise BridgeError(f"PyPI's index of {project} cannot be read: {exc}", path=r.recipe, field="source.url",
                          hint="check the network and retry") from None
    files = doc.get("files") if isinstance(doc, dict) else None
    for f in files or []:
        if isinstance(f, dict) and (f.get("hashes") or {}).get("sha256") == r.sha256:
            url, name = str(f.get("url") or ""), str(f.get("filename") or "")
            if url.startswith("https://") and name and "/" not in name and not name.startswith("."):
                return url, name
    sdists = ", ".join(str(f.get("filename")) for f in files or [] if isinstance(f, dict)
                       and str(f.get("filename", "")).endswith((".tar.gz", ".zip")) and r.version in str(f.get("filename")))
    raise BridgeError(f"PyPI has no file of {project} {r.version} ({sdists or 'no sdist of that version'}) with the "
                      f"recipe's sha256 {r.sha256}", path=r.recipe, field="source.sha256",
                      hint="check the recipe's version and sha256 against PyPI")


def download_verified(url: str, sha256: str, dest: Path) -> int:
    """Download ``url`` to ``dest`` (atomically: a temporary file beside it, renamed) if its bytes have
    ``sha256``; else nothing is kept and :class:`BridgeError` says so. Returns the size."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    h, size = hashlib.sha256(), 0
    fd, tmp = tempfile.mkstemp(prefix=".download-", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:  # noqa: S310
            for chunk in iter(lambda: resp.read(1 << 20), b""):
                size += len(chunk)
                if size > MAX_SDIST_BYTES:
                    raise BridgeError(f"{url} is larger than {MAX_SDIST_BYTES >> 20} MB", hint="check the URL")
                h.update(chunk)
                out.write(chunk)
        if h.hexdigest() != sha256:
            raise BridgeError(f"{url} does not have the sha256 {sha256} (it has {h.hexdigest()})",
                              hint="the file or the record of it was altered: check the recipe and the lock")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as any downloaded file (mkstemp makes it 0600)
        os.replace(tmp, dest)
        return size
    except OSError as exc:
        raise BridgeError(f"cannot download {url}: {exc}", hint="check the network and retry") from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def fetch_sources(requests: Sequence[SourceRequest], cache: Path,
                  known: Mapping[str, str] | None = None) -> tuple[list[SourceFile], float]:
    """Every requested source in the cache, with the URL it comes from. ``known``: sha256 -> URL (the lock's
    record); others are found on PyPI's index (:func:`locate`), also for a file already cached (so with a
    lock that records every source and a warm cache, nothing is asked of the network). Raises
    :class:`BridgeError` naming the recipe when PyPI has no file
    with its sha256."""
    t0 = time.monotonic()
    known = known or {}
    out: list[SourceFile] = []
    for r in requests:
        path = cached(cache, r.sha256)
        if path is not None:  # where it comes from: the lock's record, else PyPI's index
            out.append(SourceFile(r, path, known.get(r.sha256) or locate(r)[0], False))
            continue
        url = known.get(r.sha256)
        name = url.rsplit("/", 1)[-1] if url else None
        if not url or not name or name.startswith(".") or not url.startswith("https://"):
            url, name = locate(r)
        download_verified(url, r.sha256, cache / r.sha256 / name)
        out.append(SourceFile(r, cache / r.sha256 / name, url, True))
    return out, time.monotonic() - t0


def point_recipe_at(text: str, line: int, url: str) -> str:
    """``text`` with the ``url:`` value on ``line`` (1-based) replaced by ``url``; the original is kept
    as a comment."""
    lines = text.splitlines(keepends=True)
    old = lines[line - 1]
    m = re.match(r"^(\s*(?:-\s+)?url:\s*)(\S.*?)(\s*)$", old)
    if not m:
        raise BridgeError(f"line {line} is not a `url:` line: {old.strip()}", field="source.url",
                          hint="the real world can only redirect a single-line url")
    lines[line - 1] = f"{m.group(1)}{url}  # sandbox --real: the cached file of {m.group(2)}\n"
    return "".join(lines)


__all__ = ["SourceFile", "SourceRequest", "cached", "download_verified", "fetch_sources", "locate", "point_recipe_at"]
