"""Rules on a recipe's sources that hold before any recipe code runs (build, and lint through
:func:`source_path_problems`).

* A ``source: path:`` must stay inside the repository: an absolute path elsewhere (``/etc``), a
  ``..`` that climbs out, or a symlink that leads out is refused. Builds run sandboxed and show the
  sandbox only the repository's folders the recipe names; a path outside would either be missing there
  or, unsandboxed, read the host.
* A ``source: url:`` needs a ``sha256:``: url sources are fetched by the orchestrator (which runs no
  recipe code) into a content-addressed cache, checked against it, and the sandbox builds a copy of the
  recipe whose ``url:`` points at the cached file (:func:`point_recipe_at`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from conda_distro.errors import RecipeError
from conda_distro.recipe.model import Recipe


@dataclass(frozen=True)
class SourceProblem:
    message: str
    line: int
    field: str


def _resolved(recipe: Recipe, path: str) -> Path:
    p = Path(path).expanduser()
    return Path(os.path.realpath(p if p.is_absolute() else recipe.path.parent / p))


def source_path_problems(recipe: Recipe, root: Path) -> list[SourceProblem]:
    """Every ``source: path:`` of ``recipe`` that leads outside the repository ``root`` (written absolute,
    climbing out with ``..``, or through a symlink), with the line of its source entry."""
    top = Path(os.path.realpath(root))
    out = []
    for s in recipe.sources:
        if s.path is None:
            continue
        where = _resolved(recipe, s.path)
        if not where.is_relative_to(top):
            out.append(SourceProblem(f"source path '{s.path}' leads outside the repository (to {where})", s.line,
                                     "source.path"))
    return out


def source_paths(recipe: Recipe) -> list[Path]:
    """The host paths of the recipe's ``source: path:`` entries (resolved; check them first)."""
    return [_resolved(recipe, s.path) for s in recipe.sources if s.path is not None]


def check_sources(recipe: Recipe, root: Path) -> None:
    """Refuse (exit 2, naming the recipe file and line) a path source outside the repository and a url
    source without a sha256."""
    for p in source_path_problems(recipe, root):
        raise RecipeError(p.message, path=recipe.path, line=p.line, field=p.field,
                          hint="keep path sources inside the repository (e.g. a folder beside recipe.yaml)")
    for s in recipe.sources:
        if s.url and not s.sha256:
            raise RecipeError(f"source {s.url} has no sha256: url sources are fetched before the build and checked "
                              "against it", path=recipe.path, line=s.line, field="source.sha256",
                              hint="add the file's sha256 (sha256sum FILE)")


_URL_LINE = re.compile(r"^(\s*(?:-\s+)?url:\s*)(\S.*?)(\s*)$")


def _url_line(lines: list[str], line: int) -> int:
    """The line (1-based) of the ``url:`` of the source entry starting at ``line``."""
    for i in range(line - 1, min(len(lines), line + 15)):
        if i > line - 1 and lines[i].lstrip().startswith("- "):
            break  # the next entry
        if re.match(r"^\s*(?:-\s+)?url:", lines[i]):
            return i + 1
    return line


def point_recipe_at(text: str, line: int, url: str, note: str = "the cached file of") -> str:
    """``text`` with the ``url:`` value of the source entry at ``line`` (1-based) replaced by ``url``;
    the original is kept as a comment. :class:`RecipeError` when there is no one-line ``url:`` there."""
    lines = text.splitlines(keepends=True)
    line = _url_line(lines, line)
    old = lines[line - 1] if 0 < line <= len(lines) else ""
    m = _URL_LINE.match(old)
    if not m or m.group(2).startswith(("[", "-")):
        raise RecipeError(f"line {line} is not a one-line `url:`: {old.strip()}", line=line, field="source.url",
                          hint="write each url source as `url: URL` on one line (mirror lists cannot be redirected "
                               "to the fetched file)")
    lines[line - 1] = f"{m.group(1)}{url}  # {note} {m.group(2)}\n"
    return "".join(lines)
