"""Recipes as rattler-build renders them: the one renderer of the tool.

``recipe.yaml`` text goes through py-rattler-build (``Stage0Recipe.from_yaml(...).render(VariantConfig,
RenderConfig)``) with the distribution's variant configuration; what comes back (one entry per output
and variant) is plain data, cached on disk by (text, variant configuration, target platform,
rattler-build version) so that a warm run costs a file read per recipe.

Rendering happens in a fixed environment: ``env.get``/``env.exists`` in a recipe see no variable of
the caller (a recipe must not render one name on CI and another on a laptop).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conda_distro.errors import DistroError, RecipeError
from conda_distro.util.jsonio import read_json
from conda_distro.util.rattler_env import fixed_environment
from conda_distro.util.yamlio import load_fast, read_yaml_text

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rattler_build import RenderedVariant

RENDER_SCHEMA = "2"  # bump to invalidate every cached render
MAX_RENDERED_BYTES = 4 * 1024 * 1024  # a recipe that renders past this is refused
MAX_RECIPE_BYTES = 1024 * 1024
_SECTIONS = ("build", "host", "run", "run_constraints")


class RenderError(RecipeError):
    """rattler-build cannot render a recipe (its own message, with the line when it names one)."""


@dataclass(frozen=True)
class RenderSettings:
    """What a recipe is rendered with: the variant configuration and the target platform."""

    variants: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    zip_keys: tuple[tuple[str, ...], ...] = ()
    target_platform: str = "linux-64"
    cache_dir: Path | None = field(default=None, compare=False)

    @classmethod
    def make(cls, variants: dict[str, list[Any]] | None = None, zip_keys: list[list[str]] | None = None,
             target_platform: str = "linux-64", cache_dir: Path | None = None) -> RenderSettings:
        items = tuple(sorted((str(k), tuple(v)) for k, v in (variants or {}).items()))
        zips = tuple(tuple(z) for z in (zip_keys or []))
        return cls(items, zips, target_platform, cache_dir)

    def with_variants(self, extra: dict[str, list[Any]]) -> RenderSettings:
        merged = dict(self.variants)
        merged.update({k: tuple(v) for k, v in extra.items()})
        return RenderSettings(tuple(sorted(merged.items())), self.zip_keys, self.target_platform, self.cache_dir)

    @property
    def variant_dict(self) -> dict[str, list[Any]]:
        return {k: list(v) for k, v in self.variants}

    def to_config(self):
        from rattler_build import VariantConfig

        return VariantConfig(self.variant_dict, zip_keys=[list(z) for z in self.zip_keys] or None)

    @functools.cached_property
    def digest(self) -> str:
        payload = json.dumps([RENDER_SCHEMA, _tool_version(), self.target_platform,
                              [[k, [str(x) for x in v]] for k, v in self.variants],
                              [list(z) for z in self.zip_keys]])
        return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class RenderedRecipe:
    """Every output × variant rattler-build renders from one recipe, as plain data."""

    multi_output: bool
    outputs: tuple[dict, ...]  # {name, version, build_number, build_string, noarch, requirements,
    #                             run_exports, tests, about, sources, extra, variant}
    context: dict

    def to_json(self) -> dict:
        return {"multi_output": self.multi_output, "outputs": list(self.outputs), "context": self.context}

    @classmethod
    def from_json(cls, data: dict) -> RenderedRecipe:
        return cls(bool(data["multi_output"]), tuple(data["outputs"]), dict(data.get("context") or {}))


_version_cache: list[str] = []


def _tool_version() -> str:
    if not _version_cache:
        try:
            from rattler_build import rattler_build_version

            _version_cache.append(str(rattler_build_version()))
        except Exception:  # noqa: BLE001 - informational; the cache key then only misses the version
            _version_cache.append("?")
    return _version_cache[0]


# rattler-build's messages carry the place as ``line: 13, column: 7`` (a span) or ``at 2:1``
_LINE_RE = re.compile(r"line: (\d+)|\bat (\d+):\d+")
_QUOTED_MSG_RE = re.compile(r'(?:message|reason): "((?:[^"\\]|\\.)*)"')


def describe_render_error(exc: BaseException) -> tuple[str, int | None]:
    """rattler-build's message made readable (the inner ``message``/``reason`` when it is a debug
    dump), and the line it names."""
    text = str(getattr(exc, "message", None) or exc).strip()
    lines = [int(a or b) for a, b in _LINE_RE.findall(text)]
    inner = _QUOTED_MSG_RE.findall(text)
    readable = text
    if inner and ("Span" in text or "Marker" in text):
        readable = "; ".join(bytes(m, "utf-8").decode("unicode_escape", "replace") for m in inner)
        field_m = re.search(r'field: "([^"]+)"', text)
        if field_m:
            readable = f"{field_m.group(1)}: {readable}"
    readable = readable.replace("\n", " ")
    if len(readable) > 500:
        readable = readable[:500] + "…"
    return readable, (lines[0] if lines else None)


def _plain(value: Any) -> Any:
    """JSON-able copy of rattler-build's to_dict() values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _output_record(variant: Any) -> dict:
    r = variant.recipe
    d = r.to_dict()
    build = d.get("build") or {}
    reqs = d.get("requirements") or {}
    return _plain({
        "name": (d.get("package") or {}).get("name"),
        "version": str((d.get("package") or {}).get("version")),
        "build_number": build.get("number", 0),
        "build_string": build.get("string"),
        "noarch": build.get("noarch"),
        "requirements": {s: reqs.get(s) or [] for s in _SECTIONS},
        "run_exports": reqs.get("run_exports") or {},
        "tests": d.get("tests") or [],
        "about": d.get("about") or {},
        "sources": d.get("source") or [],
        "extra": d.get("extra") or {},
        "variant": {str(k): str(v) for k, v in variant.variant.items()},
    })


def _plain_tree(node: Any) -> Any:
    """The fast reader's tree as JSON values (JSON is YAML: rattler-build reads it), scalars typed as
    YAML would type them."""
    if isinstance(node, dict):
        return {str(k): _plain_tree(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain_tree(v) for v in node]
    if node is None:
        return None
    s = str(node)
    if getattr(node, "quoted", False):
        return s
    if re.fullmatch(r"-?\d+", s):
        return int(s)
    if s in ("true", "True", "false", "False"):
        return s.lower() == "true"
    return s


def _skip_probe(text: str) -> str | None:
    """py-rattler-build 0.73 evaluates ``build.skip`` only for multi-output recipes (a single-output
    recipe's top-level skip is ignored by its render() and run_build()). For a single-output recipe
    with a skip list, this is a one-output recipe with the same context and the same skip list, so
    that rattler-build itself evaluates the skip conditions per variant. None: nothing to probe."""
    if "skip" not in text:
        return None
    try:
        doc = load_fast(text)
    except Exception:  # noqa: BLE001 - the real render reports unreadable text
        return None
    build = doc.get("build") if isinstance(doc, dict) else None
    if not isinstance(build, dict) or "skip" not in build or "outputs" in doc:
        return None
    probe: dict[str, Any] = {}
    if isinstance(doc.get("context"), dict):
        probe["context"] = _plain_tree(doc["context"])
    probe["recipe"] = {"name": "skip-probe", "version": "0"}
    probe["build"] = {"skip": _plain_tree(build["skip"])}
    probe["outputs"] = [{"package": {"name": "skip-probe"}}]
    return json.dumps(probe)


def _consistent(variant: dict, probe_variants: list[dict]) -> bool:
    return any(all(str(variant[k]) == str(v) for k, v in p.items() if k in variant and k != "target_platform") for p in probe_variants)


@contextlib.contextmanager
def _scratch() -> Iterator[Path]:
    """A folder of ours for one render, removed when it is done. rattler-build's ``Stage0Recipe.from_yaml``
    without a ``recipe_dir`` writes the text into a new ``rattler_build_*`` folder of the temp dir that
    nothing ever removes: one per recipe rendered without the cache (thousands after one lint)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="conda-distro-render-") as tmp:
        yield Path(tmp)


def _variants(text: str, path: Path, settings: RenderSettings, from_file: bool) -> tuple[bool, list]:
    """(multi-output?, rattler-build's RenderedVariant objects) with the variants ``build.skip`` skips
    left out. Call inside :func:`fixed_environment`."""
    from rattler_build import PlatformConfig, RattlerBuildError, RenderConfig, Stage0Recipe

    render_config = RenderConfig(platform=PlatformConfig(target_platform=settings.target_platform))
    try:
        with _scratch() as scratch:  # (from_yaml writes the text into a folder: ours, removed here)
            stage0 = Stage0Recipe.from_file(str(path)) if from_file else \
                Stage0Recipe.from_yaml(text, recipe_dir=scratch / "recipe")
            multi = type(stage0).__name__ == "MultiOutputRecipe"
            variants = stage0.render(settings.to_config(), render_config)
            probe = None if multi else _skip_probe(text)
            if probe is not None:
                probe_variants = [{str(k): str(v) for k, v in pv.variant.items()}
                                  for pv in Stage0Recipe.from_yaml(probe, recipe_dir=scratch / "probe")
                                  .render(settings.to_config(), render_config)]
                variants = [v for v in variants
                            if _consistent({str(k): str(x) for k, x in v.variant.items()}, probe_variants)]
    except RattlerBuildError as exc:
        message, line = describe_render_error(exc)
        raise RenderError(f"rattler-build cannot read the recipe: {message}", path=path, line=line,
                          hint="fix the recipe (rattler-build's own message above); variant keys come from "
                               "distro.yaml's variant_config") from None
    return multi, variants


def _render_uncached(text: str, path: Path, settings: RenderSettings) -> RenderedRecipe:
    with fixed_environment():
        multi, variants = _variants(text, path, settings, from_file=False)
        seen: set[tuple[str, str]] = set()
        outputs: list[dict] = []
        context: dict = {}
        size = 0
        for v in variants:
            rec = _output_record(v)
            key = (rec["name"], rec["build_string"])
            if key in seen:  # (a key the output does not use can repeat identical variants)
                continue
            seen.add(key)
            if not context:
                context = _plain(v.recipe.context or {})
            size += len(json.dumps(rec))
            if size > MAX_RENDERED_BYTES:
                raise RenderError(f"the recipe renders to more than {MAX_RENDERED_BYTES // (1024 * 1024)} MB",
                                  path=path, hint="a recipe this large is almost certainly a mistake (or an attack)")
            outputs.append(rec)
    return RenderedRecipe(multi, tuple(outputs), context)


def live_variants(path: Path, settings: RenderSettings) -> list[RenderedVariant]:
    """rattler-build's own ``RenderedVariant`` objects of the recipe at ``path`` (what ``run_build``
    needs), rendered in the fixed environment, with the variants its ``build.skip`` skips left out."""
    text = read_yaml_text(path, error=RecipeError)
    _check_text(text, path)
    with fixed_environment():
        return _variants(text, path, settings, from_file=True)[1]


def _check_text(text: str, path: Path) -> None:
    if len(text.encode("utf-8", "replace")) > MAX_RECIPE_BYTES:
        raise RenderError(f"the recipe is larger than {MAX_RECIPE_BYTES // 1024} KiB", path=path,
                          hint="a recipe this large is almost certainly a mistake")
    # A jinja expression that builds a huge string ("a" * 300000000) would exhaust memory inside the
    # renderer before any limit could apply: refuse repetition counts past the rendered-size limit.
    for m in re.finditer(r"\$\{\{(.*?)\}\}", text, re.S):
        for n in re.findall(r"\*\s*(\d+)|(\d+)\s*\*", m.group(1)):
            count = int(n[0] or n[1])
            if count > MAX_RENDERED_BYTES:
                line = text.count("\n", 0, m.start()) + 1
                raise RenderError(f"the expression repeats a value {count} times", path=path, line=line,
                                  hint=f"rendered recipes are limited to {MAX_RENDERED_BYTES // (1024 * 1024)} MB")


def cache_file_of(text: str, settings: RenderSettings) -> Path | None:
    if settings.cache_dir is None:
        return None
    key = hashlib.sha256(settings.digest.encode() + b"\0" + text.encode("utf-8", "surrogatepass")).hexdigest()
    return settings.cache_dir / key[:2] / f"{key}.json"


def _prerender_one(args: tuple[str, str, RenderSettings]) -> None:
    text, path, settings = args
    with contextlib.suppress(RecipeError):  # cached as an error; the caller reports it when it reads the recipe
        render_text(text, Path(path), settings)


PARALLEL_MIN = 400  # below this many uncached recipes, starting worker processes costs more than it saves


def prerender(items: list[tuple[str, Path]], settings: RenderSettings, jobs: int | None = None) -> int:
    """Fill the render cache for many recipes at once, in worker processes (rattler-build holds the GIL;
    spawn, never fork: see the engine notes). Returns how many were rendered. Without a cache, or for
    a few recipes, it does nothing: the caller renders them as it reads them."""
    if settings.cache_dir is None:
        return 0
    todo = [(t, str(p), settings) for t, p in items if not cache_file_of(t, settings).is_file()]  # type: ignore[union-attr]
    jobs = jobs or min(os.cpu_count() or 1, 8)
    if len(todo) < PARALLEL_MIN or jobs < 2:
        return 0
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
        list(pool.map(_prerender_one, todo, chunksize=max(1, len(todo) // (jobs * 8))))
    return len(todo)


def render_text(text: str, path: Path, settings: RenderSettings) -> RenderedRecipe:
    """Render ``text`` (the recipe at ``path``) with rattler-build; cached under settings.cache_dir."""
    _check_text(text, path)
    cache_file = cache_file_of(text, settings)
    if cache_file is not None:
        try:
            data = read_json(cache_file, "cache")
        except (OSError, DistroError):  # unreadable or refused: a cache miss (the entry is written again)
            data = None
        if isinstance(data, dict):
            if "error" in data:
                err = data["error"]
                raise RenderError(err["message"], path=path, line=err.get("line"), hint=err.get("hint"))
            try:
                return RenderedRecipe.from_json(data)
            except (KeyError, TypeError):
                pass
    try:
        rendered = _render_uncached(text, path, settings)
    except RenderError as exc:
        if cache_file is not None:
            store_json(cache_file, {"error": {"message": exc.message, "line": exc.line, "hint": exc.hint}})
        raise
    if cache_file is not None:
        store_json(cache_file, rendered.to_json())
    return rendered


def store_json(path: Path, data: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only costs time
