"""The one YAML factory of the package.

Two views of the same text:

* :func:`load_fast` — libyaml (PyYAML's C composer) into plain ``dict``/``list``/``str`` subclasses
  that remember their 1-based line. Every scalar stays a string exactly as written (``1.10`` is
  not the float ``1.1``; ``on`` is not ``True``), typed interpretation happens in the models.
  This is the read path for lint, graph and the engines: fast enough for thousands of recipes.
* :func:`load_roundtrip` / :func:`dump_roundtrip` — ruamel.yaml round-trip documents, used only to
  edit files (``lint --fix``, sweep). Indentation is detected per file so that
  ``dump(load(text)) == text`` for the recipes we keep.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.util import load_yaml_guess_indent

from conda_distro.errors import DistroError

try:  # pragma: no branch
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - libyaml missing
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]


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


def _construct(node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        if node.tag == "tag:yaml.org,2002:null" and node.style is None and node.value in ("", "~", "null", "Null", "NULL"):
            return None
        s = LStr(node.value)
        s.line = node.start_mark.line + 1
        s.quoted = node.style in ("'", '"')
        return s
    if isinstance(node, yaml.SequenceNode):
        out = LList()
        out.line = node.start_mark.line + 1
        for item in node.value:
            out.append(_construct(item))
            out.item_lines.append(item.start_mark.line + 1)
        return out
    if isinstance(node, yaml.MappingNode):
        out_map = LDict()
        out_map.line = node.start_mark.line + 1
        for knode, vnode in node.value:
            if knode.tag == "tag:yaml.org,2002:merge":
                merged = _construct(vnode)
                for m in merged if isinstance(merged, list) else [merged]:
                    for k, v in m.items():
                        out_map.setdefault(k, v)
                continue
            key = str(knode.value)
            out_map[key] = _construct(vnode)
            out_map.key_lines[key] = knode.start_mark.line + 1
        return out_map
    raise TypeError(f"unexpected YAML node {node!r}")  # pragma: no cover


class YamlSyntaxError(DistroError):
    """The text is not valid YAML."""


def load_fast(text: str, *, path: str | Path | None = None) -> Any:
    """Parse YAML text into line-aware plain containers (all scalars are strings)."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise YamlSyntaxError(
            f"invalid YAML: {exc.problem or exc.context}",
            path=path,
            line=line,
            hint="fix the YAML syntax (indentation, a missing ':' or an unclosed quote)",
        ) from None
    except yaml.YAMLError as exc:  # pragma: no cover - non-marked errors are rare
        raise YamlSyntaxError(f"invalid YAML: {exc}", path=path) from None
    return None if node is None else _construct(node)


def load_fast_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DistroError(f"cannot read file: {exc.strerror}", path=path) from None
    except UnicodeDecodeError:
        raise DistroError("file is not UTF-8 text", path=path) from None
    return load_fast(text, path=path)


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
    y = make_roundtrip_yaml(text)
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
    return buf.getvalue()


def dump_plain(data: Any) -> str:
    """Block-style YAML for new files we generate (proposals, skeletons), keys in given order."""
    y = YAML(typ="rt")
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096
    buf = io.StringIO()
    y.dump(data, buf)
    return buf.getvalue()


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder + ``os.replace``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
