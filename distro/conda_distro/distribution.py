"""A distribution repository, loaded: distro.yaml + every recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conda_distro.config import DISTRO_FILE, DistroRepo, find_root, load_config
from conda_distro.errors import DistroError, RecipeError
from conda_distro.recipe.model import Recipe, RecipeFile, parse_recipes, read_recipe_text, scan_recipes
from conda_distro.recipe.render import RenderSettings
from conda_distro.recipe.variants import recipe_settings, render_settings
from conda_distro.util.fsutil import paused_gc


@dataclass(frozen=True)
class Unreadable:
    """A recipe that cannot be read or rendered (its folder name is all that is known of its package)."""

    recipe: str  # the folder
    path: str | None
    line: int | None
    message: str
    hint: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"recipe": self.recipe, "path": self.path, "line": self.line, "message": self.message, "hint": self.hint}


@dataclass(frozen=True)
class BlockedRecipe:
    """A readable recipe left out because it depends (maybe through others) on an unreadable one."""

    name: str
    by: str  # the unreadable recipe's folder

    @property
    def reason(self) -> str:
        return f"depends on unreadable recipe {self.by}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "by": self.by, "reason": self.reason}


@dataclass(frozen=True)
class Exclusions:
    """What commands leave out of a distribution with unreadable recipes (:meth:`Distribution.readable`)."""

    unreadable: tuple[Unreadable, ...] = ()
    blocked: tuple[BlockedRecipe, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.unreadable or self.blocked)

    def to_dict(self) -> dict[str, Any]:
        """``{unreadable: [...], blocked: [...]}`` as the JSON outputs carry them."""
        return {"unreadable": [u.to_dict() for u in self.unreadable], "blocked": [b.to_dict() for b in self.blocked]}


@dataclass
class Distribution:
    distro: DistroRepo
    recipes: dict[str, Recipe]  # by folder name
    errors: list[DistroError] = field(default_factory=list)  # recipes that could not be loaded
    settings: RenderSettings = field(default_factory=RenderSettings)  # what the recipes were rendered with
    #: :func:`repository_state` of the files it was read from (None: not read from disk as one state)
    loaded_state: tuple | None = None

    def changed_on_disk(self) -> bool:
        """Were distro.yaml or a recipe written since this was read (or is that unknown)? A command that
        read it before taking the repository's lock reads it again under the lock when so."""
        return self.loaded_state is None or repository_state(self.root) != self.loaded_state

    @property
    def root(self) -> Path:
        return self.distro.root

    @property
    def config(self):
        return self.distro.config

    @property
    def names(self) -> set[str]:
        return set(self.recipes)

    def raise_errors(self) -> None:
        """Raise the first recipe error (for callers that cannot work around an unreadable recipe)."""
        if self.errors:
            first = self.errors[0]
            if len(self.errors) > 1:
                more = f"{len(self.errors) - 1} more recipe error(s): run `conda-distro lint`"
                first.hint = (first.hint + "; " if first.hint else "") + more
            raise first

    def get(self, name: str) -> Recipe:
        try:
            return self.recipes[name]
        except KeyError:
            import difflib

            close = difflib.get_close_matches(name, sorted(self.recipes), n=1)
            raise RecipeError(f"no recipe named '{name}' in {self.distro.recipes_dir}",
                              hint=f"did you mean '{close[0]}'?" if close else "see `conda-distro graph` for the names") from None

    @property
    def broken(self) -> dict[str, DistroError]:
        """folder name -> why its recipe cannot be read or rendered."""
        out: dict[str, DistroError] = {}
        for e in self.errors:
            out.setdefault(folder_of(e, self.distro.recipes_dir), e)
        return out

    def blocked_by_broken(self) -> dict[str, str]:
        """Readable recipes that depend (host/run/build, any output) on an unreadable one: name -> the
        unreadable recipe's folder. The folder name is all that is known of a recipe that cannot be
        rendered, so that is what dependents are matched on; the block is transitive."""
        broken = set(self.broken)
        if not broken:
            return {}
        owner = {out: folder for folder, r in self.recipes.items() for out in r.output_names}
        out: dict[str, str] = {}
        changed = True
        while changed:
            changed = False
            for name, recipe in self.recipes.items():
                if name in out:
                    continue
                for dep in recipe.dep_names("build", "host", "run"):
                    if dep in recipe.output_names:
                        continue
                    folder = owner.get(dep)
                    if folder is None and dep in broken:
                        out[name] = dep
                    elif folder in out:
                        out[name] = out[folder]
                    else:
                        continue
                    changed = True
                    break
        return out

    def readable(self) -> Distribution:
        """The distribution without its unreadable recipes and the recipes that depend on them: what
        commands carry on with (they report the rest, see :meth:`unreadable` / :meth:`blocked_by_broken`)."""
        if not self.errors:
            return self
        blocked = self.blocked_by_broken()
        keep = {n: r for n, r in self.recipes.items() if n not in blocked}
        return Distribution(self.distro, keep, [], self.settings, self.loaded_state)

    def exclusions(self) -> Exclusions:
        """What :meth:`readable` left out: the recipes that cannot be read or rendered, and their dependents."""
        return Exclusions(
            unreadable=tuple(Unreadable(folder, e.path, e.line, e.message, e.hint) for folder, e in sorted(self.broken.items())),
            blocked=tuple(BlockedRecipe(n, b) for n, b in sorted(self.blocked_by_broken().items())))

    def notices(self) -> list[str]:
        """What commands print on stderr about the recipes they leave out: every recipe that cannot be
        read or rendered (file:line, rattler-build's message), then the recipes blocked by them."""
        return [*(f"error: {e}" for e in self.errors),
                *(f"blocked: {b.name} {b.reason}" for b in self.exclusions().blocked)]

    def check_names(self, names: list[str] | tuple[str, ...]) -> None:
        """Each name is a recipe of the distribution, readable or not (a misspelt name raises
        :class:`RecipeError` with a did-you-mean hint, exit 2)."""
        for n in names:
            if n not in self.recipes and not any(e.path and n in e.path for e in self.errors):
                self.get(n)

    def folder_of_package(self, name: str) -> str:
        """The recipe folder ``name`` names: a folder itself, or a package name that exactly one readable
        recipe produces (an output of a multi-output recipe: what the gate's advice and channel files
        name); else ``name`` unchanged (:meth:`require` then says what is wrong)."""
        if name in self.recipes:
            return name
        makers = [folder for folder, r in self.recipes.items() if name in r.output_names]
        return makers[0] if len(makers) == 1 else name

    def require(self, names: list[str] | tuple[str, ...]) -> None:
        """Named targets must exist and be readable (exit 2 otherwise)."""
        broken = self.broken
        for n in names:
            if n in broken:
                raise broken[n]
            self.get(n)


def folder_of(error: DistroError, recipes_dir: Path) -> str:
    """The recipe folder an error is about (its path's folder under recipes/)."""
    if error.path:
        p = Path(error.path)
        try:
            return p.resolve().relative_to(recipes_dir.resolve()).parts[0]
        except (ValueError, IndexError):
            return p.parent.name
    return "?"


def open_distro(root: Path | None) -> DistroRepo:
    return load_config(root.resolve() if root else find_root(Path.cwd()))


def repository_state(root: Path, recipes: list[RecipeFile] | None = None) -> tuple:
    """distro.yaml and every recipe file as stat data (inode, mtime, size): what a sweep edits. Any write
    (an atomic replace, a git checkout) changes it. ``recipes``: :func:`scan_recipes` of ``root``'s
    recipes folder when the caller has made it (one pass serves both)."""
    try:
        st = (root / DISTRO_FILE).stat()
        top: tuple | None = (st.st_ino, st.st_mtime_ns, st.st_size)
    except OSError:
        top = None
    if recipes is None:
        recipes = scan_recipes(root / "recipes")
    return (top, *((f.folder, f.state) for f in recipes))


def load_distribution(root: Path | None = None, *, strict: bool = True, distro: DistroRepo | None = None) -> Distribution:
    """Load distro.yaml and every recipe. ``strict`` raises the first recipe error; otherwise errors are
    collected so that lint can still report on the rest. The result records the files' state
    (:meth:`Distribution.changed_on_disk`), unless they were written while it read them.

    The recipes folder is scanned once (:func:`scan_recipes`: each folder's entries and its recipe's
    stat); every recipe text is read (the caches are keyed by content, never by modification time: an
    edit that keeps the size and the time stamp is still seen), and the folder is scanned again for the
    state afterwards."""
    top = distro.root if distro is not None else (root.resolve() if root else find_root(Path.cwd()))
    scanned = scan_recipes(top / "recipes", contents=True)
    before = repository_state(top, scanned)
    if distro is None:
        distro = load_config(top)
    errors: list[DistroError] = []
    texts: list[tuple[str, Path]] = []
    listing: dict[str, frozenset[str]] = {}
    for found in scanned:
        path = found.path
        try:
            texts.append((read_recipe_text(path, found), path))
        except DistroError as exc:
            errors.append(exc)
        if found.names is not None:
            listing[found.folder] = found.names
    dist = distribution_of_texts(distro, texts, errors, listing=listing)
    dist.loaded_state = before if repository_state(distro.root) == before else None
    if strict:
        dist.raise_errors()
    return dist


@paused_gc()
def distribution_of_texts(distro: DistroRepo, texts: list[tuple[str, Path]],
                          errors: list[DistroError] | None = None, *,
                          listing: dict[str, frozenset[str]] | None = None) -> Distribution:
    """The distribution ``distro`` with these recipe texts ((text, path) each), rendered as rattler-build
    renders them; the recipes that cannot be rendered join ``errors``. ``listing``: folder name -> its
    entries, for the folders the caller listed (variant files beside a recipe are not looked up again)."""
    settings = render_settings(distro)
    errors = list(errors or ())
    keep = (distro.config.pytorch.name,)
    items: list[tuple[str, Path, RenderSettings]] = []
    for text, path in texts:
        try:
            items.append((text, path, recipe_settings(settings, path.parent, keep=keep,
                                                      listing=(listing or {}).get(path.parent.name))))
        except DistroError as exc:  # (a variant file beside the recipe that cannot be read)
            errors.append(exc)
    recipes: dict[str, Recipe] = {}
    for (_, path, _), outcome in zip(items, parse_recipes(items, owner=str(distro.root)), strict=True):
        if isinstance(outcome, DistroError):
            errors.append(outcome)
        else:
            recipes[path.parent.name] = outcome
    return Distribution(distro, recipes, errors, settings)
