"""Owned package names: which recipe may publish which package name (as conda-forge's feedstock-outputs
decides which feedstock may upload which name).

A package name belongs to one recipe folder (``recipes/<folder>``). The owner of a name is, first found:

1. **the reviewed file** ``package_owners.yaml`` at the repository root (optional)::

       owners:
         fastquant:                 # the package name
           recipe: fastquant        # the folder under recipes/ that may publish it
           by: octocat              # GitHub handle of who decided it
           reason: moved from recipes/quanttools, which no longer builds it (#42)

   An entry is how a name changes owner (a recipe renamed, an output moved to another recipe): a reviewed
   pull request. It may name a folder that does not exist (the name is then reserved for it);
2. **main's ledger** (``channel_state/<name>.json``): the recipe its newest promoted artifact was built
   from (``recipe`` of each artifact, recorded at promotion from the build's results). Entries promoted
   before the ledger recorded it say nothing here;
3. **the recipe folder named after the package**, when it declares that name;
4. **the one recipe declaring it**: a new name nobody owns belongs to the recipe that declares it.

A recipe declaring a name owned by another recipe, or two recipes declaring one name that none of them
owns (3 and 4 cannot decide), is an ownership *conflict*: ``lint`` (check ``package-owner``) and
``check-pr`` report it naming the owner, ``build`` refuses to start (exit 2), and ``promote`` holds an
artifact whose name is owned by another recipe than the one it was built from (``not-owner``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator

from conda_distro.errors import ConfigError, DistroError
from conda_distro.state.document import StateDocument, StrictModel
from conda_distro.state.ledger import Ledger, PackageState
from conda_distro.util.validation import Handle, check_reason, to_error
from conda_distro.util.yamlio import LDict, load_fast_file

if TYPE_CHECKING:  # pragma: no cover
    from conda_distro.distribution import Distribution

OWNERS_FILE = "package_owners.yaml"
RECIPES = "recipes"
_FOLDER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_NAME_RE = re.compile(r"^[a-z0-9_][a-z0-9_.+-]*$")
_SEE = "see the comment at the top of package_owners.yaml, or docs/add-your-package.md, section \"Owned package names\""
_NEVER = dt.datetime.min.replace(tzinfo=dt.UTC)
Source = Literal["package_owners.yaml", "channel_state", "folder", "declared"]


class _OwnerData(StrictModel):
    model_config = ConfigDict(frozen=True)

    recipe: str
    by: Handle
    reason: str = Field(min_length=1)

    @field_validator("recipe")
    @classmethod
    def _recipe(cls, v: str) -> str:
        v = v.removeprefix(f"{RECIPES}/").rstrip("/")
        if not _FOLDER_RE.match(v) or v in (".", ".."):
            raise ValueError(f"'{v}' is not a recipe folder name (the folder under recipes/, e.g. fastquant)")
        return v

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        return check_reason(v, "say why the name belongs to this recipe")


class _OwnersFile(StateDocument):
    """``package_owners.yaml`` (written by people; ``schema_version`` is optional)."""

    model_config = ConfigDict(frozen=True)
    DOCUMENT = OWNERS_FILE

    owners: dict[str, _OwnerData] = Field(default_factory=dict)

    @field_validator("owners", mode="before")
    @classmethod
    def _owners(cls, v: Any) -> Any:
        if v is None:
            return {}
        if isinstance(v, dict):
            for name in v:
                if not isinstance(name, str) or not _NAME_RE.match(name):
                    raise ValueError(f"'{name}' is not a conda package name (lowercase letters, digits and _ . + -)")
        return v


@dataclass(frozen=True)
class Owner:
    """Who owns one package name, and why."""

    name: str
    recipe: str  # the recipe folder (under recipes/)
    source: Source
    detail: str  # where that is written, for people
    line: int | None = None  # package_owners.yaml: the entry's line

    @property
    def path(self) -> str:
        """``recipes/<folder>``, as results and the ledger name a recipe."""
        return f"{RECIPES}/{self.recipe}"

    def describe(self) -> str:
        return f"{self.path} ({self.detail})"


@dataclass(frozen=True)
class Conflict:
    """A recipe declaring a name it does not own."""

    recipe: str  # the folder in error
    name: str  # the package name
    owner: Owner | None  # None: several recipes declare the name and none of them owns it
    others: tuple[str, ...] = ()  # the other folders declaring the name

    @property
    def message(self) -> str:
        if self.owner is not None:
            return (f"declares package '{self.name}', which belongs to {self.owner.describe()}: "
                    "a recipe may publish only the package names it owns")
        return (f"declares package '{self.name}', which {', '.join(f'{RECIPES}/{o}' for o in self.others)} "
                "declare(s) too, and no recipe owns it: two recipes cannot publish one name")

    @property
    def hint(self) -> str:
        if self.owner is not None:
            return (f"rename this output (or remove it); if '{self.name}' really moves to {RECIPES}/{self.recipe}, "
                    f"give it an entry in {OWNERS_FILE} in a reviewed pull request")
        return (f"keep '{self.name}' in one recipe, or say which recipe owns it in {OWNERS_FILE} "
                "(a reviewed pull request)")


def load_reviewed(root: Path) -> dict[str, Owner]:
    """The entries of ``package_owners.yaml`` at ``root`` (none when there is no such file). A malformed
    file is a :class:`ConfigError` naming the file, the line and the field (exit 2)."""
    path = root / OWNERS_FILE
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        doc = load_fast_file(path)
    except DistroError as exc:  # YAML syntax, duplicate keys, alias bombs, unreadable or special file
        raise ConfigError(exc.message, path=path, line=exc.line, hint=exc.hint or _SEE) from None
    if doc is None:
        return {}
    if not isinstance(doc, LDict):
        raise ConfigError(f"{OWNERS_FILE} must be a mapping with one key, owners: (package name -> owner)",
                          path=path, line=getattr(doc, "line", 1), hint=_SEE)
    _OwnersFile.check_version(doc, path, error=ConfigError)
    try:
        data = _OwnersFile.model_validate(doc)
    except ValidationError as exc:
        raise to_error(exc, doc, path, root=_OwnersFile, error=ConfigError, see=_SEE) from None
    items = doc.get("owners")
    out = {}
    for name, entry in data.owners.items():
        line = items.line_of(name) if isinstance(items, LDict) else doc.line_of("owners")
        out[name] = Owner(name, entry.recipe, "package_owners.yaml",
                          f"{OWNERS_FILE}:{line}, by {entry.by}: {entry.reason.strip()}", line)
    return out


def ledger_owners(states: Mapping[str, PackageState]) -> dict[str, Owner]:
    """name -> the recipe its newest promoted artifact was built from, as main's ledger records it."""
    out = {}
    for name, state in states.items():
        recorded = [a for a in state.artifacts if a.recipe]
        if not recorded:
            continue
        newest = max(recorded, key=lambda a: (a.promoted_at or _NEVER, a.artifact))
        folder = (newest.recipe or "").removeprefix(f"{RECIPES}/")  # (the ledger allows only recipes/<folder>)
        out[name] = Owner(name, folder, "channel_state",
                          f"channel_state/{name}.json: {newest.artifact} was promoted from it")
    return out


@dataclass
class OwnerRegistry:
    """Every package name the repository knows with its owner, and the conflicts of its recipes."""

    owners: dict[str, Owner] = field(default_factory=dict)
    disputed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # name -> the folders declaring it
    conflicts: list[Conflict] = field(default_factory=list)

    def owner_of(self, name: str) -> Owner | None:
        return self.owners.get(name)

    def conflicts_of(self, recipe: str) -> list[Conflict]:
        return [c for c in self.conflicts if c.recipe == recipe]

    def verdicts(self) -> dict[str, Owner | None]:
        """name -> its owner, None for a disputed name: what promote checks each artifact against."""
        return {**dict.fromkeys(self.disputed), **self.owners}


def build_registry(declared: Mapping[str, Iterable[str]], reviewed: Mapping[str, Owner],
                   ledger: Mapping[str, Owner]) -> OwnerRegistry:
    """The registry from the names each recipe folder declares (``{folder: names}``), the reviewed file
    and the ledger (pure; see the module's docstring for the order)."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for folder, names in sorted(declared.items()):
        for name in dict.fromkeys(names):
            by_name[name].append(folder)
    reg = OwnerRegistry(owners={**ledger, **reviewed})
    for name, folders in sorted(by_name.items()):
        if name in reg.owners:
            continue
        if name in folders:
            reg.owners[name] = Owner(name, name, "folder", "the recipe folder named after the package")
        elif len(folders) == 1:
            reg.owners[name] = Owner(name, folders[0], "declared", "the only recipe that declares it")
        else:
            reg.disputed[name] = tuple(folders)
    for name, folders in sorted(by_name.items()):
        owner = reg.owners.get(name)
        for folder in folders:
            if owner is None or owner.recipe != folder:
                reg.conflicts.append(Conflict(folder, name, owner, tuple(f for f in folders if f != folder)))
    return reg


def registry_of(dist: Distribution, states: Mapping[str, PackageState] | None = None) -> OwnerRegistry:
    """The registry of a loaded distribution: its readable recipes' output names, ``package_owners.yaml``
    and main's ledger (``states``: already loaded, or read here)."""
    states = Ledger(dist.distro.state_dir).load_all() if states is None else states
    declared = {folder: r.output_names for folder, r in dist.recipes.items()}
    return build_registry(declared, load_reviewed(dist.root), ledger_owners(states))


class OwnershipError(DistroError):
    """Recipes declare package names they do not own (exit 2: nothing is built)."""


def require_owned(dist: Distribution) -> None:
    """Raise :class:`OwnershipError` naming every conflict of the distribution's recipes (``build``: before
    anything runs)."""
    conflicts = registry_of(dist).conflicts
    if conflicts:
        first = conflicts[0]
        more = "".join(f"; {RECIPES}/{c.recipe} {c.message}" for c in conflicts[1:])
        raise OwnershipError(f"{first.message}{more}", path=dist.distro.recipes_dir / first.recipe / "recipe.yaml",
                             field="package.name", hint=first.hint + "; `conda-distro lint` lists every conflict")
