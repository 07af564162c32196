"""The one JSON reader: every JSON file the tool reads goes through :func:`read_json` (or
:func:`read_json_text`, for a pydantic model that parses the text itself).

Before anything is parsed, a file must be a regular file (:func:`conda_distro.util.fsutil.read_bounded`: no
FIFO, device, socket or symbolic link to one), at most as large as its kind allows (:data:`MAX_BYTES`),
UTF-8, and nested at most :data:`MAX_DEPTH` deep (a cheap scan of the brackets, outside strings, so that
no parser or validator recurses into a hostile document). Then it is parsed refusing duplicate keys
(``json`` keeps the last one silently). Every refusal is the caller's error type naming the file (and
the line, for invalid JSON): exit 2.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from conda_distro.errors import DistroError
from conda_distro.util.fsutil import read_bounded_text

_MB = 1024 * 1024
Kind = Literal["ledger", "results", "repodata", "excuses", "sweep", "cache", "lock", "prune"]
#: the largest file of each kind read, in bytes. Channel indexes may be large (conda-forge's linux-64
#: repodata.json is a few hundred MB); what the tool writes itself is small.
MAX_BYTES: dict[Kind, int] = {
    "ledger": 64 * _MB,  # channel_state/<name>.json: every artifact of one package in main, with its tests
    "results": 16 * _MB,  # build/results/<artifact>.json: one artifact's test outcomes
    "lock": 16 * _MB,  # real-world.lock.json: the wheels and sdists the real world is made of
    "repodata": 1024 * _MB,  # repodata.json and run_exports.json of local channels
    "excuses": 64 * _MB,  # build/excuses.json: every candidate in staging
    "prune": 64 * _MB,  # build/prune.journal.json: the staging files an interrupted prune was removing
    "sweep": 16 * _MB,  # build/sweep/pytorch-VER*.json: one release day's report, journal, leftovers
    "cache": 16 * _MB,  # render cache and sandbox cache entries
}
#: how deeply arrays and objects may nest (the deepest file the tool writes nests 6 deep)
MAX_DEPTH = 64

_NOT_A_BRACKET_OR_QUOTE = bytes(b for b in range(256) if b not in b'[]{}"')
_STRING = re.compile(rb'"[^"]*"')
_INNERMOST = re.compile(rb"\[\]|\{\}")


def too_deep(data: bytes, limit: int = MAX_DEPTH) -> bool:
    """Do the arrays and objects of the JSON text ``data`` nest deeper than ``limit``? Strings are taken
    out, then only the brackets are kept, and the innermost pairs are removed ``limit`` times (one level
    each time, in C): whatever pair is left was deeper. Unbalanced brackets are the parser's to refuse."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    # Strings out, in C (a 100 MB index takes a fraction of a second): escapes first (an escaped backslash,
    # then an escaped quote), then all but brackets and quotes; adjacent quotes go (an empty string, or
    # the end of one string and the start of the next: nothing lies between them), then what is left
    # between quotes.
    kept = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_A_BRACKET_OR_QUOTE)
    brackets = _STRING.sub(b"", kept.replace(b'""', b""))
    for _ in range(limit):
        shorter = _INNERMOST.sub(b"", brackets)
        if len(shorter) == len(brackets):
            return False
        brackets = shorter
    return _INNERMOST.search(brackets) is not None


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def loads_checked(data: bytes) -> Any:
    """The JSON document ``data`` (bytes read from somewhere other than a file: a download), depth-checked
    and refusing duplicate keys as :func:`parse_json` does; ``ValueError`` saying why when it is not one."""
    if too_deep(data):
        raise ValueError(f"arrays and objects nest deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(data, object_pairs_hook=_refuse_duplicates)
    except RecursionError:  # (the depth check comes first; this is the parser's own limit)
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise ValueError(str(getattr(exc, "msg", exc))) from None


def check_depth(text: str, path: Path, *, error: type[DistroError], hint: str | None) -> None:
    """Refuse ``text`` (read from ``path``) when it nests deeper than :data:`MAX_DEPTH`."""
    if too_deep(text.encode("utf-8", "surrogatepass")):
        raise error(f"not valid JSON here: arrays and objects nest deeper than {MAX_DEPTH} levels", path=path,
                    hint=hint or "this is not the file it should be; check what wrote it")


def read_json_text(path: Path, kind: Kind, *, error: type[DistroError] = DistroError, hint: str | None = None) -> str:
    """The text of the JSON file ``path`` of ``kind``, checked (regular file, size, UTF-8, depth) but not
    parsed: for a caller that parses it with a pydantic model. ``FileNotFoundError`` passes through."""
    text = read_bounded_text(path, MAX_BYTES[kind], error=error, hint=hint)
    check_depth(text, path, error=error, hint=hint)
    return text


def parse_json(text: str, path: Path, *, error: type[DistroError] = DistroError, hint: str | None = None) -> Any:
    """The JSON document ``text`` (read from ``path``), depth-checked, refusing duplicate keys; invalid
    text is ``error`` naming the file and line."""
    check_depth(text, path, error=error, hint=hint)
    try:
        return json.loads(text, object_pairs_hook=_refuse_duplicates)
    except RecursionError:  # (the depth check comes first; this is the parser's own limit)
        raise error(f"not valid JSON here: nested deeper than {MAX_DEPTH} levels", path=path, hint=hint) from None
    except ValueError as exc:
        raise error(f"not valid JSON: {getattr(exc, 'msg', exc)}", path=path, line=getattr(exc, "lineno", None),
                    hint=hint) from None


def read_json(path: Path, kind: Kind, *, error: type[DistroError] = DistroError, hint: str | None = None) -> Any:
    """The JSON document in ``path`` of ``kind``: :func:`read_json_text`, then :func:`parse_json`.
    ``FileNotFoundError`` passes through."""
    return parse_json(read_bounded_text(path, MAX_BYTES[kind], error=error, hint=hint), path, error=error, hint=hint)
