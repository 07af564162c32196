"""Package proposals (spec §5, PyTorch RFC-0006 "Proposing a new package for inclusion").

A proposal is ``proposals/<name>.yaml``: the RFC's intake questions as fields (what the package is,
who maintains it and consented to, why PyTorch is a key dependency, ...). This module holds

* the schema (:class:`ProposalData`, strict: unknown keys are an error with a did-you-mean hint) and
  the loaded, line-aware :class:`Proposal`; :func:`load_proposal` / :func:`load_proposals`;
* ``conda-distro propose``: :func:`propose` writes a proposal and a v1 recipe skeleton
  (:func:`render_proposal`, :func:`render_recipe_skeleton` are the pure halves);
* the proposal lint: :func:`lint_proposals` runs the ``proposal-*`` checks
  (:mod:`conda_distro.lint.proposal_checks`) and is what ``lint`` and ``check-pr`` call.

What a proposal promises is checked against its recipe and the upstream channels; see the checks.
"""

from __future__ import annotations

import json
import re
import typing
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from conda_distro.config import Distro
from conda_distro.distribution import open_distro
from conda_distro.errors import ChannelError, DistroError, ProposalError, UsageError
from conda_distro.lint.base import CHECKS, Finding
from conda_distro.lint.checks import HANDLE_RE
from conda_distro.lint.context import LintContext
from conda_distro.lint.proposal_checks import ProposalCheck
from conda_distro.recipe import RECIPE_FILE, Recipe, parse_recipe
from conda_distro.specs import admits, minor_of, next_minor_bound
from conda_distro.validation import to_error
from conda_distro.yamlio import LDict, LList, atomic_write_text, dump_plain, load_fast, load_fast_file

if typing.TYPE_CHECKING:  # pragma: no cover
    from conda_distro.distribution import Distribution

PROPOSALS_DIR = "proposals"
SCHEMA_VERSION = 1
PLACEHOLDER_VERSION = "0.0.0"  # written when `propose` is not told the version; proposal-incomplete flags it
# the skeleton's sha256 (well-formed, so rattler-build renders the recipe; lint's source-missing-sha256 flags it)
PLACEHOLDER_SHA256 = "0" * 64
# conda-forge's rule for package names: lowercase letters, digits, '.', '_' and '-', starting alphanumeric.
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")
_URL_RE = re.compile(r"^https?://\S+$")
INVALID_CHECK = "proposal-invalid"


# ---------------------------------------------------------------------------------------------
# schema


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _text(v: Any) -> Any:
    """An empty YAML value (``key:``) is an unanswered question, not an error."""
    return "" if v is None else v


class Maintainer(_Strict):
    handle: str
    consent: bool = False

    @field_validator("handle", mode="before")
    @classmethod
    def _handle(cls, v: Any) -> Any:
        if isinstance(v, str) and not HANDLE_RE.match(v.strip()):
            raise ValueError(f"'{v}' is not a GitHub handle (write the bare handle, e.g. 'octocat', without '@')")
        return v.strip() if isinstance(v, str) else v

    @field_validator("consent", mode="before")
    @classmethod
    def _consent(cls, v: Any) -> Any:
        if v is None:
            return False
        s = str(v).strip().lower()
        if s in ("true", "false"):
            return s == "true"
        raise ValueError(f"consent must be true or false, not '{v}'")


class ProposalData(_Strict):
    """The fields of proposals/<name>.yaml. Free-text answers default to '' (not yet answered)."""

    schema_version: int = SCHEMA_VERSION
    name: str
    version: str = ""
    summary: str = ""
    homepage: str = ""
    repository: str = ""
    license: str = ""
    issue: str = ""
    maintainers: list[Maintainer] = Field(min_length=1)
    pytorch_dependency: str = ""
    focus_area: str = ""
    downstream_users: str = ""
    test_plan: str = ""

    _v_text = field_validator("version", "summary", "homepage", "repository", "license", "issue",
                              "pytorch_dependency", "focus_area", "downstream_users", "test_plan",
                              mode="before")(_text)

    @field_validator("schema_version")
    @classmethod
    def _schema(cls, v: int) -> int:
        if v != SCHEMA_VERSION:
            raise ValueError(f"unsupported schema_version {v} (this conda-distro reads {SCHEMA_VERSION})")
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        problem = name_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        problem = version_problem(v) if v.strip() else None
        if problem:
            raise ValueError(problem)
        return v.strip()

    @field_validator("homepage", "repository")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip()
        if v and not _URL_RE.match(v):
            raise ValueError(f"'{v}' is not an http(s) URL")
        return v

    @field_validator("maintainers")
    @classmethod
    def _unique_maintainers(cls, v: list[Maintainer]) -> list[Maintainer]:
        seen: set[str] = set()
        for m in v:
            if m.handle.lower() in seen:
                raise ValueError(f"maintainer '{m.handle}' is listed more than once")
            seen.add(m.handle.lower())
        return v


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid package name for the distribution, or None."""
    if not NAME_RE.match(name or ""):
        return (f"'{name}' is not a valid conda package name (lowercase letters, digits, '.', '_' and '-', "
                "starting with a letter or digit)")
    return None


def version_problem(version: str) -> str | None:
    """Why ``version`` is not a conda version, or None."""
    from rattler import Version
    from rattler.exceptions import InvalidVersionError

    v = version.strip()
    try:
        if not v or "-" in v or " " in v or v[:1] in ("v", "V"):
            raise InvalidVersionError(v)
        Version(v)
    except (InvalidVersionError, ValueError):
        return f"'{version}' is not a conda version (no leading 'v', no '-' or spaces; e.g. 1.2.0)"
    return None


def validate_handle(handle: str) -> str:
    if not HANDLE_RE.match(handle or ""):
        raise UsageError(f"'{handle}' is not a GitHub handle", field="--maintainer",
                         hint="write the bare handle, e.g. 'octocat' or 'org/team', without a leading '@'")
    return handle


# ---------------------------------------------------------------------------------------------
# loading


@dataclass(frozen=True)
class Proposal:
    """A loaded proposal: the validated data plus where it lives and on which lines its keys are."""

    path: Path
    data: ProposalData
    doc: LDict = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.data.name

    def line_of(self, key: str) -> int:
        return self.doc.line_of(key) if key in self.doc else 1

    def maintainer_line(self, index: int) -> int:
        items = self.doc.get("maintainers")
        if isinstance(items, LList) and index < len(items):
            item = items[index]
            return item.line_of("handle") if isinstance(item, LDict) else items.line_of(index)
        return self.line_of("maintainers")

    def consent_line(self, index: int) -> int:
        items = self.doc.get("maintainers")
        if isinstance(items, LList) and index < len(items) and isinstance(items[index], LDict) and "consent" in items[index]:
            return items[index].line_of("consent")
        return self.maintainer_line(index)


@dataclass
class ProposalSet:
    """All proposals of a distribution; unreadable ones are in ``errors`` (lint reports them)."""

    proposals: dict[str, Proposal] = field(default_factory=dict)  # by file stem (= name)
    errors: list[ProposalError] = field(default_factory=list)

    def raise_errors(self) -> None:
        if self.errors:
            first = self.errors[0]
            if len(self.errors) > 1:
                first.hint = (first.hint + "; " if first.hint else "") + \
                    f"{len(self.errors) - 1} more proposal error(s): run `conda-distro lint`"
            raise first


def parse_proposal(text: str, path: Path) -> Proposal:
    """Parse proposal text. Raises :class:`ProposalError` naming file, field and line."""
    try:
        doc = load_fast(text, path=path)
    except DistroError as exc:
        raise ProposalError(exc.message, path=path, line=exc.line, hint=exc.hint) from None
    return _validate(doc, path)


def load_proposal(path: Path) -> Proposal:
    try:
        doc = load_fast_file(path)
    except DistroError as exc:
        raise ProposalError(exc.message, path=path, line=exc.line, hint=exc.hint) from None
    return _validate(doc, path)


def _validate(doc: Any, path: Path) -> Proposal:
    if not isinstance(doc, LDict):
        raise ProposalError("a proposal must be a YAML mapping (name:, maintainers:, ...)", path=path,
                            line=getattr(doc, "line", 1), hint="start from `conda-distro propose NAME --maintainer HANDLE`")
    try:
        data = ProposalData.model_validate(doc)
    except ValidationError as exc:
        raise to_error(exc, doc, path, root=ProposalData, error=ProposalError, see="see proposals/README.md") from None
    if path.stem != data.name:
        raise ProposalError(f"the file is {path.name} but the proposal names '{data.name}'", path=path,
                            field="name", line=doc.line_of("name"),
                            hint=f"rename the file to {data.name}.yaml or fix 'name:'")
    return Proposal(path, data, doc)


def proposal_paths(distro: Distro) -> list[Path]:
    folder = distro.proposals_dir
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".yaml", ".yml"))


def load_proposals(distro: Distro, *, strict: bool = False, names: Iterable[str] = ()) -> ProposalSet:
    """Every proposals/*.yaml (or the named ones). ``strict`` raises the first malformed one."""
    wanted = set(names)
    out = ProposalSet()
    for path in proposal_paths(distro):
        if wanted and path.stem not in wanted:
            continue
        try:
            out.proposals[path.stem] = load_proposal(path)
        except ProposalError as exc:
            out.errors.append(exc)
    if strict:
        out.raise_errors()
    return out


def proposal_names(root: Path, paths: Iterable[str]) -> list[str]:
    """Names of the proposals/<name>.yaml files among changed ``paths`` that still exist."""
    names = set()
    for p in paths:
        parts = p.split("/")
        if len(parts) == 2 and parts[0] == PROPOSALS_DIR and parts[1].endswith((".yaml", ".yml")) \
                and (root / p).is_file():
            names.add(Path(parts[1]).stem)
    return sorted(names)


def changed_proposals(root: Path, ref: str) -> list[str]:
    """Names of proposals/<name>.yaml added or changed since ``ref`` (git)."""
    from conda_distro.gitutil import changed_files

    return proposal_names(root, changed_files(root, ref))


# ---------------------------------------------------------------------------------------------
# upstream channels, as far as they can be read offline


@dataclass
class UpstreamIndex:
    """Package names (and versions) published in the upstream channels that are local folders.

    Channel names (conda-forge) and URLs cannot be read offline: they are listed in ``unreadable``
    and every conclusion of the form "X is not upstream" is then withheld.
    """

    versions: dict[str, set[str]] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)  # name -> "<channel>/<subdir>/repodata.json"
    unreadable: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.unreadable

    def has(self, name: str) -> bool:
        return name in self.versions

    @classmethod
    def load(cls, distro: Distro) -> "UpstreamIndex":
        index = cls()
        for ref in distro.config.channels.upstream:
            if not distro.is_local_ref(ref):
                index.unreadable.append(ref)
                continue
            base = distro.resolve_local(ref)
            if not base.is_dir():
                index.unreadable.append(ref)
                continue
            for subdir in distro.subdirs:
                index._read(base / subdir / "repodata.json", f"{ref.rstrip('/')}/{subdir}/repodata.json")
        return index

    def _read(self, path: Path, label: str) -> None:
        if not path.is_file():
            return
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ChannelError(f"cannot read repodata: {exc}", path=path,
                               hint="re-index the channel (rattler-index) or fix channels.upstream in distro.yaml") from None
        if not isinstance(data, dict):
            raise ChannelError("repodata.json is not a JSON object", path=path)
        for key in ("packages", "packages.conda"):
            records = data.get(key) or {}
            if not isinstance(records, dict):
                raise ChannelError(f"repodata.json: '{key}' is not an object", path=path)
            for record in records.values():
                name = record.get("name") if isinstance(record, dict) else None
                if not name:
                    continue
                self.versions.setdefault(name, set())
                if record.get("version"):
                    self.versions[name].add(str(record["version"]))
                self.where.setdefault(name, label)


# ---------------------------------------------------------------------------------------------
# lint


@dataclass
class ProposalContext:
    """What proposal checks see besides the proposal."""

    lint: LintContext
    dist: "Distribution"

    @cached_property
    def upstream(self) -> UpstreamIndex:
        return UpstreamIndex.load(self.dist.distro)

    @property
    def pytorch(self) -> str:
        return self.lint.pytorch

    def recipe_path(self, proposal: Proposal) -> Path:
        return self.dist.distro.recipes_dir / proposal.name / RECIPE_FILE

    def recipe(self, proposal: Proposal) -> Recipe | None:
        """The proposal's recipe, None when it is missing or unreadable (recipe lint reports that)."""
        return self.dist.recipes.get(proposal.name)

    def recipe_unreadable(self, proposal: Proposal) -> bool:
        return proposal.name not in self.dist.recipes and self.recipe_path(proposal).is_file()


def _invalid_finding(exc: ProposalError, ctx: LintContext) -> Finding:
    path = Path(exc.path) if exc.path else ctx.distro.proposals_dir
    field_note = f" (field '{exc.field}')" if exc.field else ""
    return Finding(recipe=path.stem, check=INVALID_CHECK, severity="error", message=exc.message + field_note,
                   path=ctx.relpath(path), line=exc.line, hint=exc.hint)


def lint_proposals(dist: "Distribution", ctx: LintContext | None = None, *, names: Iterable[str] = (),
                   checks: Iterable[Any] | None = None) -> list[Finding]:
    """Run the ``proposal-*`` checks over proposals/*.yaml (or the named ones).

    ``checks``: the selected check instances (``lint --check``); proposal checks among them run, others
    are ignored. Malformed proposals come back as ``proposal-invalid`` findings, whose check is ``fatal``
    (lint exits 2). Findings are on the proposals/<name>.yaml path, sorted by path and line.
    """
    ctx = ctx or LintContext(dist.distro, names=set(dist.recipes))
    selected: list[ProposalCheck] = [c for c in (checks if checks is not None else (CHECKS[k]() for k in sorted(CHECKS)))
                                     if isinstance(c, ProposalCheck)]
    loaded = load_proposals(dist.distro, names=names)
    findings = [_invalid_finding(e, ctx) for e in loaded.errors]
    pctx = ProposalContext(ctx, dist)
    for name in sorted(loaded.proposals):
        proposal = loaded.proposals[name]
        for check in selected:
            findings.extend(check.proposal_findings(proposal, pctx))
    findings.sort(key=lambda f: (f.path, f.line or 0, f.check))
    return findings


def has_fatal(findings: Iterable[Finding]) -> bool:
    """Any finding that means the input is malformed (exit 2)?"""
    return any(CHECKS[f.check].fatal for f in findings if f.check in CHECKS)


# ---------------------------------------------------------------------------------------------
# propose


@dataclass(frozen=True)
class ProposeOptions:
    name: str
    maintainers: tuple[str, ...]
    version: str | None = None
    summary: str = ""
    homepage: str = ""
    repository: str = ""
    license: str = ""
    force: bool = False
    root: Path | None = None  # the distribution's folder (None: found from the current one)


@dataclass
class ProposeResult:
    root: Path
    name: str
    written: list[Path] = field(default_factory=list)
    exit_code: int = 0

    def relpaths(self) -> list[str]:
        return [p.relative_to(self.root).as_posix() for p in self.written]

    def to_dict(self) -> dict:
        return {"ok": True, "written": self.relpaths()}

    def text_lines(self) -> list[str]:
        return [*(f"wrote {path}" for path in self.relpaths()),
                f"next: answer the questions in proposals/{self.name}.yaml, complete the TODOs in the recipe, "
                f"run `conda-distro lint {self.name}`, and open a pull request; each maintainer then sets `consent: true`."]


def pytorch_pin(releases: list[str]) -> str:
    """The version part of the run pin admitting every supported release at minor granularity:
    ['2.4.1', '2.5.1', '2.6.0'] -> '>=2.4,<2.7'."""
    major, minor = minor_of(releases[0])
    return f">={major}.{minor},<{next_minor_bound(releases[-1])}"


def _sdist_url(name: str) -> str:
    filename = re.sub(r"[-_.]+", "_", name)  # PEP 625 sdist file names
    return f"https://pypi.org/packages/source/{name[0]}/{name}/{filename}-${{{{ version }}}}.tar.gz"


def _import_name(name: str) -> str:
    return re.sub(r"[-.]+", "_", name)


def _comment_before(mapping: CommentedMap, key: str, text: str, indent: int = 0) -> None:
    mapping.yaml_set_comment_before_after_key(key, before=text, indent=indent)


@dataclass(frozen=True)
class _Answers:
    """ProposeOptions after validation, with defaults filled in."""

    name: str
    version: str
    handles: tuple[str, ...]
    summary: str
    homepage: str
    repository: str
    license: str


def _check_options(distro: Distro, opts: ProposeOptions) -> _Answers:
    problem = name_problem(opts.name)
    if problem:
        raise UsageError(problem, field="NAME", hint="e.g. `conda-distro propose torch-foo --maintainer octocat`")
    if opts.name == distro.config.pytorch.name:
        raise UsageError(f"'{opts.name}' is the distribution's core package", field="NAME")
    if not opts.maintainers:
        raise UsageError("at least one maintainer is required", field="--maintainer",
                         hint="pass --maintainer YOUR-GITHUB-HANDLE (repeatable)")
    for h in opts.maintainers:
        validate_handle(h)
    if len({h.lower() for h in opts.maintainers}) != len(opts.maintainers):
        raise UsageError("a maintainer is given twice", field="--maintainer")
    version = PLACEHOLDER_VERSION
    if opts.version is not None:
        problem = version_problem(opts.version)
        if problem:
            raise UsageError(problem, field="--version")
        version = opts.version.strip()
    for flag, url in (("--homepage", opts.homepage), ("--repository", opts.repository)):
        if url and not _URL_RE.match(url):
            raise UsageError(f"'{url}' is not an http(s) URL", field=flag)
    repository = opts.repository or (opts.homepage if re.match(r"^https://(github|gitlab)\.com/[^/]+/[^/]+/?$",
                                                                  opts.homepage) else "")
    return _Answers(opts.name, version, tuple(opts.maintainers), opts.summary.strip(), opts.homepage,
                    repository, opts.license.strip())


def render_proposal(distro: Distro, opts: ProposeOptions) -> str:
    """The text of proposals/<name>.yaml for these options (validated, nothing written)."""
    a = _check_options(distro, opts)
    d = CommentedMap()
    d["schema_version"] = SCHEMA_VERSION
    d["name"] = a.name
    d["version"] = DoubleQuotedScalarString(a.version)
    d["summary"] = a.summary
    d["homepage"] = a.homepage
    d["repository"] = a.repository
    d["license"] = a.license
    d["issue"] = ""
    d["maintainers"] = CommentedSeq(CommentedMap(handle=h, consent=False) for h in a.handles)
    d["pytorch_dependency"] = ""
    d["focus_area"] = ""
    d["downstream_users"] = ""
    d["test_plan"] = ""
    d.yaml_set_start_comment(
        f"Package proposal for the {distro.config.name} distribution (PyTorch RFC-0006, \"Proposing a new\n"
        "package for inclusion\"). Answer every empty question, then open a pull request adding this file\n"
        f"together with recipes/{a.name}/recipe.yaml; `conda-distro lint {a.name}` checks both.\n"
        "Multi-line answers: use a block scalar ('key: |' and indented lines).")
    d.yaml_add_eol_comment("TODO: the upstream version to package (also in the recipe)"
                           if a.version == PLACEHOLDER_VERSION else
                           "the version first proposed; the recipe may move ahead of it later", "version")
    d.yaml_add_eol_comment("one line: what the package does", "summary")
    d.yaml_add_eol_comment("the upstream source repository, e.g. https://github.com/OWNER/REPO", "repository")
    d.yaml_add_eol_comment("SPDX identifier of the upstream license, e.g. BSD-3-Clause", "license")
    d.yaml_add_eol_comment("optional: link to the approved package-proposal issue", "issue")
    _comment_before(d, "maintainers",
                    "\nMaintainers commit to keep the package working with each new PyTorch release and are pinged\n"
                    "when it breaks (an unmaintained package is retired). Each maintainer sets `consent: true` on\n"
                    "their own entry in the pull request (a commit or an accepted suggestion): the check fails\n"
                    "until every listed maintainer has.")
    _comment_before(d, "pytorch_dependency",
                    "\nWhy PyTorch is a key dependency (RFC-0006 criterion 1): which torch APIs the package builds on.")
    _comment_before(d, "focus_area", "The area it serves: deep learning, machine learning, scientific computing, ...")
    _comment_before(d, "downstream_users", "Who would install it from this channel (projects, users).")
    _comment_before(d, "test_plan",
                    "What the recipe's tests exercise besides the import (torch functionality, CPU and GPU).")
    text = dump_plain(d)
    parse_proposal(text, distro.proposals_dir / f"{a.name}.yaml")  # self-check: it must load back
    return text


def render_recipe_skeleton(distro: Distro, opts: ProposeOptions) -> str:
    """The text of recipes/<name>/recipe.yaml: everything that can be known, TODOs for the rest."""
    a = _check_options(distro, opts)
    name = a.name
    pytorch = distro.config.pytorch.name
    d = CommentedMap()
    d["context"] = CommentedMap(version=DoubleQuotedScalarString(a.version))
    d["package"] = CommentedMap(name=name, version="${{ version }}")
    d["source"] = CommentedMap(url=_sdist_url(name), sha256=PLACEHOLDER_SHA256)
    d["build"] = CommentedMap(number=0, noarch="python",
                              script="${{ PYTHON }} -m pip install . -vv --no-deps --no-build-isolation")
    host = CommentedSeq(["python >=3.10", "pip"])
    run = CommentedSeq(["python >=3.10", f"{pytorch} {pytorch_pin(distro.config.pytorch.releases)}"])
    d["requirements"] = CommentedMap(host=host, run=run)
    imports = CommentedSeq([_import_name(name)])
    d["tests"] = CommentedSeq([CommentedMap(python=CommentedMap(imports=imports))])
    about = CommentedMap()  # unknown answers are left out (rattler-build rejects empty URLs/licenses)
    for key, value in (("homepage", a.homepage), ("repository", a.repository), ("summary", a.summary),
                       ("license", a.license)):
        if value:
            about[key] = value
    about["license_file"] = "LICENSE"
    missing = [k for k in ("homepage", "summary", "license") if k not in about]
    if missing:
        _comment_before(about, "license_file", "TODO: add " + ", ".join(f"{k}:" for k in missing)
                        + (" (an SPDX identifier)" if "license" in missing else ""), indent=2)
    d["about"] = about
    d["extra"] = CommentedMap({"recipe-maintainers": CommentedSeq(a.handles)})

    d.yaml_set_start_comment(
        f"Recipe skeleton written by `conda-distro propose {name}` (v1 recipe format, rattler-build).\n"
        f"Complete every TODO, then run `conda-distro lint {name}`.")
    if a.version == PLACEHOLDER_VERSION:
        d["context"].yaml_add_eol_comment("TODO: the upstream version", "version")
    for key in ("package", "source", "build", "requirements", "tests", "about", "extra"):
        _comment_before(d, key, "\n")
    d["source"].yaml_add_eol_comment("TODO: check the sdist file name on PyPI", "url")
    d["source"].yaml_add_eol_comment(
        f"TODO: sha256 of the sdist (pip download --no-deps --no-binary :all: {name}==VERSION; sha256sum)", "sha256")
    host.yaml_add_eol_comment("TODO: add the build backend (setuptools, hatchling, flit-core, ...)", 1)
    run.yaml_add_eol_comment(
        "every supported PyTorch release, at minor granularity. TODO: other run deps, with upper bounds", 1)
    imports.yaml_add_eol_comment("TODO: the import name(s); add a script test exercising the torch API", 0)
    text = dump_plain(d)
    from conda_distro.variants import render_settings

    parse_recipe(text, distro.recipes_dir / name / RECIPE_FILE, render_settings(distro))  # self-check
    return text


def propose(opts: ProposeOptions) -> ProposeResult:
    """Write proposals/<name>.yaml and recipes/<name>/recipe.yaml (both or neither) in the distribution at
    ``opts.root``.

    Refuses (:class:`UsageError`, nothing written) on a bad name, version, URL or handle, and when
    either file exists unless ``force``.
    """
    distro = open_distro(opts.root)
    proposal_path = distro.proposals_dir / f"{opts.name}.yaml"
    recipe_path = distro.recipes_dir / opts.name / RECIPE_FILE
    proposal_text = render_proposal(distro, opts)
    recipe_text = render_recipe_skeleton(distro, opts)
    if not opts.force:
        for path in (proposal_path, recipe_path):
            if path.exists():
                raise UsageError("the file already exists (nothing was written)", path=path,
                                 hint="edit it, or pass --force to overwrite it with a fresh skeleton")
    result = ProposeResult(distro.root, opts.name)
    created_proposal = not proposal_path.exists()
    atomic_write_text(proposal_path, proposal_text)
    result.written.append(proposal_path)
    try:
        atomic_write_text(recipe_path, recipe_text)
    except OSError:
        if created_proposal:  # both or neither
            proposal_path.unlink(missing_ok=True)
        raise
    result.written.append(recipe_path)
    return result


def version_older(recipe_version: str, proposal_version: str) -> bool:
    """Is the recipe's version older than the version the proposal was made for?"""
    from rattler import Version
    from rattler.exceptions import InvalidVersionError

    try:
        return Version(recipe_version) < Version(proposal_version)
    except (InvalidVersionError, ValueError):
        return False


def spec_resolvable(version_spec: str | None, versions: Iterable[str]) -> bool:
    """Does any of ``versions`` satisfy the spec (no spec or no known versions: yes)?"""
    versions = list(versions)
    return not version_spec or not versions or any(admits(version_spec, v) for v in versions)
