"""Checks on proposals/<name>.yaml. Ids start with ``proposal-``; each docstring is the help.

They are registered in the same table as the recipe checks (so ``lint --list-checks`` / ``--check``
know them), but they look at a proposal, not a recipe: :class:`ProposalCheck` yields nothing for
recipes and is run by :func:`conda_distro.lint.proposals.lint_proposals`. Findings are on the proposal's path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from conda_distro.channels.upstream_index import UpstreamIndex
from conda_distro.distribution import Distribution
from conda_distro.lint.base import FileCheck, Finding, Problem, Severity
from conda_distro.lint.context import LintContext
from conda_distro.proposal.load import Proposal
from conda_distro.proposal.schema import PLACEHOLDER_VERSION
from conda_distro.recipe.model import RECIPE_FILE, Recipe
from conda_distro.recipe.specs import spec_resolvable, version_older

_SKIP_FUNCS = ("compiler", "stdlib", "cdt")


@dataclass
class ProposalContext:
    """What proposal checks see besides the proposal."""

    lint: LintContext
    dist: Distribution

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


class ProposalCheck(FileCheck):
    """Base of the proposal checks: implement ``check(proposal, pctx)``."""

    def check(self, proposal: Proposal, pctx: ProposalContext) -> Iterable[Problem]:  # pragma: no cover
        raise NotImplementedError

    def proposal_findings(self, proposal: Proposal, pctx: ProposalContext) -> Iterator[Finding]:
        for p in self.check(proposal, pctx):
            yield Finding(recipe=proposal.path.stem, check=self.id, severity=self.severity.value, message=p.message,
                          path=pctx.lint.relpath(proposal.path), line=p.line, hint=p.hint or self.hint or None)


class ProposalInvalid(ProposalCheck):
    """The proposal file is valid YAML with only the known keys (did-you-mean on typos), a valid package
    name matching the file name, GitHub handles and http(s) URLs. Reported by the loader; lint exits 2."""

    id = "proposal-invalid"
    fatal = True
    hint = "see proposals/README.md for the fields"

    def check(self, proposal: Proposal, pctx: ProposalContext) -> Iterable[Problem]:
        return ()  # findings come from load errors (conda_distro.lint.proposals.lint_proposals)


class ProposalRecipeMissing(ProposalCheck):
    """A proposal comes with its recipe, recipes/<name>/recipe.yaml (RFC-0006: "a working recipe for
    creating a conda package is available")."""

    id = "proposal-recipe-missing"
    hint = ("add the recipe in the same pull request: write recipes/NAME/recipe.yaml (docs/add-your-package.md "
            "shows one; `conda-distro propose NAME` writes both files only while neither exists)")

    def check(self, proposal: Proposal, pctx: ProposalContext) -> Iterable[Problem]:
        if pctx.recipe(proposal) is None and not pctx.recipe_unreadable(proposal):
            rel = pctx.lint.relpath(pctx.recipe_path(proposal))
            yield Problem(f"no recipe for the proposed package: {rel} does not exist", proposal.line_of("name"))


class ProposalRecipeMismatch(ProposalCheck):
    """The recipe matches its proposal: same package name; a version not older than the proposed one (the
    recipe moves ahead with new releases); the same maintainers as extra.recipe-maintainers, so that every
    maintainer has a consent entry in the proposal."""

    id = "proposal-recipe-mismatch"
    hint = "keep proposals/<name>.yaml and the recipe in agreement (a new maintainer is added to both)"

    def check(self, proposal: Proposal, pctx: ProposalContext) -> Iterable[Problem]:
        recipe = pctx.recipe(proposal)
        if recipe is None:
            return
        data = proposal.data
        if recipe.name != data.name:
            yield Problem(f"the recipe's package.name is '{recipe.name}', the proposal names '{data.name}'",
                          proposal.line_of("name"))
        if data.version and version_older(recipe.version, data.version):
            yield Problem(f"the recipe's version {recipe.version} is older than the proposed version {data.version}",
                          proposal.line_of("version"))
        in_recipe = {m.lower(): m for m in recipe.maintainers}
        in_proposal = {m.handle.lower(): i for i, m in enumerate(data.maintainers)}
        for key, i in in_proposal.items():
            if key not in in_recipe:
                yield Problem(f"maintainer '{data.maintainers[i].handle}' is not in the recipe's "
                              "extra.recipe-maintainers", proposal.maintainer_line(i))
        for key, handle in in_recipe.items():
            if key not in in_proposal:
                yield Problem(f"recipe maintainer '{handle}' is not listed (with consent) in the proposal",
                              proposal.line_of("maintainers"))


class ProposalPytorchRunDep(ProposalCheck):
    """PyTorch (distro.yaml pytorch.name) is a direct run requirement of the proposed package: RFC-0006
    admits packages for which PyTorch is a key dependency."""

    id = "proposal-pytorch-not-run-dep"
    hint = "add the pytorch pin to requirements.run, e.g. 'pytorch >=2.4,<2.7'"

    def check(self, proposal: Proposal, pctx: ProposalContext) -> Iterable[Problem]:
        recipe = pctx.recipe(proposal)
        if recipe is not None and pctx.pytorch not in recipe.dep_names("run"):
            yield Problem(f"{pctx.pytorch} is not a run requirement of recipes/{proposal.name}/recipe.yaml",
                          proposal.line_of("pytorch_dependency"))


class ProposalConsent(ProposalCheck):
    """Every maintainer listed in the proposal has set `consent: true`: proposing a package commits its
    maintainers to keep it working with new PyTorch releases (RFC-0006 "packages that aren't maintained")."""

    id = "proposal-consent-missing"
    hint = "each maintainer sets `consent: true` on their own entry in this pull request"

    def check(self, proposal: Proposal, pctx: ProposalContext) -> Iterable[Problem]:
        for i, m in enumerate(proposal.data.maintainers):
            if not m.consent:
                yield Problem(f"maintainer '{m.handle}' has not consented (consent: false)", proposal.consent_line(i))


class ProposalNameTaken(ProposalCheck):
    """The proposed name is not already published in an upstream channel (by its repodata): a second
    package of the same name would shadow or be shadowed by it. Only upstream channels that are local
    folders can be read offline; channel names such as conda-forge are skipped."""

    id = "proposal-name-taken"
    hint = "choose another name, or use the upstream package instead of proposing it"

    def check(self, proposal: Proposal, pctx: ProposalContext) -> Iterable[Problem]:
        upstream = pctx.upstream
        if upstream.has(proposal.name):
            yield Problem(f"'{proposal.name}' is already published upstream ({upstream.where[proposal.name]})",
                          proposal.line_of("name"))


class ProposalDepsResolvable(ProposalCheck):
    """Every run requirement of the proposed package is available: from an upstream channel (a version its
    spec admits) or as a distribution recipe (RFC-0006 criterion 2). Needs every upstream channel to be
    readable offline (local folders); otherwise the check is skipped (`solve` decides)."""

    id = "proposal-deps-unresolvable"
    hint = "propose the missing dependency too (its own proposal and recipe), or get it into the upstream channel"

    def check(self, proposal: Proposal, pctx: ProposalContext) -> Iterable[Problem]:
        recipe = pctx.recipe(proposal)
        upstream = pctx.upstream
        if recipe is None or not upstream.complete:
            return
        line = proposal.line_of("name")
        seen: set[str] = set()
        for dep in recipe.deps("run"):
            name = dep.name
            if not name or name in seen or name.startswith("__") or dep.func in _SKIP_FUNCS:
                continue
            if dep.spec is not None and not dep.spec.ok:
                continue  # spec-syntax reports it
            seen.add(name)
            version = dep.version if dep.spec is not None else None
            if name in pctx.dist.recipes:
                if not spec_resolvable(version, [pctx.dist.recipes[name].version]):
                    yield Problem(f"run requirement '{dep.raw}': the distribution's {name} is "
                                  f"{pctx.dist.recipes[name].version}", line)
            elif upstream.has(name):
                if not spec_resolvable(version, upstream.versions[name]):
                    have = ", ".join(sorted(upstream.versions[name])[:8])
                    yield Problem(f"run requirement '{dep.raw}': no upstream version matches (have {have})", line)
            else:
                yield Problem(f"run requirement '{name}' is neither in the upstream channels nor a distribution "
                              "package", line)


class ProposalIncomplete(ProposalCheck):
    """The proposal answers the RFC-0006 intake questions: summary, homepage, upstream repository, license,
    why PyTorch is a key dependency, and the version (not the 0.0.0 placeholder)."""

    id = "proposal-incomplete"
    hint = "answer the question in the proposal file (see the comment above it)"
    REQUIRED = ("summary", "homepage", "repository", "license", "pytorch_dependency")

    def check(self, proposal: Proposal, pctx: ProposalContext) -> Iterable[Problem]:
        data = proposal.data
        if not data.version:
            yield Problem("'version' is not answered", proposal.line_of("version"))
        elif data.version == PLACEHOLDER_VERSION:
            yield Problem(f"'version' is still the placeholder {PLACEHOLDER_VERSION}", proposal.line_of("version"),
                          hint="write the upstream version here and in the recipe's context: version")
        for key in self.REQUIRED:
            if not str(getattr(data, key)).strip():
                yield Problem(f"'{key}' is not answered", proposal.line_of(key))


class ProposalDetails(ProposalCheck):
    """The proposal says which area the package serves, who uses it, and what its tests exercise; these
    answers help reviewers decide (RFC-0006: "focused on an area like deep learning, machine learning or
    scientific computing")."""

    id = "proposal-details-missing"
    severity = Severity.WARNING
    hint = "answer the question in the proposal file (see the comment above it)"
    FIELDS = ("focus_area", "downstream_users", "test_plan")

    def check(self, proposal: Proposal, pctx: ProposalContext) -> Iterable[Problem]:
        for key in self.FIELDS:
            if not str(getattr(proposal.data, key)).strip():
                yield Problem(f"'{key}' is not answered", proposal.line_of(key))
