"""A recipe's url sources, fetched before its build by the orchestrator (which runs no recipe code).

The build sandbox has no network. Each ``source: url:`` of the rendered recipe is put into a
content-addressed cache, ``<cache>/sources/<sha256>/<file name>`` (``$CONDA_DISTRO_CACHE``, default
``~/.cache/conda-distro``): downloaded (``http``/``https``) or copied (``file://``), and kept only when
its sha256 is the recipe's. The build then runs on a copy of the recipe folder whose ``url:`` lines
point at the cached files as the sandbox shows them (rattler-build still checks the sha256 itself).
rattler-build keys its own source cache by URL, so a pre-filled one could not stand in.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote, urlparse

from conda_distro.errors import RecipeError
from conda_distro.recipe.model import Recipe
from conda_distro.recipe.sources import check_sources, point_recipe_at, source_paths
from conda_distro.util.cachedir import default_cache_dir
from conda_distro.util.fsutil import open_regular, remove_stale, sha256_regular

FETCH_TIMEOUT = 120  # seconds without progress before a download is given up
MAX_SOURCE_BYTES = 8 << 30


class SourceFetchError(Exception):
    """A url source could not be fetched, or its bytes are not the recipe's (fails that build)."""


@dataclass(frozen=True)
class UrlSource:
    url: str
    sha256: str
    line: int  # of its source entry in recipe.yaml


@dataclass(frozen=True)
class RecipeInputs:
    """What a recipe's build reads besides the recipe folder: url sources and path sources."""

    urls: tuple[UrlSource, ...] = ()
    paths: tuple[Path, ...] = ()  # `source: path:` entries, resolved (all inside the repository)


def recipe_inputs(recipe: Recipe, root: Path) -> RecipeInputs:
    """The recipe's inputs; :class:`~conda_distro.errors.RecipeError` (exit 2) for a path source outside
    the repository or a url source without sha256."""
    check_sources(recipe, root)
    urls = tuple(UrlSource(s.url, str(s.sha256).lower(), s.line) for s in recipe.sources if s.url and s.sha256)
    for u in urls:  # each url: line can be pointed at the fetched file
        try:
            point_recipe_at(recipe.text, u.line, "file:///cached")
        except RecipeError as exc:
            exc.path = str(recipe.path)
            raise
    return RecipeInputs(urls, tuple(source_paths(recipe)))


def sources_cache() -> Path:
    return default_cache_dir().expanduser().absolute() / "sources"


def _sha256(path: Path) -> str:
    return sha256_regular(path, error=SourceFetchError)


def _file_name(url: str) -> str:
    name = unquote(urlparse(url).path.rstrip("/").rsplit("/", 1)[-1])
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", name).lstrip(".")
    return name[:200] or "source"


def _copy_from(url: str, dest: BinaryIO, limit: int) -> None:
    parsed = urlparse(url)
    if parsed.scheme == "file":
        with open_regular(unquote(parsed.path), error=SourceFetchError) as fin:
            _copy_stream(fin, dest, limit)
    elif parsed.scheme in ("http", "https"):
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT) as resp:  # noqa: S310 - scheme checked
            _copy_stream(resp, dest, limit)
    else:
        raise SourceFetchError(f"cannot fetch {url}: only http, https and file URLs can be fetched before a build")


def _copy_stream(fin: Any, dest: BinaryIO, limit: int) -> None:
    total = 0
    while chunk := fin.read(1 << 20):
        total += len(chunk)
        if total > limit:
            raise SourceFetchError(f"the source is larger than {limit} bytes")
        dest.write(chunk)


def fetch_source(src: UrlSource, cache: Path) -> Path:
    """``src`` in the cache (fetched when missing, its sha256 checked). Raises :class:`SourceFetchError`."""
    if not re.fullmatch(r"[0-9a-f]{64}", src.sha256):
        raise SourceFetchError(f"'{src.sha256}' is not a sha256")
    folder = cache / src.sha256
    entries = list(folder.iterdir()) if folder.is_dir() else []
    remove_stale(p for p in entries if p.name.startswith("."))  # temps of the sandbox's own downloads, killed
    # (never a temp, hidden: a complete one would carry the right bytes under a name rattler-build cannot unpack)
    have = [p for p in entries if not p.name.startswith(".") and p.is_file() and not p.is_symlink()]
    for p in have:
        if _sha256(p) == src.sha256:
            return p
        p.unlink(missing_ok=True)  # not the bytes it is filed under (cut short by a crash): fetch again
    folder.mkdir(parents=True, exist_ok=True)
    remove_stale(cache.glob(".part-*"))  # left by a fetch killed with -9 (a day is longer than any fetch)
    dest = folder / _file_name(src.url)
    fd, tmp = tempfile.mkstemp(prefix=".part-", dir=cache)
    try:
        with os.fdopen(fd, "wb") as fh:
            _copy_from(src.url, fh, MAX_SOURCE_BYTES)
        got = _sha256(Path(tmp))
        if got != src.sha256:
            raise SourceFetchError(f"{src.url} has sha256 {got}, but the recipe says {src.sha256}")
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except OSError as exc:
        raise SourceFetchError(f"cannot fetch {src.url}: {exc}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return dest


def recipe_copy(recipe_dir: Path, dest: Path, urls: dict[int, str]) -> Path:
    """A copy of ``recipe_dir`` at ``dest`` whose url sources (line -> URL) point elsewhere (symlinks are
    copied as links). Returns the copy's recipe.yaml."""
    shutil.copytree(recipe_dir, dest, symlinks=True)
    target = dest / "recipe.yaml"
    text = target.read_text(encoding="utf-8")
    for line in sorted(urls, reverse=True):
        text = point_recipe_at(text, line, urls[line])
    target.unlink()  # (a link in the copy must not lead the write elsewhere)
    target.write_text(text, encoding="utf-8")
    return target


__all__ = ["RecipeInputs", "SourceFetchError", "UrlSource", "fetch_source", "recipe_copy", "recipe_inputs",
           "sources_cache"]
