"""The one recipe editor: the sweep's pin and build-number edits, `lint --fix`'s fixes and `propose`'s
skeletons (recipe and proposal, written from nothing) go through it.

One way to address a node, as in conda-recipe-manager: a dotted path with ``[...]`` for sequence
items, ``build.number``, ``context.version``, ``extra.recipe-maintainers[2]`` (an index) or
``requirements.run[pytorch]`` (the item whose package name is ``pytorch``).

Two ways to change text, both addressed that way:

* :class:`LineEditor` changes single lines of the text and keeps every other byte as it is (the
  line of a node comes from the fast loader's line numbers); a value written as ``${{ var }}`` is
  followed into ``context:``. It refuses (:class:`EditError`) what a line edit cannot do.
* :class:`TreeEditor` is the fallback: a ruamel round trip (comments and quoting kept; whitespace
  may be normalised), for insertions, deletions and shapes a line edit cannot handle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from conda_distro.util.yamlio import LDict, LList, dump_roundtrip, load_fast, load_roundtrip, make_plain_yaml


class EditError(Exception):
    """An edit that cannot be made automatically (the message says why)."""


# ---------------------------------------------------------------------------------------------
# addressing


@dataclass(frozen=True)
class Named:
    """``[name]`` in a path: the sequence item whose package name (its first word) is ``name``."""

    name: str


Step = str | int | Named
_PATH = re.compile(r"[^.\[\]]+(?:\.[^.\[\]]+|\[[^\]]*\])*")
_STEP = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")


def parse_path(path: str) -> list[Step]:
    """``requirements.run[pytorch]`` -> ``["requirements", "run", Named("pytorch")]``; ``a[2]`` -> ``["a", 2]``."""
    if not _PATH.fullmatch(path):
        raise EditError(f"'{path}' is not a node path (like build.number or requirements.run[pytorch])")
    steps: list[Step] = []
    for m in _STEP.finditer(path):
        if m.group(1) is not None:
            steps.append(m.group(1))
        else:
            inner = m.group(2).strip()
            steps.append(int(inner) if re.fullmatch(r"-?\d+", inner) else Named(inner))
    return steps


def _item_name(item: Any) -> str | None:
    return str(item).split()[0] if isinstance(item, str) and item.strip() else None


def _key(parent: Any, step: Step, path: str) -> Any:
    """The key or index of ``step`` in ``parent`` (EditError when there is none)."""
    if isinstance(step, Named):
        if isinstance(parent, list):
            for i, item in enumerate(parent):
                if _item_name(item) == step.name:
                    return i
        raise EditError(f"no item '{step.name}' in {path}")
    if isinstance(step, int):
        if isinstance(parent, list) and -len(parent) <= step < len(parent):
            return step % len(parent)
        raise EditError(f"no item {step} in {path}")
    if isinstance(parent, dict) and step in parent:
        return step
    raise EditError(f"no key '{step}' in {path}")


def locate(tree: Any, path: str) -> tuple[Any, Any]:
    """``(parent, key)`` of the node at ``path``: ``parent[key]`` is the node."""
    steps = parse_path(path)
    node, done = tree, ""
    for step in steps[:-1]:
        node = node[_key(node, step, done or "the document")]
        done = f"{done}.{step}" if isinstance(step, str) and done else (done + _show(step) if done else str(step))
    return node, _key(node, steps[-1], done or "the document")


def _show(step: Step) -> str:
    return f"[{step.name}]" if isinstance(step, Named) else f"[{step}]" if isinstance(step, int) else f".{step}"


def get(tree: Any, path: str, default: Any = None) -> Any:
    """The node at ``path``, ``default`` when it is not there."""
    try:
        parent, key = locate(tree, path)
    except (EditError, KeyError, IndexError, TypeError):
        return default
    return parent[key]


# ---------------------------------------------------------------------------------------------
# line edits: byte for byte everything else is kept


CONTEXT_VAR = re.compile(r"\$\{\{\s*([A-Za-z_]\w*)\s*\}\}")


def split_eol(line: str) -> tuple[str, str]:
    body = line[:-1] if line.endswith("\r") else line
    return body, line[len(body):]


def comment_start(body: str) -> int:
    """Index where a '#' comment starts (outside quotes), len(body) when there is none."""
    quote = None
    for i, ch in enumerate(body):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'" and (i == 0 or body[i - 1] in " \t[,:-"):
            quote = ch
        elif ch == "#" and (i == 0 or body[i - 1] in " \t"):
            return i
    return len(body)


def set_scalar(body: str, key: str, value: str) -> str | None:
    """``  key: old  # c`` -> ``  key: value  # c`` (the quoting of the old value is kept)."""
    m = re.match(rf"^(\s*(?:-\s+)?[\"']?{re.escape(key)}[\"']?\s*:\s*)([\"']?)([^\"'#]*?)\2(\s*(?:\s#.*)?)$", body)
    if m is None:
        m = re.search(rf"((?<![\w-]){re.escape(key)}\s*:\s*)([\"']?)([^\"',}}\s#]+)\2", body)  # flow mapping
        if m is None:
            return None
    return body[:m.start(3)] + value + body[m.end(3):]


class LineEditor:
    """Edits a recipe's text line by line; remembers which lines it changed. ``tree`` is the text's
    fast-loaded document (line numbers on every mapping and sequence), read once."""

    def __init__(self, text: str, tree: Any = None) -> None:
        self.lines = text.split("\n")
        self.tree = tree if tree is not None else load_fast(text)
        self.changed: set[int] = set()
        ctx = self.tree.get("context") if isinstance(self.tree, dict) else None
        self.context: LDict | dict = ctx if isinstance(ctx, dict) else {}

    def text(self) -> str:
        return "\n".join(self.lines)

    def line_of(self, path: str) -> int:
        """The line a node's value is written on (1-based)."""
        parent, key = locate(self.tree, path)
        if not isinstance(parent, (LDict, LList)):
            raise EditError(f"no line is known for {path}")
        return parent.line_of(key)

    def get_line(self, line: int) -> str:
        if not 1 <= line <= len(self.lines):
            raise EditError(f"line {line} is not in the file")
        return self.lines[line - 1]

    def put_line(self, line: int, body: str, eol: str) -> None:
        self.lines[line - 1] = body + eol
        self.changed.add(line)

    def insert_line(self, index: int, line: str) -> None:
        """Insert ``line`` (with its line ending) before the 0-based ``index``: a new sequence item."""
        self.lines.insert(index, line)

    def set_context(self, var: str, value: str) -> None:
        if var not in self.context or not isinstance(self.context, LDict):
            raise EditError(f"'{var}' is not a context: variable")
        line = self.context.line_of(var)
        body, eol = split_eol(self.get_line(line))
        new = set_scalar(body, var, value)
        if new is None:
            raise EditError(f"cannot edit the context: variable '{var}' on line {line}")
        self.put_line(line, new, eol)

    def set_number(self, path: str, value: int, line: int | None = None) -> None:
        """Set the integer at ``path`` (``build.number``; ``line``: where it is written, when the
        caller knows better, e.g. an output's); a ``${{ var }}`` there is set in ``context:``."""
        if line is None:
            try:
                line = self.line_of(path)
            except EditError:
                raise EditError(f"no {path} to set") from None
        key = str(parse_path(path)[-1])
        body, eol = split_eol(self.get_line(line))
        cut = comment_start(body)
        m = re.search(rf"(?<![\w-]){re.escape(key)}\s*:\s*([\"']?)(\d+)\1", body[:cut])
        if m is not None:
            self.put_line(line, body[:m.start(2)] + str(value) + body[m.end(2):], eol)
            return
        var = re.search(rf"(?<![\w-]){re.escape(key)}\s*:\s*[\"']?" + CONTEXT_VAR.pattern, body[:cut])
        if var is None:
            raise EditError(f"cannot read {path} on line {line}")
        self.set_context(var.group(1), str(value))

    def replace(self, line: int, old: str, new: str) -> None:
        """Replace the whole word ``old`` (a requirement as written) by ``new`` on ``line``, outside its comment."""
        body, eol = split_eol(self.get_line(line))
        cut = comment_start(body)
        m = re.search(r"(?<![\w.\-:\[])" + re.escape(old) + r"(?![\w.*\]])", body[:cut])
        if m is None:
            raise EditError(f"cannot find '{old}' on line {line}")
        self.put_line(line, body[:m.start()] + new + body[m.end():], eol)


# ---------------------------------------------------------------------------------------------
# the round-trip fallback


class TreeEditor:
    """A ruamel round trip of the text: edit :attr:`doc` (or through the path methods), then :meth:`text`.

    :meth:`new` starts a document from nothing (``propose``'s skeletons): built with :meth:`insert`,
    annotated with :meth:`comment`, written in :func:`~conda_distro.util.yamlio.make_plain_yaml`'s style."""

    def __init__(self, text: str, path: str | Path | None = None) -> None:
        self.doc, self._yaml = load_roundtrip(text, path=path)

    @classmethod
    def new(cls) -> TreeEditor:
        """An editor on an empty mapping, for a file written from scratch."""
        editor = cls.__new__(cls)
        editor.doc, editor._yaml = CommentedMap(), make_plain_yaml()
        return editor

    def text(self) -> str:
        return dump_roundtrip(self.doc, self._yaml)

    def get(self, path: str, default: Any = None) -> Any:
        return get(self.doc, path, default)

    def set(self, path: str, value: Any) -> None:
        """Set the node at ``path`` (a string keeps the old value's quoting style)."""
        parent, key = locate(self.doc, path)
        old = parent[key]
        parent[key] = type(old)(value) if isinstance(old, str) and type(old) is not str and isinstance(value, str) else value

    def insert(self, path: str, key: str, value: Any, position: int | None = 0) -> None:
        """Insert ``key: value`` at ``position`` (None: at the end) into the mapping at ``path`` (``""``:
        the document). Plain mappings and lists in ``value`` become nodes that can carry comments."""
        mapping = self.doc if not path else self.get(path)
        if not hasattr(mapping, "insert"):
            raise EditError(f"{path or 'the document'} is not a mapping")
        mapping.insert(len(mapping) if position is None else position, key, _node(value))

    def comment(self, path: str, *, eol: str | None = None, before: str | None = None) -> None:
        """Annotate the node at ``path``: ``eol`` at the end of its line, ``before`` on the lines above
        its key (a mapping entry; ``"\n"`` is a blank line). ``path`` ``""`` with ``before``: the
        document's first lines."""
        if not path:
            if eol is not None or before is None:
                raise EditError("the document takes only a comment before it")
            self.doc.yaml_set_start_comment(before)
            return
        parent, key = locate(self.doc, path)
        if eol is not None:
            parent.yaml_add_eol_comment(eol, key)
        if before is not None:
            if not isinstance(parent, CommentedMap):
                raise EditError(f"{path} is no mapping entry: it takes no comment before it")
            depth = sum(1 for step in parse_path(path) if isinstance(step, str)) - 1
            parent.yaml_set_comment_before_after_key(key, before=before, indent=2 * depth)

    def delete(self, path: str) -> None:
        """Delete the node at ``path``; a sequence item takes exactly its own line with it."""
        parent, key = locate(self.doc, path)
        if isinstance(parent, list):
            delete_seq_item(parent, key)
        else:
            del parent[key]

    def replace_items(self, path: str, old: str, new: str) -> int:
        """Replace every item equal to ``old`` in the sequences under ``path`` (if/then/else branches
        included) by ``new``; returns how many were replaced."""
        return _replace_strings(self.get(path), old, new)


def _node(value: Any) -> Any:
    """``value`` with its mappings and lists as ruamel's commented nodes (which carry comments)."""
    if isinstance(value, dict) and not isinstance(value, CommentedMap):
        return CommentedMap((k, _node(v)) for k, v in value.items())
    if isinstance(value, list) and not isinstance(value, CommentedSeq):
        return CommentedSeq(_node(v) for v in value)
    return value


def double_quoted(text: str) -> str:
    """``text``, written in double quotes (a version that must stay a string: ``"1.10"``)."""
    return DoubleQuotedScalarString(text)


def _replace_strings(node: Any, old: str, new: str) -> int:
    n = 0
    if isinstance(node, list):
        for i, item in enumerate(node):
            if isinstance(item, str) and item.strip() == old:
                node[i] = type(item)(new) if type(item) is not str else new
                n += 1
            else:
                n += _replace_strings(item, old, new)
    elif isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, str) and k in ("then", "else") and v.strip() == old:
                node[k] = type(v)(new) if type(v) is not str else new
                n += 1
            elif isinstance(v, (list, dict)):
                n += _replace_strings(v, old, new)
    return n


def delete_seq_item(seq: Any, index: int) -> None:
    """Delete ``seq[index]`` from a ruamel round-trip sequence, removing exactly that item's line.

    ruamel keeps the blank and comment lines that follow an item in that item's comment token, so a
    plain ``del`` would take them along; they are handed to the previous item instead."""
    from ruamel.yaml.error import CommentMark
    from ruamel.yaml.tokens import CommentToken

    ca = getattr(seq, "ca", None)
    entry = ca.items.get(index) if ca is not None else None
    tail = ""
    if entry and entry[0] is not None:
        value = entry[0].value
        tail = value[value.find("\n") + 1:] if "\n" in value else ""
    del seq[index]
    if tail and index > 0 and ca is not None:  # (a tail comes from ca)
        prev = ca.items.get(index - 1)
        if prev and prev[0] is not None:
            prev[0].value += tail
        else:
            ca.items[index - 1] = [CommentToken("\n" + tail, CommentMark(0), None), None, None, None]
