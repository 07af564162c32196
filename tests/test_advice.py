"""Advice a person can follow: every `conda-distro ...` command the package's texts name (error hints,
hold advice, PR comments, docstrings, templates) is a command the CLI has, with options it has; no text
advises a bare `conda-distro build` (the CLI refuses it: nothing selected); every docs/<page>.md a text
names exists, and so does the section it names there; no text sends a reader to a README section the README
does not have; no message cites engine-notes (not in the repository: the message says the rule itself)
or advises rattler-index (not installed with the tool); `conda-distro sweep` is advised with its release.

The texts are read from the source (every string constant, f-string and `+` of strings, with `{...}`
standing for what is filled in at run time), from the templates, and from the repository's own
configuration files' comments. The commands and options are read from the real click command tree.
"""

from __future__ import annotations

import ast
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from typer.core import TyperGroup

from conda_distro.cli import command

_GROUP_PARSE = TyperGroup.parse_args

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "distro" / "conda_distro"
README = REPO / "README.md"
CONFIG_FILES = ("hints.yaml", "package_owners.yaml", "distro.yaml", "variants.yaml")

# what selects packages for a build: without one of these and without a name, the CLI refuses it
BUILD_SELECTORS = {"--all", "--changed-since", "--retry-errors"}
SHELL_STOP = {"|", "||", "&&", ";", ">", ">>", "2>&1", "<"}
BACKQUOTED = re.compile(r"(`+)([^`]+?)\1")
JINJA_COMMENT = re.compile(r"\{#.*?#\}", re.S)
CODE_TAG = re.compile(r"<code>(.+?)</code>", re.S)
DOCS_PAGE = re.compile(r"(?<![\w/.-])docs/[\w./-]+?\.md\b")
README_SECTION = re.compile(r"README(?:'s|\.md)?,?\s*(?:section\s*)?[\"“']([^\"”']+)[\"”']")
README_NAMED = re.compile(r"README(?:'s|\.md)?\s+([\w./ -]{1,40}?)\s+section")
# `docs/page.md, section "Heading"` (or `docs/page.md ("Heading")`): the heading must be one of the page's
DOCS_SECTION = re.compile(r"(docs/[\w./-]+?\.md)(?:,\s*section\s*|\s*\(\s*)[\\]?[\"“]([^\"”\\]+)[\\]?[\"”]")


class Text:
    def __init__(self, where: str, text: str, docstring: bool):
        self.where, self.text, self.docstring = where, text, docstring


def _flatten_add(node: ast.expr, out: list[ast.expr]) -> None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        _flatten_add(node.left, out)
        _flatten_add(node.right, out)
    else:
        out.append(node)


def _render(node: ast.expr) -> str | None:
    """The text a string expression makes, with `{...}` for each part filled in at run time."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            parts.append(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{...}")
        return "".join(parts)
    return None


def _docstring_nodes(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def _python_texts(path: Path) -> Iterator[Text]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docs = _docstring_nodes(tree)
    done: set[int] = set()
    rel = path.relative_to(REPO)
    for node in ast.walk(tree):
        if id(node) in done:
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            parts: list[ast.expr] = []
            _flatten_add(node, parts)
            rendered = [_render(p) for p in parts]
            if any(r is not None for r in rendered):
                for sub in ast.walk(node):
                    done.add(id(sub))
                yield Text(f"{rel}:{node.lineno}", "".join("{...}" if r is None else r for r in rendered), False)
                continue
        if isinstance(node, ast.JoinedStr):
            for sub in ast.walk(node):
                done.add(id(sub))
        text = _render(node) if isinstance(node, ast.expr) else None
        if text is not None:
            yield Text(f"{rel}:{node.lineno}", text, id(node) in docs)


def _comments(path: Path) -> Iterator[Text]:
    rel = path.relative_to(REPO)
    with path.open("rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type == tokenize.COMMENT:
                yield Text(f"{rel}:{tok.start[0]}", tok.string, True)


def _texts() -> Iterator[Text]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield from _python_texts(path)
        yield from _comments(path)
    for path in sorted((PACKAGE / "templates").iterdir()):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            comments = JINJA_COMMENT.findall(text)  # what the template is, not what it tells a reader
            yield Text(str(path.relative_to(REPO)), JINJA_COMMENT.sub("", text), False)
            yield Text(str(path.relative_to(REPO)), "\n".join(comments), True)
    for name in CONFIG_FILES:
        path = REPO / name
        if path.is_file():
            comments = "\n".join(line for line in path.read_text(encoding="utf-8").splitlines()
                                 if line.lstrip().startswith("#"))
            yield Text(name, comments, False)


def _mentions(text: str) -> Iterator[str]:
    """Each `conda-distro ...` inside backquotes (or a template's <code>), from `conda-distro` on."""
    spans = [m.group(2) for m in BACKQUOTED.finditer(text)] + [m.group(1) for m in CODE_TAG.finditer(text)]
    for span in spans:
        for m in re.finditer(r"(?<![\w-])conda-distro(?![\w-])", span):
            yield span[m.start():]


def _options(cmd: Any) -> dict[str, Any]:
    """A command's options by name, with the help options every command takes (set on the root's context)."""
    found = {opt: p for p in cmd.params if p.param_type_name == "option" for opt in (*p.opts, *p.secondary_opts)}
    root = command()
    ctx = root.make_context("conda-distro", [], resilient_parsing=True)
    help_option = root.get_help_option(ctx)
    for name in root.get_help_option_names(ctx):
        found[name] = help_option
    return found


def _check_command(mention: str, *, docstring: bool) -> list[str]:
    """What is wrong with one mention (an empty list when nothing is)."""
    tokens = []
    for tok in mention.split()[1:]:
        if tok in SHELL_STOP:
            break
        tok = tok.strip("[]()\"',.:")
        if tok:
            tokens.append(tok)
    root = command()
    cmd, path, i = root, [], 0
    # the command path: group names, then (for a group) one of its commands; `a|b|c` names several
    while i < len(tokens) and hasattr(cmd, "commands") and not tokens[i].startswith("-"):
        names = tokens[i].split("|")
        known = [n for n in names if n in cmd.commands]
        if cmd is root or known:
            unknown = [n for n in names if n not in cmd.commands]
            if unknown:
                return [f"no command `conda-distro {' '.join([*path, *unknown])}`"]
            if len(names) > 1:
                return []
            cmd = cmd.commands[names[0]]
            path.append(names[0])
            i += 1
        else:
            # a group that runs a hidden default command when not given one of its names (`sandbox DIR`)
            hidden = [c for c in cmd.commands.values() if c.hidden]
            if len(hidden) == 1 and type(cmd).parse_args is not _GROUP_PARSE:
                cmd = hidden[0]
            break
    problems = []
    options = {**_options(root), **_options(cmd)} if cmd is not root else _options(root)
    positional, flags = [], set()
    rest = tokens[i:]
    j = 0
    while j < len(rest):
        tok = rest[j]
        if tok.startswith("-") and len(tok) > 1 and not tok.startswith("-{"):
            name = tok.split("=", 1)[0]
            if name.rstrip(".") == "-" or set(name) == {"-"}:
                j += 1
                continue
            opt = options.get(name)
            if opt is None:
                problems.append(f"`conda-distro {' '.join(path)}` has no option {name}")
            else:
                flags.add(name)
                if "=" not in tok and not opt.is_flag and not getattr(opt, "count", False):
                    j += 1  # the option's value
        else:
            positional.append(tok)
        j += 1
    if path == ["build"] and not docstring and not positional and not flags & BUILD_SELECTORS:
        problems.append("a bare `conda-distro build` is refused (nothing selected): name the packages "
                        "(`conda-distro build NAME`) or pass --all")
    if path == ["sweep"] and not docstring and "--pytorch" not in flags and not flags & {"--help", "-h"}:
        problems.append("`conda-distro sweep` is refused without a release: name it (`--pytorch VER`)")
    return problems


def _readme_sections() -> set[str]:
    return {line.lstrip("#").strip() for line in README.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")}


def _headings(page: Path) -> set[str]:
    return {line.lstrip("#").strip() for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("#")}


def offenders() -> list[str]:
    out = []
    sections = _readme_sections()
    for t in _texts():
        for mention in _mentions(t.text):
            out += [f"{t.where}: {p} (in {mention.splitlines()[0]!r})"
                    for p in _check_command(mention, docstring=t.docstring)]
        for m in DOCS_PAGE.finditer(t.text):
            if not (REPO / m.group(0)).is_file():
                out.append(f"{t.where}: names {m.group(0)}, which does not exist")
        for m in DOCS_SECTION.finditer(t.text):
            page, heading = REPO / m.group(1), " ".join(m.group(2).split())
            if page.is_file() and heading not in _headings(page):
                out.append(f"{t.where}: names the section {heading!r} of {m.group(1)}, which that page does not have")
        if not t.docstring and "rattler-index" in t.text:  # not installed with the tool: say what re-indexes
            out.append(f"{t.where}: advises rattler-index, which is not installed with conda-distro")
        if not t.docstring and "engine-notes" in t.text:  # a file the repository does not have: say the rule
            out.append(f"{t.where}: cites engine-notes, which is not in the repository")
        for m in README_SECTION.finditer(t.text):
            if m.group(1) not in sections:
                out.append(f"{t.where}: names the README section {m.group(1)!r}, which the README does not have")
        for m in README_NAMED.finditer(t.text):
            if m.group(1) not in sections:
                out.append(f"{t.where}: names the README's {m.group(1)!r} section, which the README does not have")
    return out


def test_advice_names_what_exists():
    found = offenders()
    print(f"{len(found)} offenders:")
    for line in found:
        print("  " + line)
    assert not found, f"{len(found)} texts advise what does not exist:\n" + "\n".join(found)


def test_the_guard_sees_what_it_guards():
    """The checks themselves: each kind of offender is caught, and the forms that work pass."""
    assert _check_command("conda-distro build", docstring=False)
    assert _check_command("conda-distro build --dry-run", docstring=False)
    assert not _check_command("conda-distro build NAME", docstring=False)
    assert not _check_command("conda-distro build {...}", docstring=False)
    assert not _check_command("conda-distro build --all", docstring=False)
    assert not _check_command("conda-distro build --pytorch VER --all", docstring=False)
    assert _check_command("conda-distro build --pytorch VER", docstring=False)  # VER is the option's value
    assert _check_command("conda-distro lint --explain", docstring=False)
    assert not _check_command("conda-distro lint --list-checks", docstring=False)
    assert _check_command("conda-distro no-such-command", docstring=False)
    assert not _check_command("conda-distro sweep report --pytorch VER", docstring=False)
    assert not _check_command("conda-distro sandbox DIR --real", docstring=False)
    assert not _check_command("conda-distro fanout plan|shard|merge", docstring=False)
    assert _check_command("conda-distro sweep", docstring=False)
    assert not _check_command("conda-distro sweep --pytorch {...}", docstring=False)
    assert list(_mentions("run ``conda-distro lint`` then `conda-distro build {...}`")) == \
        ["conda-distro lint", "conda-distro build {...}"]
    texts = list(_python_texts(PACKAGE / "checkpr" / "comment.py"))
    assert any("conda-distro" in t.text for t in texts)
    assert README_SECTION.search('(README "No such section")')
    assert README_NAMED.search("see the README's distro.yaml section")
    assert DOCS_SECTION.search('see docs/operate.md, section "No such section"').group(2) == "No such section"
    assert DOCS_SECTION.search('see docs/operate.md ("Build sandbox")').group(2) == "Build sandbox"
