"""``conda-distro propose``: :func:`propose` writes proposals/<name>.yaml and a v1 recipe skeleton
(:func:`render_proposal`, :func:`render_recipe_skeleton` are the pure halves)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.config import DistroRepo
from conda_distro.distribution import open_distro
from conda_distro.errors import UsageError
from conda_distro.proposal.load import parse_proposal
from conda_distro.proposal.schema import (
    PLACEHOLDER_VERSION,
    SCHEMA_VERSION,
    URL_RE,
    name_problem,
    validate_handle,
    version_problem,
)
from conda_distro.recipe.edit import TreeEditor, double_quoted
from conda_distro.recipe.model import RECIPE_FILE, parse_recipe
from conda_distro.recipe.variants import render_settings
from conda_distro.util.fsutil import atomic_write_text
from conda_distro.vocab import Release

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
    return f">={Release(releases[0]).minor},<{Release(releases[-1]).next_minor}"


def _sdist_url(name: str) -> str:
    filename = re.sub(r"[-_.]+", "_", name)  # PEP 625 sdist file names
    return f"https://pypi.org/packages/source/{name[0]}/{name}/{filename}-${{{{ version }}}}.tar.gz"


def _import_name(name: str) -> str:
    return re.sub(r"[-.]+", "_", name)


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
    ed = TreeEditor.new()
    for key, value in (("schema_version", SCHEMA_VERSION), ("name", a.name), ("version", double_quoted(a.version)),
                       ("summary", a.summary), ("homepage", a.homepage), ("repository", a.repository),
                       ("license", a.license), ("issue", ""),
                       ("maintainers", [{"handle": h, "consent": False} for h in a.handles]),
                       ("pytorch_dependency", ""), ("focus_area", ""), ("downstream_users", ""), ("test_plan", "")):
        ed.insert("", key, value, position=None)
    ed.comment("", before=(
        f"Package proposal for the {distro.config.name} distribution (PyTorch RFC-0006, \"Proposing a new\n"
        "package for inclusion\"). Answer every empty question, then open a pull request adding this file\n"
        f"together with recipes/{a.name}/recipe.yaml; `conda-distro lint {a.name}` checks both.\n"
        "Multi-line answers: use a block scalar ('key: |' and indented lines)."))
    ed.comment("version", eol="TODO: the upstream version to package (also in the recipe)"
               if a.version == PLACEHOLDER_VERSION else
               "the version first proposed; the recipe may move ahead of it later")
    ed.comment("summary", eol="one line: what the package does")
    ed.comment("repository", eol="the upstream source repository, e.g. https://github.com/OWNER/REPO")
    ed.comment("license", eol="SPDX identifier of the upstream license, e.g. BSD-3-Clause")
    ed.comment("issue", eol="optional: link to the approved package-proposal issue")
    ed.comment("maintainers", before=(
        "\nMaintainers commit to keep the package working with each new PyTorch release and are pinged\n"
        "when it breaks (an unmaintained package is retired). Each maintainer sets `consent: true` on\n"
        "their own entry in the pull request (a commit or an accepted suggestion): the check fails\n"
        "until every listed maintainer has."))
    ed.comment("pytorch_dependency",
               before="\nWhy PyTorch is a key dependency (RFC-0006 criterion 1): which torch APIs the package builds on.")
    ed.comment("focus_area", before="The area it serves: deep learning, machine learning, scientific computing, ...")
    ed.comment("downstream_users", before="Who would install it from this channel (projects, users).")
    ed.comment("test_plan",
               before="What the recipe's tests exercise besides the import (torch functionality, CPU and GPU).")
    text = ed.text()
    parse_proposal(text, distro.proposals_dir / f"{a.name}.yaml")  # self-check: it must load back
    return text


def render_recipe_skeleton(distro: DistroRepo, opts: ProposeOptions) -> str:
    """The text of recipes/<name>/recipe.yaml: everything that can be known, TODOs for the rest."""
    a = _check_options(distro, opts)
    name = a.name
    pytorch = distro.config.pytorch.name
    ed = TreeEditor.new()
    about = {key: value for key, value in (("homepage", a.homepage), ("repository", a.repository),
                                           ("summary", a.summary), ("license", a.license)) if value}
    # (unknown answers are left out: rattler-build rejects empty URLs and licenses)
    for key, value in (
        ("context", {"version": double_quoted(a.version)}),
        ("package", {"name": name, "version": "${{ version }}"}),
        ("source", {"url": _sdist_url(name), "sha256": PLACEHOLDER_SHA256}),
        ("build", {"number": 0, "noarch": "python",
                   "script": "${{ PYTHON }} -m pip install . -vv --no-deps --no-build-isolation"}),
        ("requirements", {"host": ["python >=3.10", "pip"],
                          "run": ["python >=3.10", f"{pytorch} {pytorch_pin(distro.config.pytorch.releases)}"]}),
        ("tests", [{"python": {"imports": [_import_name(name)]}}]),
        ("about", {**about, "license_file": "LICENSE"}),
        ("extra", {"recipe-maintainers": list(a.handles)}),
    ):
        ed.insert("", key, value, position=None)
    missing = [k for k in ("homepage", "summary", "license") if k not in about]
    if missing:
        ed.comment("about.license_file", before="TODO: add " + ", ".join(f"{k}:" for k in missing)
                   + (" (an SPDX identifier)" if "license" in missing else ""))
    ed.comment("", before=(
        f"Recipe skeleton written by `conda-distro propose {name}` (v1 recipe format, rattler-build).\n"
        f"Complete every TODO, then run `conda-distro lint {name}`."))
    if a.version == PLACEHOLDER_VERSION:
        ed.comment("context.version", eol="TODO: the upstream version")
    for key in ("package", "source", "build", "requirements", "tests", "about", "extra"):
        ed.comment(key, before="\n")
    ed.comment("source.url", eol="TODO: check the sdist file name on PyPI")
    ed.comment("source.sha256",
               eol=f"TODO: sha256 of the sdist (pip download --no-deps --no-binary :all: {name}==VERSION; sha256sum)")
    ed.comment("requirements.host[1]", eol="TODO: add the build backend (setuptools, hatchling, flit-core, ...)")
    ed.comment("requirements.run[1]",
               eol="every supported PyTorch release, at minor granularity. TODO: other run deps, with upper bounds")
    ed.comment("tests[0].python.imports[0]", eol="TODO: the import name(s); add a script test exercising the torch API")
    text = ed.text()
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
        for path, other in ((proposal_path, recipe_path), (recipe_path, proposal_path)):
            if path.exists():
                hint = (f"edit it, and write {other.relative_to(distro.root)} by hand (docs/add-your-package.md): "
                        "--force would overwrite both files with fresh skeletons") if not other.exists() else \
                    "edit it, or pass --force to overwrite both files with fresh skeletons"
                raise UsageError("the file already exists (nothing was written)", path=path, hint=hint)
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
