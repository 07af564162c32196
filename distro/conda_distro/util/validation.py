"""Turning a pydantic ValidationError on a YAML/JSON document into one of our errors, naming the file,
the field, the line and (for an unknown key) the known key it was probably meant to be.

One place for distro.yaml, proposals and the channel_state ledger.
"""

from __future__ import annotations

import difflib
import re
import typing
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ValidationError

from conda_distro.errors import DistroError
from conda_distro.util.yamlio import LDict, LList

# a GitHub user ("octocat") or team ("org/team") handle, written without '@'
HANDLE_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")


def check_handle(v: str) -> str:
    """``v`` when it is a GitHub handle (:data:`HANDLE_RE`); else a ValueError saying how to write one."""
    if not HANDLE_RE.match(v):
        raise ValueError(f"'{v}' is not a GitHub handle (write it without '@', e.g. octocat)")
    return v


#: a GitHub user or team handle, written without '@' (a field of this type refuses anything else)
Handle = Annotated[str, AfterValidator(check_handle)]


def check_reason(v: str, say: str) -> str:
    """``v`` when it says something; a blank reason is a ValueError ``the reason is empty: {say}`` (``say``:
    what the file's reader needs to be told, e.g. "say why the name belongs to this recipe")."""
    if not v.strip():
        raise ValueError(f"the reason is empty: {say}")
    return v


def line_at(doc: Any, loc: tuple) -> int | None:
    """The 1-based line of ``loc`` in a document read by :func:`conda_distro.util.yamlio.load_fast`."""
    node, line = doc, getattr(doc, "line", None)
    for part in loc:
        if isinstance(node, LDict) and str(part) in node:
            line, node = node.line_of(str(part)), node[str(part)]
        elif isinstance(node, LList) and isinstance(part, int) and part < len(node):
            line, node = node.line_of(part), node[part]
        else:
            break
    return line


def model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel]:
    """The model that holds the field at ``loc`` (list items and Optional[...] are looked through)."""
    model = root
    for part in loc:
        if isinstance(part, int):
            continue
        ann = getattr(model.model_fields.get(part), "annotation", None)
        candidates = [ann, *typing.get_args(ann)]
        inner = next((a for a in candidates if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if inner is None:
            break
        model = inner
    return model


E = TypeVar("E", bound=DistroError)


def to_error(exc: ValidationError, doc: Any, path: Path, *, root: type[BaseModel], error: type[E], see: str) -> E:
    """The first problem of ``exc`` as ``error``. A misspelt key also makes the real key "missing":
    the unknown key is reported first, since its hint names the real one."""
    err = min(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    field = ".".join(str(p) for p in loc) or None
    line = line_at(doc, loc)
    if err["type"] == "extra_forbidden":
        key = str(loc[-1])
        known = list(model_at(root, loc[:-1]).model_fields)
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
        hint = f"did you mean '{close[0]}'?" if close else f"known keys here: {', '.join(known)}"
        return error(f"unknown key '{key}'", path=path, field=field, line=line, hint=hint)
    if err["type"] == "missing":
        return error("required key is missing", path=path, field=field, line=line, hint=f"add '{loc[-1]}:' ({see})")
    return error(err["msg"].removeprefix("Value error, "), path=path, field=field, line=line, hint=see)
