"""The typed view of a v1 ``recipe.yaml``: what rattler-build renders, with the lines of the text.

rattler-build's renderer (:mod:`conda_distro.recipe.render`) is the authority on what a recipe means: name,
version, outputs, requirements per variant, tests, about. This module turns its rendered outputs into
a :class:`Recipe` and adds what only the text knows: the line of each entry (for findings), whether an
entry sits in an ``if:`` branch, and whether ``build.number`` was written at all. The ruamel round-trip
document is loaded on demand (:meth:`Recipe.roundtrip`) by the flows that edit recipes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat as stat_mod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, overload

from conda_distro.errors import DistroError, RecipeError
from conda_distro.recipe.render import RenderedRecipe, RenderError, RenderSettings, remove_json_entries, render_text
from conda_distro.recipe.specs import ParsedSpec, parse_spec
from conda_distro.util.cachedir import PackedCache, prune_packs
from conda_distro.util.fsutil import read_bounded_text
from conda_distro.util.yamlio import MAX_DOCUMENT_BYTES, LDict, LList, load_fast, read_yaml_text

RECIPE_FILE = "recipe.yaml"
V0_FILE = "meta.yaml"
SECTIONS = ("build", "host", "run", "run_constraints")
_EXPR = "${{"
_PIN_FUNCS = ("pin_subpackage", "pin_compatible")
_TEMPLATE_FUNCS = ("compiler", "stdlib", "cdt")

__all__ = ["Dep", "Output", "Recipe", "VariantReqs", "RenderError", "Source", "load_recipe", "parse_recipe", "recipe_paths",
           "RECIPE_FILE", "SECTIONS"]


def as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "on", "1")


@dataclass(frozen=True)
class Dep:
    """One requirement entry, as rendered (deduplicated over the variants)."""

    section: str
    raw: str  # the requirement as written when it is a literal entry, else as rendered; for pin functions
    #           the text in the file (``spec.text`` is always what rattler-build rendered)
    line: int
    spec: ParsedSpec | None  # None for pin functions
    func: str | None = None  # pin_compatible | pin_subpackage | compiler | stdlib | cdt
    func_kw: tuple[tuple[str, str], ...] = ()
    conditional: bool = False
    pin_name: str = ""  # the package a pin function names
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

    @overload
    def kw(self, key: str) -> str | None: ...
    @overload
    def kw(self, key: str, default: str) -> str: ...

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
    file_name: str | None = None  # a url source saved under another name (extra downloads: licenses)
    target_directory: str | None = None


@dataclass(frozen=True)
class Output:
    """One package the recipe produces (a single-output recipe has one, index None)."""

    index: int | None
    name: str
    version: str
    build_number: int
    noarch: str | None
    variants: int  # how many variants rattler-build renders for it


@dataclass(frozen=True)
class VariantReqs:
    """One rendered variant of one output: its variant keys (those rattler-build says it uses) and its
    requirement specs per section as rendered (pin functions left out). A pin written with a variant key
    (``pytorch ${{ pytorch }}.*``) differs per variant: what a variant admits is read here."""

    output: str
    variant: dict[str, str]
    requirements: dict[str, tuple[str, ...]]


@dataclass
class Recipe:
    path: Path  # .../recipes/<name>/recipe.yaml
    text: str
    data: LDict | None  # the line-aware YAML tree (None until needed, for a recipe read from the cache)
    name: str
    version: str
    build_number: int | None  # None when the text never sets build.number
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
    outputs: list[Output] = field(default_factory=list)
    multi_output: bool = False
    settings: RenderSettings | None = None  # what it was rendered with (edits re-render the same way)
    variants: list[VariantReqs] = field(default_factory=list)  # every rendered output × variant
    #: what is derived from the text once and asked for again (e.g. its written pins: three lint checks and
    #: the sweep ask; bench_spine warm 300 recipes: 900 computations of 3.7 s profiled became 300)
    derived: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    #: (section, text as written, line) of every requirement item in the text, top level and outputs (and their
    #: tests': sections ``tests.build``, ``tests.run``), every
    #: if/then/else branch: what the pins are read from, kept in the model cache so that a warm lint never
    #: parses the YAML again (None: not known yet, read from :attr:`tree` when asked)
    written: tuple[tuple[str, str, int], ...] | None = field(default=None, repr=False, compare=False)
    #: (line, text as rendered) of each test requirement written with an expression (``pytorch >=2.4,<${{ hi }}``)
    #: that rattler-build renders to one text in every variant (:func:`rendered_test_entries`)
    test_rendered: tuple[tuple[int, str], ...] = field(default=(), repr=False, compare=False)

    def written_requirements(self) -> tuple[tuple[str, str, int], ...]:
        """:attr:`written`, read from the text's tree the first time when not known."""
        if self.written is None:
            self.written = written_requirements(self.tree)
        return self.written

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def output_names(self) -> list[str]:
        return [o.name for o in self.outputs] or [self.name]

    @property
    def tree(self) -> LDict:
        """The line-aware YAML tree of the text."""
        if self.data is None:
            self.data = _tree(self.text, self.path)
        return self.data

    def to_json(self) -> dict:
        """Everything but the path, the text and the tree (the model cache: see :func:`parse_recipe`)."""
        def dep(d: Dep) -> list:
            spec = None if d.spec is None else [d.spec.text, d.spec.name, d.spec.version, d.spec.build, d.spec.error]
            return [d.section, d.raw, d.line, spec, d.func, [list(k) for k in d.func_kw], d.conditional, d.pin_name, d.output]
        return {
            "name": self.name, "version": self.version, "build_number": self.build_number, "noarch": self.noarch,
            "skip": self.skip, "requirements": {k: [dep(d) for d in v] for k, v in self.requirements.items()},
            "tests": self.tests, "about": self.about, "maintainers": self.maintainers, "lockstep": self.lockstep,
            "skip_lints": self.skip_lints, "sources": [vars(x) for x in self.sources], "platform": self.platform,
            "run_exports": [dep(d) for d in self.run_exports], "lines": self.lines,
            "outputs": [vars(o) for o in self.outputs], "multi_output": self.multi_output,
            "variants": [[v.output, v.variant, {k: list(x) for k, x in v.requirements.items()}] for v in self.variants],
            "written": [list(w) for w in self.written_requirements()],
            "test_rendered": [list(t) for t in self.test_rendered],
        }

    @classmethod
    def from_json(cls, data: dict, path: Path, text: str, settings: RenderSettings | None,
                  shared: dict | None = None) -> Recipe:
        """The recipe of :meth:`to_json`'s data. ``shared``: equal immutable parts (specs, entries, strings)
        become one object across the recipes read with the same dict (a smaller packed cache)."""
        share: Callable[[Any], Any] = (lambda o: o) if shared is None else (lambda o: shared.setdefault(o, o))

        def dep(x: list) -> Dep:
            spec = None if x[3] is None else share(ParsedSpec(*x[3]))
            return share(Dep(x[0], x[1], x[2], spec, x[4], tuple(tuple(k) for k in x[5]), x[6], x[7], x[8]))
        return cls(
            path=path, text=text, data=None, name=data["name"], version=data["version"],
            build_number=data["build_number"], noarch=data["noarch"], skip=data["skip"],
            requirements={k: [dep(d) for d in v] for k, v in data["requirements"].items()}, tests=data["tests"],
            about=data["about"], maintainers=data["maintainers"], lockstep=data["lockstep"],
            skip_lints=data["skip_lints"], sources=[share(Source(**x)) for x in data["sources"]], platform=data["platform"],
            run_exports=[dep(d) for d in data["run_exports"]], lines=data["lines"],
            outputs=[share(Output(**o)) for o in data["outputs"]], multi_output=data["multi_output"], settings=settings,
            variants=[VariantReqs(share(o), {share(a): share(b) for a, b in v.items()},
                                  {share(k): share(tuple(x)) for k, x in r.items()}) for o, v, r in data["variants"]],
            written=tuple(share((a, b, c)) for a, b, c in data["written"]),
            test_rendered=tuple((a, b) for a, b in data["test_rendered"]),
        )

    def packed(self) -> Recipe:
        """A copy of plain values (no line-aware strings) without what the packed cache does not keep:
        path, text, settings, tree, derived values (set again when it is read, see :func:`parse_recipes`).
        A recipe without its tree was read from plain JSON data already (:meth:`from_json`)."""
        if self.data is None:
            return replace(self, path=None, text="", settings=None, derived={}, written=self.written)  # type: ignore[arg-type]
        return Recipe.from_json(json.loads(json.dumps(self.to_json())), None, "", None)  # type: ignore[arg-type]

    def produces(self, name: str) -> bool:
        """Is ``name`` one of the packages this recipe builds? A requirement on it (``pin_subpackage``,
        ``pytorch ==${{ version }}`` between a feedstock's outputs) is not a downstream pin."""
        return name == self.name or name in self.output_names

    def noarch_of(self, output: int | None) -> str | None:
        for o in self.outputs:
            if o.index == output:
                return o.noarch
        return self.noarch

    def deps(self, *sections: str) -> Iterator[Dep]:
        for s in sections or SECTIONS:
            yield from self.requirements.get(s, [])

    def dep_names(self, *sections: str) -> set[str]:
        return {d.name for d in self.deps(*sections) if d.name}

    def test_requirements(self) -> list[str]:
        """The run requirements of the recipe's tests as rendered (``"numpy >=1.24"``), in order."""
        return [str(dep) for t in self.tests if isinstance(t, dict)
                for dep in ((t.get("requirements") or {}).get("run") or [])]

    def line_of(self, key: str) -> int:
        return self.lines.get(key, 1)


# ---------------------------------------------------------------------------------------------
# lines: where each rendered entry stands in the text


@dataclass
class _Candidate:
    raw: str  # the item as written (unrendered)
    line: int
    conditional: bool
    used: bool = False

    @functools.cached_property
    def literal_name(self) -> str | None:
        """(Asked once per rendered entry of the section: computed once.)"""
        if _EXPR in self.raw:
            return None
        return parse_spec(self.raw.strip()).name

    def calls(self, funcs: tuple[str, ...]) -> str | None:
        for f in funcs:
            pattern = _CALL_RES.get(f) or re.compile(rf"\b{f}\s*\(")
            if pattern.search(self.raw):
                return f
        return None


#: ``name(`` of each pin and template function, compiled once (each entry asks for them per rendered entry)
_CALL_RES = {f: re.compile(rf"\b{f}\s*\(") for f in _PIN_FUNCS + _TEMPLATE_FUNCS}


def _flatten(value: Any, line: int, conditional: bool, out: list[_Candidate]) -> None:
    """Every item of a requirements list as written, both branches of if/then/else included."""
    if value is None:
        return
    if isinstance(value, list):
        lines = value.item_lines if isinstance(value, LList) else ()
        for i, item in enumerate(value):
            _flatten(item, lines[i] if i < len(lines) else getattr(value, "line", line), conditional, out)
        return
    if isinstance(value, dict) and "if" in value:
        for key in ("then", "else"):
            branch = value.get(key)
            ln = value.line_of(key) if isinstance(value, LDict) else line
            _flatten(branch, ln, True, out)
        return
    if isinstance(value, str):
        out.append(_Candidate(str(value), getattr(value, "line", line) or line, conditional))


def written_items(value: Any, line: int) -> list[tuple[str, int]]:
    """(text as written, line) of every item of a requirements list of the YAML tree, in every branch
    of its if/then/else conditions."""
    found: list[_Candidate] = []
    _flatten(value, line, False, found)
    return [(c.raw, c.line) for c in found]


REQUIREMENT_SECTIONS = ("build", "host", "run", "run_constraints")
#: the requirements of a test (``tests: [{requirements: {build: [...], run: [...]}}]``), and the sections
#: :func:`written_requirements` names them by
TEST_REQUIREMENT_SECTIONS = ("build", "run")
TEST_SECTIONS = tuple(f"tests.{s}" for s in TEST_REQUIREMENT_SECTIONS)


def written_tests(tests: Any, at: str = "tests") -> list[tuple[str, dict]]:
    """(path, test) of each test of a ``tests:`` list as written (``at``: the list's path, in the recipe
    editors' syntax: ``tests[1].then[0]``), those in both branches of an ``if:`` item included (``- if:
    linux`` / ``then:`` a test or a list of them / ``else:`` ...), in text order."""
    if isinstance(tests, list):
        return [found for j, t in enumerate(tests) for found in written_tests(t, f"{at}[{j}]")]
    if not isinstance(tests, dict):
        return []
    if "if" not in tests:
        return [(at, tests)]
    return [found for key in ("then", "else") for found in written_tests(tests.get(key), f"{at}.{key}")]


def written_requirements(doc: Any) -> tuple[tuple[str, str, int], ...]:
    """(section, text as written, line) of every requirement item of a recipe's tree: the top level's and
    each output's ``requirements`` (build, host, run, run_constraints) and the requirements of each of
    their tests (sections ``tests.build``, ``tests.run``; a test inside an ``if:`` item too), both branches of
    every condition."""
    outputs = doc.get("outputs") if isinstance(doc, dict) else None
    bodies = [doc] + [o for o in outputs if isinstance(o, dict)] if isinstance(outputs, list) else [doc]
    found: list[tuple[str, str, int]] = []
    for body in bodies:
        if not isinstance(body, dict):
            continue
        reqs: list[tuple[Any, tuple[str, ...], str]] = [(body.get("requirements"), REQUIREMENT_SECTIONS, "")]
        reqs += [(t.get("requirements"), TEST_REQUIREMENT_SECTIONS, "tests.") for _, t in written_tests(body.get("tests"))]
        for req, sections, prefix in reqs:
            if not isinstance(req, dict):
                continue
            for section in sections:
                start = req.line_of(section) if isinstance(req, LDict) else 1
                found.extend((prefix + section, text, line) for text, line in written_items(req.get(section), start))
    return tuple(found)


def rendered_test_entries(written: Iterable[tuple[str, str, int]], rendered: RenderedRecipe) -> tuple[tuple[int, str], ...]:
    """(line, text as rendered) of each test requirement ``written`` with an expression, found among the
    requirements rattler-build rendered for the tests of every output × variant: those the entry's
    literal parts match (``pytorch >=2.4,<${{ hi }}`` -> ``pytorch >=2.4,<(.+?)``), less any entry written
    literally in that section. Kept only when exactly one text matches: an entry in a branch that does not
    render here, or one that renders differently per variant, stays unread (as before)."""
    entries = [(section, text.strip(), line) for section, text, line in written if section in TEST_SECTIONS]
    literals: dict[str, set[str]] = {s: set() for s in TEST_SECTIONS}
    for section, text, _ in entries:
        if _EXPR not in text:
            literals[section].add(text)
    out: list[tuple[int, str]] = []
    for section, text, line in entries:
        if _EXPR not in text:
            continue
        parts = re.split(r"(\$\{\{.*?\}\})", text)
        pattern = re.compile("".join("(.+?)" if p.startswith(_EXPR) else re.escape(p) for p in parts))
        literal = literals[section]
        wanted = section.removeprefix("tests.")
        hits = {req.strip() for o in rendered.outputs for t in o.get("tests") or [] if isinstance(t, dict)
                for req in ((t.get("requirements") or {}).get(wanted) or []) if isinstance(req, str)
                and req.strip() not in literal and pattern.fullmatch(req.strip())}
        if len(hits) == 1:
            out.append((line, hits.pop()))
    return tuple(out)


class _LineFinder:
    """Maps rendered requirement entries of one output and section back to the text."""

    def __init__(self, bodies: list[Any], section: str, fallback: int) -> None:
        self.candidates: list[_Candidate] = []
        self.rendered_from: dict[str, _Candidate] = {}
        self.fallback = fallback
        for body in bodies:
            req = body.get("requirements") if isinstance(body, dict) else None
            if isinstance(req, dict):
                lst = req.get(section)
                line = req.line_of(section) if isinstance(req, LDict) else fallback
                if section == "run_exports" and isinstance(lst, dict):
                    for bucket in lst.values():
                        _flatten(bucket, line, False, self.candidates)
                else:
                    _flatten(lst, line, False, self.candidates)
                if isinstance(req, LDict) and section in req:
                    self.fallback = req.line_of(section)

    def _take(self, *preds: Callable[[_Candidate], bool]) -> _Candidate | None:
        """The first candidate a predicate accepts, in order of the predicates; candidates not yet
        matched to an entry first (a second identical entry is a second line)."""
        for want_unused in (True, False):
            for pred in preds:
                for c in self.candidates:
                    if (not want_unused or not c.used) and pred(c):
                        c.used = True
                        return c
        return None

    def find_spec(self, name: str) -> _Candidate | None:
        for c in self.candidates:  # a literal entry not matched yet
            if not c.used and c.literal_name == name:
                c.used = True
                return c
        known = self.rendered_from.get(name)  # the same package from an expression in another variant
        if known is not None:
            return known
        word = re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])")
        hit = self._take(
            lambda c: c.literal_name == name,
            lambda c: _EXPR in c.raw and word.search(c.raw) is not None,
            lambda c: c.calls(_TEMPLATE_FUNCS) is not None,
            lambda c: _EXPR in c.raw and c.calls(_PIN_FUNCS) is None,
        )
        if hit is not None:
            self.rendered_from[name] = hit
        return hit

    def find_pin(self, func: str, name: str) -> _Candidate | None:
        return self._take(lambda c: c.calls((func,)) is not None and name in c.raw,
                          lambda c: c.calls((func,)) is not None)


def _kw_text(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    return "" if value is None else str(value)


def _make_dep(section: str, item: Any, finder: _LineFinder, output: int | None) -> Dep | None:
    if isinstance(item, dict) and len(item) == 1 and next(iter(item)) in _PIN_FUNCS:
        func = next(iter(item))
        args = item[func] or {}
        name = str(args.get("name", ""))
        hit = finder.find_pin(func, name)
        kws = tuple(sorted((str(k), _kw_text(v)) for k, v in args.items() if k != "name"))
        return Dep(section, hit.raw.strip() if hit else f"${{{{ {func}('{name}') }}}}",
                   hit.line if hit else finder.fallback, None, func, kws, bool(hit and hit.conditional), name, output)
    if not isinstance(item, str):
        return None
    text = item.strip()
    if not text:
        return None
    spec = parse_spec(text)  # what rattler-build rendered (and normalised: `[build=x]` -> ` x`)
    hit = finder.find_spec(spec.name)
    func = hit.calls(_TEMPLATE_FUNCS) if hit is not None else None
    # raw: the entry as written where it is a literal (what a person reads and an edit finds on its
    # line), else as rendered
    raw = hit.raw.strip() if hit is not None and _EXPR not in hit.raw else text
    return Dep(section, raw, hit.line if hit else finder.fallback, spec, func, (), bool(hit and hit.conditional), "", output)


# ---------------------------------------------------------------------------------------------
# parse


_V0_RE = re.compile(r"^[ \t]*\{%", re.M)  # a jinja block at the start of a line: v0 meta.yaml
_V0_HINT = "convert it to a v1 recipe.yaml: {% set %} -> context:, {{ x }} -> ${{ x }}, # [sel] -> if/then, test: -> tests:"


def _mapping(value: Any) -> LDict:
    return value if isinstance(value, LDict) else LDict()


def _output_index(doc: LDict, rendered: RenderedRecipe) -> dict[str, int | None]:
    """Rendered output name -> its index under ``outputs:`` (literal names first, then the
    templated ones in order)."""
    if not rendered.multi_output:
        return {o["name"]: None for o in rendered.outputs}
    listed = doc.get("outputs")
    outputs = listed if isinstance(listed, list) else []
    raw_names = []
    for o in outputs:
        pkg = o.get("package") if isinstance(o, dict) else None
        raw_names.append(str(pkg.get("name")) if isinstance(pkg, dict) and pkg.get("name") is not None else "")
    names = list(dict.fromkeys(o["name"] for o in rendered.outputs))
    mapping: dict[str, int | None] = {}
    for i, raw in enumerate(raw_names):
        if _EXPR not in raw and raw in names:
            mapping[raw] = i
    templated = [i for i, raw in enumerate(raw_names) if _EXPR in raw or raw not in names]
    for name in names:
        if name not in mapping and templated:
            mapping[name] = templated.pop(0)
    for name in names:
        mapping.setdefault(name, None)
    return mapping


def _body(doc: LDict, index: int | None) -> list[Any]:
    if index is None:
        return [doc]
    outputs = doc.get("outputs")
    if isinstance(outputs, list) and index < len(outputs) and isinstance(outputs[index], dict):
        return [outputs[index], doc]
    return [doc]


def _declared_build_number(doc: LDict, lines: dict[str, int]) -> bool:
    build = doc.get("build")
    if isinstance(build, dict) and "number" in build:
        lines["build.number"] = build.line_of("number") if isinstance(build, LDict) else 1
        return True
    outputs = doc.get("outputs")
    if isinstance(outputs, list) and outputs:
        found = False
        for o in outputs:
            b = o.get("build") if isinstance(o, dict) else None
            if isinstance(b, dict) and "number" in b:
                lines.setdefault("build.number", b.line_of("number") if isinstance(b, LDict) else 1)
                found = True
        return found
    return False


_QUOTED_RE = re.compile(r"'([A-Za-z0-9_.\-]+)'")


def _find_key(node: Any, key: str) -> int | None:
    """The line of the first ``key:`` anywhere under ``node`` (depth first)."""
    children: Iterable[Any]
    if isinstance(node, LDict):
        if key in node:
            return node.line_of(key)
        children = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return None
    for child in children:
        hit = _find_key(child, key)
        if hit is not None:
            return hit
    return None


def _locate(doc: LDict, text: str, message: str) -> tuple[int | None, str | None]:
    """Line (and field) a rattler-build parse message is about. Its messages name fields in quotes
    (``invalid value for 'build.number'``, ``unknown top-level field 'scriptt'``), a missing field
    (then: the mapping that lacks it) or quote the offending value (then: the line that holds it)."""
    missing = re.search(r"missing required field '(\w+)'", message)
    if missing:
        for holder in ("package", "recipe"):
            if holder in doc and missing.group(1) in ("name", "version"):
                return doc.line_of(holder), f"{holder}.{missing.group(1)}"
        return 1, missing.group(1)
    for name in reversed(_QUOTED_RE.findall(message)):
        node: Any = doc
        line = None
        for part in name.split("."):
            if isinstance(node, LDict) and part in node:
                line, node = node.line_of(part), node[part]
            else:
                line = None
                break
        if line is None:
            line = _find_key(doc, name.split(".")[-1])
        if line is not None:
            return line, name
    # the quoted value, or the text after the last colon (``unable to parse version spec: >=2,,<3``)
    fragments = [q for q in re.findall(r"'([^']{2,})'", message)]
    tail = message.rsplit(": ", 1)[-1].strip()
    if len(tail) >= 3:
        fragments.append(tail)
    lines = text.splitlines()
    for frag in fragments:
        for i, ln in enumerate(lines):
            body = ln.split("#", 1)[0]
            if frag in body and not ln.lstrip().startswith("#"):
                return i + 1, None
    return 1, None


def _tree(text: str, path: Path) -> LDict:
    m = _V0_RE.search(text)
    if m is not None:
        raise RecipeError("this looks like a v0 meta.yaml ({% set %} / {{ }}); only v1 recipe.yaml is supported",
                          path=path, line=text.count("\n", 0, m.start()) + 1, hint=_V0_HINT)
    doc = load_fast(text, path=path)
    if not isinstance(doc, dict):
        raise RecipeError("a recipe must be a YAML mapping (package:, source:, build:, ...)", path=path,
                          line=getattr(doc, "line", 1), hint="see the v1 recipe format")
    return doc if isinstance(doc, LDict) else LDict(doc)


MODEL_SCHEMA = "7"  # bump when the Recipe model or how it is built changes


def parse_recipe(text: str, path: Path, settings: RenderSettings | None = None) -> Recipe:
    """Render ``text`` with rattler-build and build the :class:`Recipe`. Raises :class:`RecipeError`
    (a :class:`RenderError` for what rattler-build refuses) with file and line. One recipe is rendered
    each time (an edit, a fix, a skeleton's self-check); a distribution's recipes are read through the
    packed cache of :func:`parse_recipes`."""
    return _parse(text, path, settings or RenderSettings())


PACKS = "packs"  # the packed model caches: <render cache>/packs/<schema>-<owner hash>.pack, one per distribution
MAX_PACKS = 64  # packs kept (the most recently written; older ones are removed by the next writer)
PACK_UNUSED_DAYS = 14  # a pack's entries neither written nor used for this long are dropped when it is written


def pack_file(folder: Path, owner: str | None) -> Path:
    """The packed model cache of ``owner`` (a distribution's root folder; None: recipes of no distribution)
    under the render cache ``folder``."""
    digest = hashlib.sha256((owner or "").encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return folder / PACKS / f"{MODEL_SCHEMA}-{digest}.pack"
#: the classes a packed cache may hold (anything else in its file: the cache is read as empty)
_PACKED: tuple[type, ...] = ()  # (set below, once the classes exist)
PARALLEL_MIN = 200  # below this many recipes to render, starting worker processes costs more than it saves


def parse_recipes(items: list[tuple[str, Path, RenderSettings]], jobs: int | None = None, *,
                  owner: str | None = None) -> list[Recipe | DistroError]:
    """:func:`parse_recipe` of many recipes ((text, path, settings) each), in order: each a
    :class:`Recipe` or the :class:`DistroError` that says why it cannot be read.

    The models are kept in one packed cache per ``owner`` (the distribution's root folder: a small
    distribution never reads a big one's models), :class:`~conda_distro.util.cachedir.PackedCache`,
    file :func:`pack_file` under the render cache's folder, keyed as the render cache is (text + variant
    configuration + target platform + rattler-build version): a warm load reads one file. The
    recipes not in it are parsed (rendered) once each, in ``jobs`` worker processes when there are
    many (rattler-build holds the GIL; spawn, never fork: see the engine notes), and added to it in
    one write. A recipe that cannot be read is not packed (its render error is in the render cache)."""
    results: list[Recipe | DistroError | None] = [None] * len(items)
    keys = [model_key(text, s) for text, _, s in items]
    folder = next((s.cache_dir for _, _, s in items if s.cache_dir is not None), None)
    pack = PackedCache(pack_file(folder, owner), allowed=_PACKED) if folder is not None else None
    stored = pack.load() if pack is not None else {}
    todo: list[int] = []
    for i, ((text, path, settings), key) in enumerate(zip(items, keys, strict=True)):
        recipe = stored.get(key) if key is not None else None
        if type(recipe) is Recipe:
            recipe.path, recipe.text, recipe.settings = path, text, settings
            results[i] = recipe
        else:
            todo.append(i)
    fresh: dict[str, Recipe] = {}
    for i, outcome in zip(todo, _parse_many([items[i] for i in todo], jobs), strict=True):
        results[i] = outcome
        key = keys[i]
        if isinstance(outcome, Recipe) and key is not None:
            fresh[key] = outcome.packed()
    if pack is not None and fresh:
        pack.update(fresh, used=[k for k in keys if k is not None and k not in fresh], drop_after=PACK_UNUSED_DAYS * 86400)
        prune_packs(pack.path.parent, MAX_PACKS, spare=pack.path)
        remove_json_entries(pack.path.parent.parent)  # (what older versions wrote per recipe; only when writing)
    return results  # type: ignore[return-value]


def model_key(text: str, settings: RenderSettings) -> str | None:
    """The packed cache's key of ``text`` rendered with ``settings`` (None: no cache)."""
    if settings.cache_dir is None:
        return None
    return hashlib.sha256(settings.digest.encode() + b"\0" + text.encode("utf-8", "surrogatepass")).hexdigest()


def _parse_many(items: list[tuple[str, Path, RenderSettings]], jobs: int | None) -> list[Recipe | DistroError]:
    """The recipe (or the error) of each item: parsed in this process for a few, else in workers."""
    jobs = jobs or min(os.cpu_count() or 1, 8)
    if len(items) < PARALLEL_MIN or jobs < 2:
        out: list[Recipe | DistroError] = []
        for text, path, settings in items:
            try:
                out.append(parse_recipe(text, path, settings))
            except DistroError as exc:
                out.append(exc)
        return out
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    uncached: dict[RenderSettings, RenderSettings] = {}  # (one object per distinct settings: pickled once a chunk)
    work = [(text, str(path), uncached.setdefault(settings, replace(settings, cache_dir=None))) for text, path, settings in items]
    # The models are made from the workers' data as each chunk arrives (this process works while the workers
    # render the next ones), and the workers are left to exit on their own once the last chunk is in (joined
    # by the pool's own thread, and at the latest when this process exits): waiting for their exit cost
    # up to a second of wall clock on a loaded machine (bench_spine cold).
    pool = ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"), initializer=_worker_start)
    shared: dict = {}
    out = []
    try:
        done = pool.map(_parse_in_worker, work, chunksize=max(1, len(work) // (jobs * 8)))
        for outcome, (text, path, settings) in zip(done, items, strict=True):
            out.append(outcome if isinstance(outcome, DistroError) else Recipe.from_json(outcome, path, text, settings, shared))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return out


def _worker_start() -> None:
    """(A worker process, once.) Its environment becomes the render environment for good (it only
    renders): each render's :func:`~conda_distro.util.rattler_env.fixed_environment` then swaps a few
    variables, not the caller's whole environment (bench_spine cold: 0.16 s of 2.6 s per 300 recipes)."""
    import tempfile

    from conda_distro.util.rattler_env import RENDER_ENV

    tempfile.gettempdir()  # (settled from the caller's TMPDIR first, as fixed_environment does)
    os.environ.clear()
    os.environ.update(RENDER_ENV)


def _parse_in_worker(item: tuple[str, str, RenderSettings]) -> dict | DistroError:
    """(In a worker process.) The recipe's model as plain data (:meth:`Recipe.to_json`, pickled back as it is:
    its values are plain already; a JSON dump and load of it here cost ~0.2 ms a recipe, bench_spine cold),
    or why it cannot be read."""
    text, path, settings = item
    try:
        return _parse(text, Path(path), settings).to_json()
    except DistroError as exc:
        return exc


def _parse(text: str, path: Path, settings: RenderSettings) -> Recipe:
    """rattler-build's rendering of ``text``, with the lines of the text: the steps below, in order."""
    doc = _tree(text, path)
    try:
        rendered = render_text(text, path, settings, tree=doc)
    except RenderError as exc:
        if exc.line is None:  # rattler-build's parse errors name a field but often no place
            exc.line, exc.field = _locate(doc, text, exc.message)
        raise
    lines, head = _section_lines(doc)
    index = _output_index(doc, rendered)
    outputs = _outputs(doc, rendered, index, lines)
    main = next((o for o in outputs if o.name == path.parent.name), outputs[0] if outputs else None)
    name, version, noarch, number = _identity(head, main, outputs, rendered.multi_output, path.parent.name)
    build_number = number if _declared_build_number(doc, lines) else None
    requirements, run_exports = _requirements(doc, rendered, index, lines.get("requirements", lines.get("build", 1)))
    tests = _tests(doc, rendered, lines)
    written = written_requirements(doc)
    first = next((o for o in rendered.outputs if main is not None and o["name"] == main.name), None)
    about = dict(first["about"]) if first else {}
    about_raw = _mapping(doc.get("about"))
    for k in about_raw:
        lines[f"about.{k}"] = about_raw.line_of(k)
    maintainers, lockstep, skip_lints = _extra(doc, first["extra"] if first else {}, lines)
    sources = _sources(doc, first["sources"] if first else [], lines)
    if "build" not in lines:
        lines["build"] = 1
    return Recipe(
        path=path, text=text, data=doc, name=name, version=version, build_number=build_number,
        noarch=noarch, skip=not outputs, requirements=requirements, tests=tests, about=about,
        maintainers=maintainers, lockstep=lockstep, skip_lints=skip_lints, sources=sources,
        platform=settings.target_platform, run_exports=run_exports, lines=lines, outputs=outputs,
        multi_output=rendered.multi_output, settings=settings, variants=_variant_reqs(rendered),
        written=written, test_rendered=rendered_test_entries(written, rendered),
    )


def _variant_reqs(rendered: RenderedRecipe) -> list[VariantReqs]:
    return [VariantReqs(o["name"], dict(o.get("variant") or {}),
                        {s: tuple(str(x) for x in (o["requirements"].get(s) or []) if isinstance(x, str)) for s in SECTIONS})
            for o in rendered.outputs]


def _section_lines(doc: LDict) -> tuple[dict[str, int], LDict]:
    """The lines of the top-level sections and of the package's name and version; and the ``package:``
    (or ``recipe:``) mapping."""
    lines: dict[str, int] = {}
    for key in ("package", "recipe", "build", "requirements", "tests", "about", "extra", "source", "outputs", "context"):
        if key in doc:
            lines[key] = doc.line_of(key)
    head = _mapping(doc.get("package")) if "package" in doc else _mapping(doc.get("recipe"))
    if "package" in doc or "recipe" in doc:
        lines["package"] = lines.get("package", lines.get("recipe", 1))
        lines["package.name"] = head.line_of("name") if "name" in head else lines["package"]
        lines["package.version"] = head.line_of("version") if "version" in head else lines["package"]
    return lines, head


def _outputs(doc: LDict, rendered: RenderedRecipe, index: dict[str, int | None], lines: dict[str, int]) -> list[Output]:
    """One :class:`Output` per rendered package name (with how many variants it renders to)."""
    outputs: list[Output] = []
    counts: dict[str, int] = {}
    for o in rendered.outputs:
        counts[o["name"]] = counts.get(o["name"], 0) + 1
    for o in rendered.outputs:
        if any(x.name == o["name"] for x in outputs):
            continue
        outputs.append(Output(index.get(o["name"]), o["name"], o["version"], int(o["build_number"] or 0),
                              o.get("noarch"), counts[o["name"]]))
    if rendered.multi_output and outputs and "outputs" in doc:
        first_out = doc["outputs"][0] if isinstance(doc["outputs"], list) and doc["outputs"] else None
        if isinstance(first_out, LDict) and "package.name" not in lines:
            lines["package.name"] = first_out.line
    return outputs


def _identity(head: LDict, main: Output | None, outputs: list[Output], multi_output: bool,
              folder: str) -> tuple[str, str, str | None, int]:
    """The recipe's name, version, noarch and build number: its main output's (the one named like the
    folder, else the first); when nothing renders for this platform, what the text says."""
    if main is None:  # nothing renders for this platform (skipped everywhere)
        name = str(head.get("name") or folder) if _EXPR not in str(head.get("name") or "") else folder
        version = str(head.get("version") or "0") if _EXPR not in str(head.get("version") or "") else "0"
        return name, version, None, 0
    noarch = main.noarch
    if multi_output and len({o.noarch for o in outputs}) > 1:
        noarch = None
    return main.name, main.version, noarch, main.build_number


def _requirements(doc: LDict, rendered: RenderedRecipe, index: dict[str, int | None],
                  req_line: int) -> tuple[dict[str, list[Dep]], list[Dep]]:
    """Every requirement of every rendered variant, once each, with its line; and the run exports."""
    requirements: dict[str, list[Dep]] = {s: [] for s in SECTIONS}
    run_exports: list[Dep] = []
    seen: set[tuple[int | None, str, str, int | str]] = set()
    finders: dict[tuple[int | None, str], _LineFinder] = {}

    def add(out: list[Dep], section: str, item: Any, out_idx: int | None, bodies: Any) -> None:
        finder = finders.get((out_idx, section))
        if finder is None:
            finder = finders[(out_idx, section)] = _LineFinder(bodies, section, req_line)
        dep = _make_dep(section, item, finder, out_idx)
        if dep is not None:
            out.append(dep)

    for o in rendered.outputs:
        out_idx = index.get(o["name"])
        bodies = _body(doc, out_idx)
        for section in SECTIONS:
            occurrence: dict[str, int] = {}  # the same entry twice in one variant is two entries
            for item in o["requirements"].get(section) or []:
                r = repr(item)
                occurrence[r] = occurrence.get(r, 0) + 1
                seen_key = (out_idx, section, r, occurrence[r])
                if seen_key not in seen:
                    seen.add(seen_key)
                    add(requirements[section], section, item, out_idx, bodies)
        rex = o.get("run_exports") or {}
        buckets = rex.items() if isinstance(rex, dict) else [("weak", rex)]
        for bucket, items in buckets:
            for item in items or []:
                rex_key = (out_idx, "run_exports", str(bucket), repr(item))
                if rex_key not in seen:
                    seen.add(rex_key)
                    add(run_exports, "run_exports", item, out_idx, bodies)
    return requirements, run_exports


def _tests(doc: LDict, rendered: RenderedRecipe, lines: dict[str, int]) -> list[Any]:
    """The rendered tests of every output, once each (and the line of the first ``tests:`` when only
    outputs have them)."""
    tests: list[Any] = []
    seen_tests: set[str] = set()
    for o in rendered.outputs:
        for t in o.get("tests") or []:
            k = repr(t)
            if k not in seen_tests:
                seen_tests.add(k)
                tests.append(t)
    if "tests" not in lines and tests:
        listed = doc.get("outputs")
        out_list = listed if isinstance(listed, list) else []
        for o in out_list:
            if isinstance(o, LDict) and "tests" in o:
                lines["tests"] = o.line_of("tests")
                break
    return tests


def _extra(doc: LDict, extra_src: dict, lines: dict[str, int]) -> tuple[list[str], bool, list[str]]:
    """From ``extra:`` (rendered; the text's when nothing renders): the maintainers, ``pytorch-lockstep``
    and ``skip-lints``."""
    extra_tree = _mapping(doc.get("extra"))
    if not extra_src and extra_tree:
        extra_src = {k: v for k, v in extra_tree.items()}
    maint_raw = extra_src.get("recipe-maintainers")
    if maint_raw is not None and not isinstance(maint_raw, list):
        maint_raw = [maint_raw]
    maintainers = [str(m).strip() for m in (maint_raw or []) if m is not None]
    if "recipe-maintainers" in extra_tree:
        lines["extra.recipe-maintainers"] = extra_tree.line_of("recipe-maintainers")
    lockstep = as_bool(extra_src.get("pytorch-lockstep", False))
    skip_lints_raw = extra_src.get("skip-lints") or []
    skip_lints = [str(s) for s in (skip_lints_raw if isinstance(skip_lints_raw, list) else [skip_lints_raw])]
    return maintainers, lockstep, skip_lints


def _sources(doc: LDict, rendered: list, lines: dict[str, int]) -> list[Source]:
    src_lines: list[int] = []
    raw = doc.get("source")
    if isinstance(raw, list):
        for i, item in enumerate(raw):
            ln = raw.item_lines[i] if isinstance(raw, LList) and i < len(raw.item_lines) else lines.get("source", 1)
            if isinstance(item, dict) and "if" in item:
                for key in ("then", "else"):
                    branch = item.get(key)
                    for b in branch if isinstance(branch, list) else [branch]:
                        if isinstance(b, dict):
                            src_lines.append(getattr(b, "line", ln) or ln)
            else:
                src_lines.append(getattr(item, "line", ln) or ln)
    elif isinstance(raw, dict):
        src_lines.append(getattr(raw, "line", lines.get("source", 1)))
    out = []
    for i, s in enumerate(rendered if isinstance(rendered, list) else [rendered]):
        if not isinstance(s, dict):
            continue
        url = s.get("url")
        if isinstance(url, list):
            url = url[0] if url else None
        out.append(Source(
            url=str(url) if url else None, sha256=s.get("sha256"), md5=s.get("md5"),
            git=str(s["git"]) if s.get("git") else None, path=str(s["path"]) if s.get("path") else None,
            line=src_lines[i] if i < len(src_lines) else lines.get("source", 1),
            file_name=s.get("file_name"), target_directory=s.get("target_directory"),
        ))
    return out


def read_recipe_text(path: Path, found: RecipeFile | None = None) -> str:
    """The text of recipes/<name>/recipe.yaml (a clear error for a v0 meta.yaml in its place). ``found``: what
    :func:`scan_recipes` saw of the folder (no ``meta.yaml`` in it: no v0 check; its real path: read without
    resolving it again)."""
    if found is not None and found.names is not None and V0_FILE not in found.names:
        try:
            return read_bounded_text(path, MAX_DOCUMENT_BYTES, error=RecipeError, real=found.real)
        except FileNotFoundError:
            raise RecipeError("cannot read file: no such file", path=path) from None
    v0 = path.parent / V0_FILE
    if v0.is_file() and not path.is_file():
        raise RecipeError("a v0 meta.yaml is not supported: only v1 recipe.yaml is", path=v0, hint=_V0_HINT)
    text = read_yaml_text(path, error=RecipeError)
    if v0.is_file():
        raise RecipeError(f"a v0 {V0_FILE} stands beside recipe.yaml; rattler-build reads only recipe.yaml",
                          path=v0, hint=f"delete {V0_FILE} (or the recipe.yaml, if the v0 recipe is the real one)")
    return text


def load_recipe(path: Path, settings: RenderSettings | None = None) -> Recipe:
    return parse_recipe(read_recipe_text(path), path, settings)


@dataclass(frozen=True)
class RecipeFile:
    """One ``recipes/<name>/`` folder as :func:`scan_recipes` saw it."""

    folder: str  # <name>
    state: tuple[int, int, int] | None  # (inode, mtime_ns, size) of recipe.yaml after links; None: none readable
    real: str | None = None  # its real path when no symbolic link leads to it below the resolved recipes/ folder
    names: frozenset[str] | None = None  # the folder's entries (``contents=True``)
    recipes_dir: Path | None = field(default=None, compare=False)

    @property
    def path(self) -> Path:
        """recipes/<name>/recipe.yaml"""
        return self.recipes_dir.joinpath(self.folder, RECIPE_FILE)  # type: ignore[union-attr]


def scan_recipes(recipes_dir: Path, *, contents: bool = False) -> list[RecipeFile]:
    """Every recipe folder of ``recipes_dir``, sorted by name, in one pass: what :func:`recipe_paths` lists, with
    the state of each ``recipe.yaml`` (what :func:`conda_distro.distribution.repository_state` compares) from
    one ``lstat`` (a ``stat`` more for a symbolic link), and with ``contents`` each folder's entries (whether a
    v0 ``meta.yaml`` or a variant file stands beside it: one listing instead of a check per name). Before,
    a warm load of 5,000 recipes made about 11 ``stat``-like calls a recipe (``realpath`` of every file,
    ``Path.stat``, ``is_file``, ``lexists``)."""
    if not recipes_dir.is_dir():
        return []
    real_dir = os.path.realpath(recipes_dir)
    found: list[RecipeFile] = []
    with os.scandir(recipes_dir) as entries:
        for entry in entries:
            if not entry.is_dir():
                continue
            path = f"{entry.path}/{RECIPE_FILE}"  # (f-strings: os.path.join cost more than the lstat)
            real: str | None = None
            st: os.stat_result | None
            try:
                st = os.lstat(path)
                if stat_mod.S_ISLNK(st.st_mode):
                    try:
                        st = os.stat(path)
                    except OSError:
                        st = None
                elif not entry.is_symlink():
                    real = f"{real_dir}/{entry.name}/{RECIPE_FILE}"
            except OSError:  # (no recipe.yaml: listed when a v0 meta.yaml stands there, as recipe_paths lists it)
                if not os.path.isfile(f"{entry.path}/{V0_FILE}"):
                    continue
                st = None
            names = None
            if contents:
                try:
                    names = frozenset(os.listdir(entry.path))
                except OSError:
                    names = None
            state = (st.st_ino, st.st_mtime_ns, st.st_size) if st is not None else None
            found.append(RecipeFile(entry.name, state, real, names, recipes_dir))
    found.sort(key=lambda f: f.folder)
    return found


def recipe_paths(recipes_dir: Path, names: list[str] | None = None) -> list[Path]:
    """recipes/<name>/recipe.yaml for every (or the named) folder, sorted by name. A folder holding
    only a v0 ``meta.yaml`` is listed too (loading it gives a clear error)."""
    if names:
        return [recipes_dir / n / RECIPE_FILE for n in names]
    if not recipes_dir.is_dir():
        return []
    found = []
    with os.scandir(recipes_dir) as entries:  # (os.scandir: pathlib costs ~30 us a folder)
        for entry in entries:
            # (lexists: a recipe.yaml that is a FIFO or a link to a device is a recipe whose reading is refused)
            if entry.is_dir() and (os.path.lexists(os.path.join(entry.path, RECIPE_FILE))
                                   or os.path.isfile(os.path.join(entry.path, V0_FILE))):
                found.append(entry.name)
    return [recipes_dir.joinpath(name, RECIPE_FILE) for name in sorted(found)]


_PACKED = (Recipe, Dep, Output, Source, VariantReqs, ParsedSpec)
