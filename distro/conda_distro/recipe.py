"""The typed view of a v1 ``recipe.yaml`` (rattler-build / conda-forge's new format).

Reading is done from the fast line-aware tree (:mod:`conda_distro.yamlio`); ``${{ }}`` expressions
are rendered with jinja2 against ``context:`` and the platform, ``if/then/else`` selectors are
evaluated for one target platform. The ruamel round-trip document is loaded on demand
(:meth:`Recipe.roundtrip`) by the flows that edit recipes.
"""

from __future__ import annotations

import os
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


# Rendering speed: compiling a jinja template costs about a millisecond, and every recipe has its own
# strings (urls with the name in them), so strings are split into literal text and ``${{ }}``
# expressions; each expression is compiled once for all recipes. The commonest expressions (``name``,
# ``version``, ``name|lower``) are plain variable lookups and skip jinja altogether. Anything the split
# cannot reproduce exactly (whitespace control, ``}}`` inside a string or a dict literal, unclosed
# ``${{``) falls back to the full template, so the output is always what jinja renders.
_EXPR_RE = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_NAME_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\|\s*(lower|upper)\s*)?")
_JINJA_LITERALS = frozenset({"true", "false", "none", "True", "False", "None"})
_JINJA_KEYWORDS = frozenset({"and", "or", "not", "in", "is", "if", "else"})
_MISSING = object()


class _Lookup:
    """``${{ name }}`` / ``${{ name|lower }}`` without jinja (same result: str(), "" when undefined)."""

    __slots__ = ("name", "case")

    def __init__(self, name: str, case: str | None) -> None:
        self.name, self.case = name, case

    def __call__(self, ns: dict[str, Any]) -> str:
        v = ns.get(self.name, _MISSING)
        s = "" if v is _MISSING else str(v)
        return s.lower() if self.case == "lower" else s.upper() if self.case == "upper" else s


@lru_cache(maxsize=16384)
def _compiled(text: str) -> tuple | None:
    """Literal and expression parts of ``text``; None when only the whole template renders it exactly."""
    if "\r" in text:  # jinja normalises newlines in literal text
        return None
    parts: list[Any] = []
    pos = 0
    for m in _EXPR_RE.finditer(text):
        if m.start() > pos:
            parts.append(text[pos:m.start()])
        expr = m.group(1)
        if expr[:1] in ("-", "+") or expr[-1:] in ("-", "+"):
            return None  # whitespace control (``${{- x -}}``)
        simple = _NAME_RE.fullmatch(expr)
        name = simple.group(1) if simple else None
        if name and name not in _JINJA_LITERALS and name not in _JINJA_KEYWORDS and name not in _ENV.globals:
            parts.append(_Lookup(name, simple.group(2)))
        else:
            try:
                parts.append(_expression(expr))
            except jinja2.TemplateSyntaxError:
                return None  # e.g. '}}' inside a string: the template parser knows where it really ends
        pos = m.end()
    if _EXPR in text[pos:]:
        return None  # an unclosed ${{: the template reports it
    if pos < len(text):
        parts.append(text[pos:])
    return tuple(parts)


def _render_text(text: str, ns: dict[str, Any]) -> str:
    parts = _compiled(text)
    if parts is None:
        return _template(text).render(ns)
    out = []
    for p in parts:
        if type(p) is str:
            out.append(p)
        elif type(p) is _Lookup:
            out.append(p(ns))
        else:
            out.append(str(p(**ns)))
    return "".join(out)


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


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, jinja2.TemplateError) else text or type(exc).__name__


_base_namespace = lru_cache(maxsize=16)(platform_namespace)  # its values are stateless: share them

# ``if: linux`` / ``if: not win``: plain variable tests, evaluated without jinja (same truth value)
_COND_RE = re.compile(r"(not\s+)?([A-Za-z_][A-Za-z0-9_]*)")


@lru_cache(maxsize=4096)
def _simple_condition(text: str) -> tuple[bool, str] | None:
    m = _COND_RE.fullmatch(text)
    if m is None:
        return None
    name = m.group(2)
    if name in _JINJA_LITERALS or name in _JINJA_KEYWORDS or name in _ENV.globals:
        return None
    return bool(m.group(1)), name


def _match_unknown_false(value: Any, spec: str) -> bool:
    """``match()`` for build.skip: an unknown variant (python, cuda_compiler_version) does not skip."""
    if value is None or isinstance(value, jinja2.Undefined) or str(value) == "":
        return False
    return _match(value, spec)


class Renderer:
    """Renders ``${{ }}`` strings and evaluates ``if:`` expressions for one recipe and platform."""

    def __init__(self, platform: str, path: Path) -> None:
        self.ns: dict[str, Any] = dict(_base_namespace(platform))
        self.path = path

    def render(self, value: Any, line: int | None = None) -> str:
        s = str(value)
        if _EXPR not in s:
            return s
        try:
            return _render_text(s, self.ns)
        except Exception as exc:  # noqa: BLE001 - jinja errors and whatever the expression raised (1/0, bad arguments)
            raise RenderError(f"cannot render expression {s!r}: {_describe(exc)}", path=self.path,
                              line=line or getattr(value, "line", None),
                              hint="check the ${{ }} expression and the context: variables it uses") from None

    def condition(self, expr: Any, *, unknown_matches: bool = True) -> bool:
        """Evaluate an ``if:`` (or ``skip:``) expression. ``match()`` on a variant the recipe cannot
        know (python, cuda_compiler_version) is True by default, so that conditional dependencies are
        kept; with ``unknown_matches=False`` it is False (a skip condition must not skip the recipe)."""
        s = str(expr).strip()
        if s.startswith(_EXPR) and s.endswith("}}"):
            s = s[3:-2].strip()
        simple = _simple_condition(s)
        if simple is not None:
            negate, name = simple
            return bool(self.ns.get(name, False)) is not negate
        ns = self.ns if unknown_matches else {**self.ns, "match": _match_unknown_false}
        try:
            result = _expression(s)(**ns)
        except Exception as exc:  # noqa: BLE001 - as in render()
            raise RenderError(f"cannot evaluate condition {s!r}: {_describe(exc)}", path=self.path,
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


_INT_RE = re.compile(r"-?\d+")
_DIGITS_RE = re.compile(r"\d+")


def _typed_scalar(raw: Any, rendered: str) -> Any:
    if isinstance(raw, LStr) and raw.quoted:
        return rendered
    low = rendered.lower()
    if low in ("true", "false"):
        return low == "true"
    if _INT_RE.fullmatch(rendered):
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
    raw: str  # the requirement as rendered; for pin functions/compilers the text in the file
    line: int
    spec: ParsedSpec | None  # None for pin functions / compilers
    func: str | None = None  # pin_compatible | pin_subpackage | compiler | stdlib | cdt
    func_kw: tuple[tuple[str, str], ...] = ()
    conditional: bool = False

    pin_name: str = ""  # the package a pin function / compiler() names
    output: int | None = None  # index in outputs: of a multi-output recipe; None = the top level

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


_new_object = object.__new__


def _dep(section: str, raw: str, line: int, spec: ParsedSpec | None, func: str | None = None,
         func_kw: tuple[tuple[str, str], ...] = (), conditional: bool = False, pin_name: str = "",
         output: int | None = None) -> Dep:
    """``Dep(...)`` without the frozen dataclass's per-field ``object.__setattr__`` calls (a recipe has
    dozens of requirements; this is several times faster). The result is an ordinary, equal ``Dep``."""
    d = _new_object(Dep)
    d.__dict__.update(section=section, raw=raw, line=line, spec=spec, func=func, func_kw=func_kw,
                      conditional=conditional, pin_name=pin_name, output=output)
    return d


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

    def items(self, value: Any, line: int, conditional: bool = False) -> list[tuple[Any, int, bool]]:
        """(rendered item, line, from an if/then branch) for every item that applies; empty
        rendered strings are dropped, mappings without ``if:`` are passed through unrendered."""
        out: list[tuple[Any, int, bool]] = []
        self._collect(value, line, conditional, out, None)
        return out

    def items_raw(self, value: Any, line: int) -> list[tuple[Any, Any, int, bool]]:
        """Like :meth:`items`, with the unrendered item first: (raw, rendered, line, conditional)."""
        out: list[tuple[Any, Any, int, bool]] = []
        self._collect(value, line, False, None, out)
        return out

    def _collect(self, value: Any, line: int, conditional: bool, out: list | None, out_raw: list | None) -> None:
        if value is None:
            return
        if isinstance(value, list):
            lines = value.item_lines if isinstance(value, LList) else ()
            n = len(lines)
            for i, item in enumerate(value):
                self._item(item, lines[i] if i < n else (value.line if isinstance(value, LList) else line),
                           conditional, out, out_raw)
        else:
            self._item(value, getattr(value, "line", line), conditional, out, out_raw)

    def _item(self, item: Any, line: int, conditional: bool, out: list | None, out_raw: list | None) -> None:
        if isinstance(item, str):
            rendered = self.r.render(item, line) if _EXPR in item else item
            rendered = rendered.strip()
            if rendered:
                if out is not None:
                    out.append((rendered, line, conditional))
                else:
                    out_raw.append((item, rendered, line, conditional))  # type: ignore[union-attr]
        elif isinstance(item, dict) and "if" in item:
            branch = item.get("then") if self.r.condition(item["if"]) else item.get("else")
            ln = item.line_of("then") if isinstance(item, LDict) else line
            self._collect(branch, ln, True, out, out_raw)
        elif item is not None:
            if out is not None:
                out.append((item, line, conditional))
            else:
                out_raw.append((item, item, line, conditional))  # type: ignore[union-attr]


@lru_cache(maxsize=4096)
def _pin_parts(rendered: str) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    func, name, kw = rendered[1:].split("|", 2)
    return func, name, tuple(tuple(p.split("=", 1)) for p in kw.split(";") if p)  # type: ignore[misc]


def _parse_dep(section: str, raw: str, rendered: str, line: int, conditional: bool, output: int | None = None) -> Dep:
    """``raw`` is the requirement as rendered (what a solver gets), except for pin functions and
    compilers, where it is the text in the recipe (``${{ pin_compatible('numpy') }}``)."""
    if rendered.startswith(_PIN_MARK):
        func, name, kws = _pin_parts(rendered)
        return _dep(section, str(raw).strip(), line, None, func, kws, conditional, name, output)
    return _dep(section, rendered, line, parse_spec(rendered), None, (), conditional, "", output)


_V0_RE = re.compile(r"^[ \t]*\{%", re.M)  # a jinja block at the start of a line: v0 meta.yaml


def parse_recipe(text: str, path: Path, platform: str = "linux-64") -> Recipe:
    """Parse recipe text into a :class:`Recipe`. Raises :class:`RecipeError` with file and line."""
    jinja_blocks = "{%" in text
    v0 = _V0_RE.search(text) if jinja_blocks else None
    if v0 is not None:
        raise RecipeError("this looks like a v0 meta.yaml ({% set %}); only v1 recipe.yaml is supported", path=path,
                          line=text.count("\n", 0, v0.start()) + 1,
                          hint="convert it: {% set %} -> context:, {{ x }} -> ${{ x }}, # [sel] -> if/then")
    doc = load_fast(text, path=path)
    if not isinstance(doc, dict):
        raise RecipeError("a recipe must be a YAML mapping (package:, source:, build:, ...)", path=path,
                          line=getattr(doc, "line", 1), hint="see the v1 recipe format")
    if jinja_blocks and "context" not in doc:
        raise RecipeError("this looks like a v0 meta.yaml ({% set %}); only v1 recipe.yaml is supported", path=path,
                          hint="convert it: {% set %} -> context:, {{ x }} -> ${{ x }}, # [sel] -> if/then")
    r = Renderer(platform, path)
    r.add_context(doc.get("context"))
    flat = _Flattener(r)
    lines: dict[str, int] = {}

    if "outputs" in doc:  # multi-output: the recipe: block names the family
        pkg = _mapping(doc.get("recipe"), "recipe", path, doc.line)
        outputs = doc.get("outputs") or []
        if not isinstance(outputs, list):
            raise RecipeError("'outputs' must be a list of mappings", path=path, field="outputs",
                              line=doc.line_of("outputs"), hint="write each output as '- package: {name: ...}'")
        first = outputs[0] if outputs and isinstance(outputs[0], dict) else {}
        pkg_first = _mapping(first.get("package"), "outputs[0].package", path, doc.line) if first else LDict()
        name_raw = pkg.get("name") or pkg_first.get("name")
        version_raw = pkg.get("version") or pkg_first.get("version")
        pkg_for_lines = pkg if "name" in pkg else pkg_first
        pkg_line = doc.line_of("recipe") if "recipe" in doc else (pkg_first.line or doc.line_of("outputs"))
        bodies = [doc] + [o for o in outputs if isinstance(o, dict)]
    else:
        if "package" not in doc:
            raise RecipeError("missing 'package:' section", path=path, field="package", line=1,
                              hint="add package: {name: ..., version: ...}")
        pkg = _mapping(doc.get("package"), "package", path, doc.line_of("package"))
        name_raw, version_raw, pkg_for_lines = pkg.get("name"), pkg.get("version"), pkg
        pkg_line = doc.line_of("package")
        bodies = [doc]
    for key, value in (("name", name_raw), ("version", version_raw)):
        if isinstance(value, (dict, list)):
            raise RecipeError(f"package.{key} must be a single value, not a {'mapping' if isinstance(value, dict) else 'list'}",
                              path=path, field=f"package.{key}", line=getattr(value, "line", None) or pkg_line)
    if not name_raw or not r.render(name_raw).strip():
        raise RecipeError("missing package name", path=path, field="package.name",
                          line=pkg_line, hint="add 'name:' under 'package:'")
    if version_raw is None or not r.render(version_raw).strip():
        raise RecipeError("missing package version", path=path, field="package.version",
                          line=pkg_line, hint="add 'version:' under 'package:' (or define it in context:)")
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
        if not _DIGITS_RE.fullmatch(rendered.strip()):
            raise RecipeError(f"build number '{rendered}' is not a whole number", path=path, field="build.number",
                              line=build.line_of("number"), hint="use number: 0 for a new version")
        build_number = int(rendered)
        lines["build.number"] = build.line_of("number")
    if isinstance(build.get("noarch"), (dict, list)):
        raise RecipeError("build.noarch must be 'python' or 'generic'", path=path, field="build.noarch",
                          line=build.line_of("noarch"))
    noarch = r.render(build["noarch"]).strip() if build.get("noarch") else None
    if "noarch" in build:
        lines["build.noarch"] = build.line_of("noarch")
    # build.skip: a list (or one) of conditions, each plain (`win`) or wrapped (`${{ win }}`); they are
    # evaluated, not rendered first, so that match() on an unknown variant does not skip the recipe
    skip = any(as_bool(raw) if str(raw).strip().lower() in ("true", "false")
               else r.condition(raw, unknown_matches=False)
               for raw, _, _, _ in flat.items_raw(build.get("skip"), build.line_of("skip")))

    requirements: dict[str, list[Dep]] = {s: [] for s in SECTIONS}
    run_exports: list[Dep] = []
    for index, body in enumerate(bodies):
        output = index - 1 if index else None
        req = _mapping(body.get("requirements"), "requirements", path, body.line_of("requirements") if isinstance(body, LDict) else 1)
        for section in SECTIONS:
            raw_list = req.get(section)
            if raw_list is not None and not isinstance(raw_list, list):
                raise RecipeError(f"'requirements.{section}' must be a list", path=path,
                                  field=f"requirements.{section}", line=req.line_of(section))
            if not raw_list:
                continue
            deps = requirements[section]
            # plain entries ("numpy >=1.24,<3": nothing to render or evaluate) are the common case and
            # are taken directly; anything else goes through the flattener, in the same order
            lines_of = raw_list.item_lines if isinstance(raw_list, LList) else ()
            fallback_line = raw_list.line if isinstance(raw_list, LList) else req.line_of(section)
            for i, item in enumerate(raw_list):
                line = lines_of[i] if i < len(lines_of) else fallback_line
                if type(item) is LStr and _EXPR not in item:
                    rendered = item.strip()
                    if rendered:
                        deps.append(_dep(section, rendered, line, parse_spec(rendered), None, (), False, "", output))
                    continue
                branch: list[tuple[Any, Any, int, bool]] = []
                flat._item(item, line, False, None, branch)
                for raw, rendered, ln, cond in branch:
                    if not isinstance(rendered, str):
                        raise RecipeError(f"unexpected entry in requirements.{section}: {rendered!r}", path=path,
                                          field=f"requirements.{section}", line=ln)
                    deps.append(_parse_dep(section, raw, rendered, ln, cond, output))
        rex = req.get("run_exports")
        if isinstance(rex, dict):
            rex_items = []
            for kind in ("weak", "strong"):
                part = rex.get(kind)
                if part is not None and not isinstance(part, list):
                    raise RecipeError(f"'requirements.run_exports.{kind}' must be a list", path=path,
                                      field=f"requirements.run_exports.{kind}", line=rex.line_of(kind))
                rex_items += part or []
        else:
            rex_items = rex
        for raw, rendered, line, cond in flat.items_raw(rex_items, req.line_of("run_exports")):
            if isinstance(rendered, str):
                run_exports.append(_parse_dep("run_exports", raw, rendered, line, cond, output))
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
        fields = {"line": getattr(item, "line", line)}
        for key in ("url", "sha256", "md5", "git", "path"):
            v = item.get(key)
            if isinstance(v, list):
                v = v[0] if v else None
            fields[key] = r.render(v).strip() if v is not None else None
        source = _new_object(Source)  # as _dep(): a frozen dataclass made without per-field setattr
        source.__dict__.update(fields)
        sources.append(source)
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
    found = []
    with os.scandir(recipes_dir) as entries:  # (os.scandir: pathlib costs ~30 us a folder)
        for entry in entries:
            if entry.is_dir() and os.path.isfile(os.path.join(entry.path, RECIPE_FILE)):
                found.append(entry.name)
    return [recipes_dir.joinpath(name, RECIPE_FILE) for name in sorted(found)]
