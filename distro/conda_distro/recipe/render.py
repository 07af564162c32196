"""Recipes as rattler-build renders them: the one renderer of the tool.

``recipe.yaml`` text goes through py-rattler-build (``Stage0Recipe.from_yaml(...).render(VariantConfig,
RenderConfig)``) with the distribution's variant configuration; what comes back (one entry per output
and variant) is plain data; :mod:`conda_distro.recipe.model` keeps the finished models in one packed cache
per distribution, keyed by (text, variant configuration, target platform, rattler-build version).

Rendering happens in a fixed environment: ``env.get``/``env.exists`` in a recipe see no variable of
the caller (a recipe must not render one name on CI and another on a laptop).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conda_distro.errors import RecipeError
from conda_distro.util.rattler_env import fixed_environment
from conda_distro.util.yamlio import load_fast, read_yaml_text

if TYPE_CHECKING:

    from rattler_build import RenderedVariant

RENDER_SCHEMA = "3"  # bump to invalidate every cached render
MAX_RENDERED_BYTES = 4 * 1024 * 1024  # a recipe that renders past this is refused
MAX_RECIPE_BYTES = 1024 * 1024
_SECTIONS = ("build", "host", "run", "run_constraints")
CUDA_KEY = "cuda_compiler_version"  # conda-forge's key of the CUDA compiler's version ...
CPU_CUDA = "None"  # ... and its value in the rows without CUDA


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

    def with_minors(self, key: str, minors: list[str]) -> RenderSettings:
        """``key`` (the PyTorch key) set to ``minors``, and so is every key zipped with it in the variant
        config (conda-forge zips ``libtorch`` with ``pytorch``: the two name one release)."""
        partners = {k for z in self.zip_keys if key in z for k in z}
        return self.with_variants({k: list(minors) for k in partners | {key}})

    def without_cuda_rows(self) -> RenderSettings:
        return _memo("narrow", self, self._without_cuda_rows)

    def _without_cuda_rows(self) -> RenderSettings:
        """The variant config as conda-forge gives it to a recipe that does not use CUDA: only the rows
        where ``cuda_compiler_version`` is ``"None"`` (of its zip group, or of the key alone). conda-smithy
        adds the CUDA rows of conda-forge's pinning only for a recipe that uses the CUDA compiler; here
        rattler-build says whether a recipe uses the key (:func:`_variants`). Unchanged when the key is
        missing or has no ``"None"`` value."""
        values = dict(self.variants).get(CUDA_KEY)
        if values is None or CPU_CUDA not in [str(v) for v in values]:
            return self
        rows = [i for i, v in enumerate(values) if str(v) == CPU_CUDA]
        group = next((z for z in self.zip_keys if CUDA_KEY in z), (CUDA_KEY,))
        merged = dict(self.variants)
        for k in group:
            if k in merged and len(merged[k]) == len(values):
                merged[k] = tuple(merged[k][i] for i in rows)
        return RenderSettings(tuple(sorted(merged.items())), self.zip_keys, self.target_platform, self.cache_dir)

    @property
    def variant_dict(self) -> dict[str, list[Any]]:
        return {k: list(v) for k, v in self.variants}

    def to_config(self):
        """rattler-build's ``VariantConfig`` of these settings (made once per distinct settings: a render
        only reads it)."""
        from rattler_build import VariantConfig

        return _memo("config", self, lambda: VariantConfig(self.variant_dict, zip_keys=[list(z) for z in self.zip_keys] or None))

    def render_config(self):
        """rattler-build's ``RenderConfig`` for the target platform (made once per distinct settings)."""
        from rattler_build import PlatformConfig, RenderConfig

        return _memo("render", self, lambda: RenderConfig(platform=PlatformConfig(target_platform=self.target_platform)))

    @functools.cached_property
    def digest(self) -> str:
        payload = json.dumps([RENDER_SCHEMA, _tool_version(), self.target_platform,
                              [[k, [_typed(x) for x in v]] for k, v in self.variants],
                              [list(z) for z in self.zip_keys]])
        return hashlib.sha256(payload.encode()).hexdigest()


_memos: dict[tuple[str, RenderSettings], Any] = {}


def _memo(kind: str, settings: RenderSettings, make: Any) -> Any:
    """What ``make()`` derives from ``settings``, made once per equal settings in this process (a distribution's
    recipes share a few; bench_spine cold: rebuilt per recipe, they cost a quarter of a render)."""
    key = (kind, settings)
    if key not in _memos:
        if len(_memos) >= 1024:  # (bounded: a long-lived process renders many distributions)
            _memos.clear()
        _memos[key] = make()
    return _memos[key]


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


def _typed(value: Any) -> str:
    """A variant value with its type: ``True`` (a YAML boolean, as rattler-build reads an unquoted
    True) and ``"True"`` (a string) render differently, so they must not share a cache entry."""
    return f"bool:{value}" if isinstance(value, bool) else str(value)


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
    """One rendered output × variant as a record of rattler-build's ``to_dict()`` values, not copied: they
    are plain JSON values already (dicts, lists, strings, numbers; checked by :func:`_json_size`, which
    copies them through :func:`_plain` when they are not). Before, every record was copied whole
    (bench_spine cold, 300 recipes: ~0.15 ms a recipe)."""
    r = variant.recipe
    d = r.to_dict()
    build = d.get("build") or {}
    reqs = d.get("requirements") or {}
    return {
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
    }


def _json_size(rec: dict) -> tuple[dict, int]:
    """The record as plain JSON values and its size in JSON characters (what :data:`MAX_RENDERED_BYTES`
    limits). A value JSON cannot hold makes a :func:`_plain` copy (such values become their text)."""
    try:
        return rec, len(json.dumps(rec))
    except (TypeError, ValueError):
        rec = _plain(rec)
        return rec, len(json.dumps(rec))


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


_BARE_CONDITION = re.compile(r"\s*(?:not\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*")


def _platform_only(skip: Any, context: Any, settings: RenderSettings | None) -> list[str] | None:
    """The skip list when every entry is a bare name (``win``, ``not linux``) that is neither a variant key
    nor a context variable: a platform selector, whose value no variant changes. None otherwise."""
    if settings is None:
        return None
    entries = skip if isinstance(skip, list) else [skip]
    keys = {k for k, _ in settings.variants} | (set(context) if isinstance(context, dict) else set())
    out = []
    for entry in entries:
        m = _BARE_CONDITION.fullmatch(entry) if isinstance(entry, str) else None
        if m is None or m.group(1) in keys or m.group(1) in ("true", "false", "True", "False"):
            return None
        out.append(str(entry))
    return out


def _skip_probe(text: str, settings: RenderSettings | None = None, tree: Any = None) -> str | None:
    """py-rattler-build 0.73 evaluates ``build.skip`` only for multi-output recipes (a single-output
    recipe's top-level skip is ignored by its render() and run_build()). For a single-output recipe
    with a skip list, this is the same recipe written as a multi-output recipe with one output (its
    ``package`` becomes ``recipe``, ``build.skip`` stays on top, everything else of the package goes
    into the output), so that rattler-build itself evaluates the skip conditions per variant, with the
    same variant keys as the recipe (the keys it uses elsewhere count: a condition such as
    ``match(cuda_compiler_version, "<${{ min }}")`` is evaluated with the recipe's own variants).
    None: nothing to probe.

    When every skip condition is a platform selector (:func:`_platform_only`: ``skip: [win]``, the
    common case), the probe is that skip list alone on an empty one-output recipe: the same for
    every such recipe, so one render answers them all (:func:`_probe_variants` remembers it; before,
    each recipe rendered a second time: bench_spine cold, 1,000 generated recipes with ``skip: [win]``).
    rattler-build still evaluates the conditions."""
    if "skip" not in text:
        return None
    try:
        doc = load_fast(text) if tree is None else tree  # (``tree``: the caller's reading of the same text)
    except Exception:  # noqa: BLE001 - the real render reports unreadable text
        return None
    build = doc.get("build") if isinstance(doc, dict) else None
    if not isinstance(build, dict) or "skip" not in build or "outputs" in doc or not isinstance(doc.get("package"), dict):
        return None
    selectors = _platform_only(build["skip"], doc.get("context"), settings)
    if selectors is not None:
        alone: dict[str, Any] = {"package": {"name": "skip-probe"}}
        if build.get("noarch"):  # (as the recipe's own output would be: noarch or not)
            alone["build"] = {"noarch": _plain_tree(build["noarch"])}
        return json.dumps({"recipe": {"name": "skip-probe", "version": "0"}, "build": {"skip": selectors},
                           "outputs": [alone]})
    plain = _plain_tree(doc)
    package = plain.pop("package")
    rest = {k: v for k, v in plain["build"].items() if k != "skip"}
    probe: dict[str, Any] = {k: plain[k] for k in ("context", "source", "about", "extra") if k in plain}
    probe["recipe"] = package
    probe["build"] = {"skip": plain["build"]["skip"]}
    output: dict[str, Any] = {"package": {"name": package.get("name")}}
    if rest:
        output["build"] = rest
    for key in ("requirements", "tests"):
        if key in plain:
            output[key] = plain[key]
    probe["outputs"] = [output]
    return json.dumps(probe)


def _consistent(variant: dict, probe_variants: list[dict]) -> bool:
    return any(all(str(variant[k]) == str(v) for k, v in p.items() if k in variant and k != "target_platform") for p in probe_variants)


_scratch_dirs: dict[int, Any] = {}  # thread id -> its ScratchDir (removed at exit)


def _scratch() -> Path:
    """This thread's folder for the recipe text rattler-build's ``Stage0Recipe.from_yaml`` writes (without a
    ``recipe_dir`` it writes into a new ``rattler_build_*`` folder of the temp dir that nothing removes).
    One folder per thread, reused by every render (``from_yaml`` overwrites its ``recipe.yaml``) and
    removed when the process exits: a folder made and removed per render cost more than the render on a
    loaded disk (bench_spine: mkdir + rmdir of 200 folders 9.4 s of 21 s). A kill -9 leaves at most one
    ``conda-distro-render-*`` folder per thread in :func:`scratch_root`; it is named after its process
    (:class:`~conda_distro.util.scratch.ScratchDir`) and the next render scratch folder made there once
    that process is dead removes it."""
    import threading

    from conda_distro.util.scratch import ScratchDir

    key = threading.get_ident()
    if key not in _scratch_dirs:
        _scratch_dirs[key] = ScratchDir("conda-distro-render-", scratch_root())
    return Path(_scratch_dirs[key].name)


def scratch_root() -> str | None:
    """Where the render scratch folders go: ``/dev/shm`` when it is a writable RAM disk, else the temp
    folder (None). ``from_yaml`` writes each recipe's text there before rendering it: on a busy disk
    that write cost more than the render (bench_spine cold, 300 recipes: 1.0 s of ~2.6 s profiled)."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


_probe_memo: dict[tuple[str, str], list[dict[str, str]]] = {}  # (settings digest, probe) -> its variants


def _probe_variants(probe: str, settings: RenderSettings, render_config: Any) -> list[dict[str, str]]:
    """The variants the skip probe keeps, rendered once per distinct probe and settings in this process: the
    probe holds only the skip list and the context it reads, so recipes that skip alike share one render
    ("no second render where one answers": 5,000 generated recipes, one probe render per worker)."""
    from rattler_build import Stage0Recipe

    key = (settings.digest, probe)
    if key not in _probe_memo:
        if len(_probe_memo) >= 4096:  # (bounded: a long-lived process renders many distributions)
            _probe_memo.clear()
        _probe_memo[key] = [{str(k): str(v) for k, v in pv.variant.items()}
                            for pv in Stage0Recipe.from_yaml(probe, recipe_dir=_scratch() / "probe")
                            .render(settings.to_config(), render_config)]
    return _probe_memo[key]


def uses_cuda(variants: list) -> bool:
    """Does the recipe use the CUDA compiler's key? rattler-build says: a rendered variant lists the keys
    its recipe uses (``compiler('cuda')``, a condition on ``cuda_compiler_version``)."""
    return any(CUDA_KEY in v.variant for v in variants)


_NAMES_CUDA = re.compile(r"""cuda_compiler|compiler\(\s*['"]cuda['"]""")  # the key, or the compiler that sets it


def _cuda_or_not(stage0: Any, text: str, settings: RenderSettings, render_config: Any) -> tuple[RenderSettings, list]:
    """The settings a recipe renders with and rattler-build's render with them: without the CUDA rows
    unless rattler-build says the recipe uses the CUDA key (:func:`uses_cuda`). Which it does is a
    property of the recipe's expressions (rattler-build collects the variables they name), not of the
    rows it is rendered with, so a recipe whose text names the key or the CUDA compiler is rendered
    with every row first and, in the common case, once; any other recipe without the CUDA rows first.
    The guess only orders the renders: a wrong one costs one more render, never a different answer
    (before, every CUDA recipe rendered twice)."""
    narrow = settings.without_cuda_rows()
    if narrow is settings:
        return settings, stage0.render(settings.to_config(), render_config)
    full = stage0.render(settings.to_config(), render_config) if _NAMES_CUDA.search(text) else None
    if full is not None and uses_cuda(full):
        return settings, full
    variants = stage0.render(narrow.to_config(), render_config)
    if uses_cuda(variants):
        return settings, full if full is not None else stage0.render(settings.to_config(), render_config)
    return narrow, variants


def _variants(text: str, path: Path, settings: RenderSettings, from_file: bool, tree: Any = None) -> tuple[bool, list]:
    """(multi-output?, rattler-build's RenderedVariant objects) with the variants ``build.skip`` skips
    left out. A recipe that does not use the CUDA key renders without the variant config's CUDA rows
    (:meth:`RenderSettings.without_cuda_rows`): it would otherwise get one more build per CUDA row of the
    compilers' zip, a CPU build with the CUDA build's compiler. Call inside :func:`fixed_environment`."""
    from rattler_build import RattlerBuildError, Stage0Recipe

    render_config = settings.render_config()
    try:
        stage0 = Stage0Recipe.from_file(str(path)) if from_file else \
            Stage0Recipe.from_yaml(text, recipe_dir=_scratch() / "recipe")  # (from_yaml writes the text there)
        multi = type(stage0).__name__ == "MultiOutputRecipe"
        narrow, variants = _cuda_or_not(stage0, text, settings, render_config)
        probe = None if multi else _skip_probe(text, narrow, tree)
        if probe is not None:
            probe_variants = _probe_variants(probe, narrow, render_config)
            variants = [v for v in variants
                        if _consistent({str(k): str(x) for k, x in v.variant.items()}, probe_variants)]
    except RattlerBuildError as exc:
        message, line = describe_render_error(exc)
        raise RenderError(f"rattler-build cannot read the recipe: {message}", path=path, line=line,
                          hint="fix the recipe (rattler-build's own message above); variant keys come from "
                               "distro.yaml's variant_config") from None
    return multi, variants


def _render_uncached(text: str, path: Path, settings: RenderSettings, tree: Any = None) -> RenderedRecipe:
    with fixed_environment():
        multi, variants = _variants(text, path, settings, from_file=False, tree=tree)
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
            rec, rec_size = _json_size(rec)
            size += rec_size
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


def render_text(text: str, path: Path, settings: RenderSettings, tree: Any = None) -> RenderedRecipe:
    """Render ``text`` (the recipe at ``path``) with rattler-build. ``tree``: the caller's :func:`load_fast`
    of ``text``, when it has one (not read twice). Not cached here: the finished models of a distribution's
    recipes are kept in one packed file (:func:`conda_distro.recipe.model.parse_recipes`); the per-recipe
    JSON files this wrote before (never pruned) are removed by :func:`remove_json_entries`."""
    _check_text(text, path)
    return _render_uncached(text, path, settings, tree)


_JSON_BUCKET = re.compile(r"[0-9a-f]{2}")
_JSON_ENTRY = re.compile(r"[0-9a-f]{64}(?:\.model\d+)?\.json|\.[0-9a-f]{64}(?:\.model\d+)?\.json\.\d+\.tmp")


def remove_json_entries(folder: Path) -> None:
    """Remove the per-recipe JSON entries older versions wrote under the render cache ``folder``
    (``<two hex digits>/<sha256>[.model<N>].json``): one file per recipe text ever rendered, never pruned.
    A bucket holding anything else is left as it is."""
    try:
        buckets = [e.path for e in os.scandir(folder) if e.is_dir(follow_symlinks=False) and _JSON_BUCKET.fullmatch(e.name)]
    except OSError:
        return
    for bucket in buckets:
        try:
            with os.scandir(bucket) as entries:
                files = list(entries)
            if not all(e.is_file(follow_symlinks=False) and _JSON_ENTRY.fullmatch(e.name) for e in files):
                continue
            for e in files:
                os.unlink(e.path)
            os.rmdir(bucket)
        except OSError:
            continue
