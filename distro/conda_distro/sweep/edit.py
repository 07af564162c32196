"""The sweep's edits: a recipe's pytorch pins widened and its build number + 1, and the release
added to distro.yaml. Only those lines change (a line edit through :mod:`conda_distro.recipe.edit`),
with a ruamel round trip as the fallback for shapes a line edit cannot handle; every edited recipe
is checked by parsing it back (ours and rattler-build's parser)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from rattler import MatchSpec, Version
from rattler.exceptions import InvalidMatchSpecError

from conda_distro.config import DistroRepo
from conda_distro.errors import DistroError
from conda_distro.pins import own_names, pytorch_pins
from conda_distro.recipe.edit import CONTEXT_VAR, EditError, LineEditor, TreeEditor, comment_start, split_eol
from conda_distro.recipe.model import Recipe, parse_recipe, written_tests
from conda_distro.recipe.specs import SpecEditError, admits, build_outside_brackets, next_minor_bound, split_spec, widen_version
from conda_distro.sweep.model import Decision, PinEdit
from conda_distro.util.yamlio import LDict, LList, load_fast

if TYPE_CHECKING:
    from rattler_build import Stage0Recipe

# a requirement line: indentation, '- ' and/or 'then:'/'else:', the (optionally quoted) value, a comment
_ITEM_LINE = re.compile(r"^(?P<pre>\s*(?:-\s+)?(?:(?:then|else)\s*:\s+)?)(?P<q>[\"']?)(?P<val>.*?)(?P=q)"
                        r"(?P<post>(?:\s+#.*)?\s*)$")


def _widen_pin(editor: LineEditor, edit: PinEdit, release: str) -> None:
    """Widen the version part of the pin on ``edit.line``; its name, channel, build string and
    bracket keys stay as written. An upper bound that comes from a ``context:`` variable
    (``pytorch >=2.4,<${{ torch_max }}``) is edited there."""
    body, eol = split_eol(editor.get_line(edit.line))
    cut = comment_start(body)
    item = _ITEM_LINE.match(body[:cut])
    val = item.group("val") if item else ""
    if "${{" not in val:
        if edit.error:
            raise EditError(edit.error)
        editor.replace(edit.line, edit.old, edit.new)
        return
    # an expression in the spec (``pytorch >=${{ lo }},<2.7`` or ``pytorch >=2.4,<${{ hi }} *cuda*``)
    try:
        parts = split_spec(val, build_outside_brackets(edit.old))
    except SpecEditError as exc:
        raise EditError(f"cannot read the pin on line {edit.line}: {exc}") from None
    upper = [t for t in parts.version.split(",") if t.strip().startswith("<")]
    if len(upper) != 1:
        raise EditError(f"no single upper bound in '{val}' (line {edit.line})")
    var = re.fullmatch(r"\s*<=?\s*" + CONTEXT_VAR.pattern + r"\s*", upper[0])
    if var is not None:
        editor.set_context(var.group(1), next_minor_bound(release))
        return
    new_val = parts.head + widen_version(parts.version, release) + parts.tail
    assert item is not None  # "${{" is in val
    editor.put_line(edit.line, body[:item.start("val")] + new_val + body[item.end("val"):], eol)


def _pin_shape(pins: list) -> list[tuple]:
    """What must not change in a recipe's pytorch pins: everything but the version (sorted)."""
    out: list[tuple] = []
    for d in pins:
        try:
            m = MatchSpec(d.raw, strict=True)
        except (InvalidMatchSpecError, ValueError):
            out.append((d.section, d.raw))
            continue
        out.append((d.section, m.build, str(m.channel) if m.channel else None, m.subdir, m.build_number))
    return sorted(out, key=repr)


def _rattler_build_parses(text: str) -> str | None:
    """rattler-build's own parse of recipe text: None when it reads it, else its message. (The binding's
    parser is called directly: the public ``Stage0Recipe.from_yaml`` also writes the text into a new
    temporary folder that it never removes.)"""
    try:
        from rattler_build._rattler_build import stage0 as _stage0  # type: ignore[import-not-found]  # compiled binding, no stubs

        parse = _stage0.Stage0Recipe.from_yaml
    except (ImportError, AttributeError):  # another rattler-build layout: the public API
        from rattler_build import Stage0Recipe

        parse = _parse_in_scratch(Stage0Recipe.from_yaml)
    try:
        parse(text)
    except Exception as exc:  # noqa: BLE001 - any refusal of rattler-build's is the answer
        return str(exc).strip() or type(exc).__name__
    return None


def _parse_in_scratch(from_yaml: Callable[..., Stage0Recipe]) -> Callable[[str], Stage0Recipe]:
    def parse(text: str) -> Stage0Recipe:
        from conda_distro.util.scratch import ScratchDir

        with ScratchDir("conda-distro-recipe-") as tmp:
            return from_yaml(text, recipe_dir=tmp)

    return parse


def _verify(recipe: Recipe, text: str, dec: Decision, pytorch: str, release: str) -> Recipe:
    """The edited text must parse (ours and rattler-build's parser, when the original passed it), admit
    ``release`` in every pytorch pin, keep every pin's build string and channel, and carry the new build
    number; the package's own output pins are never changed. Returns the edited recipe."""
    try:
        edited = parse_recipe(text, recipe.path, recipe.settings)
    except DistroError as exc:
        raise EditError(f"the edited recipe does not parse: {exc.message}") from None
    if edited.build_number != dec.new_build:
        raise EditError(f"the edited build number is {edited.build_number}, not {dec.new_build}")
    pins = pytorch_pins(edited, pytorch)
    bad = [d.raw for d in pins if not admits(d.version, release)]
    if bad:
        raise EditError(f"'{bad[0]}' still does not admit {pytorch} {release}")
    if (edited.name, edited.version) != (recipe.name, recipe.version):
        raise EditError("the edit changed the package name or version")
    if _pin_shape(pins) != _pin_shape(pytorch_pins(recipe, pytorch)):
        raise EditError("the edit changed more than the version part of a pytorch pin")
    own = own_names(recipe) - {pytorch}
    others = lambda r: sorted((d.section, d.raw, d.func or "") for d in r.deps() if d.name != pytorch)  # noqa: E731
    if others(edited) != others(recipe) or own_names(edited) != own_names(recipe):
        raise EditError(f"the edit changed requirements other than pytorch pins ({', '.join(sorted(own)) or 'none'})")
    why = _rattler_build_parses(text)
    if why is not None and _rattler_build_parses(recipe.text) is None:  # (a recipe it never read stays as it was)
        raise EditError(f"rattler-build cannot read the edited recipe: {why}")
    return edited


def _bump_build_number(tree: TreeEditor) -> None:
    number = tree.get("build.number")
    if isinstance(number, int):
        tree.set("build.number", number + 1)
        return
    m = re.fullmatch(r"\$\{\{\s*(\w+)\s*\}\}", str(number or "").strip())
    ctx = tree.get("context") or {}
    if m and m.group(1) in ctx and str(ctx[m.group(1)]).isdigit():
        old = ctx[m.group(1)]
        tree.set(f"context.{m.group(1)}", int(old) + 1 if isinstance(old, int) else str(int(old) + 1))
        return
    raise EditError("cannot find a build number to increment (write build: {number: N})")


def _roundtrip_edit(recipe: Recipe, dec: Decision) -> str:
    """The fallback: a ruamel round trip (comments and quoting kept; whitespace may be normalised)."""
    tree = TreeEditor(recipe.text, path=recipe.path)
    outputs = tree.get("outputs") or []
    tops = ["", *[f"outputs[{i}]." for i, o in enumerate(outputs) if isinstance(o, dict)]]
    bodies = [f"{top}requirements" for top in tops]
    for top in tops:  # the tests' requirements (a test's pytorch pin is widened like the others)
        bodies += [f"{at}.requirements" for at, t in written_tests(tree.get(f"{top}tests"), f"{top}tests")
                   if isinstance(t.get("requirements"), dict)]
    for e in {e.old: e for e in dec.edits}.values():  # identical host and run pins: one replacement does both
        if e.error:
            raise EditError(e.error)
        if sum(tree.replace_items(b, e.old, e.new) for b in bodies) == 0:
            raise EditError(f"cannot find '{e.old}' (line {e.line})")
    _bump_build_number(tree)
    return tree.text()


def edited_recipe(recipe: Recipe, dec: Decision, pytorch: str, release: str) -> Recipe:
    """The recipe with ``dec``'s pin edits and the build number + 1 (its ``text`` is the new file).
    Raises :class:`EditError`.

    A line edit first: exactly the pin lines (or the context: lines their bounds come from) and the
    build-number line change, byte for byte everything else is kept. When the recipe's shape defeats
    it, a ruamel round trip. Either result is checked by parsing it back."""
    editor = LineEditor(recipe.text, recipe.tree)
    try:
        for e in dec.edits:
            _widen_pin(editor, e, release)
        line = recipe.lines.get("build.number")
        if line is None:
            raise EditError("no build: number: to increment")
        editor.set_number("build.number", dec.new_build or 0, line=line)
        text = editor.text()
        return _verify(recipe, text, dec, pytorch, release)
    except EditError as first:
        try:
            text = _roundtrip_edit(recipe, dec)
            return _verify(recipe, text, dec, pytorch, release)
        except (EditError, DistroError):
            raise first from None


def edited_text(recipe: Recipe, dec: Decision, pytorch: str, release: str) -> str:
    """The text of :func:`edited_recipe`."""
    return edited_recipe(recipe, dec, pytorch, release).text


def add_release_text(distro: DistroRepo, release: str, text: str | None = None) -> str:
    """distro.yaml (``text``, read from disk when not given) with ``release`` inserted in
    ``pytorch.releases`` (version order), only that line (flow list) or one new line (block list)
    changing; a ruamel round trip otherwise."""
    text = distro.path.read_text() if text is None else text
    try:
        return _add_release_lines(text, release)
    except EditError:
        pass
    tree = TreeEditor(text, path=distro.path)
    releases = tree.get("pytorch.releases")
    style = type(releases[0]) if releases else str
    pos = sum(Version(str(r)) < Version(release) for r in releases)
    releases.insert(pos, style(release) if style is not str else release)
    return tree.text()


def _add_release_lines(text: str, release: str) -> str:
    doc = load_fast(text)
    pt = doc.get("pytorch") if isinstance(doc, dict) else None
    rel = pt.get("releases") if isinstance(pt, LDict) else None
    if not isinstance(pt, LDict) or not isinstance(rel, LList) or not rel:
        raise EditError("no pytorch.releases list")
    pos = sum(Version(str(r)) < Version(release) for r in rel)
    editor = LineEditor(text, doc)
    key_line = pt.line_of("releases")
    if all(n == key_line for n in rel.item_lines):  # a one-line flow list: releases: ["2.4.1", "2.5.1"]
        body, eol = split_eol(editor.get_line(key_line))
        cut = comment_start(body)
        open_, close = body.find("[", 0, cut), body.rfind("]", 0, cut)
        if open_ < 0 or close < open_:
            raise EditError("unexpected releases line")
        items = list(re.finditer(r"(\"[^\"]*\"|'[^']*'|[^,\s\]]+)", body[open_ + 1:close]))
        if len(items) != len(rel):
            raise EditError("unexpected releases line")
        quote = items[0].group(1)[0] if items[0].group(1)[0] in "\"'" else ""
        new = f"{quote}{release}{quote}"
        if pos == len(items):
            at = open_ + 1 + items[-1].end()
            body = body[:at] + ", " + new + body[at:]
        else:
            at = open_ + 1 + items[pos].start()
            body = body[:at] + new + ", " + body[at:]
        editor.put_line(key_line, body, eol)
    else:  # a block list: one line per release
        if len(set(rel.item_lines)) != len(rel):
            raise EditError("unexpected releases list")
        ref = rel.item_lines[pos - 1] if pos else rel.item_lines[0]
        body, eol = split_eol(editor.get_line(ref))
        m = re.match(r"^(\s*-\s+)([\"']?)", body)
        if m is None:
            raise EditError("unexpected releases item")
        editor.insert_line(ref if pos else ref - 1, f"{m.group(1)}{m.group(2)}{release}{m.group(2)}{eol}")
    out = editor.text()
    check = load_fast(out)["pytorch"]["releases"]
    if [str(r) for r in check] != sorted([*map(str, rel), release], key=Version):
        raise EditError("the edited releases list does not read back")
    return out
