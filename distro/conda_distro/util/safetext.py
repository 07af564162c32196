"""Text from recipe code, made safe to show people: :func:`shown`, the one function every output that
puts such text in front of people goes through.

Recipe code (build and test scripts) is hostile, and what it prints reaches people: a test's last output
line becomes its failure reason, a log excerpt goes into the sweep's tracking issue, reasons go into the
PR comment, the excuses, the status page and the unmaintained report. Unchecked, ``@octocat
@pytorch/core``, a link, an image, ``</details>`` or a code fence in that output would make the bot
ping anyone, show anything or break out of the report around it. :func:`shown` makes such text:

* **clean**: ANSI escape sequences and control characters (C0, C1, DEL) removed, and the invisible
  format characters (bidi overrides, zero-width characters) too; tabs become spaces;
* **short**: at most ``width`` characters a line (``…`` where cut) and ``lines`` lines (a line says
  how many were left out);
* **inert**: an ``@`` before a name is followed by a zero-width joiner (no mention, no team ping, no
  e-mail link), a URL scheme's ``:`` by a zero-width space and ``www`` by one before its dot (no link),
  ``#`` before a digit by a zero-width joiner (no reference to an issue or pull request);
* in the form its place needs: ``line``: one line of markdown (GitHub's): every character markdown or
  HTML gives a meaning there is a numeric character reference (``&#60;``): no tag, no link, no image, no
  emphasis, no table cell, no escape; ``code``: one line as a markdown code span; ``block``: a fenced
  markdown code block whose fence is longer than any run of backticks in the text (it cannot be closed
  from inside, nor can our ``<details>`` around it); ``html``: one line of HTML, escaped as jinja escapes
  (a :class:`markupsafe.Markup`, so that the page's autoescape does not escape it twice; for text and
  attribute values alike); ``text``: plain text for terminals, JSON and the page's ``title``
  attributes (clean, short and without mentions; links stay as they are, usable in a terminal: the
  documents made from it use one of the other forms).

A ``line`` is a plain string: put into an HTML template it would be escaped again (shown with its
character references, never unsafe); an ``html`` one put into markdown would allow links: each place
uses its form, and the tests render every template with hostile text.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

from markupsafe import Markup, escape

Form = Literal["line", "code", "block", "html", "text"]

ZWJ = "\u200d"  # zero-width joiner: after '@' and '#'
ZWSP = "\u200b"  # zero-width space: inside URL schemes and 'www.'
WIDTH = 300  # characters a line, by default
BLOCK_LINES = 40  # lines of a block, by default (its end: where a log says what failed)

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI (colours, cursor movement)
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC (window titles, hyperlinks, clipboard writes)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[@-Z\\-_]"  # other two-character escapes
    r"|\x9b[0-?]*[ -/]*[@-~]")  # the 8-bit CSI
_MENTION = re.compile(r"@(?=[A-Za-z0-9_])")
_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{1,31}):(?=//)|\b(mailto|xmpp|javascript|vbscript|data|tel|sms):")
_WWW = re.compile(r"(?i)\b(www)(?=\.)")
_REFERENCE = re.compile(r"#(?=\d)|(?i:\bgh)(?=-\d)")
#: characters that mean something to markdown or HTML inside a line (line-start syntax cannot apply: a
#: ``line`` always follows text of ours): escapes, code, emphasis and strike-through, links and images
#: (no ``[``: no ``[text](url)``, no ``![image](url)``), table cells, math, tags and entities
_ACTIVE = frozenset("\\`*_~[]|$<>&")


def _clean(text: str) -> str:
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n").replace("\t", "    ")
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch == "\n" or cat[0] != "C" and cat not in ("Zl", "Zp"):
            out.append(ch)
        elif cat in ("Zl", "Zp"):
            out.append("\n")
    return "".join(out)


def _no_mentions(text: str) -> str:
    return _REFERENCE.sub(lambda m: m.group(0) + ZWJ, _MENTION.sub("@" + ZWJ, text))


def _defuse(text: str) -> str:
    text = _SCHEME.sub(lambda m: m.group(0) + ZWSP, _no_mentions(text))
    return _WWW.sub(lambda m: m.group(0) + ZWSP, text)


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: max(1, width - 1)].rstrip() + "…"


def _lines(text: str, lines: int, width: int, keep: Literal["head", "tail"]) -> list[str]:
    rows = [_cut(ln.rstrip(), width) for ln in text.split("\n")]
    while rows and not rows[-1]:
        rows.pop()
    while rows and not rows[0]:
        rows.pop(0)
    if len(rows) <= lines:
        return rows
    left = len(rows) - (lines - 1)
    if keep == "tail":
        return [f"[… {left} earlier line(s) left out …]", *rows[-(lines - 1):]] if lines > 1 else rows[-1:]
    return [*rows[: lines - 1], f"[… {left} more line(s) left out …]"] if lines > 1 else rows[:1]


_WORD_UNDERSCORE = re.compile(r"(?<=[A-Za-z0-9])_+(?=[A-Za-z0-9])")  # snake_case: never emphasis in GFM


def _entities(text: str) -> str:
    """Every character of :data:`_ACTIVE` as a numeric character reference, but an underscore inside a
    word (``legacy_autograd_hook`` stays readable: GitHub's markdown takes no emphasis there)."""
    keep = {i for m in _WORD_UNDERSCORE.finditer(text) for i in range(m.start(), m.end())}
    return "".join(f"&#{ord(c)};" if c in _ACTIVE and i not in keep else c for i, c in enumerate(text))


def shown(text: object, form: Form = "line", *, lines: int | None = None, width: int = WIDTH,
          keep: Literal["head", "tail"] = "tail") -> str:
    """``text`` from recipe code as it may be shown to people, in ``form`` (module docstring). ``lines``:
    at most so many lines (``text`` and ``block``; default 1 for ``text``, :data:`BLOCK_LINES` for
    ``block``; ``line``, ``code`` and ``html`` are always one), ``keep``: which end of a longer text is kept."""
    raw = "" if text is None else str(text)
    clean = _clean(raw)
    if form == "text":
        n = lines or 1
        clean = _no_mentions(clean)
        if n == 1:
            return _cut(" ".join(clean.split()), width)
        return "\n".join(_lines(clean, n, width, keep))
    clean = _defuse(clean)
    if form == "line":
        return _entities(_cut(" ".join(clean.split()), width))
    if form == "html":
        return escape(_cut(" ".join(clean.split()), width))
    if form == "code":
        one = _cut(" ".join(clean.split()), width)
        if not one:
            return Markup("")
        fence = "`" * (max((len(r) for r in re.findall(r"`+", one)), default=0) + 1)
        pad = " " if one.startswith("`") or one.endswith("`") else ""
        return Markup(f"{fence}{pad}{one}{pad}{fence}")
    if form == "block":
        rows = _lines(clean, lines or BLOCK_LINES, width, keep)
        body = "\n".join(rows)
        fence = "`" * max(3, max((len(r) for r in re.findall(r"`+", body)), default=0) + 1)
        return Markup(f"{fence}text\n{body}\n{fence}")
    raise ValueError(f"unknown form {form!r}")
