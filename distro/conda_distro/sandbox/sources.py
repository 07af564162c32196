"""Recipe sources, fetched once into a cache and checked against the recipes' sha256.

The recipes name PyPI sdists by the conda-forge URL convention
(``https://pypi.org/packages/source/<x>/<name>/<name>-<version>.tar.gz``), which returns 404 from
machines that reach PyPI only through pip's index. pip fetches the same file:
``pip download --no-deps --no-binary :all: NAME==VERSION``. Each file is kept under
``<cache>/sources/<sha256>/<filename>``, so a file is fetched once for every world and a recipe
whose sha256 does not match is reported (never silently built from other bytes).

rattler-build 0.73 keys its own source cache (``<output>/src_cache/``) by a hash of the URL it was
given, so a pre-filled entry cannot stand for the recipe's https URL; the real world therefore points
each recipe's ``url:`` at the cached file (``file://``), keeping its ``sha256:`` (rattler-build still
checks it): the bytes built are the ones the recipe names.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from conda_distro.errors import BridgeError
from conda_distro.upstream.resolve import PipOptions, run_pip

_PYPI_SOURCE = re.compile(r"/packages/source/[^/]/(?P<project>[^/]+)/(?P<file>[^/]+)$")


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
                              field="source.url", hint="the real world fetches PyPI sdists with pip only")
        return m.group("project")


@dataclass(frozen=True)
class SourceFile:
    request: SourceRequest
    path: Path  # the cached file
    fetched: bool


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cached(cache: Path, sha256: str) -> Path | None:
    d = cache / sha256
    files = sorted(d.glob("*")) if d.is_dir() else []
    return files[0] if len(files) == 1 else None


def fetch_sources(requests: Sequence[SourceRequest], cache: Path, pip: PipOptions | None = None) -> tuple[list[SourceFile], float]:
    """Every requested source in the cache (one pip call for the missing ones). Raises
    :class:`BridgeError` naming the recipe when pip finds no sdist or its sha256 differs."""
    pip = pip if pip is not None else PipOptions()
    t0 = time.monotonic()
    out: list[SourceFile] = []
    missing = [r for r in requests if cached(cache, r.sha256) is None]
    if missing:
        with tempfile.TemporaryDirectory(prefix="conda-distro-sources-") as td:
            pins = sorted({f"{r.project}=={r.version}" for r in missing})
            # --no-binary for these projects only: with :all:, pip would also build their build
            # dependencies (setuptools, ninja, torch, ...) from source to prepare metadata
            projects = ",".join(sorted({r.project for r in missing}))
            run_pip(["download", "--no-deps", "--no-binary", projects, "--quiet", "-d", td, *pins], pip,
                     f"download the sdists {' '.join(pins)}")
            got = {_sha256(p): p for p in Path(td).iterdir() if p.is_file()}
            for r in missing:
                src = got.get(r.sha256)
                if src is None:
                    names = ", ".join(p.name for p in got.values() if p.name.lower().startswith(r.project.lower().replace("-", "_"))
                                      or p.name.lower().startswith(r.project.lower()))
                    raise BridgeError(f"pip's sdist of {r.project} {r.version} ({names or 'none'}) does not have the "
                                      f"recipe's sha256 {r.sha256}", path=r.recipe, field="source.sha256",
                                      hint="check the recipe's version and sha256 against PyPI")
                dest = cache / r.sha256 / src.name
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest)
    fetched = {r.sha256 for r in missing}
    for r in requests:
        path = cached(cache, r.sha256)
        assert path is not None
        out.append(SourceFile(r, path, r.sha256 in fetched))
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


__all__ = ["SourceFile", "SourceRequest", "cached", "fetch_sources", "point_recipe_at"]
