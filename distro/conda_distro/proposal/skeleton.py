"""``conda-distro propose``: :func:`propose` writes proposals/<name>.yaml and a v1 recipe skeleton
(:func:`render_proposal`, :func:`render_recipe_skeleton` are the pure halves)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from conda_distro.config import DistroRepo
from conda_distro.distribution import open_distro
from conda_distro.errors import UsageError
from conda_distro.fsutil import atomic_write_text
from conda_distro.proposal.load import parse_proposal
from conda_distro.proposal.schema import (
    PLACEHOLDER_VERSION,
    SCHEMA_VERSION,
    URL_RE,
    name_problem,
    validate_handle,
    version_problem,
)
from conda_distro.recipe import RECIPE_FILE, parse_recipe
from conda_distro.specs import minor_of, next_minor_bound
from conda_distro.variants import render_settings
from conda_distro.yamlio import dump_plain

# the skeleton's sha256 (well-formed, so rattler-build renders the recipe; lint's source-missing-sha256 flags it)
PLACEHOLDER_SHA256 = "0" * 64


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


def _check_options(distro: DistroRepo, opts: ProposeOptions) -> _Answers:
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
        if url and not URL_RE.match(url):
            raise UsageError(f"'{url}' is not an http(s) URL", field=flag)
    repository = opts.repository or (opts.homepage if re.match(r"^https://(github|gitlab)\.com/[^/]+/[^/]+/?$",
                                                                  opts.homepage) else "")
    return _Answers(opts.name, version, tuple(opts.maintainers), opts.summary.strip(), opts.homepage,
                    repository, opts.license.strip())


def render_proposal(distro: DistroRepo, opts: ProposeOptions) -> str:
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


def render_recipe_skeleton(distro: DistroRepo, opts: ProposeOptions) -> str:
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
