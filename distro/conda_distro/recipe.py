"""The typed view of a v1 ``recipe.yaml`` (rattler-build / conda-forge's new format).

Reading is done from the fast line-aware tree (:mod:`conda_distro.yamlio`); ``${{ }}`` expressions
are rendered with jinja2 against ``context:`` and the platform, ``if/then/else`` selectors are
evaluated for one target platform. The ruamel round-trip document is loaded on demand
(:meth:`Recipe.roundtrip`) by the flows that edit recipes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import jinja2
import jinja2.sandbox

from conda_distro.errors import RecipeError
from conda_distro.specs import ParsedSpec, parse_spec
from conda_distro.yamlio import LDict, LList, LStr, load_fast, load_roundtrip

RECIPE_FILE = "recipe.yaml"
SECTIONS = ("build", "host", "run", "run_constraints")
_EXPR = "${{"
_PIN_MARK = "\x00"


# ---------------------------------------------------------------------------------------------
# expression rendering


class _Pin:
    """What ``pin_compatible``/``pin_subpackage``/``compiler``/``stdlib`` render to."""

    def __init__(self, func: str, name: str, **kw: Any) -> None:
        self.func, self.name, self.kw = func, name, kw

    def __str__(self) -> str:
        kw = ";".join(f"{k}={v}" for k, v in sorted(self.kw.items()))
        return f"{_PIN_MARK}{self.func}|{self.name}|{kw}"


def _pin_factory(func: str):
    def make(name: str, *args: Any, **kw: Any) -> _Pin:
        return _Pin(func, str(name), **kw)

    return make


class _Undefined(jinja2.ChainableUndefined):
    """Unknown variables (variant keys like ``python`` or ``cuda_compiler_version``) render empty."""


_ENV = jinja2.sandbox.ImmutableSandboxedEnvironment(
    variable_start_string="${{",
    variable_end_string="}}",
    block_start_string="\x01{%",  # v1 recipes have no blocks; make them inert
    block_end_string="%}\x01",
    comment_start_string="\x01{#",
    comment_end_string="#}\x01",
    undefined=_Undefined,
    keep_trailing_newline=True,
    autoescape=False,
)
_ENV.filters.setdefault("version_to_buildstring", lambda v: "".join(str(v).split(".")[:2]))


@lru_cache(maxsize=16384)
def _template(text: str) -> jinja2.Template:
    return _ENV.from_string(text)


@lru_cache(maxsize=16384)
def _expression(text: str):
    return _ENV.compile_expression(text, undefined_to_none=False)


def _match(value: Any, spec: str) -> bool:
    if value is None or isinstance(value, jinja2.Undefined) or str(value) == "":
        return True  # unknown variant: assume the branch applies (conservative for deps)
    from conda_distro.specs import admits

    return admits(str(spec).replace(" ", ""), str(value))


def platform_namespace(platform: str) -> dict[str, Any]:
    os_, _, arch = platform.partition("-")
    arch_names = {"64": "x86_64", "aarch64": "aarch64", "arm64": "arm64", "ppc64le": "ppc64le"}
    a = arch_names.get(arch, arch)
    return {
        "target_platform": platform,
        "build_platform": platform,
        "host_platform": platform,
        "linux": os_ == "linux",
        "osx": os_ == "osx",
        "win": os_ == "win",
        "unix": os_ in ("linux", "osx"),
        "x86_64": a == "x86_64",
        "x86": a == "x86_64",
        "aarch64": a == "aarch64",
        "arm64": a == "arm64",
        "ppc64le": a == "ppc64le",
        "match": _match,
        "pin_compatible": _pin_factory("pin_compatible"),
        "pin_subpackage": _pin_factory("pin_subpackage"),
        "compiler": lambda lang, *a, **k: _Pin("compiler", str(lang)),
        "stdlib": lambda lang, *a, **k: _Pin("stdlib", str(lang)),
        "cdt": lambda name, *a, **k: _Pin("cdt", str(name)),
        "env": _EnvProxy(),
        "hash": "",
        "PYTHON": "python",
    }


class _EnvProxy:
    def get(self, name: str, default: Any = "") -> Any:
        return default

    def exists(self, name: str) -> bool:
        return False


class RenderError(RecipeError):
    pass


class Renderer:
    """Renders ``${{ }}`` strings and evaluates ``if:`` expressions for one recipe and platform."""

    def __init__(self, platform: str, path: Path) -> None:
        self.ns: dict[str, Any] = platform_namespace(platform)
        self.path = path

    def render(self, value: Any, line: int | None = None) -> str:
        s = str(value)
        if _EXPR not in s:
            return s
        try:
            return _template(s).render(self.ns)
        except jinja2.TemplateError as exc:
            raise RenderError(f"cannot render expression {s!r}: {exc}", path=self.path,
                              line=line or getattr(value, "line", None),
                              hint="check the ${{ }} expression and the context: variables it uses") from None

    def condition(self, expr: Any) -> bool:
        s = str(expr).strip()
        if s.startswith(_EXPR) and s.endswith("}}"):
            s = s[3:-2].strip()
        try:
            result = _expression(s)(**self.ns)
        except jinja2.TemplateError as exc:
            raise RenderError(f"cannot evaluate condition {s!r}: {exc}", path=self.path,
                              line=getattr(expr, "line", None)) from None
        if isinstance(result, jinja2.Undefined):
            return False
        return bool(result)

    def add_context(self, context: Any) -> None:
        if not isinstance(context, dict):
            return
        for key, value in context.items():
            if isinstance(value, (dict, list)):
                self.ns[key] = value
                continue
            rendered = self.render(value) if value is not None else ""
            self.ns[key] = _typed_scalar(value, rendered)


def _typed_scalar(raw: Any, rendered: str) -> Any:
    if isinstance(raw, LStr) and raw.quoted:
        return rendered
    low = rendered.lower()
    if low in ("true", "false"):
        return low == "true"
    if re.fullmatch(r"-?\d+", rendered):
        return int(rendered)
    return rendered


def as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "on", "1")


# ---------------------------------------------------------------------------------------------
# the model


@dataclass(frozen=True)
class Dep:
    """One requirement entry, after rendering."""

    section: str
    raw: str  # the text in the file
    line: int
    spec: ParsedSpec | None  # None for pin functions / compilers
    func: str | None = None  # pin_compatible | pin_subpackage | compiler | stdlib | cdt
    func_kw: tuple[tuple[str, str], ...] = ()
    conditional: bool = False

    pin_name: str = ""  # the package a pin function / compiler() names

    @property
    def name(self) -> str:
        return self.spec.name if self.spec is not None else self.pin_name

    @property
    def version(self) -> str | None:
        return self.spec.version if self.spec else None

    @property
    def is_bare(self) -> bool:
        return self.spec is not None and self.spec.ok and not self.spec.version and not self.spec.build

    def kw(self, key: str, default: str | None = None) -> str | None:
        return dict(self.func_kw).get(key, default)


@dataclass(frozen=True)
class Source:
    url: str | None
    sha256: str | None
    md5: str | None
    git: str | None
    path: str | None
    line: int


@dataclass
class Recipe:
    path: Path  # .../recipes/<name>/recipe.yaml
    text: str
    data: LDict
    name: str
    version: str
    build_number: int | None
    noarch: str | None
    skip: bool
    requirements: dict[str, list[Dep]]
    tests: list[Any]
    about: dict[str, Any]
    maintainers: list[str]
    lockstep: bool
    skip_lints: list[str]
    sources: list[Source]
    platform: str
    run_exports: list[Dep] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.path.parent

    def deps(self, *sections: str) -> Iterator[Dep]:
        for s in sections or SECTIONS:
            yield from self.requirements.get(s, [])

    def dep_names(self, *sections: str) -> set[str]:
        return {d.name for d in self.deps(*sections) if d.name}

    def line_of(self, key: str) -> int:
        return self.lines.get(key, 1)

    def roundtrip(self) -> tuple[Any, Any]:
        """The ruamel round-trip document and the YAML object to dump it with."""
        return load_roundtrip(self.text, path=self.path)


def _mapping(value: Any, where: str, path: Path, line: int | None) -> LDict:
    if value is None:
        d = LDict()
        d.line = line or 1
        return d
    if not isinstance(value, dict):
        raise RecipeError(f"'{where}' must be a mapping", path=path, field=where, line=getattr(value, "line", line),
                          hint="expected 'key: value' lines under it")
    return value


class _Flattener:
    """Evaluates ``if/then/else`` items in a list and renders each scalar item."""

    def __init__(self, renderer: Renderer) -> None:
        self.r = renderer

    def items(self, value: Any, line: int, conditional: bool = False) -> Iterator[tuple[Any, int, bool]]:
        if value is None:
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                yield from self._item(item, value.line_of(i) if isinstance(value, LList) else line, conditional)
        else:
            yield from self._item(value, getattr(value, "line", line), conditional)

    def _item(self, item: Any, line: int, conditional: bool) -> Iterator[tuple[Any, int, bool]]:
        if isinstance(item, dict) and "if" in item:
            branch = item.get("then") if self.r.condition(item["if"]) else item.get("else")
            ln = item.line_of("then") if isinstance(item, LDict) else line
            yield from self.items(branch, ln, True)
        elif isinstance(item, (str, LStr)):
            rendered = self.r.render(item, line)
            if rendered.strip():
                yield rendered.strip(), line, conditional
        elif item is not None:
            yield item, line, conditional


def _parse_dep(section: str, raw: str, rendered: str, line: int, conditional: bool) -> Dep:
    if rendered.startswith(_PIN_MARK):
        func, name, kw = rendered[1:].split("|", 2)
        kws = tuple(tuple(p.split("=", 1)) for p in kw.split(";") if p)
        return Dep(section, raw, line, None, func, kws, conditional, pin_name=name)  # type: ignore[arg-type]
    return Dep(section, raw, line, parse_spec(rendered), conditional=conditional)


def parse_recipe(text: str, path: Path, platform: str = "linux-64") -> Recipe:
    """Parse recipe text into a :class:`Recipe`. Raises :class:`RecipeError` with file and line."""
    doc = load_fast(text, path=path)
    if not isinstance(doc, dict):
        raise RecipeError("a recipe must be a YAML mapping (package:, source:, build:, ...)", path=path,
                          line=getattr(doc, "line", 1), hint="see the v1 recipe format")
    if "{%" in text and "context" not in doc:
        raise RecipeError("this looks like a v0 meta.yaml ({% set %}); only v1 recipe.yaml is supported", path=path,
                          hint="convert it: {% set %} -> context:, {{ x }} -> ${{ x }}, # [sel] -> if/then")
    r = Renderer(platform, path)
    r.add_context(doc.get("context"))
    flat = _Flattener(r)
    lines: dict[str, int] = {}

    if "outputs" in doc:  # multi-output: the recipe: block names the family
        pkg = _mapping(doc.get("recipe"), "recipe", path, doc.line)
        outputs = doc.get("outputs") or []
        first = outputs[0] if isinstance(outputs, list) and outputs and isinstance(outputs[0], dict) else {}
        pkg_first = _mapping(first.get("package"), "outputs[0].package", path, doc.line) if first else LDict()
        name_raw = pkg.get("name") or pkg_first.get("name")
        version_raw = pkg.get("version") or pkg_first.get("version")
        pkg_for_lines = pkg if "name" in pkg else pkg_first
        bodies = [doc] + [o for o in outputs if isinstance(o, dict)]
    else:
        if "package" not in doc:
            raise RecipeError("missing 'package:' section", path=path, field="package", line=1,
                              hint="add package: {name: ..., version: ...}")
        pkg = _mapping(doc.get("package"), "package", path, doc.line_of("package"))
        name_raw, version_raw, pkg_for_lines = pkg.get("name"), pkg.get("version"), pkg
        bodies = [doc]
    if not name_raw or not r.render(name_raw).strip():
        raise RecipeError("missing package name", path=path, field="package.name",
                          line=pkg_for_lines.line, hint="add 'name:' under 'package:'")
    if version_raw is None or not r.render(version_raw).strip():
        raise RecipeError("missing package version", path=path, field="package.version",
                          line=pkg_for_lines.line, hint="add 'version:' under 'package:' (or define it in context:)")
    name = r.render(name_raw).strip()
    version = r.render(version_raw).strip()
    lines["package.name"] = pkg_for_lines.line_of("name")
    lines["package.version"] = pkg_for_lines.line_of("version")
    lines["package"] = getattr(pkg_for_lines, "line", 1)
    r.ns.setdefault("name", name)
    r.ns.setdefault("version", version)

    build = _mapping(doc.get("build"), "build", path, doc.line_of("build") if isinstance(doc, LDict) else 1)
    lines["build"] = doc.line_of("build") if "build" in doc else 1
    number_raw = build.get("number")
    build_number: int | None = None
    if number_raw is not None:
        rendered = r.render(number_raw)
        if not re.fullmatch(r"\d+", rendered.strip()):
            raise RecipeError(f"build number '{rendered}' is not a whole number", path=path, field="build.number",
                              line=build.line_of("number"), hint="use number: 0 for a new version")
        build_number = int(rendered)
        lines["build.number"] = build.line_of("number")
    noarch = r.render(build["noarch"]).strip() if build.get("noarch") else None
    if "noarch" in build:
        lines["build.noarch"] = build.line_of("noarch")
    skip = any(as_bool(v) if str(v).strip().lower() in ("true", "false") else r.condition(v)
               for v, _, _ in flat.items(build.get("skip"), build.line_of("skip")))

    requirements: dict[str, list[Dep]] = {s: [] for s in SECTIONS}
    run_exports: list[Dep] = []
    for body in bodies:
        req = _mapping(body.get("requirements"), "requirements", path, body.line_of("requirements") if isinstance(body, LDict) else 1)
        for section in SECTIONS:
            raw_list = req.get(section)
            if raw_list is not None and not isinstance(raw_list, list):
                raise RecipeError(f"'requirements.{section}' must be a list", path=path,
                                  field=f"requirements.{section}", line=req.line_of(section))
            for rendered, line, cond in flat.items(raw_list, req.line_of(section)):
                if not isinstance(rendered, str):
                    raise RecipeError(f"unexpected entry in requirements.{section}: {rendered!r}", path=path,
                                      field=f"requirements.{section}", line=line)
                requirements[section].append(_parse_dep(section, rendered, rendered, line, cond))
        rex = req.get("run_exports")
        rex_items = rex.get("weak", []) + rex.get("strong", []) if isinstance(rex, dict) else rex
        for rendered, line, cond in flat.items(rex_items, req.line_of("run_exports")):
            if isinstance(rendered, str):
                run_exports.append(_parse_dep("run_exports", rendered, rendered, line, cond))
    lines["requirements"] = doc.line_of("requirements") if "requirements" in doc else lines["build"]

    tests_raw = doc.get("tests")
    tests = [t for t, _, _ in flat.items(tests_raw, doc.line_of("tests"))] if tests_raw is not None else []
    if "tests" in doc:
        lines["tests"] = doc.line_of("tests")

    about_raw = _mapping(doc.get("about"), "about", path, doc.line_of("about"))
    about = {k: (r.render(v).strip() if isinstance(v, str) else v) for k, v in about_raw.items()}
    lines["about"] = doc.line_of("about") if "about" in doc else 1
    for k in about_raw:
        lines[f"about.{k}"] = about_raw.line_of(k)

    extra = _mapping(doc.get("extra"), "extra", path, doc.line_of("extra"))
    lines["extra"] = doc.line_of("extra") if "extra" in doc else 1
    maint_raw = extra.get("recipe-maintainers")
    if maint_raw is not None and not isinstance(maint_raw, list):
        maint_raw = [maint_raw]
    maintainers = [str(m).strip() for m in (maint_raw or []) if m is not None]
    if "recipe-maintainers" in extra:
        lines["extra.recipe-maintainers"] = extra.line_of("recipe-maintainers")
    lockstep = as_bool(extra.get("pytorch-lockstep", False))
    skip_lints_raw = extra.get("skip-lints") or []
    skip_lints = [str(s) for s in (skip_lints_raw if isinstance(skip_lints_raw, list) else [skip_lints_raw])]

    sources: list[Source] = []
    src_raw = doc.get("source")
    for item, line, _ in flat.items(src_raw, doc.line_of("source")):
        if not isinstance(item, dict):
            raise RecipeError("each source must be a mapping (url:/git:/path:)", path=path, field="source", line=line)
        def get(key: str) -> str | None:
            v = item.get(key)
            if isinstance(v, list):
                v = v[0] if v else None
            return r.render(v).strip() if v is not None else None
        sources.append(Source(get("url"), get("sha256"), get("md5"), get("git"), get("path"),
                              getattr(item, "line", line)))
    if "source" in doc:
        lines["source"] = doc.line_of("source")

    return Recipe(
        path=path, text=text, data=doc, name=name, version=version, build_number=build_number,
        noarch=noarch, skip=skip, requirements=requirements, tests=tests, about=about,
        maintainers=maintainers, lockstep=lockstep, skip_lints=skip_lints, sources=sources,
        platform=platform, run_exports=run_exports, lines=lines,
    )


def load_recipe(path: Path, platform: str = "linux-64") -> Recipe:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecipeError(f"cannot read recipe: {exc.strerror}", path=path) from None
    except UnicodeDecodeError:
        raise RecipeError("recipe is not UTF-8 text", path=path) from None
    return parse_recipe(text, path, platform)


def recipe_paths(recipes_dir: Path, names: list[str] | None = None) -> list[Path]:
    """recipes/<name>/recipe.yaml for every (or the named) folder, sorted by name."""
    if names:
        return [recipes_dir / n / RECIPE_FILE for n in names]
    if not recipes_dir.is_dir():
        return []
    return sorted(p / RECIPE_FILE for p in recipes_dir.iterdir() if p.is_dir() and (p / RECIPE_FILE).is_file())
