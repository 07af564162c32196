"""The lint cache: the findings of a recipe's recipe-scope checks, kept per recipe so that a recipe that did
not change is not linted again.

A check declares ``scope = "recipe"`` when its findings depend only on

* the recipe as rendered (its text + the variant configuration + the target platform + rattler-build's
  version: the packed model cache's key, :func:`conda_distro.recipe.model.model_key`) and where it stands
  (its path as the distribution lists it, ``<root>/recipes/<folder>/recipe.yaml``; a recipe folder that
  is a symbolic link and is pointed elsewhere between two runs keeps the path its findings were reported
  with until the recipe changes: lint reports paths relative to the distribution, and a link out of it is
  refused by the source-path checks, which always run),
* the lint configuration: distro.yaml (policy, the PyTorch releases, ...), the run_exports of the local
  upstream channels, the selected check ids, and the tool's own code (the files of every loaded
  ``conda_distro`` module, by path, size and modification time: an edited check never answers from the
  cache),
* which of the recipe's own requirement names are packages of the distribution (``ctx.names`` as the
  recipe sees it).

Everything else, e.g. checks over other recipes (the graph, lags behind dependencies), package owners
and files on disk, is ``scope = "distribution"`` (the default) and runs on every lint. An entry's key
is a hash of all of the above; a stale entry is never found, only left to age out of the pack.

Entries live in one :class:`~conda_distro.util.cachedir.PackedCache` per distribution, beside the
model packs (``<render cache>/packs/lint<schema>-<hash of the distribution folder>.pack``): a corrupt,
truncated or foreign file reads as empty (everything is linted again and the file rewritten).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from conda_distro.lint.base import Finding, LintCheck, lint_recipe
from conda_distro.lint.context import LintContext
from conda_distro.recipe.model import MAX_PACKS, PACK_UNUSED_DAYS, PACKS, Recipe, model_key
from conda_distro.util.cachedir import PackedCache, prune_packs

LINT_SCHEMA = "2"  # bump when what a cached finding holds changes
RECIPE_SCOPE = "recipe"


def lint_pack_file(folder: Path, owner: str) -> Path:
    digest = hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return folder / PACKS / f"lint{LINT_SCHEMA}-{digest}.pack"


def code_digest() -> str:
    """The tool's code as it is loaded: path, size and modification time of every ``conda_distro`` module's
    file (a few hundred ``stat`` calls; a checkout or an edit changes it)."""
    h = hashlib.sha256()
    for name in sorted(sys.modules):
        if name != "conda_distro" and not name.startswith("conda_distro."):
            continue
        path = getattr(sys.modules[name], "__file__", None)
        if not path:
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


class LintCache:
    """For one lint run over one distribution: the cached findings of the recipe-scope ``local`` checks of
    each recipe, and which of the distribution-scope ``rest`` apply to it (:meth:`LintCheck.applies`)."""

    def __init__(self, pack: PackedCache | None, ctx: LintContext, local: list[LintCheck], rest: list[LintCheck]) -> None:
        self.pack = pack
        self.ctx = ctx
        self.local = local
        self.rest = rest
        self.stored = pack.load() if pack is not None else {}
        self.fresh: dict[str, tuple[tuple[Finding, ...], tuple[str, ...]]] = {}
        self.used: list[str] = []
        config = json.dumps([LINT_SCHEMA, [c.id for c in local], [c.id for c in rest], str(ctx.distro.root),
                             ctx.distro.config.model_dump(mode="json"),
                             sorted((k, sorted(v.items())) for k, v in ctx.upstream_run_exports.items()),
                             code_digest()], sort_keys=True, default=str)
        self.config_digest = hashlib.sha256(config.encode()).hexdigest()

    @classmethod
    def open(cls, cache_dir: Path | None, owner: Path, ctx: LintContext, checks: list[LintCheck]) -> LintCache:
        """The lint cache of the distribution at ``owner`` under the render cache ``cache_dir`` (None: no
        cache, every recipe is linted), for ``checks``."""
        local, rest = recipe_scoped(checks)
        pack = PackedCache(lint_pack_file(cache_dir, str(owner)), allowed=(Finding,)) if cache_dir is not None else None
        return cls(pack, ctx, local, rest)

    def key(self, recipe: Recipe) -> str | None:
        if self.pack is None or recipe.settings is None or recipe.path is None:
            return None
        content = model_key(recipe.text, recipe.settings)
        if content is None:
            return None
        names = self.ctx.names
        seen = {d.name for ds in recipe.requirements.values() for d in ds}
        seen.update(d.name for d in recipe.run_exports)
        seen.update(recipe.output_names)
        seen.add(recipe.name)
        payload = "\0".join([self.config_digest, content, str(recipe.path), *sorted(n for n in seen if n in names)])
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()

    def findings(self, recipe: Recipe) -> list[Finding]:
        """Every finding of the checks for ``recipe``: the recipe-scope ones from the cache when its key is
        there (else computed and kept), then the distribution-scope checks that apply to it."""
        key = self.key(recipe)
        hit = self.stored.get(key) if key is not None else None
        if key is not None and hit is not None and _valid(hit):
            self.used.append(key)
            found, applying = list(hit[0]), set(hit[1])
        else:
            found = lint_recipe(recipe, self.ctx, self.local)
            applying = {c.id for c in self.rest if c.applies(recipe, self.ctx)}
            if key is not None:
                self.fresh[key] = (tuple(found), tuple(sorted(applying)))
        return found + lint_recipe(recipe, self.ctx, [c for c in self.rest if c.id in applying])

    def save(self) -> None:
        """Write the new entries (one write, only when there are any)."""
        if self.pack is None or not self.fresh:
            return
        self.pack.update(self.fresh, used=self.used, drop_after=PACK_UNUSED_DAYS * 86400)
        prune_packs(self.pack.path.parent, MAX_PACKS, spare=self.pack.path)


def _valid(entry: object) -> bool:
    """An entry as :meth:`LintCache.findings` writes it (anything else in a pack is a miss)."""
    return (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], tuple) and isinstance(entry[1], tuple)
            and all(type(f) is Finding for f in entry[0]) and all(isinstance(i, str) for i in entry[1]))


def recipe_scoped(checks: list[LintCheck]) -> tuple[list[LintCheck], list[LintCheck]]:
    """(the checks of recipe scope, the others), each in the given order."""
    return ([c for c in checks if c.scope == RECIPE_SCOPE], [c for c in checks if c.scope != RECIPE_SCOPE])
