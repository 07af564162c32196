"""Secrets (API tokens): read once from the environment, cleaned, validated, and masked in every form.

A token is stripped of surrounding whitespace before use (``ANACONDA_API_TOKEN=$'T\\n'`` is the token
``T``); one with characters that cannot go into an HTTP header (non-ASCII, control characters, inner
whitespace), or shorter than :data:`MIN_SECRET_LENGTH` (8) characters, is a clear exit-2 error that does
not show it. Every token read is *registered* for the life of the process, and :func:`mask` replaces
every form it could take in a message by ``***``:

* the token with each character written as itself or escaped in any of the ways a server, a log or a
  serializer writes characters, mixed freely: HTML entities (``&#116;``, ``&#x74;``/``&#X74;``, ``&amp;``
  …), URL-encoding (``%74``/``%4A``, ``+`` for a space), backslash escapes (``\\x74``, ``\\u0074``, Python's
  ``repr`` and JSON's ``\\"`` ``\\\\`` ``\\/``);
* the same, reversed;
* its UTF-8 bytes in hex, lower, upper or mixed case;
* base64 (standard and URL-safe alphabets) at each of the three alignments it can have inside a longer
  encoded text (as in a ``Basic`` auth header): the characters that depend on the token alone.

Why at least 8 characters: at an alignment, base64 spreads the token's first and last bytes over
characters shared with its neighbours; only whole 3-byte groups of the token give characters of their
own. A token of 8 characters leaves at least 8 such characters at every alignment; a 4-character token
would leave 4 or fewer, a string common enough in any base64 text that masking it would hide unrelated
output, and not masking it would show the token. Real API tokens are far longer.

The CLI masks everything it writes with the registered secrets, a log-record factory masks every log
line, and :func:`masked_excepthook` masks a traceback that would otherwise print
one (the channel backends never let an exception that can hold a token escape: they re-raise it as a
``ChannelError`` with the token masked, ``from None``).

:func:`scrubbed_env` is the environment for a child process: the same without any secret variable.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import sys
import threading
import traceback
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from conda_distro.errors import ChannelError

MASK = "***"
#: Variables that hold secrets: never passed on to a child process, never printed.
SECRET_ENV_VARS = ("ANACONDA_API_TOKEN", "BINSTAR_API_TOKEN", "GH_TOKEN", "GITHUB_TOKEN")
#: A secret shorter than this is refused when it is read: it could not be masked safely (module docstring).
MIN_SECRET_LENGTH = 8
_MIN_B64_CORE = 6  # shorter base64 fragments are too likely to occur by chance
_NAMED_ENTITIES = {"&": ("amp",), "<": ("lt",), ">": ("gt",), '"': ("quot",), "'": ("apos",)}
_BACKSLASHED = {'"': '\\"', "\\": "\\\\", "/": "\\/", "'": "\\'"}  # JSON's and repr's escapes


def _char_pattern(ch: str) -> str:
    """A regular expression for ``ch`` written as itself or in any escaped form (module docstring)."""
    code = ord(ch)
    data = ch.encode("utf-8", "surrogateescape")
    alts = [f"&#0*{code};", f"(?i:&#x0*{code:x};)", "(?i:" + "".join(f"%{b:02x}" for b in data) + ")"]
    alts += [f"&{name};" for name in _NAMED_ENTITIES.get(ch, ())]
    alts += [re.escape(_BACKSLASHED[ch])] if ch in _BACKSLASHED else []
    alts += ["\\+"] if ch == " " else []
    if code < 0x100:
        alts.append(f"(?i:\\\\x{code:02x})")
    if code < 0x10000:
        alts.append(f"(?i:\\\\u{code:04x})")
    alts.append(re.escape(ch))  # last: the escaped forms starting with this very character ('&', '%', '\\') go first
    return "(?:" + "|".join(alts) + ")"


def secret_pattern(value: str) -> re.Pattern[str]:
    """Every escaped, reversed or hex form of ``value`` (module docstring) as one regular expression."""
    forms = ["".join(_char_pattern(c) for c in text) for text in (value, value[::-1])]
    forms.append("(?i:" + value.encode("utf-8", "surrogateescape").hex() + ")")
    return re.compile("|".join(forms))


def _b64_cores(value: bytes) -> set[str]:
    """The base64 text ``value`` turns into wherever it sits in a longer encoded string: for each of the
    three alignments, the characters that depend on ``value`` alone (not on its neighbours)."""
    out = set()
    for pad in range(3):
        enc = base64.b64encode(b"\0" * pad + value).decode("ascii").rstrip("=")
        start = 4 if pad else 0  # the first group mixes in the neighbour's bytes
        end = (pad + len(value)) // 3 * 4  # the last partial group mixes in what follows
        core = enc[start:end]
        if len(core) >= _MIN_B64_CORE:
            out.add(core)
        for variant in (core.replace("+", "-").replace("/", "_"),):  # urlsafe alphabet
            if len(variant) >= _MIN_B64_CORE:
                out.add(variant)
    return out


def secret_forms(value: str) -> set[str]:
    """The literal text forms ``value`` (and its whitespace-stripped self) could appear in: as given, Python's
    ``repr`` and JSON's escapes of the whole, URL-encoded, and its base64 cores (:func:`secret_pattern`
    covers the character-by-character escapes, the reversed and the hex forms)."""
    forms: set[str] = set()
    for v in {value, value.strip()}:
        if not v:
            continue
        forms |= {v, repr(v)[1:-1], json.dumps(v)[1:-1], quote(v, safe=""), quote_plus(v), quote(v)}
        forms.add(v.encode("unicode_escape").decode("ascii"))
        try:
            raw = v.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates from a mis-decoded environment
            raw = v.encode("utf-8", "surrogateescape")
        forms |= _b64_cores(raw)
    return {f for f in forms if f}


class Secret:
    """A secret string that does not show itself: ``str``/``repr`` are ``***``; :meth:`reveal` gives it.
    A value shorter than :data:`MIN_SECRET_LENGTH` (surrounding whitespace aside) is refused with a
    :class:`ChannelError` that does not show it."""

    __slots__ = ("name", "_value", "_forms", "_pattern")

    def __init__(self, value: str, *, name: str, raw: str | None = None) -> None:
        core = value.strip()
        if len(core) < MIN_SECRET_LENGTH:
            raise ChannelError(
                f"{name} is too short to be an API token ({len(core)} character(s); at least {MIN_SECRET_LENGTH}): "
                "a secret that short cannot be kept out of the output safely", field=name,
                hint=f"set {name} to the token exactly as anaconda.org shows it")
        self.name = name
        self._value = value
        forms = secret_forms(value) | (secret_forms(raw) if raw else set())
        self._forms = tuple(sorted(forms, key=len, reverse=True))
        self._pattern = secret_pattern(core)

    def reveal(self) -> str:
        return self._value

    @property
    def forms(self) -> tuple[str, ...]:
        return self._forms

    def mask(self, text: str) -> str:
        text = self._pattern.sub(MASK, text)
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def __repr__(self) -> str:
        return f"Secret({self.name}={MASK})"

    __str__ = __repr__


_registry: list[Secret] = []
_registry_lock = threading.Lock()


def register(secret: Secret) -> Secret:
    """Mask ``secret`` in everything this process writes from now on (idempotent)."""
    with _registry_lock:
        if not any(s.forms == secret.forms for s in _registry):
            _registry.append(secret)
    _install_log_masking()
    return secret


def registered() -> tuple[Secret, ...]:
    return tuple(_registry)


def mask(text: object, *secrets: Secret | None) -> str:
    """``text`` with every form of ``secrets`` and of every registered secret replaced by ``***``."""
    if not isinstance(text, str):
        text = str(text)
    for s in (*secrets, *_registry):
        if s is not None:
            text = s.mask(text)
    return text


def check_token(value: str, name: str) -> None:
    """Raise ChannelError (exit 2, the token not shown) unless ``value`` can go into an HTTP header."""
    for i, ch in enumerate(value):
        if not ("!" <= ch <= "~"):
            what = "a non-ASCII character" if ord(ch) > 127 else (
                "whitespace" if ch.isspace() else "a control character")
            raise ChannelError(
                f"{name} holds {what} at position {i + 1} (of {len(value)}); API tokens are printable ASCII",
                field=name, hint=f"set {name} to the token exactly as anaconda.org shows it "
                                 "(surrounding whitespace and newlines are ignored)")


def read_secret(env: Mapping[str, str], name: str) -> Secret | None:
    """The secret in ``env[name]``, stripped of surrounding whitespace and registered for masking.
    None when unset or blank; ChannelError when it holds characters a token cannot have or is shorter
    than :data:`MIN_SECRET_LENGTH`."""
    raw = env.get(name)
    if raw is None or not raw.strip():
        return None
    secret = register(Secret(raw.strip(), name=name, raw=raw))  # masked even in the refusal below
    check_token(secret.reveal(), name)
    return secret


def as_secret(value: Secret | str | None, name: str) -> Secret | None:
    """A Secret from a Secret, a plain string (stripped, checked, registered) or None."""
    if value is None or isinstance(value, Secret):
        return value
    return read_secret({name: value}, name)


def scrubbed_env(env: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> dict[str, str]:
    """``env`` (default: ``os.environ``) without the secret variables, for a child process."""
    import os

    drop = {*SECRET_ENV_VARS, *extra}
    return {k: v for k, v in (os.environ if env is None else env).items() if k not in drop}


# -- the process-wide nets -------------------------------------------------------------------------

_log_masking = False


def _install_log_masking() -> None:
    """Every log record made from now on has its message masked (whatever logger or handler)."""
    global _log_masking
    if _log_masking:
        return
    _log_masking = True
    make = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        if _registry:
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a malformed record stays as it is, masked below
                message = str(record.msg)
            record.msg, record.args = mask(message), None
            if record.exc_info and record.exc_info[1] is not None:
                record.exc_text = mask("".join(traceback.format_exception(*record.exc_info))).rstrip("\n")
                record.exc_info = None
        return record

    logging.setLogRecordFactory(factory)


def masked_excepthook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
    """``sys.excepthook`` that prints the usual traceback with every registered secret masked."""
    sys.stderr.write(mask("".join(traceback.format_exception(exc_type, exc, tb))))
    sys.stderr.flush()


class MaskingStream:
    """A text stream that masks the registered secrets in everything written through it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, text: str | bytes) -> int:
        if not isinstance(text, str):  # bytes: let the inner stream accept or refuse them (click probes so)
            return self._inner.write(text)
        self._inner.write(mask(text) if _registry else text)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


__all__ = ["MASK", "MIN_SECRET_LENGTH", "SECRET_ENV_VARS", "MaskingStream", "Secret", "as_secret", "check_token",
           "mask", "masked_excepthook", "read_secret", "register", "registered", "scrubbed_env", "secret_forms",
           "secret_pattern"]
