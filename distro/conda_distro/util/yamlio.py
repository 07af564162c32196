"""The one YAML factory of the package.

Two views of the same text:

* :func:`load_fast` — libyaml (PyYAML's C composer) into plain ``dict``/``list``/``str`` subclasses
  that remember their 1-based line. Every scalar stays a string exactly as written (``1.10`` is
  not the float ``1.1``; ``on`` is not ``True``), typed interpretation happens in the models.
  This is the read path for lint, graph and the engines (a warm load of recipes reads none: the
  models come from the packed cache, see :mod:`conda_distro.recipe.model`).
* :func:`load_roundtrip` / :func:`dump_roundtrip` — ruamel.yaml round-trip documents, used only to
  edit files (``lint --fix``, sweep). Indentation is detected per file so that
  ``dump(load(text)) == text`` for the recipes we keep.

Every reader refuses what YAML would silently accept but the author did not mean: a key given twice
in one mapping (YAML keeps the last one; rattler-build refuses the file), documents past
:data:`MAX_DOCUMENT_BYTES`, and aliases that expand past :data:`MAX_EXPANDED_SIZE` ("billion laughs").
:func:`load_typed` is the same path with PyYAML's typed scalars, for files the tool writes itself.
"""

from __future__ import annotations

import io
import weakref
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.util import load_yaml_guess_indent

from conda_distro.errors import DistroError
from conda_distro.util.fsutil import read_bounded_text

try:  # pragma: no branch
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - libyaml missing
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

_NULL_TAG, _MERGE_TAG, _STR_TAG = "tag:yaml.org,2002:null", "tag:yaml.org,2002:merge", "tag:yaml.org,2002:str"


class _StringLoader(_Loader):
    """The loader of :func:`load_fast`, whose scalars are all strings: a plain scalar is resolved only to what
    :func:`_construct` and :func:`_check_nodes` tell apart (null, the ``<<`` merge key, a string), not
    matched against every implicit type's pattern (int, float, bool, timestamp) first (bench_spine cold:
    ~0.1 ms of a recipe's ~1.8 ms parse with lines). :func:`load_typed` keeps the full resolver."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode:
            if implicit[0]:
                if value in _NULLS:  # (YAML's null pattern: ~, null, Null, NULL and the empty plain scalar)
                    return _NULL_TAG
                if value == "<<":
                    return _MERGE_TAG
            return _STR_TAG
        return super().resolve(kind, value, implicit)


class LStr(str):
    """A string scalar that knows its line (1-based) and whether it was quoted."""

    line: int = 0
    quoted: bool = False


class LDict(dict):
    """A mapping that knows its own line and the line of each key."""

    line: int = 0

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.key_lines: dict[str, int] = {}

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class LList(list):
    """A sequence that knows its own line and the line of each item."""

    line: int = 0

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.item_lines: list[int] = []

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if index < len(self.item_lines) else self.line


_NULLS = frozenset({"", "~", "null", "Null", "NULL"})


class _ConstructError(Exception):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message, self.line = message, line


#: A document larger than this is refused before parsing (recipes and distro.yaml are a few KB).
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
#: What a document may expand to with its aliases followed, in characters of scalars + nodes.
MAX_EXPANDED_SIZE = 4 * 1024 * 1024

_DUP_HINT = "remove one of the two (YAML would silently keep only the last one)"


class _DuplicateKey(Exception):
    def __init__(self, key: str, first: int, second: int) -> None:
        super().__init__(key)
        self.key, self.first, self.second = key, first, second


def _duplicate(key: str, first: int, second: int, path: str | Path | None) -> YamlSyntaxError:
    return YamlSyntaxError(f"duplicate key '{key}' at lines {first} and {second}", path=path, line=second,
                           hint=_DUP_HINT)


def _check_nodes(root: yaml.Node, path: str | Path | None) -> None:
    """Refuse duplicate keys and alias bombs in a composed node graph (before anything is built from it).
    Each distinct node is visited once; its expanded size (aliases followed) is memoised, so a
    "billion laughs" document is measured in the time its text takes to read."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if isinstance(node, yaml.ScalarNode):
            n = 1 + len(node.value)
        else:
            if key in active:
                raise _ConstructError("an alias refers to the node that contains it (recursive alias)",
                                      node.start_mark.line + 1)
            active.add(key)
            n = 1
            if isinstance(node, yaml.MappingNode):
                seen: dict[str, int] = {}
                for knode, vnode in node.value:
                    if isinstance(knode, yaml.ScalarNode) and knode.tag != "tag:yaml.org,2002:merge":
                        line = knode.start_mark.line + 1
                        if knode.value in seen:
                            raise _DuplicateKey(knode.value, seen[knode.value], line)
                        seen[knode.value] = line
                    n += size(knode) + size(vnode)
                    if n > MAX_EXPANDED_SIZE:
                        break
            else:
                for item in node.value:
                    n += size(item)
                    if n > MAX_EXPANDED_SIZE:
                        break
            active.discard(key)
        if n > MAX_EXPANDED_SIZE:
            raise _ConstructError(f"the document expands to more than {MAX_EXPANDED_SIZE // (1024 * 1024)} MB "
                                  "through its aliases (&anchor / *alias)", node.start_mark.line + 1)
        sizes[key] = n
        return n

    try:
        size(root)
    except _DuplicateKey as exc:
        raise _duplicate(exc.key, exc.first, exc.second, path) from None
    except _ConstructError as exc:
        raise YamlSyntaxError(f"invalid YAML: {exc.message}", path=path, line=exc.line,
                              hint="write the repeated parts out, or remove the aliases") from None


def _construct(node: yaml.Node, memo: dict[int, Any], active: set[int]) -> Any:
    """Node graph -> line-aware containers. Aliases share one constructed object (``memo``), so a
    document made of nested aliases costs what its text costs; a recursive alias is an error."""
    key_id = id(node)
    if key_id in memo:
        return memo[key_id]
    if isinstance(node, yaml.ScalarNode):
        # the C parser gives plain scalars style '' and the pure-Python one None
        if node.tag == "tag:yaml.org,2002:null" and not node.style and node.value in _NULLS:
            return None
        s = LStr(node.value)
        s.line = node.start_mark.line + 1
        s.quoted = node.style in ("'", '"')
        return s
    if key_id in active:
        raise _ConstructError("an alias refers to the node that contains it (recursive alias)", node.start_mark.line + 1)
    active.add(key_id)
    out: LList | LDict
    try:
        if isinstance(node, yaml.SequenceNode):
            out = seq = LList()
            seq.line = node.start_mark.line + 1
            for item in node.value:
                seq.append(_construct(item, memo, active))
                seq.item_lines.append(item.start_mark.line + 1)
        elif isinstance(node, yaml.MappingNode):
            out = mapping = LDict()
            mapping.line = node.start_mark.line + 1
            for knode, vnode in node.value:
                if knode.tag == "tag:yaml.org,2002:merge":
                    merged = _construct(vnode, memo, active)
                    for m in merged if isinstance(merged, list) else [merged]:
                        if not isinstance(m, dict):
                            raise _ConstructError("a '<<' merge key needs a mapping or a list of mappings",
                                                  knode.start_mark.line + 1)
                        for k, v in m.items():
                            mapping.setdefault(k, v)
                    continue
                key = str(knode.value)
                mapping[key] = _construct(vnode, memo, active)
                mapping.key_lines[key] = knode.start_mark.line + 1
        else:  # pragma: no cover
            raise TypeError(f"unexpected YAML node {node!r}")
    finally:
        active.discard(key_id)
    memo[key_id] = out
    return out


class YamlSyntaxError(DistroError):
    """The text is not valid YAML."""


_HINT = "fix the YAML syntax (indentation, a missing ':' or an unclosed quote)"


def load_fast(text: str, *, path: str | Path | None = None) -> Any:
    """Parse YAML text into line-aware plain containers (all scalars are strings), with libyaml.

    (A hand-written parser for plain block-style YAML used to stand in front of libyaml here. It parsed
    1,000 generated recipes in 0.07 s of CPU against libyaml's 0.21 s, but recipes are parsed only when
    they are rendered (cold: rattler-build's own render of those 1,000 costs ~2.4 s of CPU, so the
    parser saved ~6 % of it) or edited: a warm load reads the packed model cache and parses no YAML.
    bench_spine showed no target decided by it: removed.)"""
    _check_size(text, path)
    node = _compose(text, path, _StringLoader)
    if node is None:
        return None
    try:
        return _construct(node, {}, set())
    except _ConstructError as exc:
        raise YamlSyntaxError(f"invalid YAML: {exc.message}", path=path, line=exc.line, hint=_HINT) from None
    except RecursionError:
        raise YamlSyntaxError("invalid YAML: nested too deeply", path=path) from None


def _check_size(text: str, path: str | Path | None) -> None:
    if len(text) > MAX_DOCUMENT_BYTES:
        raise YamlSyntaxError(f"the file is {len(text) // 1024} KB; YAML files read by conda-distro are limited "
                              f"to {MAX_DOCUMENT_BYTES // (1024 * 1024)} MB", path=path,
                              hint="this is not a recipe or configuration file; check what was written here")


def _compose(text: str, path: str | Path | None, loader: Any = _Loader) -> yaml.Node | None:
    """libyaml's node graph of ``text``, checked by :func:`_check_nodes`; YAML errors as YamlSyntaxError."""
    try:
        node = yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise YamlSyntaxError(f"invalid YAML: {exc.problem or exc.context}", path=path, line=line, hint=_HINT) from None
    except yaml.YAMLError as exc:  # pragma: no cover - non-marked errors are rare
        raise YamlSyntaxError(f"invalid YAML: {exc}", path=path) from None
    except RecursionError:
        raise YamlSyntaxError("invalid YAML: nested too deeply", path=path) from None
    if node is not None:
        try:
            _check_nodes(node, path)
        except RecursionError:
            raise YamlSyntaxError("invalid YAML: nested too deeply", path=path) from None
    return node


def load_typed(text: str, *, path: str | Path | None = None) -> Any:
    """Like ``yaml.safe_load`` (ints, bools, dates are typed), through the same checks as
    :func:`load_fast`: for files the tool writes itself (retirement records)."""
    _check_size(text, path)
    node = _compose(text, path)
    if node is None:
        return None
    try:
        return _Loader("").construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise YamlSyntaxError(f"invalid YAML: {getattr(exc, 'problem', None) or exc}", path=path,
                              line=mark.line + 1 if mark else None, hint=_HINT) from None


def read_yaml_text(path: Path, *, error: type[DistroError] = DistroError, hint: str | None = None) -> str:
    """The text of the YAML file ``path``: a regular file of at most :data:`MAX_DOCUMENT_BYTES`, UTF-8
    (:func:`conda_distro.util.fsutil.read_bounded`); anything else is ``error`` naming the file, a missing
    file included."""
    try:
        return read_bounded_text(path, MAX_DOCUMENT_BYTES, error=error, hint=hint)
    except FileNotFoundError:
        raise error("cannot read file: no such file", path=path, hint=hint) from None


def load_fast_file(path: Path) -> Any:
    return load_fast(read_yaml_text(path), path=path)


# ---------------------------------------------------------------------------------------------
# round trip (editing)


def make_roundtrip_yaml(text: str | None = None) -> YAML:
    """A ruamel YAML configured for byte-faithful round trips of ``text``'s style."""
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096
    y.allow_duplicate_keys = False
    mapping, sequence, offset = 2, 4, 2
    if text:
        try:
            _, ind, boff = load_yaml_guess_indent(text)
            if ind is not None and boff is not None:
                sequence, offset = ind, boff
                mapping = max(2, ind - boff) if ind > boff else 2
        except Exception:  # noqa: BLE001 - guessing is best effort
            pass
    y.indent(mapping=mapping, sequence=sequence, offset=offset)
    return y


def load_roundtrip(text: str, *, path: str | Path | None = None) -> tuple[Any, YAML]:
    """Return (document, yaml-instance-to-dump-it-with)."""
    _check_size(text, path)
    _compose(text, path)  # the same refusals as load_fast (duplicate keys, alias bombs)
    kept, text = _keep_multiline_quoted(text)
    y = make_roundtrip_yaml(text)
    _KEPT[y] = kept  # restored by dump_roundtrip
    try:
        return y.load(text), y
    except Exception as exc:  # ruamel raises many types
        mark = getattr(exc, "problem_mark", None)
        raise YamlSyntaxError(
            f"invalid YAML: {getattr(exc, 'problem', exc)}",
            path=path,
            line=mark.line + 1 if mark else None,
        ) from None


def dump_roundtrip(doc: Any, y: YAML) -> str:
    buf = io.StringIO()
    y.dump(doc, buf)
    out = buf.getvalue()
    for token, original in _KEPT.get(y, {}).items():
        out = out.replace(token, original, 1)
    return out


_KEEP = "__conda_distro_kept_{}__"
#: YAML instance of load_roundtrip -> the multi-line quoted scalars it set aside (token -> original text)
_KEPT: weakref.WeakKeyDictionary[YAML, dict[str, str]] = weakref.WeakKeyDictionary()


def _keep_multiline_quoted(text: str) -> tuple[dict[str, str], str]:
    """ruamel re-flows a quoted scalar that spans lines ("a summary over\n    two lines"): such scalars
    are swapped for one-line placeholders before the round trip and put back, byte for byte, by
    :func:`dump_roundtrip`. (Their values are not what flows that edit recipes change.)"""
    if "\n" not in text or not ('"' in text or "'" in text):
        return {}, text
    spans = []
    try:
        for tok in yaml.scan(text, Loader=_Loader):
            if isinstance(tok, yaml.ScalarToken) and tok.style in ('"', "'") and tok.start_mark.line != tok.end_mark.line:
                spans.append((tok.start_mark.index, tok.end_mark.index))
    except yaml.YAMLError:
        return {}, text
    kept: dict[str, str] = {}
    for i, (a, b) in enumerate(reversed(spans)):
        token = _KEEP.format(len(spans) - 1 - i)
        if token in text:
            return {}, text
        kept[token] = text[a:b]
        text = text[:a] + token + text[b:]
    return kept, text


def make_plain_yaml() -> YAML:
    """The YAML instance for new files we generate (proposals, skeletons): block style, keys in given
    order, two-space indents, no line folding."""
    y = YAML(typ="rt")
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096
    return y


def dump_plain(data: Any) -> str:
    """Block-style YAML for new files we generate, keys in given order."""
    buf = io.StringIO()
    make_plain_yaml().dump(data, buf)
    return buf.getvalue()
