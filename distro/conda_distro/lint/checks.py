"""The lint checks. Each class is one check; its docstring is what `conda-distro lint --list-checks` shows."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from conda_distro.lagging import READY, excluded_by_bound
from conda_distro.lint.base import CHECKS, LintCheck, Problem, Severity
from conda_distro.lint.context import LintContext
from conda_distro.recipe.edit import TreeEditor
from conda_distro.recipe.model import SECTIONS, Dep, Recipe
from conda_distro.recipe.specs import admits, admitted_minors, granularity_name, has_upper_bound, upper_granularity
from conda_distro.util.validation import HANDLE_RE

SPDX_RE = re.compile(r"^[A-Za-z0-9.+-]+( (AND|OR|WITH) [A-Za-z0-9.+-]+)*$|^\(.*\)$")
_SPDX_BAD_WORDS = re.compile(r"\b(license|licence|other|unknown|see|custom)\b", re.I)
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


@lru_cache(maxsize=16384)
def _valid_version(v: str) -> bool:
    from rattler import Version
    from rattler.exceptions import InvalidVersionError

    if "-" in v or " " in v:
        return False
    try:
        Version(v)
    except (InvalidVersionError, ValueError):
        return False
    return True


# ------------------------------------------------------------------ maintainers


class MaintainersMissing(LintCheck):
    """Every recipe lists at least one GitHub handle in extra.recipe-maintainers: someone answers for it
    when a PyTorch release breaks it."""

    id = "maintainers-missing"
    scope = "recipe"
    hint = "add extra: {recipe-maintainers: [your-github-handle]} (a team such as conda-distro/core is fine)"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if not recipe.maintainers:
            key = "extra.recipe-maintainers" if "extra.recipe-maintainers" in recipe.lines else "extra"
            yield Problem("no recipe maintainers listed", recipe.line_of(key))


class MaintainersMalformed(LintCheck):
    """Maintainers are GitHub handles (letters, digits, single hyphens, at most 39 characters) or
    ORG/TEAM handles, written without a leading @."""

    id = "maintainers-malformed"
    scope = "recipe"
    hint = "write the bare handle, e.g. 'octocat' or 'conda-distro/core'"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        for m in recipe.maintainers:
            if not HANDLE_RE.match(m):
                yield Problem(f"'{m}' is not a GitHub handle", recipe.line_of("extra.recipe-maintainers"))


class MaintainersDuplicate(LintCheck):
    """A maintainer is listed twice."""

    id = "maintainers-duplicate"
    scope = "recipe"
    severity = Severity.WARNING
    hint = "remove the repeated handle (lint --fix does it)"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        seen: set[str] = set()
        for m in recipe.maintainers:
            if m.lower() in seen:
                yield Problem(f"maintainer '{m}' is listed more than once", recipe.line_of("extra.recipe-maintainers"))
            seen.add(m.lower())

    def fix(self, recipe: Recipe, edit: TreeEditor, ctx: LintContext) -> bool:
        lst = edit.get("extra.recipe-maintainers")
        if not isinstance(lst, list):
            return False
        changed = False
        for i in reversed(range(len(lst))):
            if str(lst[i]).lower() in {str(x).lower() for x in lst[:i]}:
                edit.delete(f"extra.recipe-maintainers[{i}]")
                changed = True
        return changed


# ------------------------------------------------------------------ pins


class RunDepUnbounded(LintCheck):
    """Every run requirement has an upper bound (policy.upper_bounds; names in policy.unbounded_allowed
    are exempt). A bare host requirement whose package exports an upper-bounded run_export (conda-forge's
    pytorch exports 'pytorch >=X.Y,<X.(Y+1)') counts as bounded. Upper bounds are what let the
    distribution promise that `conda install` of today's packages still works after tomorrow's releases."""

    id = "run-dep-unbounded"
    scope = "recipe"
    hint = "add an upper bound, e.g. 'numpy >=1.24,<3' (or list the package in policy.unbounded_allowed)"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        seen: set[str] = set()
        for dep in recipe.deps("run"):
            name = dep.name
            if not name or name in seen or dep.func in ("compiler", "stdlib", "cdt"):
                continue
            if dep.spec is not None and not dep.spec.ok:
                continue
            seen.add(name)
            if not ctx.needs_upper_bound(name) or name in ctx.names and dep.func == "pin_subpackage":
                continue
            if recipe.produces(name):
                continue  # a pin between the recipe's own outputs
            if dep.spec is not None and upper_granularity(dep.version) is not None:
                continue  # this entry bounds it (the same answer is_bounded() gives, without grouping)
            if not ctx.is_bounded(recipe, name):
                yield Problem(f"run requirement '{dep.raw}' has no upper bound", dep.line)


class PytorchBoundGranularity(LintCheck):
    """The pin on pytorch is bounded at minor granularity (`pytorch >=2.4,<2.7`, not `<3` and not `<2.6.2`):
    a bugfix release of PyTorch must never need a new downstream build, and a new minor release must be
    tested before it is admitted."""

    id = "pytorch-bound-granularity"
    scope = "recipe"
    hint = "bound pytorch at a minor release: 'pytorch >=2.4,<2.7'"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        views = ctx.run_pins(recipe, ctx.pytorch)
        if not views:
            return
        bounded = [(v, v.granularity) for v in views if v.granularity is not None]
        if not bounded:
            # no bound at all: run-dep-unbounded reports it when the policy asks for one; with
            # policy.upper_bounds: off (or pytorch in unbounded_allowed) a floor alone is accepted
            return
        best, granularity = min(bounded, key=lambda vg: abs(vg[1] - 2))
        if granularity != 2:
            yield Problem(
                f"'{best.dep.raw}' bounds pytorch at {granularity_name(granularity)} granularity, not minor",
                best.dep.line)


class PytorchLowerBound(LintCheck):
    """An explicit pytorch run pin has a floor, so that users with an older PyTorch get a solver
    error rather than a broken import."""

    id = "pytorch-lower-bound"
    scope = "recipe"
    severity = Severity.WARNING
    hint = "add a floor, e.g. 'pytorch >=2.4,<2.7'"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        for v in ctx.run_pins(recipe, ctx.pytorch):
            if v.via == "spec" and v.version and has_upper_bound(v.version) and admits(v.version, "0.0.1"):
                yield Problem(f"'{v.dep.raw}' has no lower bound", v.dep.line)


class PytorchPinAdmitsRelease(LintCheck):
    """The pytorch pin admits at least one release listed in distro.yaml (pytorch.releases); otherwise
    the package can never be tested or installed from the distribution."""

    id = "pytorch-pin-no-release"
    scope = "recipe"
    hint = "widen the pin to cover a supported release, or add the release to distro.yaml"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        idx = ctx.index(recipe)
        if recipe.produces(ctx.pytorch):
            return  # the recipe builds pytorch itself: its self-pins are not downstream pins
        pins = [d for d in idx.named("run", ctx.pytorch) + idx.named("host", ctx.pytorch) if d.spec is not None and d.spec.ok]
        for d in pins:
            if d.version and not any(admits(d.version, r) for r in ctx.releases):
                yield Problem(f"'{d.raw}' admits none of the supported releases ({', '.join(ctx.releases)})", d.line)


class PytorchPinLags(LintCheck):
    """The pytorch pins leave out a supported release (their upper bound is below it) while every
    distribution package the recipe depends on admits that release: nothing holds it back but its own
    pins. That is what a package fixed after release day looks like: it failed the release-day sweep,
    its pins were put back, and a later fix (a new version, a patched recipe) does not widen them. The
    sweep admits it: `conda-distro sweep --pytorch VER --package NAME` widens the pins, raises the build
    number, builds and tests it against the release and commits it on a branch of its own. A warning: the
    package still works with the releases it admits. Lockstep packages need a new version instead, and a
    package whose dependency leaves the release out waits for that one."""

    id = "pytorch-pin-lags"
    severity = Severity.WARNING
    hint = "conda-distro sweep --pytorch VER --package NAME"

    def applies(self, recipe: Recipe, ctx: LintContext) -> bool:
        """Only a recipe (not lockstep) whose own pins leave out a supported release can lag."""
        return not recipe.lockstep and any(excluded_by_bound(recipe, ctx.pytorch, r) is not None for r in ctx.releases)

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if not self.applies(recipe, ctx):
            return
        ready = [lag for lag in ctx.lags_of(recipe) if lag.status == READY]
        if not ready:
            return
        newest = ready[-1].release  # (its widened bound admits the older ones too)
        yield Problem(f"'{ready[0].pin}' leaves out pytorch {', '.join(lag.release for lag in ready)}, a supported "
                      "release every distribution package it depends on admits", ready[0].line,
                      hint=f"admit it: conda-distro sweep --pytorch {newest} --package {recipe.folder.name} (widens "
                           "the pin, raises the build number, builds and tests it against the release, commits it "
                           "with --commit)")


class LockstepOneMinor(LintCheck):
    """Packages marked extra.pytorch-lockstep (torchvision-like, versioned with PyTorch's minor) pin
    pytorch to exactly one minor release, e.g. 'pytorch >=2.5,<2.6'."""

    id = "lockstep-pin-one-minor"
    scope = "recipe"
    hint = "pin pytorch to one minor: 'pytorch >=2.5,<2.6' (or 'pytorch 2.5.*')"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if not recipe.lockstep:
            return
        explicit = [d for d in recipe.deps("run") if d.name == ctx.pytorch and d.spec is not None and d.spec.ok and d.version]
        host = [d for d in recipe.deps("host") if d.name == ctx.pytorch and d.spec is not None and d.spec.ok and d.version]
        candidates = explicit or host
        if not candidates:
            line = recipe.line_of("requirements")
            yield Problem("lockstep package does not pin pytorch to a version", line)
            return
        for d in candidates:
            n = len(admitted_minors(d.version))
            if n != 1:
                yield Problem(f"'{d.raw}' admits {n} minor releases of pytorch; a lockstep package admits one", d.line)


class PytorchMissing(LintCheck):
    """A package in the PyTorch distribution depends on pytorch, directly or through another
    distribution package. Packages that do not belong in conda-forge, not here."""

    id = "pytorch-missing"
    scope = "recipe"
    severity = Severity.WARNING
    hint = "add pytorch to requirements.run, or propose the package to conda-forge instead"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        names = ctx.index(recipe).names("run", "host")
        if ctx.pytorch not in names and not (names & ctx.names) and recipe.name != ctx.pytorch:
            yield Problem("the recipe depends neither on pytorch nor on a distribution package", recipe.line_of("requirements"))


class DuplicateDeps(LintCheck):
    """A package appears twice in the same requirements section (outside if/then branches; each output
    of a multi-output recipe has its own sections). conda-forge's idiom of a bare entry next to a
    constrained one (`pytorch` for the variant pin and run_exports, `pytorch * cuda*` for the build
    string) is not a duplicate."""

    id = "duplicate-deps"
    scope = "recipe"
    hint = "keep one entry per package per section (lint --fix removes exact repeats)"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        idx = ctx.index(recipe)
        for section in SECTIONS:
            grouped = idx.by_name.get(section, {})
            if len(grouped) == len(recipe.requirements.get(section, ())):
                continue  # every entry has its own name: nothing can be a duplicate
            seen: dict[tuple[str, int | None], Dep] = {}
            for d in recipe.deps(section):
                if d.conditional or not d.name or d.func in ("compiler", "stdlib", "cdt"):
                    continue
                key = (d.name, d.output)
                first = seen.get(key)
                if first is None:
                    seen[key] = d
                elif first.line == d.line:
                    continue  # one entry of the text, rendered differently per variant
                elif not (first.is_bare or d.is_bare) or first.raw == d.raw:
                    yield Problem(f"requirements.{section}: '{d.name}' is listed twice (lines {first.line} and {d.line})", d.line)

    def fix(self, recipe: Recipe, edit: TreeEditor, ctx: LintContext) -> bool:
        changed = False
        for section in SECTIONS:
            lst = edit.get(f"requirements.{section}")
            if not isinstance(lst, list):
                continue
            for i in range(len(lst) - 1, -1, -1):
                item = lst[i]
                if isinstance(item, str) and item.strip() in {x.strip() for x in lst[:i] if isinstance(x, str)}:
                    edit.delete(f"requirements.{section}[{i}]")
                    changed = True
        return changed


# ------------------------------------------------------------------ build


class BuildNumberMissing(LintCheck):
    """build.number is set explicitly: every rebuild of the same version (pin widened, fix) bumps it, and
    the artifact filename must never be reused."""

    id = "build-number-missing"
    scope = "recipe"
    hint = "add build: {number: 0} (lint --fix does it)"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if recipe.build_number is None:
            yield Problem("build.number is not set", recipe.line_of("build"))

    def fix(self, recipe: Recipe, edit: TreeEditor, ctx: LintContext) -> bool:
        from ruamel.yaml.comments import CommentedMap

        doc = edit.doc
        if "outputs" in doc:
            return False
        build = doc.get("build")
        if build is None and "build" in doc:  # an empty 'build:'
            build = doc["build"] = CommentedMap()
        if not isinstance(build, dict) and build is not None:
            return False
        if build is None:
            build = CommentedMap()
            keys = list(doc.keys())
            pos = keys.index("source") + 1 if "source" in keys else (keys.index("package") + 1 if "package" in keys else len(keys))
            edit.insert("", "build", build, pos)
        edit.insert("build", "number", 0)
        return True


class FolderNameMismatch(LintCheck):
    """The recipe folder is named after the package (recipes/<package.name>/recipe.yaml)."""

    id = "folder-name-mismatch"
    scope = "recipe"
    hint = "rename the folder to the package name"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if recipe.folder.name != recipe.name:
            yield Problem(f"folder '{recipe.folder.name}' holds package '{recipe.name}'", recipe.line_of("package.name"))


class VersionPrefix(LintCheck):
    """The version is the upstream version without a leading 'v' (git tags often have one; conda versions do not)."""

    id = "version-v-prefix"
    scope = "recipe"
    hint = "drop the leading 'v' (lint --fix does it)"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if recipe.version[:1] in ("v", "V"):
            yield Problem(f"version '{recipe.version}' starts with 'v'", recipe.line_of("package.version"))

    def fix(self, recipe: Recipe, edit: TreeEditor, ctx: LintContext) -> bool:
        for path in ("context.version", "package.version"):
            value = edit.get(path)
            if isinstance(value, str) and value[:1] in ("v", "V") and "${{" not in value:
                edit.set(path, value[1:])
                return True
        return False


class VersionInvalid(LintCheck):
    """The version is a valid conda version (no spaces, no '-', no '${{' left after rendering)."""

    id = "version-invalid"
    scope = "recipe"
    fatal = True
    hint = "use the upstream version, e.g. 1.2.0 (a '-' becomes '_')"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        v = recipe.version.removeprefix("v").removeprefix("V")  # version-v-prefix reports that one
        if not _valid_version(v):
            yield Problem(f"'{v}' is not a valid conda version", recipe.line_of("package.version"))


class NoarchPythonNeedsPython(LintCheck):
    """A noarch: python package lists python in both host and run requirements; without it the
    build has no site-packages and the package installs into any environment."""

    id = "noarch-python-missing-python"
    scope = "recipe"
    hint = "add python to requirements.host and requirements.run (e.g. 'python >=3.10')"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if recipe.noarch != "python":
            return
        idx = ctx.index(recipe)
        for section in ("host", "run"):
            if not idx.named(section, "python"):
                yield Problem(f"noarch: python package has no python in requirements.{section}", recipe.line_of("requirements"))


class NoarchWithCompiler(LintCheck):
    """A noarch package cannot use compilers: compiled code is platform-specific."""

    id = "noarch-with-compiler"
    scope = "recipe"
    hint = "drop noarch, or drop the compiler requirement"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if recipe.noarch:
            for d in recipe.deps("build"):
                if d.func == "compiler":
                    yield Problem(f"noarch: {recipe.noarch} package uses compiler('{d.name}')", d.line)


# ------------------------------------------------------------------ tests


class TestsMissing(LintCheck):
    """Every recipe has tests: the distribution's promise rests on testing each artifact against every
    supported PyTorch release."""

    id = "tests-missing"
    scope = "recipe"
    hint = "add tests: [{python: {imports: [yourpkg]}}] and a script test exercising the torch API you use"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        runnable = [t for t in recipe.tests if isinstance(t, dict) and set(t) & {"python", "script", "downstream", "r", "perl"}]
        if not runnable:
            yield Problem("no runnable tests (python imports or a script)", recipe.line_of("tests") if "tests" in recipe.lines else 1)


class PythonImportTest(LintCheck):
    """A python package has a `python: imports:` test; it is the cheapest test that catches a broken
    install."""

    id = "tests-no-import"
    scope = "recipe"
    severity = Severity.WARNING
    hint = "add tests: [{python: {imports: [yourpkg]}}]"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if recipe.noarch == "python" and recipe.tests and not any(isinstance(t, dict) and "python" in t for t in recipe.tests):
            yield Problem("python package without a 'python: imports:' test", recipe.line_of("tests"))


# ------------------------------------------------------------------ about / source


class LicenseMissing(LintCheck):
    """about.license is set: redistributing a package requires knowing its license."""

    id = "license-missing"
    scope = "recipe"
    hint = "add about: {license: BSD-3-Clause} (an SPDX identifier)"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if not str(recipe.about.get("license") or "").strip():
            yield Problem("about.license is missing", recipe.line_of("about"))


class LicenseSpdx(LintCheck):
    """about.license is an SPDX expression (e.g. 'BSD-3-Clause', 'MIT OR Apache-2.0')."""

    id = "license-not-spdx"
    scope = "recipe"
    severity = Severity.WARNING
    hint = "use the SPDX identifier, see https://spdx.org/licenses/"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        lic = str(recipe.about.get("license") or "").strip()
        if lic and (not SPDX_RE.match(lic) or _SPDX_BAD_WORDS.search(lic)):
            yield Problem(f"license '{lic}' does not look like an SPDX expression", recipe.line_of("about.license"))


class LicenseFileMissing(LintCheck):
    """about.license_file names the license text shipped in the package."""

    id = "license-file-missing"
    scope = "recipe"
    severity = Severity.WARNING
    hint = "add about: {license_file: LICENSE}"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if recipe.about.get("license") and not recipe.about.get("license_file"):
            yield Problem("about.license_file is missing", recipe.line_of("about"))


class SummaryMissing(LintCheck):
    """about.summary says in one line what the package is; it is shown by `conda search` and on the status page."""

    id = "summary-missing"
    scope = "recipe"
    severity = Severity.WARNING
    hint = "add about: {summary: ...}"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if not str(recipe.about.get("summary") or "").strip():
            yield Problem("about.summary is missing", recipe.line_of("about"))


class HomepageMissing(LintCheck):
    """about.homepage (or repository) points users to the project."""

    id = "homepage-missing"
    scope = "recipe"
    severity = Severity.WARNING
    hint = "add about: {homepage: https://...}"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        if not (recipe.about.get("homepage") or recipe.about.get("repository")):
            yield Problem("about.homepage is missing", recipe.line_of("about"))


class SourceSha256(LintCheck):
    """Every url source has a sha256 checksum, so that a changed upstream tarball fails loudly."""

    id = "source-missing-sha256"
    scope = "recipe"
    hint = "add sha256: (e.g. from `pip download --no-deps --no-binary :all: NAME==VER` and `sha256sum`)"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        for s in recipe.sources:
            if s.url and not s.sha256:
                yield Problem(f"source {s.url} has no sha256", s.line)
            elif s.sha256 and not SHA256_RE.match(s.sha256):
                yield Problem(f"sha256 '{s.sha256}' is not 64 lowercase hex digits", s.line)
            elif s.sha256 and set(s.sha256) == {"0"}:
                yield Problem(f"source {s.url or s.path or s.git} has the placeholder sha256 (all zeros)", s.line)


class SourceUrlVersion(LintCheck):
    """A url source names the version (through ${{ version }}), so that a version bump cannot silently
    keep building the old tarball. Extra downloads (a license file, test data) need not: the check fires
    when no url source names the version."""

    id = "source-url-without-version"
    scope = "recipe"
    severity = Severity.WARNING
    hint = "write the url with ${{ version }} in it"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        # extra downloads beside the main source (a license file, test data) need not carry the version:
        # the check fires when no url source names it
        urls = [(s.url, s.line) for s in recipe.sources if s.url]
        if urls and not any(recipe.version in url for url, _ in urls):
            yield Problem(f"source url does not contain the version {recipe.version}", urls[0][1])


class SkipLintsUnknown(LintCheck):
    """extra.skip-lints names only existing check ids."""

    id = "skip-lints-unknown"
    scope = "recipe"
    severity = Severity.WARNING
    hint = "see `conda-distro lint --list-checks` for the ids"

    def run(self, recipe: Recipe, ctx: LintContext) -> Iterable[Problem]:
        for s in recipe.skip_lints:
            if s not in CHECKS:
                yield Problem(f"extra.skip-lints names unknown check '{s}'", recipe.line_of("extra"))
