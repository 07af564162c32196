"""Release-day sweep (spec §7): admit a new PyTorch release across the distribution.

Plan (pure data, ``--dry-run`` prints it) -> edits (only the pin lines and the build-number line
change: a line edit, with a ruamel round trip as the fallback for shapes a line edit cannot handle)
-> build/test of the affected set against the new release -> statuses -> optional git branch with
one commit per bumped package, PR bodies and a tracking-issue body.

Which packages are built and tested: the bumped ones and, when the release opens a new minor, the
pytorch-dependent ones whose pins already admit it (their existing builds were never tested with
it), plus every dependent of those (the affected set). A bugfix release of an already supported
minor needs no new downstream build (spec §1), so it builds nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rattler import MatchSpec
from rattler.exceptions import InvalidMatchSpecError

from conda_distro.channels.hooks import crash_point
from conda_distro.channels.locking import DEFAULT_LOCK_TIMEOUT, REPOSITORY_LOCK, channel_lock
from conda_distro.config import DISTRO_FILE, Distro, load_config
from conda_distro.distribution import Distribution, load_distribution, open_distro
from conda_distro.errors import DistroError, GitError, UsageError
from conda_distro.gitutil import branch_sha, clear_stale_index_lock, commit_chain, publish_branch
from conda_distro.graph import RecipeGraph
from conda_distro.pins import depends_on, own_names, pytorch_pins
from conda_distro.progress import make_reporter
from conda_distro.recipe import Recipe, parse_recipe
from conda_distro.specs import (SpecEditError, admits, build_outside_brackets, minor_of, next_minor_bound, split_spec, widen_spec,
                                widen_version)
from conda_distro.sweepstate import SweepJournal, UncommittedEdits, find_journal, journal_path, roll_back
from conda_distro.yamlio import LDict, LList, atomic_write_text, dump_roundtrip, load_fast, load_roundtrip

RELEASE_RE = re.compile(r"^\d+\.\d+\.\d+$")
STATUSES = ("unchanged", "bumped", "needs-new-version", "failed", "awaiting-parents", "not-solvable", "unreadable")
FAILURES = ("failed", "not-solvable", "unreadable")  # statuses that make the report's `ok` false
BLOCKING = ("failed", "not-solvable", "needs-new-version", "awaiting-parents", "unreadable")  # their dependents wait


@dataclass(frozen=True)
class PinEdit:
    old: str  # the requirement text as written (rendered)
    new: str
    line: int
    error: str | None = None  # why the spec cannot be widened (then ``new == old``)


@dataclass
class Decision:
    name: str
    status: str
    maintainers: list[str]
    old_pin: str | None = None
    new_pin: str | None = None
    edits: list[PinEdit] = field(default_factory=list)
    old_build: int | None = None
    new_build: int | None = None
    reason: str | None = None
    log: str | None = None  # failing log excerpt
    tests: list[dict] = field(default_factory=list)
    direct: bool = True  # depends on pytorch itself (False: only through distribution packages)

    @property
    def applied(self) -> bool:
        """Is the edit in the working tree after the sweep (only bumped packages keep theirs)?"""
        return self.status == "bumped"

    def to_dict(self) -> dict:
        return {
            "name": self.name, "status": self.status, "old_pin": self.old_pin, "new_pin": self.new_pin,
            "maintainers": self.maintainers, "old_build": self.old_build, "new_build": self.new_build,
            "applied": self.applied, "pytorch_dependency": "direct" if self.direct else "indirect",
            "reason": self.reason, "log": self.log, "tests": self.tests,
        }


@dataclass
class SweepPlan:
    release: str
    decisions: list[Decision]
    noop: bool = False  # the release is already supported
    dry_run: bool = False  # only planned: nothing is edited, so nothing is applied

    def get(self, name: str) -> Decision:
        return next(d for d in self.decisions if d.name == name)

    def to_dict(self) -> dict:
        return {"release": self.release, "noop": self.noop, "dry_run": self.dry_run,
                "packages": [{**d.to_dict(), "applied": d.applied and not self.dry_run} for d in self.decisions]}


@dataclass(frozen=True)
class SweepOptions:
    release: str
    commit: bool = False
    dry_run: bool = False
    build: bool = True
    jobs: int = 1
    author: str = "conda-distro bot <bot@conda-distro.invalid>"
    sandbox: bool = True  # False: --no-sandbox
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT  # seconds to wait for another sweep of the same repository
    root: Path | None = None  # the distribution's folder (None: found from the current one); for sweep()


@dataclass
class SweepResult:
    plan: SweepPlan
    branch: str | None = None
    commits: list[dict] = field(default_factory=list)
    pr_bodies: dict[str, dict] = field(default_factory=dict)
    tracking_issue: str | None = None
    message: str | None = None
    report_file: str | None = None  # build/sweep/pytorch-VER.json, this document
    start: str | None = None  # --commit: the branch (or commit) checked out again after making the sweep's branches

    @property
    def ok(self) -> bool:
        return not any(d.status in FAILURES for d in self.plan.decisions)

    @property
    def summary(self) -> dict[str, int]:
        """How many packages ended in each status (only statuses that occur, in STATUSES order)."""
        counts = {st: sum(d.status == st for d in self.plan.decisions) for st in STATUSES}
        return {st: n for st, n in counts.items() if n}

    @property
    def next_steps(self) -> list[str]:
        return next_steps(self)

    def to_dict(self) -> dict:
        return {**self.plan.to_dict(), "ok": self.ok, "summary": self.summary, "next_steps": self.next_steps,
                "branch": self.branch, "start": self.start, "commits": self.commits,
                "pull_requests": self.pr_bodies, "tracking_issue": self.tracking_issue, "message": self.message,
                "report_file": self.report_file}

    @property
    def exit_code(self) -> int:
        return 0  # spec §7: the sweep ran; failures are statuses in the report, not an error

    def text_lines(self) -> list[str]:
        lines = [self.message] if self.message else []
        for d in self.plan.decisions:
            pin = f"{d.old_pin} -> {d.new_pin}" if d.old_pin != d.new_pin else (d.old_pin or "")
            if d.old_pin != d.new_pin and not d.applied:
                pin += " (reverted)"
            lines.append(f"  {d.status:18} {d.name:24} {pin}" + (f"  ({d.reason})" if d.reason else ""))
        if self.branch:
            lines.append(f"branch {self.branch}: {len(self.commits)} commit(s)")
            lines += [f"  {pr['branch']}  ({name})" for name, pr in self.pr_bodies.items() if pr.get("branch")]
            if self.start:
                lines.append(f"back on {self.start} (the sweep's edits are on the branches)")
        if self.summary:
            lines.append(("planned: " if self.plan.dry_run else "summary: ")
                         + ", ".join(f"{n} {st}" for st, n in self.summary.items()))
        lines += [f"next: {step}" for step in self.next_steps]
        return lines

    def markdown(self) -> str:
        """The tracking issue's body, then each PR's title and body (or the message, when there is no issue)."""
        parts = [self.message] if self.message and not self.tracking_issue else []
        if self.tracking_issue:
            parts.append(self.tracking_issue.rstrip("\n"))
        parts += [f"\n---\n## PR: {pr['title']}\n\n{pr['body']}" for pr in self.pr_bodies.values()]
        return "".join(f"{p}\n" for p in parts)


# ---------------------------------------------------------------------------------------------
# planning


def widen(version: str, release: str) -> str:
    """The version part widened to the next minor after ``release`` (see :func:`specs.widen_version`)."""
    return widen_version(version, release)


def _pytorch_deps(recipe: Recipe, pytorch: str):
    """The recipe's versioned pins of pytorch (build, host, run, run_constraints, outputs, every branch;
    never its own outputs' pins)."""
    return pytorch_pins(recipe, pytorch)


def decide(recipe: Recipe, pytorch: str, release: str, supported: tuple[str, ...] = ()) -> Decision | None:
    """What the sweep does to one recipe. ``supported``: the releases supported before the sweep; a
    bugfix release of a minor the recipe did not admit before either changes nothing for it."""
    versioned = _pytorch_deps(recipe, pytorch)
    if not versioned and not depends_on(recipe, pytorch):
        return None
    run_pin = next((d for d in versioned if d.section == "run"), versioned[0] if versioned else None)
    dec = Decision(recipe.folder.name, "unchanged", list(recipe.maintainers),
                   old_pin=run_pin.raw if run_pin else None, new_pin=run_pin.raw if run_pin else None,
                   old_build=recipe.build_number, new_build=recipe.build_number)
    if all(admits(d.version, release) for d in versioned):
        return dec
    same_minor = [r for r in supported if minor_of(r) == minor_of(release)]
    if same_minor and not any(all(admits(d.version, r) for d in versioned) for r in same_minor):
        ma, mi = minor_of(release)
        dec.reason = f"does not admit pytorch {ma}.{mi} (nor {', '.join(same_minor)}): a bugfix release changes nothing"
        return dec
    if recipe.lockstep:
        dec.status = "needs-new-version"
        ma, mi = minor_of(release)
        dec.reason = (f"lockstep package: needs the upstream release made for pytorch {ma}.{mi} "
                      f"(a new version with its pin set to '{pytorch} >={ma}.{mi},<{next_minor_bound(release)}')")
        return dec
    dec.status = "bumped"
    for d in versioned:
        if not admits(d.version, release):
            try:
                dec.edits.append(PinEdit(d.raw, widen_spec(d.raw, release, supported=supported), d.line))
            except SpecEditError as exc:  # the edit fails with this reason (that package alone fails)
                dec.edits.append(PinEdit(d.raw, d.raw, d.line, error=str(exc)))
    if run_pin is not None:
        dec.new_pin = next((e.new for e in dec.edits if e.line == run_pin.line), run_pin.raw)
    dec.new_build = (recipe.build_number or 0) + 1
    return dec


def plan_sweep(dist: Distribution, release: str) -> SweepPlan:
    if not RELEASE_RE.match(release):
        raise UsageError(f"'{release}' is not a release version like 2.7.0", field="--pytorch",
                         hint="pass the full MAJOR.MINOR.PATCH version that was published")
    if release in dist.config.pytorch.releases:
        return SweepPlan(release, [], noop=True)
    # a recipe that cannot be read is reported (and its dependents wait); the others are swept
    decisions: list[Decision] = [Decision(folder, "unreadable", [], reason=str(err))
                                 for folder, err in sorted(dist.broken.items())]
    for name, by in sorted(dist.blocked_by_broken().items()):
        decisions.append(Decision(name, "awaiting-parents", list(dist.recipes[name].maintainers),
                                  reason=f"depends on unreadable recipe {by}"))
    dist = dist.readable()
    pytorch = dist.config.pytorch.name
    graph = RecipeGraph.from_recipes(dist.recipes)
    seen: set[str] = set()
    for name in graph.order():
        dec = decide(dist.recipes[name], pytorch, release, tuple(dist.config.pytorch.releases))
        if dec is None and any(p in seen for p in graph.dependencies(name)):
            recipe = dist.recipes[name]  # depends on pytorch only through distribution packages
            dec = Decision(name, "unchanged", list(recipe.maintainers), old_build=recipe.build_number,
                           new_build=recipe.build_number, direct=False)
        if dec is not None:
            decisions.append(dec)
            seen.add(name)
    return SweepPlan(release, decisions)


# ---------------------------------------------------------------------------------------------
# edits: only the pin lines and the build-number line change


class EditError(Exception):
    """An edit that cannot be made automatically (the message says why)."""


_CTX_VAR = re.compile(r"\$\{\{\s*([A-Za-z_]\w*)\s*\}\}")
# a requirement line: indentation, '- ' and/or 'then:'/'else:', the (optionally quoted) value, a comment
_ITEM_LINE = re.compile(r"^(?P<pre>\s*(?:-\s+)?(?:(?:then|else)\s*:\s+)?)(?P<q>[\"']?)(?P<val>.*?)(?P=q)"
                        r"(?P<post>(?:\s+#.*)?\s*)$")


def _split_eol(line: str) -> tuple[str, str]:
    body = line[:-1] if line.endswith("\r") else line
    return body, line[len(body):]


def _comment_start(body: str) -> int:
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


def _set_scalar(body: str, key: str, value: str) -> str | None:
    """``  key: old  # c`` -> ``  key: value  # c`` (the quoting of the old value is kept)."""
    m = re.match(rf"^(\s*(?:-\s+)?[\"']?{re.escape(key)}[\"']?\s*:\s*)([\"']?)([^\"'#]*?)\2(\s*(?:\s#.*)?)$", body)
    if m is None:
        m = re.search(rf"((?<![\w-]){re.escape(key)}\s*:\s*)([\"']?)([^\"',}}\s#]+)\2", body)  # flow mapping
        if m is None:
            return None
    return body[:m.start(3)] + value + body[m.end(3):]


class _LineEditor:
    """Edits a recipe's text line by line; remembers which lines it changed."""

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe
        self.lines = recipe.text.split("\n")
        self.changed: set[int] = set()
        ctx = recipe.tree.get("context") if isinstance(recipe.tree, dict) else None
        self.context: LDict | dict = ctx if isinstance(ctx, dict) else {}

    def text(self) -> str:
        return "\n".join(self.lines)

    def _get(self, line: int) -> str:
        if not 1 <= line <= len(self.lines):
            raise EditError(f"line {line} is not in the file")
        return self.lines[line - 1]

    def _put(self, line: int, body: str, eol: str) -> None:
        self.lines[line - 1] = body + eol
        self.changed.add(line)

    def set_context(self, var: str, value: str) -> None:
        if var not in self.context or not isinstance(self.context, LDict):
            raise EditError(f"'{var}' is not a context: variable")
        line = self.context.line_of(var)
        body, eol = _split_eol(self._get(line))
        new = _set_scalar(body, var, value)
        if new is None:
            raise EditError(f"cannot edit the context: variable '{var}' on line {line}")
        self._put(line, new, eol)

    def pin(self, edit: PinEdit, release: str) -> None:
        """Widen the version part of the pin on ``edit.line``; its name, channel, build string and
        bracket keys stay as written. An upper bound that comes from a ``context:`` variable
        (``pytorch >=2.4,<${{ torch_max }}``) is edited there."""
        body, eol = _split_eol(self._get(edit.line))
        cut = _comment_start(body)
        item = _ITEM_LINE.match(body[:cut])
        val = item.group("val") if item else ""
        if "${{" not in val:
            if edit.error:
                raise EditError(edit.error)
            m = re.search(r"(?<![\w.\-:\[])" + re.escape(edit.old) + r"(?![\w.*\]])", body[:cut])
            if m is None:
                raise EditError(f"cannot find '{edit.old}' on line {edit.line}")
            self._put(edit.line, body[:m.start()] + edit.new + body[m.end():], eol)
            return
        # an expression in the spec (``pytorch >=${{ lo }},<2.7`` or ``pytorch >=2.4,<${{ hi }} *cuda*``)
        try:
            parts = split_spec(val, build_outside_brackets(edit.old))
        except SpecEditError as exc:
            raise EditError(f"cannot read the pin on line {edit.line}: {exc}") from None
        upper = [t for t in parts.version.split(",") if t.strip().startswith("<")]
        if len(upper) != 1:
            raise EditError(f"no single upper bound in '{val}' (line {edit.line})")
        var = re.fullmatch(r"\s*<=?\s*" + _CTX_VAR.pattern + r"\s*", upper[0])
        if var is not None:
            self.set_context(var.group(1), next_minor_bound(release))
            return
        new_val = parts.head + widen_version(parts.version, release) + parts.tail
        self._put(edit.line, body[:item.start("val")] + new_val + body[item.end("val"):], eol)

    def build_number(self, new: int) -> None:
        line = self.recipe.lines.get("build.number")
        if line is None:
            raise EditError("no build: number: to increment")
        body, eol = _split_eol(self._get(line))
        cut = _comment_start(body)
        m = re.search(r"(?<![\w-])number\s*:\s*([\"']?)(\d+)\1", body[:cut])
        if m is not None:
            self._put(line, body[:m.start(2)] + str(new) + body[m.end(2):], eol)
            return
        var = re.search(r"(?<![\w-])number\s*:\s*[\"']?" + _CTX_VAR.pattern, body[:cut])
        if var is None:
            raise EditError(f"cannot read the build number on line {line}")
        self.set_context(var.group(1), str(new))


def _pin_shape(pins: list) -> list[tuple]:
    """What must not change in a recipe's pytorch pins: everything but the version (sorted)."""
    out = []
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
        from rattler_build._rattler_build import stage0 as _stage0

        parse = _stage0.Stage0Recipe.from_yaml
    except (ImportError, AttributeError):  # another rattler-build layout: the public API
        from rattler_build import Stage0Recipe

        parse = _parse_in_scratch(Stage0Recipe)
    try:
        parse(text)
    except Exception as exc:  # noqa: BLE001 - any refusal of rattler-build's is the answer
        return str(exc).strip() or type(exc).__name__
    return None


def _parse_in_scratch(stage0):
    def parse(text: str):
        import tempfile

        with tempfile.TemporaryDirectory(prefix="conda-distro-recipe-") as tmp:
            return stage0.from_yaml(text, recipe_dir=tmp)

    return parse


def _verify(recipe: Recipe, text: str, dec: Decision, pytorch: str, release: str) -> None:
    """The edited text must parse (ours and rattler-build's parser, when the original passed it), admit
    ``release`` in every pytorch pin, keep every pin's build string and channel, and carry the new build
    number; the package's own output pins are never changed."""
    try:
        edited = parse_recipe(text, recipe.path, recipe.settings)
    except DistroError as exc:
        raise EditError(f"the edited recipe does not parse: {exc.message}") from None
    if edited.build_number != dec.new_build:
        raise EditError(f"the edited build number is {edited.build_number}, not {dec.new_build}")
    pins = _pytorch_deps(edited, pytorch)
    bad = [d.raw for d in pins if not admits(d.version, release)]
    if bad:
        raise EditError(f"'{bad[0]}' still does not admit {pytorch} {release}")
    if (edited.name, edited.version) != (recipe.name, recipe.version):
        raise EditError("the edit changed the package name or version")
    if _pin_shape(pins) != _pin_shape(_pytorch_deps(recipe, pytorch)):
        raise EditError("the edit changed more than the version part of a pytorch pin")
    own = own_names(recipe) - {pytorch}
    others = lambda r: sorted((d.section, d.raw, d.func or "") for d in r.deps() if d.name != pytorch)  # noqa: E731
    if others(edited) != others(recipe) or own_names(edited) != own_names(recipe):
        raise EditError(f"the edit changed requirements other than pytorch pins ({', '.join(sorted(own)) or 'none'})")
    why = _rattler_build_parses(text)
    if why is not None and _rattler_build_parses(recipe.text) is None:  # (a recipe it never read stays as it was)
        raise EditError(f"rattler-build cannot read the edited recipe: {why}")


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


def _bump_build_number(doc: Any) -> None:
    build = doc.get("build")
    number = build.get("number") if build is not None else None
    if isinstance(number, int):
        build["number"] = number + 1
        return
    m = re.fullmatch(r"\$\{\{\s*(\w+)\s*\}\}", str(number or "").strip())
    ctx = doc.get("context") or {}
    if m and m.group(1) in ctx and str(ctx[m.group(1)]).isdigit():
        old = ctx[m.group(1)]
        ctx[m.group(1)] = int(old) + 1 if isinstance(old, int) else type(old)(str(int(old) + 1))
        return
    raise EditError("cannot find a build number to increment (write build: {number: N})")


def _roundtrip_edit(recipe: Recipe, dec: Decision) -> str:
    """The fallback: a ruamel round trip (comments and quoting kept; whitespace may be normalised)."""
    doc, y = recipe.roundtrip()
    bodies = [doc, *[o for o in (doc.get("outputs") or []) if isinstance(o, dict)]]
    for e in {e.old: e for e in dec.edits}.values():  # identical host and run pins: one replacement does both
        if e.error:
            raise EditError(e.error)
        if sum(_replace_strings(b.get("requirements"), e.old, e.new) for b in bodies) == 0:
            raise EditError(f"cannot find '{e.old}' (line {e.line})")
    _bump_build_number(doc)
    return dump_roundtrip(doc, y)


def edited_text(recipe: Recipe, dec: Decision, pytorch: str, release: str) -> str:
    """The recipe's text with ``dec``'s pin edits and the build number + 1. Raises :class:`EditError`.

    A line edit first: exactly the pin lines (or the context: lines their bounds come from) and the
    build-number line change, byte for byte everything else is kept. When the recipe's shape defeats
    it, a ruamel round trip. Either result is checked by parsing it back."""
    editor = _LineEditor(recipe)
    try:
        for e in dec.edits:
            editor.pin(e, release)
        editor.build_number(dec.new_build)
        text = editor.text()
        _verify(recipe, text, dec, pytorch, release)
        return text
    except EditError as first:
        try:
            text = _roundtrip_edit(recipe, dec)
            _verify(recipe, text, dec, pytorch, release)
            return text
        except (EditError, DistroError):
            raise first from None


def add_release_text(distro: Distro, release: str) -> str:
    """distro.yaml with ``release`` inserted in ``pytorch.releases`` (version order), only that line
    (flow list) or one new line (block list) changing; a ruamel round trip otherwise."""
    from rattler import Version

    text = distro.path.read_text()
    try:
        return _add_release_lines(text, release)
    except EditError:
        pass
    doc, y = load_roundtrip(text, path=distro.path)
    releases = doc["pytorch"]["releases"]
    style = type(releases[0]) if releases else str
    pos = sum(Version(str(r)) < Version(release) for r in releases)
    releases.insert(pos, style(release) if style is not str else release)
    return dump_roundtrip(doc, y)


def _add_release_lines(text: str, release: str) -> str:
    from rattler import Version

    doc = load_fast(text)
    pt = doc.get("pytorch") if isinstance(doc, dict) else None
    rel = pt.get("releases") if isinstance(pt, LDict) else None
    if not isinstance(rel, LList) or not rel:
        raise EditError("no pytorch.releases list")
    pos = sum(Version(str(r)) < Version(release) for r in rel)
    lines = text.split("\n")
    key_line = pt.line_of("releases")
    if all(n == key_line for n in rel.item_lines):  # a one-line flow list: releases: ["2.4.1", "2.5.1"]
        body, eol = _split_eol(lines[key_line - 1])
        cut = _comment_start(body)
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
        lines[key_line - 1] = body + eol
    else:  # a block list: one line per release
        if len(set(rel.item_lines)) != len(rel):
            raise EditError("unexpected releases list")
        ref = rel.item_lines[pos - 1] if pos else rel.item_lines[0]
        body, eol = _split_eol(lines[ref - 1])
        m = re.match(r"^(\s*-\s+)([\"']?)", body)
        if m is None:
            raise EditError("unexpected releases item")
        new_line = f"{m.group(1)}{m.group(2)}{release}{m.group(2)}{eol}"
        lines.insert(ref if pos else ref - 1, new_line)
    out = "\n".join(lines)
    check = load_fast(out)["pytorch"]["releases"]
    if [str(r) for r in check] != sorted([*map(str, rel), release], key=Version):
        raise EditError("the edited releases list does not read back")
    return out


# ---------------------------------------------------------------------------------------------
# execution


_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")


def _excerpt(log: str | None, lines: int = 15) -> str | None:
    """The failing part of a log: the last Python traceback when there is one, else the tail."""
    if not log or not Path(log).is_file():
        return None
    text = Path(log).read_text(errors="replace").splitlines()
    start = max((i for i, ln in enumerate(text) if ln.startswith("Traceback (most recent call last)")), default=None)
    if start is not None:
        end = next((i for i in range(start + 1, len(text)) if _EXC_LINE.match(text[i])), None)
        if end is not None:
            block = text[start:end + 1]
            return "\n".join(block if len(block) <= lines else [block[0], "  ...", *block[-(lines - 2):]])
    return "\n".join(text[-lines:])


def _open_repo(root: Path, release: str, dirty_ok: bool = False) -> Any:
    """The git repository for ``--commit``, refusing (nothing written yet) when recipes/ or distro.yaml
    have uncommitted changes (unless ``dirty_ok``: they are the edits being committed), something is
    staged, or a sweep branch of the release exists."""
    import git

    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise GitError(f"{root} is not a git repository", field="--commit", hint="run the sweep in a git checkout") from None
    if not repo.head.is_valid():
        raise GitError("the repository has no commit yet", field="--commit", hint="commit the distribution first")
    top = Path(repo.working_tree_dir).resolve()
    rel = root.resolve().relative_to(top)
    paths = [(rel / "recipes").as_posix(), (rel / DISTRO_FILE).as_posix()]
    dirty = [p for p in repo.git.status("--porcelain", "--", *paths).splitlines() if p.strip()]
    if dirty and not dirty_ok:
        raise GitError("recipes/ or distro.yaml have uncommitted changes", field="--commit",
                       hint="commit or stash them first: the sweep makes one commit per package")
    if repo.git.diff("--cached", "--name-only").strip():
        raise GitError("the git index holds staged changes", field="--commit",
                       hint="commit or unstage them first: they would end up in the sweep's commits")
    branch = f"sweep/pytorch-{release}"
    taken = [h.name for h in repo.heads if h.name == branch or h.name.startswith(branch + "-")]
    if taken:
        raise GitError(f"branch {taken[0]} already exists", field="--commit",
                       hint=f"delete it (git branch -D {' '.join(taken)}) and rerun")
    return repo


def _check_published(dist: Distribution, release: str) -> None:
    """When every upstream channel is a readable local folder, the release must be in one of them."""
    from conda_distro.proposal import UpstreamIndex

    index = UpstreamIndex.load(dist.distro)
    pytorch = dist.config.pytorch.name
    if index.complete and release not in index.versions.get(pytorch, set()):
        have = sorted(index.versions.get(pytorch, set()), key=lambda v: [int(x) if x.isdigit() else 0 for x in v.split(".")])
        raise UsageError(f"{pytorch} {release} is not in the upstream channels "
                         f"({', '.join(dist.config.channels.upstream)}; they have {', '.join(have) or 'none'})",
                         field="--pytorch", hint="sweep once the release is published upstream")


def _mark_awaiting(plan: SweepPlan, graph: RecipeGraph) -> None:
    """Dependents of a package that cannot take the release (failed, not solvable, waiting for a new
    version, or itself waiting) wait for their parents. Decisions are in dependency order."""
    status = {d.name: d.status for d in plan.decisions}
    for dec in plan.decisions:
        if dec.status not in ("bumped", "unchanged", "awaiting-parents") or dec.name not in graph.g:
            continue
        parents = sorted(a for a in graph.ancestors(dec.name) if status.get(a) in BLOCKING)
        if parents:
            dec.status, dec.reason = "awaiting-parents", f"waits for {', '.join(parents)}"
            status[dec.name] = dec.status


def _to_test(plan: SweepPlan, graph: RecipeGraph, new_minor: bool) -> list[str]:
    seeds = [d.name for d in plan.decisions
             if d.status == "bumped" or (new_minor and d.status == "unchanged" and d.direct)]
    live = {d.name for d in plan.decisions if d.status in ("bumped", "unchanged")}
    return [n for n in graph.affected(seeds) if n in live]


def sweep(options: SweepOptions) -> SweepResult:
    """`conda-distro sweep`: :func:`run_sweep` of the repository at ``options.root``, with progress unless
    it is a dry run."""
    return run_sweep(options.root, options, make_reporter() if not options.dry_run else None)


def run_sweep(root: Path | None, options: SweepOptions, reporter=None) -> SweepResult:
    """The sweep. Everything but ``--dry-run`` runs under the repository's lock (a second sweep of the
    same checkout waits at most ``options.lock_timeout`` seconds, then exits 2), and is journaled: a
    rerun after a kill rolls the interrupted sweep's edits back and sweeps again, or finishes its commits."""
    if not RELEASE_RE.match(options.release):
        plan_sweep(load_distribution(root, strict=False), options.release)  # raises the usage error
    if options.dry_run:
        dist = load_distribution(root, strict=False)
        plan = plan_sweep(dist, options.release)
        unfinished = find_journal(dist.distro.build_dir)
        if unfinished is not None:
            return SweepResult(plan, message=f"dry run: an interrupted sweep of pytorch {unfinished.release} "
                                             "is unfinished; a sweep would finish it first")
        if plan.noop:
            return SweepResult(plan, message=_noop_message(options.release))
        _check_published(dist, options.release)  # exit 2, as the real run would
        plan.dry_run = True
        result = SweepResult(plan, message="dry run: nothing edited, built or committed")
        result.pr_bodies = {d.name: pr_body(d, plan.release, dry_run=True) for d in plan.decisions if d.status == "bumped"}
        result.tracking_issue = tracking_issue(plan, result)
        return result
    distro = open_distro(root)
    with channel_lock(distro.build_dir / REPOSITORY_LOCK, options.lock_timeout, f"the repository {distro.root}",
                      others="sweep"):
        return _sweep_locked(distro.root, options, reporter)


def _noop_message(release: str) -> str:
    return f"pytorch {release} is already a supported release: nothing to do"


def _sweep_locked(root: Path, options: SweepOptions, reporter) -> SweepResult:
    build_dir = open_distro(root).build_dir
    journal = find_journal(build_dir)
    note = None
    if journal is not None:
        clear_stale_index_lock(root)  # the interrupted sweep may have been killed inside a git command
        if journal.release != options.release:
            raise UsageError(f"the sweep of pytorch {journal.release} was interrupted and is unfinished",
                             field="--pytorch", path=journal_path(build_dir, journal.release),
                             hint=f"finish it first: conda-distro sweep --pytorch {journal.release}"
                                  f"{' --commit' if journal.commit else ''}")
        if journal.phase == "committing":
            return _finish_commits(root, journal)
        restored = roll_back(journal, root)
        journal.delete(build_dir)
        note = (f"an interrupted sweep of pytorch {journal.release} was rolled back "
                f"({len(restored)} file(s) restored) and run again")
    result = _sweep(root, options, reporter)
    if note:
        result.message = f"{note}; {result.message}" if result.message else note
    return result


def _sweep(root: Path, options: SweepOptions, reporter) -> SweepResult:
    dist = load_distribution(root, strict=False)
    plan = plan_sweep(dist, options.release)
    if plan.noop:
        if options.commit:
            left = _left_edits(dist, options.release)
            if left is not None:
                return _commit_left_edits(dist, options, left)
            _refuse_half_made(dist, options.release)
        return SweepResult(plan, message=_noop_message(options.release))
    if options.commit:
        done = _already_swept(dist, options.release)
        if done is not None:
            return done
    _check_published(dist, options.release)
    if options.build:
        from conda_distro.engine.sandbox import check_sandbox

        check_sandbox(options.sandbox)  # fail closed before anything is edited
    repo = _open_repo(dist.root, options.release) if options.commit else None
    pytorch = dist.config.pytorch.name
    new_minor = minor_of(options.release) not in {minor_of(r) for r in dist.config.pytorch.releases}
    originals: dict[str, str] = {}
    new_texts: dict[str, str] = {}
    for dec in plan.decisions:  # all edits computed before anything is written
        if dec.status != "bumped":
            continue
        recipe = dist.recipes[dec.name]
        try:
            new_texts[dec.name] = edited_text(recipe, dec, pytorch, options.release)
            originals[dec.name] = recipe.text
        except EditError as exc:
            dec.status = "failed"
            dec.reason = f"the pin cannot be edited automatically: {exc} ({recipe.path.relative_to(dist.root).as_posix()})"
    distro_path = dist.distro.path
    distro_text = distro_path.read_text()
    new_distro = add_release_text(dist.distro, options.release)
    rel = lambda p: p.relative_to(dist.root).as_posix()  # noqa: E731
    journal = SweepJournal(options.release, commit=options.commit,
                           originals={rel(distro_path): distro_text,
                                      **{rel(dist.recipes[n].path): t for n, t in originals.items()}},
                           written={rel(distro_path): new_distro,
                                    **{rel(dist.recipes[n].path): t for n, t in new_texts.items()}})
    build_dir = dist.distro.build_dir
    journal.save(build_dir)  # before any file is written: a rerun after a kill can roll back from it
    try:
        atomic_write_text(distro_path, new_distro)
        for name, text in new_texts.items():
            atomic_write_text(dist.recipes[name].path, text)
        crash_point("sweep-after-edits")
        _execute(plan, dist.root, options, reporter, new_minor)
    except BaseException:  # leave the tree as it was
        atomic_write_text(distro_path, distro_text)
        for name, text in originals.items():
            atomic_write_text(dist.recipes[name].path, text)
        journal.delete(build_dir)
        raise
    for dec in plan.decisions:  # revert what did not pass
        if dec.name in originals and dec.status != "bumped":
            atomic_write_text(dist.recipes[dec.name].path, originals[dec.name])
    crash_point("sweep-after-build")
    result = SweepResult(plan)
    result.pr_bodies = {d.name: pr_body(d, plan.release) for d in plan.decisions if d.status == "bumped"}
    saved = _report_path(dist.distro, plan.release)
    result.report_file = saved.relative_to(dist.root).as_posix() if saved.is_relative_to(dist.root) else str(saved)
    if repo is not None:
        _commit(repo, dist, plan, options, result, journal)
    else:  # what a later `sweep --commit` of this release commits
        kept = {rel(distro_path)} | {rel(dist.recipes[d.name].path) for d in plan.decisions if d.status == "bumped"}
        UncommittedEdits(plan.release, originals={k: v for k, v in journal.originals.items() if k in kept},
                         written={k: v for k, v in journal.written.items() if k in kept}).save(build_dir)
    result.tracking_issue = tracking_issue(plan, result)
    # kept for `report unmaintained` (open sweep statuses are evidence); build/ is not versioned
    atomic_write_text(saved, json.dumps(result.to_dict(), indent=1) + "\n")
    journal.delete(build_dir)
    return result


def _report_path(distro: Distro, release: str) -> Path:
    return distro.build_dir / "sweep" / f"pytorch-{release}.json"


def _refuse_half_made(dist: Distribution, release: str) -> None:
    """``--commit`` on a release distro.yaml already lists, with no journal: exit 2 (with what to do)
    rather than "nothing to do" when the release is not committed, or the sweep branch is checked
    out with uncommitted recipe edits (what an interrupted older sweep left)."""
    import git

    try:
        repo = git.Repo(dist.root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return
    if not repo.head.is_valid():
        return
    top = Path(repo.working_tree_dir).resolve()
    rel = dist.distro.path.resolve().relative_to(top).as_posix()
    recipes = dist.distro.recipes_dir.resolve().relative_to(top).as_posix()
    try:
        committed = load_fast(repo.git.show(f"HEAD:{rel}"))
        releases = [str(r) for r in committed["pytorch"]["releases"]]
    except (git.GitCommandError, KeyError, TypeError, DistroError):
        releases = []
    dirty = [ln[3:] for ln in repo.git.status("--porcelain", "--", recipes, rel).splitlines() if ln.strip()]
    if release not in releases:
        raise GitError(f"distro.yaml lists pytorch {release}, but the checked-out commit does not: the edits of an "
                       f"interrupted sweep are not committed ({len(dirty)} file(s) changed)", field="--commit",
                       hint=f"discard them (git checkout -- {rel} {recipes}) and rerun the sweep, "
                            "or commit them yourself")
    branch = f"sweep/pytorch-{release}"
    if dirty and not repo.head.is_detached and repo.active_branch.name == branch:
        raise GitError(f"branch {branch} is checked out with {len(dirty)} uncommitted change(s) under "
                       f"{recipes}/ or {rel}: an interrupted sweep", field="--commit",
                       hint=f"discard them (git checkout -- {recipes} {rel}), switch back (git checkout -), "
                            f"delete the branch (git branch -D {branch}) and rerun the sweep")


def _finish_commits(root: Path, journal: SweepJournal) -> SweepResult:
    """A rerun after a kill while the sweep made its branch: the commits exist (as objects); create
    the branch at them, check it out, and report what the interrupted sweep found."""
    import git

    repo = git.Repo(root, search_parent_directories=True)
    for rel, text in journal.written.items():
        path = root / rel
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current not in (text, journal.originals.get(rel)):
            raise GitError(f"{rel} was changed after the sweep of pytorch {journal.release} was interrupted",
                           path=path, hint=f"the branch {journal.branch} is made from the commits already recorded: "
                                           f"keep a copy of your change, git checkout -- {rel}, and rerun the sweep")
    result = _result_from_dict(journal.result)
    result.branch, result.start = journal.branch, journal.start
    _publish(repo, result, journal.tip)
    result.message = (f"finished the commits of the interrupted sweep of pytorch {journal.release}: "
                      f"branch {journal.branch}, {len(result.commits)} commit(s)"
                      + (f"; back on {result.start}" if result.start else ""))
    distro = open_distro(root)
    atomic_write_text(_report_path(distro, journal.release), json.dumps(result.to_dict(), indent=1) + "\n")
    journal.delete(distro.build_dir)
    return result


def _result_from_dict(doc: dict) -> SweepResult:
    decisions = []
    for p in doc.get("packages", []):
        dec = Decision(p["name"], p["status"], list(p.get("maintainers") or []), old_pin=p.get("old_pin"),
                       new_pin=p.get("new_pin"), old_build=p.get("old_build"), new_build=p.get("new_build"),
                       reason=p.get("reason"), log=p.get("log"), tests=list(p.get("tests") or []),
                       direct=p.get("pytorch_dependency", "direct") == "direct")
        decisions.append(dec)
    plan = SweepPlan(doc["release"], decisions, noop=bool(doc.get("noop")))
    return SweepResult(plan, branch=doc.get("branch"), commits=list(doc.get("commits") or []),
                       pr_bodies=dict(doc.get("pull_requests") or {}), tracking_issue=doc.get("tracking_issue"),
                       report_file=doc.get("report_file"), start=doc.get("start"))


def _already_swept(dist: Distribution, release: str) -> SweepResult | None:
    """A ``--commit`` sweep of ``release`` finished before (its branch is where its report says): the
    report again, saying so, rather than a refusal because the branch exists."""
    import git

    saved = _report_path(dist.distro, release)
    try:
        doc = json.loads(saved.read_text(encoding="utf-8"))
        branch, tip = doc.get("branch"), (doc.get("commits") or [{}])[-1].get("sha")
        repo = git.Repo(dist.root, search_parent_directories=True)
    except (OSError, ValueError, AttributeError, git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    if not branch or not tip or branch_sha(repo, branch) != tip:
        return None
    result = _result_from_dict(doc)
    result.message = (f"pytorch {release} was swept already: branch {branch} holds its {len(result.commits)} commit(s); "
                      f"nothing to do (delete the sweep branches to sweep again)")
    return result


def _left_edits(dist: Distribution, release: str) -> UncommittedEdits | None:
    """The edits an earlier sweep of ``release`` without --commit left, when they are still to be
    committed (the checked-out commit does not list the release yet); a stale record is removed."""
    import git

    left = UncommittedEdits.load(dist.distro.build_dir, release)
    if left is None:
        return None
    try:
        repo = git.Repo(dist.root, search_parent_directories=True)
        committed = load_fast(repo.git.show(f"HEAD:{dist.distro.path.relative_to(dist.root).as_posix()}"))
        listed = release in [str(r) for r in committed["pytorch"]["releases"]]
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.GitCommandError, ValueError, KeyError, TypeError,
            DistroError):
        listed = False
    if listed:  # committed some other way since
        left.delete(dist.distro.build_dir)
        return None
    return left


def _commit_left_edits(dist: Distribution, options: SweepOptions, left: UncommittedEdits) -> SweepResult:
    """``sweep --commit`` after a sweep without it: commit what that sweep left (its report says which
    packages were bumped), on the same branches a ``--commit`` run makes, then return to the starting branch."""
    changed = left.changed_since(dist.root)
    if changed:
        raise GitError(f"{', '.join(changed)} changed after the sweep of pytorch {left.release} edited it",
                       field="--commit", hint="commit the edits yourself, or discard them "
                                              "(git checkout -- distro.yaml recipes) and sweep again with --commit")
    saved = _report_path(dist.distro, left.release)
    try:
        result = _result_from_dict(json.loads(saved.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DistroError(f"the report of the earlier sweep cannot be read: {exc}", path=saved,
                          hint="discard the edits (git checkout -- distro.yaml recipes) and sweep again with --commit") from None
    result.plan.noop = False
    repo = _open_repo(dist.root, left.release, dirty_ok=True)
    journal = SweepJournal(left.release, commit=True, originals=left.originals, written=left.written)
    _commit(repo, dist, result.plan, options, result, journal)
    result.tracking_issue = tracking_issue(result.plan, result)
    result.message = (f"committed the edits of the earlier sweep of pytorch {left.release}: branch {result.branch}, "
                      f"{len(result.commits)} commit(s); back on {result.start}")
    atomic_write_text(saved, json.dumps(result.to_dict(), indent=1) + "\n")
    journal.delete(dist.distro.build_dir)
    left.delete(dist.distro.build_dir)
    return result


def _execute(plan: SweepPlan, root: Path, options: SweepOptions, reporter, new_minor: bool) -> None:
    """Solve and build/test the edited distribution; sets not-solvable / failed / awaiting-parents."""
    from conda_distro.engine.run import BuildOptions, run_build
    from conda_distro.solve import SolveOptions, solve_distribution

    dist = load_distribution(root, strict=False).readable()
    graph = RecipeGraph.from_recipes(dist.recipes)
    folders = {rec.name: f for f, rec in dist.recipes.items()}
    planned = {d.name for d in plan.decisions}
    solve = solve_distribution(dist, SolveOptions(pytorch=(options.release,)))
    for r in solve.results:  # not solvable with the new release: pins that clash once it is admitted
        for name in r.conflicting:
            folder = folders.get(name, name)
            if folder in planned and plan.get(folder).status in ("bumped", "unchanged"):
                dec = plan.get(folder)
                dec.status, dec.reason = "not-solvable", (r.conflict or "").splitlines()[0]
    _mark_awaiting(plan, graph)
    if options.build:
        to_test = _to_test(plan, graph, new_minor)
        if to_test:
            run = run_build(dist, BuildOptions(names=tuple(to_test), pytorch=(options.release,), jobs=options.jobs,
                                                 sandbox=options.sandbox,
                                                 lock_timeout=options.lock_timeout), reporter)
            _apply_results(plan, run.report, set(to_test), options.release)
            _mark_awaiting(plan, graph)


def _apply_results(plan: SweepPlan, report, tested: set[str], release: str) -> None:
    if report is None:
        return
    by_name: dict[str, list] = {}
    for t in report.tests:
        if t.pytorch == release:
            by_name.setdefault(t.name, []).append(t)
    builds: dict[str, list] = {}
    for b in report.builds:
        builds.setdefault(b.name, []).append(b)
    for dec in plan.decisions:
        if dec.name not in tested or dec.status not in ("bumped", "unchanged"):
            continue
        tests = by_name.get(dec.name, [])
        dec.tests = [{"pytorch": t.pytorch, "variant": t.variant, "status": t.status,
                      **({"reason": t.reason} if t.reason else {})} for t in tests]
        failed_build = next((b for b in builds.get(dec.name, []) if b.status == "failed"), None)
        blocked_build = next((b for b in builds.get(dec.name, []) if b.status == "blocked"), None)
        bad = [t for t in tests if t.status == "failed"]
        blocked = [t for t in tests if t.status == "blocked"]
        if failed_build is not None:
            dec.status, dec.reason, dec.log = "failed", f"build failed: {failed_build.reason}", _excerpt(failed_build.log)
        elif bad:
            t = bad[0]
            dec.status = "failed"
            dec.reason = f"test failed on pytorch {t.pytorch} ({t.variant}): {t.reason}"
            dec.log = _excerpt(t.log)
        elif blocked_build is not None or blocked:
            dec.status = "awaiting-parents"
            dec.reason = (blocked_build.reason if blocked_build is not None else blocked[0].reason) or "a dependency failed"


def _commit(repo, dist: Distribution, plan: SweepPlan, options: SweepOptions, result: SweepResult,
            journal: SweepJournal) -> None:
    """The branch sweep/pytorch-VER: one commit for distro.yaml, then one per bumped package. The commit
    objects are made first (nothing else changes), the journal records them, then the branch is
    created at the last one in a single ref update and checked out: it is never half-made."""
    branch = f"sweep/pytorch-{plan.release}"
    top = Path(repo.working_tree_dir).resolve()
    rel = lambda p: p.resolve().relative_to(top).as_posix()  # noqa: E731
    planned: list[tuple[list[str], str, str | None]] = [
        ([rel(dist.distro.path)], f"Add pytorch {plan.release} to the supported releases", None)]
    for dec in plan.decisions:
        if dec.status == "bumped":
            planned.append(([rel(dist.recipes[dec.name].path)],
                            f"{dec.name}: admit pytorch {'.'.join(map(str, minor_of(plan.release)))} "
                            f"({dec.old_pin} -> {dec.new_pin}, build {dec.new_build})", dec.name))
    base = repo.head.commit.hexsha
    shas = commit_chain(repo, base, [(paths, message) for paths, message, _ in planned], options.author)
    result.commits = [{"package": package, "sha": sha, "message": message.splitlines()[0]}
                      for (_, message, package), sha in zip(planned, shas)]
    # one branch per bumped package (one pull request each, as autotick opens them): the release commit
    # and that package's commit
    for (paths, message, package) in planned[1:]:
        [sha] = commit_chain(repo, shas[0], [(paths, message)], options.author)
        result.pr_bodies.setdefault(package, {}).update(branch=package_branch(plan.release, package), sha=sha)
    result.branch = branch
    result.start = _current_ref(repo)
    journal.phase, journal.branch, journal.base, journal.tip = "committing", branch, base, shas[-1]
    journal.start = result.start
    journal.result = result.to_dict()
    journal.save(dist.distro.build_dir)
    crash_point("sweep-after-commit-objects")
    _publish(repo, result, shas[-1])


def package_branch(release: str, package: str) -> str:
    return f"sweep/pytorch-{release}-{package}"


def _current_ref(repo) -> str:
    """The checked-out branch's name, or the commit on a detached HEAD."""
    try:
        return repo.active_branch.name
    except TypeError:
        return repo.head.commit.hexsha


def _publish(repo, result: SweepResult, tip: str) -> None:
    """Create the sweep branch (checked out) and the per-package branches, then check out the branch
    the sweep started from again: the sweep's edits are on the branches, the work tree is as it was."""
    publish_branch(repo, result.branch, tip)
    for pr in result.pr_bodies.values():
        if pr.get("branch") and pr.get("sha"):
            current = branch_sha(repo, pr["branch"])
            if current is None:
                repo.git.update_ref(f"refs/heads/{pr['branch']}", pr["sha"], "")
            elif current != pr["sha"]:
                raise GitError(f"branch {pr['branch']} exists at {current[:12]}, not at the sweep's commit",
                               field="--commit", hint=f"delete it (git branch -D {pr['branch']}) and rerun the sweep")
    if result.start and result.start != result.branch:
        repo.git.checkout(result.start)


# ---------------------------------------------------------------------------------------------
# reports


def _mentions(handles: list[str]) -> str:
    return " ".join(f"@{h}" for h in handles) or "(no maintainers listed)"


def pr_body(dec: Decision, release: str, dry_run: bool = False) -> dict:
    rows = "\n".join(f"| {t['pytorch']} | {t['variant']} | {t['status']} |" for t in dec.tests) or "| – | – | not built |"
    body = (
        ("> **Dry run**: the planned edit; nothing was edited, built, tested or committed.\n\n" if dry_run else "")
        + f"Admits pytorch {release} in `{dec.name}`.\n\n"
        f"- pin: `{dec.old_pin}` → `{dec.new_pin}`\n"
        f"- build number: {dec.old_build} → {dec.new_build}\n\n"
        f"| pytorch | variant | result |\n|---|---|---|\n{rows}\n\n"
        f"Maintainers: {_mentions(dec.maintainers)}: please review and merge.\n"
    )
    return {"title": f"{dec.name}: admit pytorch {release}", "body": body}


def tracking_issue(plan: SweepPlan, result: SweepResult | None = None) -> str:
    """The tracking issue's body: the summary, a checklist of the per-package pull requests (the
    release workflow replaces each ``branch`` by the link of the PR it opened), the table, the logs."""
    counts = ", ".join(f"{n} {st}" for st, n in (result.summary if result else {}).items())
    lines = [f"# PyTorch {plan.release} release sweep{' (dry run)' if plan.dry_run else ''}", ""]
    if plan.dry_run:
        lines += ["> **Dry run**: the plan only; nothing was edited, built, tested or committed.", ""]
    if counts:
        lines += [f"**Summary:** {counts}.", ""]
    prs = (result.pr_bodies if result else {})
    bumped = [d for d in plan.decisions if d.status == "bumped"]
    if bumped:
        lines.append("Pull requests (one per bumped package):")
        for d in bumped:
            branch = prs.get(d.name, {}).get("branch")
            lines.append(f"- [ ] `{d.name}`: " + (f"branch `{branch}`" if branch else
                                                   "planned" if plan.dry_run else "not committed yet"))
        lines.append("")
    ping = [d for d in plan.decisions if d.status in ("failed", "needs-new-version", "not-solvable")]
    if ping:
        lines.append("Maintainers, please act:")
        for d in ping:
            what = "publish the release made for this pytorch (a new version)" if d.status == "needs-new-version" \
                else "fix the package for this release (the log is below)"
            lines.append(f"- [ ] `{d.name}` ({d.status}): {_mentions(d.maintainers)}: {what}")
        lines.append("")
    lines += ["| package | status | pin | maintainers | note |", "|---|---|---|---|---|"]
    for d in plan.decisions:
        if d.old_pin == d.new_pin:
            pin = f"`{d.old_pin}`" if d.old_pin else "–"
        elif d.applied:
            pin = f"`{d.old_pin}` → `{d.new_pin}`"
        else:
            pin = f"`{d.old_pin}` (tried `{d.new_pin}`, reverted)"
        note = (d.reason or "").replace("|", "\\|").splitlines()[0] if d.reason else ""
        lines.append(f"| {d.name} | {d.status} | {pin} | {', '.join(d.maintainers)} | {note} |")
    for d in plan.decisions:
        if d.status == "failed" and d.log:
            lines += ["", f"<details><summary>{d.name}: failing log</summary>", "", "```", d.log, "```", "</details>"]
    return "\n".join(lines) + "\n"


def next_steps(result: SweepResult) -> list[str]:
    """What to do after this sweep, in order."""
    plan, release = result.plan, result.plan.release
    if plan.noop and not result.branch:
        return []
    steps = []
    statuses = {d.status for d in plan.decisions}
    if plan.dry_run:
        steps.append(f"run `conda-distro sweep --pytorch {release}` to edit, build and test (add --commit for the branches)")
    elif result.branch:
        branches = [pr["branch"] for pr in result.pr_bodies.values() if pr.get("branch")]
        if branches:
            steps.append(f"push the {len(branches)} package branch(es) (sweep/pytorch-{release}-NAME) and open one pull "
                         "request each with its body from the report (the release-sweep workflow does this)")
        else:
            steps.append(f"push {result.branch} and open a pull request (only distro.yaml changed)")
        if result.start:
            steps.append(f"you are back on {result.start}; the sweep's edits are on the branches")
    elif "bumped" in statuses:
        steps.append(f"review the edits (git diff), then `conda-distro sweep --pytorch {release} --commit` "
                     "commits them on the sweep branches")
    if statuses & {"failed", "not-solvable", "needs-new-version"}:
        steps.append("open the tracking issue (its body is in the report): it pings the maintainers of failed and "
                     "needs-new-version packages")
    if "awaiting-parents" in statuses:
        steps.append("sweep again once the packages they wait for pass")
    return steps


__all__ = ["SweepOptions", "SweepPlan", "SweepResult", "plan_sweep", "run_sweep", "widen", "load_config"]
