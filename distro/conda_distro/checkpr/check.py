"""`check-pr`: the PR gate. In order: lint of changed recipes and proposals, proposal checks, the
affected set (changed ∪ transitive reverse deps), solve per release × variant, build + test of the
affected set; plus downstream notification (dependents whose pins no longer admit a changed package).

The build runs in a scope of its own, ``build/pr/<branch or commit>/`` (its staging channel, results
store, logs and release views): a PR's artifacts and results never enter the shared staging channel
or ``build/results/``, so `promote` on main in the same checkout never sees them. The shared staging is
only read, after the scope's own staging, for dependencies the PR does not rebuild; and ``build/results/``
only read, for a file the PR does not change (re-tested from main): a test of it whose key main's results
already hold (same file, release view and dependencies) takes that outcome instead of running again.

**Reproducing a failure** (``--only NAME [--pytorch VER]``, the command each failure's hint names): the
PR's own build of NAME and of the distribution packages it depends on that the PR changes (what CI built
in the PR's scope), in a private scope of its own (``build/pr/<ref>--only-NAME/``, emptied first, so the
builds and tests really run again), tested on the given releases only. Dependencies the PR does not
change come from the shared staging, read-only, as in CI; nothing is ever written there. (``build NAME``
instead would test NAME against the shared staging's older parent, and leave its build there.)

This module computes the result (:class:`CheckPrResult`); :mod:`conda_distro.checkpr.comment` turns it into
the PR comment and its plain-text twin (imports flow one way: checkpr/comment.py -> checkpr/check.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.checkpr.onbase import FAILING, BaseLookup, Classified, classify, run_key
from conda_distro.distribution import Distribution, Exclusions, load_distribution
from conda_distro.engine.run import SCOPES, BuildOptions, build_paths, run_build
from conda_distro.errors import ExitCode, UsageError
from conda_distro.graph import RecipeGraph
from conda_distro.lint import Finding, LintOptions, lint_distribution
from conda_distro.lint.owner_checks import PackageOwner
from conda_distro.lint.proposals import has_fatal, lint_proposals
from conda_distro.proposal import proposal_names
from conda_distro.recipe.specs import admits, upper_granularity
from conda_distro.solve import SolveOptions, TargetSolve, solve_distribution
from conda_distro.state.ledger import Ledger
from conda_distro.state.owners import OWNERS_FILE, registry_of
from conda_distro.state.results import BuildRecord, TestRecord
from conda_distro.util.fsutil import clear_folder
from conda_distro.util.gitutil import changed_files, recipe_names, scope_name
from conda_distro.util.progress import ProgressSink

BUILDABLE_PREFIXES = ("recipes/", "proposals/")
BUILDABLE_FILES = ("distro.yaml",)


@dataclass(frozen=True)
class CheckPrOptions:
    base: str
    build: bool = True
    jobs: int | None = 1  # None: what the machine holds
    sandbox: bool = True  # False: --no-sandbox
    root: Path | None = None  # the distribution's folder (None: found from the current one)
    log_url: str | None = None  # where the CI run's logs can be read ('{path}' in it: the log's path); output only
    only: str | None = None  # --only NAME: reproduce NAME's failure (its PR-scope dependencies built with it)
    pytorch: tuple[str, ...] = ()  # --pytorch: test only against these releases (solve only them)
    solve: bool = True  # False: stop once the affected set is known (the fan-out's plan and shard jobs)
    shards: ShardInputs | None = None  # the fan-in: build nothing, take the shards' records (conda_distro.fanout)
    progress: ProgressSink | None = None  # where its builds report progress (the CLI's sink; None: nowhere)


@dataclass(frozen=True)
class ShardInputs:
    """``check-pr --from-shards``: where the shards' bundles were downloaded, this run's id, and how the run
    was cut (as the plan job's options); :func:`conda_distro.fanout.flows.pr_gate` reads them."""

    folder: Path
    run: str = "local"
    runners: int = 20
    per_shard: int = 4
    stages: int = 8


@dataclass
class PinUpdate:
    name: str  # the dependent whose pin must change
    dependency: str
    new_version: str
    pin: str  # as written
    suggested: str
    maintainers: list[str]
    path: str
    line: int

    def to_dict(self) -> dict:
        return self.__dict__.copy()


@dataclass(frozen=True)
class RecipeLocation:
    """Where a package's build or test failure points: its recipe file and the lines of its sections."""

    path: str  # relative to the distribution's folder
    build: int | None = None  # the line of ``build:``
    tests: int | None = None  # the line of ``tests:``


@dataclass
class CheckPrResult:
    base: str
    changed: list[str] = field(default_factory=list)  # recipe names
    changed_proposals: list[str] = field(default_factory=list)
    changed_files: list[str] = field(default_factory=list)
    lint: list[Finding] = field(default_factory=list)
    proposals: list[Finding] = field(default_factory=list)
    affected: list[str] = field(default_factory=list)
    solve: list[TargetSolve] = field(default_factory=list)
    builds: list[BuildRecord] = field(default_factory=list)
    tests: list[TestRecord] = field(default_factory=list)
    needs_pin_update: list[PinUpdate] = field(default_factory=list)
    maintainers: dict[str, list[str]] = field(default_factory=dict)
    malformed: bool = False
    scope: str | None = None  # build/pr/<ref>/: where the build and its results, logs and staging went
    excluded: Exclusions = field(default_factory=Exclusions)  # unreadable recipes and their dependents
    nothing_buildable: bool = False
    built: bool = False
    locations: dict[str, RecipeLocation] = field(default_factory=dict)  # where a build or test failure points
    root: Path | None = None  # the distribution's folder (logs are shown relative to it)
    only: str | None = None  # --only NAME: a reproduction of NAME's failure
    pytorch: tuple[str, ...] = ()  # --pytorch: the releases tested
    on_base_lookup: BaseLookup | None = field(default=None, repr=False)  # main's evidence (None: none: all new)
    _classified: tuple[tuple, list[Classified], frozenset] | None = field(default=None, repr=False)

    def _classification(self) -> tuple[list[Classified], frozenset]:
        """The failing tests classified, and the run keys of those already failing on the base; recomputed
        when the tests change (the fan-in sets them)."""
        failing = [t for t in self.tests if t.status in FAILING]
        key = tuple((*run_key(t), t.status, t.reason) for t in failing)
        if self._classified is None or self._classified[0] != key:
            evidence = self.on_base_lookup.evidence(failing) if self.on_base_lookup is not None and failing else {}
            found = classify(failing, evidence)
            self._classified = (key, found, frozenset(c.key for c in found if c.on_base))
        return self._classified[1], self._classified[2]

    @property
    def classified(self) -> list[Classified]:
        """Each failing test (failed / blocked) as new or already failing on the base
        (:mod:`conda_distro.checkpr.onbase`)."""
        return self._classification()[0]

    def on_base(self, test: TestRecord) -> bool:
        """Whether ``test`` is a failure already present the same way on the base (never the PR's failure)."""
        return test.status in FAILING and run_key(test) in self._classification()[1]

    @property
    def own_tests(self) -> list[TestRecord]:
        """The tests whose outcome is the PR's: every test but the failures already present on the base."""
        known = self._classification()[1]
        return [t for t in self.tests if t.status not in FAILING or run_key(t) not in known]

    @property
    def ok(self) -> bool:
        """No lint or proposal error, every target solves, every build built, every test passed (flaky never
        blocks; nor does a failure already present on the base: the PR does not make it worse), no pin to update."""
        return not self.malformed and not any(f.severity == "error" for f in self.lint + self.proposals) \
            and all(s.ok for s in self.solve) \
            and all(b.status in ("built", "skipped-existing") for b in self.builds) \
            and all(t.status in ("passed", "flaky") for t in self.own_tests) and not self.needs_pin_update

    @property
    def exit_code(self) -> ExitCode:
        if self.malformed:
            return ExitCode.BAD_INPUT
        return ExitCode.OK if self.ok else ExitCode.FAILURES

    def _tests_dicts(self) -> list[dict]:
        """The tests as JSON; a failing one says whether it already fails on the base (``on_base``)."""
        known = self._classification()[1]
        return [{**t.to_dict(), "on_base": run_key(t) in known} if t.status in FAILING else t.to_dict()
                for t in self.tests]

    def to_dict(self) -> dict:
        return {
            "ok": self.ok, "base": self.base, "changed": self.changed, "changed_proposals": self.changed_proposals,
            "nothing_buildable": self.nothing_buildable, "malformed": self.malformed, "built": self.built,
            "scope": self.scope, "only": self.only, "pytorch": list(self.pytorch),
            "lint": [f.to_dict() for f in self.lint], "proposals": [f.to_dict() for f in self.proposals],
            "affected": self.affected, "solve": [s.to_dict() for s in self.solve],
            "builds": [b.to_dict() for b in self.builds], "tests": self._tests_dicts(),
            "on_base": [c.to_dict() for c in self.classified if c.on_base],
            "needs_pin_update": [p.to_dict() for p in self.needs_pin_update], "maintainers": self.maintainers,
            **(self.excluded.to_dict() if self.excluded else {}),
        }


def _bump(version: str, granularity: int) -> str:
    nums = [int(x) for x in re.findall(r"\d+", version)[: max(1, granularity)]]
    while len(nums) < granularity:
        nums.append(0)
    nums[-1] += 1
    return ".".join(map(str, nums))


def suggest_pin(name: str, spec_version: str | None, new_version: str) -> str:
    """Widen a pin so that it admits ``new_version``, keeping its floor and its bound's granularity
    (the floor drops to ``new_version`` when the new version is below it)."""
    m = re.search(r">=\s*([\w.]+)", spec_version or "")
    floor = m.group(1) if m else new_version
    if not admits(f">={floor}", new_version):
        floor = new_version
    g = upper_granularity(spec_version) or 1
    g = 1 if g >= 99 else g
    return f"{name} >={floor},<{_bump(new_version, g)}"


def pin_updates(dist: Distribution, graph: RecipeGraph, changed: list[str]) -> list[PinUpdate]:
    out = []
    for folder in changed:
        if folder not in dist.recipes:
            continue
        pkg = dist.recipes[folder]
        for dep_folder in sorted(graph.dependents(folder)):
            d = dist.recipes[dep_folder]
            for req in d.deps("host", "run"):
                if req.name == pkg.name and req.spec is not None and req.spec.ok and not admits(req.version, pkg.version):
                    out.append(PinUpdate(dep_folder, pkg.name, pkg.version, req.raw,
                                         suggest_pin(pkg.name, req.version, pkg.version), list(d.maintainers),
                                         d.path.relative_to(dist.root).as_posix(), req.line))
    return out


def unbumped_builds(dist: Distribution, changed: list[str]) -> list[Finding]:
    """Changed recipes whose version and build number main already has (channel_state/): their build would
    give main's file name a second content (the gate would re-test main's file, with its old tests, or
    refuse the build). As conda-forge asks: bump ``build.number``."""
    ledger = Ledger(dist.distro.state_dir)
    out = []
    for folder in changed:
        recipe = dist.recipes.get(folder)
        if recipe is None:
            continue
        outputs = recipe.outputs or []
        pairs = [(o.name, o.version, o.build_number) for o in outputs] or [(recipe.name, recipe.version, recipe.build_number or 0)]
        for name, version, number in pairs:
            state = ledger.load(name)
            same = [a for a in (state.artifacts if state else []) if a.version == version and a.build_number == number]
            if not same:
                continue
            commit = f" (promoted from commit {same[0].commit[:7]})" if same[0].commit else ""
            out.append(Finding(folder, "build-number-bump", "error",
                               f"main already has {name} {version} build {number}{commit}: this change needs a new build number",
                               recipe.path.relative_to(dist.root).as_posix(),
                               recipe.lines.get("build.number") or recipe.lines.get("build") or recipe.lines.get("package"),
                               f"set build.number to {number + 1} (or release a new version)"))
            break
    return out


def owner_conflicts(dist: Distribution, linted: list[str]) -> list[Finding]:
    """The ownership conflicts of recipes lint did not look at (a recipe the PR does not change can be in
    conflict with one it adds, or with a changed package_owners.yaml): ``package-owner`` findings naming
    the owner. A malformed package_owners.yaml is bad input (exit 2)."""
    out = []
    for c in registry_of(dist).conflicts:
        if c.recipe in linted or c.recipe not in dist.recipes:
            continue
        recipe = dist.recipes[c.recipe]
        out.append(Finding(c.recipe, PackageOwner.id, "error", c.message, recipe.path.relative_to(dist.root).as_posix(),
                           recipe.line_of("package.name"), c.hint))
    return out


def scope_shown(dist: Distribution, scope: str) -> str:
    """The scope's folder as the result shows it (relative to the root when inside it)."""
    folder = dist.distro.build_dir / SCOPES / scope
    return folder.relative_to(dist.root).as_posix() if dist.distro.build_dir.is_relative_to(dist.root) else str(folder)


def check_pr(options: CheckPrOptions, reporter: ProgressSink | None = None) -> CheckPrResult:
    if options.log_url is not None and not re.match(r"^https?://[^\s]+$", options.log_url):
        raise UsageError(f"'{options.log_url[:80]}' is not an http(s) URL", field="--log-url",
                         hint="pass the CI run's URL, e.g. https://github.com/OWNER/REPO/actions/runs/ID")
    dist = load_distribution(options.root, strict=False)
    if options.only is not None:
        dist.require([options.only])  # a recipe that is not there, or cannot be read: exit 2 naming it
    res = CheckPrResult(base=options.base, root=dist.root, only=options.only, pytorch=options.pytorch)
    res.changed_files = changed_files(dist.root, options.base, flag="--base")
    buildable = [f for f in res.changed_files if f.startswith(BUILDABLE_PREFIXES) or f in (*BUILDABLE_FILES, OWNERS_FILE)]
    if not buildable and options.only is None:
        res.nothing_buildable = True
        return res
    config_changed = any(f in BUILDABLE_FILES for f in buildable)
    res.changed = recipe_names(buildable)
    res.changed_proposals = proposal_names(dist.root, buildable)
    present = [n for n in res.changed if (dist.distro.recipes_dir / n).is_dir()]
    lint = lint_distribution(dist, LintOptions(names=tuple(present), proposals=False, strict_names=False)) if present else None
    res.lint = (lint.findings if lint else []) + unbumped_builds(dist, present) + owner_conflicts(dist, present)
    res.proposals = lint_proposals(dist, names=res.changed_proposals) if res.changed_proposals else []
    res.malformed = bool(lint and lint.malformed) or has_fatal(res.proposals)
    if res.malformed:
        return res
    if any(f.check == PackageOwner.id for f in res.lint):  # build would refuse to start: nothing is built
        res.excluded = dist.exclusions()
        return res
    # recipes that cannot be read (reported by lint when the PR changes them) and their dependents
    # are left out of the rest of the gate; the lint errors already fail it
    res.excluded = dist.exclusions()
    dist = dist.readable()
    present = [n for n in present if n in dist.recipes]
    graph = RecipeGraph.from_recipes(dist.recipes)
    res.affected = graph.order() if config_changed else graph.affected(present)
    if options.only is not None:  # NAME and the packages it depends on that the PR rebuilds
        keep = {options.only} | (graph.ancestors(options.only) & set(res.affected))
        res.affected = [n for n in graph.order() if n in keep]
    res.maintainers = {n: list(dist.recipes[n].maintainers) for n in res.affected}
    # main's evidence, for telling the PR's failures from those already present on the base (read lazily)
    res.on_base_lookup = BaseLookup(dist.root, options.base, dist.distro.state_dir, build_paths(dist).store)
    res.locations = {n: RecipeLocation(dist.recipes[n].path.relative_to(dist.root).as_posix(),
                                       dist.recipes[n].lines.get("build"), dist.recipes[n].lines.get("tests"))
                     for n in res.affected}
    res.needs_pin_update = pin_updates(dist, graph, present)
    if not options.solve:
        return res
    res.solve = solve_distribution(dist, SolveOptions(pytorch=options.pytorch)).results
    if options.build and res.affected:
        scope = scope_name(dist.root)
        built = dist
        if options.only is not None:  # a private scope, emptied first: the build and its tests run again
            scope = f"{scope}--only-{options.only}"
            keep = set(res.affected) | graph.ancestors(options.only)
            built = Distribution(dist.distro, {n: r for n, r in dist.recipes.items() if n in keep}, [], dist.settings,
                                 dist.loaded_state)
            if (dist.distro.build_dir / SCOPES / scope).is_dir():
                clear_folder(dist.distro.build_dir / SCOPES / scope)
        res.scope = scope_shown(dist, scope)
        run = run_build(built, BuildOptions(names=tuple(res.affected), jobs=options.jobs, sandbox=options.sandbox,
                                            scope=scope, pytorch=options.pytorch, reuse_shared=options.only is None),
                        reporter)
        if run.report is not None:
            res.builds, res.tests = run.report.builds, run.report.tests
        res.built = True
    return res
