"""The plan job's renders, handed to the other jobs of a run (rendered once, not once per job).

Rendering every recipe is rattler-build's jinja only (no recipe code runs), and the render cache is
content-addressed: an entry ``<key[:2]>/<key>.json``, and each model in a distribution's packed cache
``packs/<schema>-<owner>.pack`` (read by a restricted unpickler that builds plain data and the model's
own classes only: never code), is keyed by the sha256 of the render settings (variant configuration,
target platform, rattler-build version) and the recipe's text, so it can only ever answer for the exact
text it was rendered from. A pack's file is named by the distribution's folder; the taker installs the
plan job's pack under its own folder's name (on GitHub every job's checkout is at the same path anyway).

The plan job (no recipe code) renders the distribution anyway to cut the shards; :func:`write_renders`
copies those entries into a folder with a manifest (``renders.json``: this run, this checkout's HEAD, each file's sha256), uploaded as the
``renders`` artifact. A shard or fan-in job takes it with :func:`take_renders` before it reads a recipe,
and checks first, as it checks shard bundles: the manifest names this run and this checkout's HEAD; the
folder holds the manifest and regular files named as cache entries only, exactly the manifest's, each
with its sha256. Any miss is a :class:`~conda_distro.errors.ShardError` (exit 2) and nothing is taken.
A job whose recipes differ from the plan job's (the release sweep's shards edit pins before building)
simply misses those entries and renders them itself.

The checks prove the folder is this run's, for this commit, unaltered since its manifest was written;
what a model in it says is believed as the plan job wrote it (a key names a text, it does not prove a
model). That rests on who can upload ``renders``: only the plan job (no recipe code), before any shard
job starts, and a run's artifact names are taken once.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from conda_distro.errors import ShardError
from conda_distro.recipe.variants import RENDER_CACHE
from conda_distro.util.cachedir import default_cache_dir
from conda_distro.util.fsutil import atomic_write_text, hash_file, link_or_copy, read_bounded_text
from conda_distro.util.gitutil import find_repo, head_sha

RENDERS_MANIFEST = "renders.json"
_ENTRY = re.compile(r"([0-9a-f]{2})/(\1[0-9a-f]{62})\.json")  # the render cache's layout (recipe/render.py)
PACK = "pack"  # the distribution's packed models (recipe/model.py's pack_file), as carried in the folder
_HINT = "run the workflow again; the renders are only what this run's plan job uploaded"
_MAX_MANIFEST = 64 * 1024 * 1024


class RendersManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: str = Field(min_length=1, max_length=200)
    head: str | None = None
    files: dict[str, str] = Field(default_factory=dict)  # "<xx>/<key>.json" or "pack" -> sha256


@dataclass
class RendersResult:
    """What was written or taken: the folder and how many entries."""

    folder: Path
    entries: int
    taken: bool = False
    exit_code: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"folder": str(self.folder), "entries": self.entries, "taken": self.taken}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    hash_file(path, h, error=ShardError)
    return h.hexdigest()


def _head(root: Path) -> str | None:
    repo = find_repo(root, with_commit=True)
    return head_sha(repo) if repo is not None else None


def cache_folder() -> Path:
    """Where renders are cached (and taken into): the tool cache's render folder."""
    return default_cache_dir() / RENDER_CACHE


def _pack_of(cache: Path, root: Path) -> Path:
    from conda_distro.config import find_root
    from conda_distro.recipe.model import pack_file

    return pack_file(cache, str(find_root(root)))


def write_renders(out: Path, run: str, root: Path, cache: Path | None = None) -> RendersResult:
    """The render cache's entries (``cache``, default :func:`cache_folder`) and the packed models of the
    distribution at ``root`` copied to ``out`` (emptied first) with their manifest: this run, this
    checkout's HEAD, each file's sha256."""
    cache = cache or cache_folder()
    if out.is_dir():
        for p in sorted(out.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    if cache.is_dir():
        for p in sorted(cache.glob("??/*.json")):
            rel = p.relative_to(cache).as_posix()
            if not _ENTRY.fullmatch(rel) or not stat.S_ISREG(p.lstat().st_mode):
                continue
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            link_or_copy(p, out / rel)
            files[rel] = _sha256(out / rel)
    pack = _pack_of(cache, root)
    if pack.is_file() and not pack.is_symlink():
        link_or_copy(pack, out / PACK)
        files[PACK] = _sha256(out / PACK)
    manifest = RendersManifest(run=run, head=_head(root), files=files)
    atomic_write_text(out / RENDERS_MANIFEST, manifest.model_dump_json(indent=1) + "\n")
    return RendersResult(out, len(files))


def check_renders(folder: Path, run: str, root: Path) -> RendersManifest:
    """The renders folder checked (module docstring); its manifest."""
    def bad(message: str) -> ShardError:
        return ShardError(f"renders {folder}: {message}", path=folder, hint=_HINT)

    if not (folder / RENDERS_MANIFEST).is_file() or (folder / RENDERS_MANIFEST).is_symlink():
        raise bad(f"no {RENDERS_MANIFEST}")
    try:
        manifest = RendersManifest.model_validate_json(read_bounded_text(folder / RENDERS_MANIFEST, _MAX_MANIFEST,
                                                                         error=ShardError, hint=_HINT))
    except ValidationError as exc:
        raise bad(f"{RENDERS_MANIFEST} is not a renders manifest ({exc.error_count()} error(s))") from None
    if manifest.run != run:
        raise bad(f"they are of run {manifest.run!r}, not this run ({run!r})")
    head = _head(root)
    if manifest.head != head:
        raise bad(f"they were rendered from commit {manifest.head}, this checkout is {head}")
    present: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath, name)
            rel = p.relative_to(folder).as_posix()
            mode = p.lstat().st_mode
            if stat.S_ISDIR(mode) and re.fullmatch(r"[0-9a-f]{2}", rel):
                continue
            if not stat.S_ISREG(mode) or not (rel in (RENDERS_MANIFEST, PACK) or _ENTRY.fullmatch(rel)):
                raise bad(f"{rel} is not a render cache entry (only regular files <xx>/<sha256>.json and {PACK})")
            if rel != RENDERS_MANIFEST:
                present.add(rel)
    if present != set(manifest.files):
        extra, missing = sorted(present - set(manifest.files)), sorted(set(manifest.files) - present)
        raise bad(f"files differ from the manifest (not listed: {extra[:3]}; missing: {missing[:3]})")
    for rel, sha in sorted(manifest.files.items()):
        if _sha256(folder / rel) != sha:
            raise bad(f"{rel}: sha256 differs from the manifest's")
    return manifest


def take_renders(folder: Path, run: str, root: Path, cache: Path | None = None) -> RendersResult:
    """The plan job's renders, checked (:func:`check_renders`), into the render cache (``cache``,
    default :func:`cache_folder`; the pack as the pack of the distribution at ``root``); files already
    there are kept (a cache of this job's own is never replaced)."""
    manifest = check_renders(folder, run, root)
    cache = cache or cache_folder()
    for rel in sorted(manifest.files):
        dst = _pack_of(cache, root) if rel == PACK else cache / rel
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            link_or_copy(folder / rel, dst)
    return RendersResult(folder, len(manifest.files), taken=True)
