"""Where an artifact and a test result came from: the recipe input hash and the git commit.

* The **recipe input hash** of a recipe is the digest of its folder (``recipes/<name>/``: the recipe
  and every file beside it), the same digest the build plan feeds into an artifact's input hash.
* The **commit** is the git commit whose tree holds that recipe as it was built: HEAD when the recipe
  folders involved have no uncommitted change, None otherwise (the recipe was in no commit).

The build engine records both in ``build/results/`` (per artifact: its own recipe; per test: the
recipes of the artifact and of its distribution dependencies); ``promote`` compares them with the
recipes of the checkout it runs in (:class:`CheckoutRecipes`) and holds anything built or tested from
other recipes (``not-from-this-checkout``). Only stdlib and git: promote imports this, not the engine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.errors import RecipeError
from conda_distro.util.fsutil import hash_file
from conda_distro.util.gitutil import find_repo, relpath, status_lines, top_dir


def recipe_digest(folder: Path) -> str:
    """The recipe input hash: sha256 over the folder's files (relative path and content), sorted. A file
    that is no regular file to read (a symbolic link to ``/proc/self/mem`` or to nothing, a FIFO) is a
    :class:`RecipeError` naming it (exit 2)."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if "__pycache__" not in p.parts and not p.is_dir():
            h.update(p.relative_to(folder).as_posix().encode() + b"\0")
            content = hashlib.sha256()
            hash_file(p, content, error=RecipeError, hint="a recipe folder holds regular files only")
            h.update(content.digest())
    return h.hexdigest()


@dataclass
class CheckoutRecipes:
    """The recipes of one checkout, hashed on demand (each folder once)."""

    root: Path
    _cache: dict[str, str | None] = field(default_factory=dict)

    def digest(self, recipe: str) -> str | None:
        """The recipe input hash of ``recipe`` (``recipes/<name>``, relative to the root); None when this
        checkout has no such recipe folder."""
        if recipe not in self._cache:
            folder = self.root / recipe
            ok = ".." not in Path(recipe).parts and not Path(recipe).is_absolute() and folder.is_dir()
            self._cache[recipe] = recipe_digest(folder) if ok else None
        return self._cache[recipe]

    def differing(self, recipes: Mapping[str, str]) -> list[str]:
        """The recipes of ``recipes`` ({folder: recorded hash}) whose hash is not this checkout's."""
        return sorted(r for r, h in recipes.items() if self.digest(r) != h)


@dataclass(frozen=True)
class BuildProvenance:
    """What a build run stamps on its results: the checkout's HEAD and its uncommitted recipe folders."""

    head: str | None = None  # None outside git or before the first commit
    dirty: frozenset[str] = frozenset()  # recipe folders (``recipes/<name>``) with uncommitted changes

    def commit_for(self, recipes: Iterable[str]) -> str | None:
        """The commit that holds ``recipes`` as they are on disk: HEAD if none of them is dirty."""
        return None if any(r in self.dirty for r in recipes) else self.head


def build_provenance(root: Path, recipes_dir: Path) -> BuildProvenance:
    """HEAD and the recipe folders under ``recipes_dir`` that differ from it (tracked or untracked)."""
    repo = find_repo(root, with_commit=True)
    if repo is None:  # not a repo, no commits, no git binary: the commit is unknown
        return BuildProvenance()
    head = repo.head.commit.hexsha
    top = top_dir(repo)
    try:
        rel = relpath(repo, recipes_dir)
        out = status_lines(repo, rel, z=True, untracked_all=True)
    except Exception:  # noqa: BLE001 - recipes outside the repository: nothing of them is committed
        return BuildProvenance(head=None)
    dirty = set()
    base, rdir = root.resolve(), recipes_dir.resolve()
    entries = iter(out.split("\0"))
    paths = []
    for entry in entries:
        if len(entry) > 3:
            paths.append(entry[3:])
            if entry[0] in "RC":  # a rename or copy: its source path follows
                paths.append(next(entries, ""))
    for path in filter(None, paths):
        try:
            name = (top / path).relative_to(rdir).parts[0]
            dirty.add((rdir / name).relative_to(base).as_posix())
        except (ValueError, IndexError):
            continue
    return BuildProvenance(head=head, dirty=frozenset(dirty))


@dataclass(frozen=True)
class Stamp:
    """The provenance one package's unit writes into the results store."""

    recipe: str = ""  # its recipe folder, relative to the root (``recipes/<name>``)
    recipe_hash: str | None = None
    commit: str | None = None  # the commit holding its recipe as built
    test_recipes: tuple[tuple[str, str], ...] = ()  # its recipe and its dependencies' recipes, with hashes
    test_commit: str | None = None  # the commit holding all of those

    @classmethod
    def of(cls, recipes: tuple[tuple[str, str], ...], prov: BuildProvenance) -> Stamp:
        """From a package plan's ``recipes`` (its own first) and the run's :class:`BuildProvenance`."""
        if not recipes:
            return cls()
        own, digest = recipes[0]
        return cls(recipe=own, recipe_hash=digest, commit=prov.commit_for([own]), test_recipes=recipes,
                   test_commit=prov.commit_for(r for r, _ in recipes))
