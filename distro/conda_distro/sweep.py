"""Release-day sweep (spec §7): admit a new PyTorch release across the distribution.

Plan (pure data, ``--dry-run`` prints it) -> edits (ruamel round trip: only the pin and build-number
values change) -> build/test of the affected set -> statuses -> optional git branch with one
commit per bumped package, PR bodies and a tracking-issue body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conda_distro.config import DISTRO_FILE, Distro, load_config
from conda_distro.distribution import Distribution, load_distribution
from conda_distro.errors import GitError, UsageError
from conda_distro.graph import RecipeGraph
from conda_distro.recipe import Recipe
from conda_distro.specs import admits, minor_of, next_minor_bound
from conda_distro.yamlio import atomic_write_text, dump_roundtrip, load_roundtrip

RELEASE_RE = re.compile(r"^\d+\.\d+\.\d+$")
STATUSES = ("unchanged", "bumped", "needs-new-version", "failed", "awaiting-parents", "not-solvable")


@dataclass(frozen=True)
class PinEdit:
    old: str  # the requirement text as written
    new: str
    line: int


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

    def to_dict(self) -> dict:
        return {
            "name": self.name, "status": self.status, "old_pin": self.old_pin, "new_pin": self.new_pin,
            "maintainers": self.maintainers, "old_build": self.old_build, "new_build": self.new_build,
            "reason": self.reason, "log": self.log, "tests": self.tests,
        }


@dataclass
class SweepPlan:
    release: str
    decisions: list[Decision]
    noop: bool = False  # the release is already supported

    def get(self, name: str) -> Decision:
        return next(d for d in self.decisions if d.name == name)

    def to_dict(self) -> dict:
        return {"release": self.release, "noop": self.noop, "packages": [d.to_dict() for d in self.decisions]}


@dataclass(frozen=True)
class SweepOptions:
    release: str
    commit: bool = False
    dry_run: bool = False
    build: bool = True
    jobs: int = 1
    author: str = "conda-distro bot <bot@conda-distro.invalid>"


@dataclass
class SweepResult:
    plan: SweepPlan
    branch: str | None = None
    commits: list[dict] = field(default_factory=list)
    pr_bodies: dict[str, dict] = field(default_factory=dict)
    tracking_issue: str | None = None
    message: str | None = None

    def to_dict(self) -> dict:
        return {**self.plan.to_dict(), "branch": self.branch, "commits": self.commits,
                "pull_requests": self.pr_bodies, "tracking_issue": self.tracking_issue, "message": self.message}


# ---------------------------------------------------------------------------------------------
# planning


def widen(version: str, release: str) -> str:
    """Replace the upper bound of a version spec with the next minor after ``release``.
    ``>=2.4,<2.7`` -> ``>=2.4,<2.8``; ``>=2.4,<2.7.0a0`` -> ``>=2.4,<2.8.0a0``; ``2.5.*`` -> ``>=2.5,<2.8``."""
    bound = next_minor_bound(release)
    parts = version.split(",")
    out, replaced = [], False
    for p in parts:
        m = re.fullmatch(r"\s*<(=?)\s*(\d+(?:\.\d+)*)(\.0a0|a0)?\s*", p)
        if m and not replaced:
            out.append(f"<{bound}{m.group(3) or ''}")
            replaced = True
        else:
            out.append(p.strip())
    if replaced:
        return ",".join(out)
    m = re.fullmatch(r"\s*=?=?(\d+\.\d+)(\.\*|\.\d+\.\*)?\s*", version)
    floor = m.group(1) if m else None
    return f">={floor},<{bound}" if floor else f"{version},<{bound}"


def _pytorch_deps(recipe: Recipe, pytorch: str):
    return [d for d in recipe.deps("host", "run") if d.name == pytorch]


def decide(recipe: Recipe, pytorch: str, release: str) -> Decision | None:
    deps = _pytorch_deps(recipe, pytorch)
    if not deps:
        return None
    versioned = [d for d in deps if d.spec is not None and d.spec.ok and d.version]
    run_pin = next((d for d in versioned if d.section == "run"), versioned[0] if versioned else None)
    dec = Decision(recipe.folder.name, "unchanged", list(recipe.maintainers),
                   old_pin=run_pin.raw if run_pin else None, new_pin=run_pin.raw if run_pin else None,
                   old_build=recipe.build_number, new_build=recipe.build_number)
    if all(admits(d.version, release) for d in versioned):
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
            dec.edits.append(PinEdit(d.raw, f"{d.name} {widen(d.version, release)}", d.line))
    if run_pin is not None:
        dec.new_pin = next((e.new for e in dec.edits if e.old == run_pin.raw), run_pin.raw)
    dec.new_build = (recipe.build_number or 0) + 1
    return dec


def plan_sweep(dist: Distribution, release: str) -> SweepPlan:
    if not RELEASE_RE.match(release):
        raise UsageError(f"'{release}' is not a release version like 2.7.0", field="--pytorch",
                         hint="pass the full MAJOR.MINOR.PATCH version that was published")
    dist.raise_errors()
    if release in dist.config.pytorch.releases:
        return SweepPlan(release, [], noop=True)
    pytorch = dist.config.pytorch.name
    graph = RecipeGraph.from_recipes(dist.recipes)
    decisions: list[Decision] = []
    for name in graph.order():
        dec = decide(dist.recipes[name], pytorch, release)
        if dec is None and graph.ancestors(name) & {d.name for d in decisions}:
            recipe = dist.recipes[name]  # depends on pytorch only through distribution packages
            dec = Decision(name, "unchanged", list(recipe.maintainers), old_build=recipe.build_number,
                           new_build=recipe.build_number)
        if dec is not None:
            decisions.append(dec)
    return SweepPlan(release, decisions)


# ---------------------------------------------------------------------------------------------
# edits (ruamel round trip: only the edited values change)


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


def _bump_build_number(doc: Any, path: Path) -> None:
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
    raise UsageError("cannot find a build number to increment", path=path, field="build.number",
                     hint="write build: {number: N} (or number: ${{ build_number }} with build_number in context:)")


def edited_text(recipe: Recipe, dec: Decision) -> str:
    doc, y = recipe.roundtrip()
    reqs = doc.get("requirements")
    for e in dec.edits:
        if _replace_strings(reqs, e.old, e.new) == 0:
            raise UsageError(f"cannot find '{e.old}' to edit", path=recipe.path, line=e.line, field="requirements")
    _bump_build_number(doc, recipe.path)
    return dump_roundtrip(doc, y)


def add_release_text(distro: Distro, release: str) -> str:
    from rattler import Version

    text = distro.path.read_text()
    doc, y = load_roundtrip(text, path=distro.path)
    releases = doc["pytorch"]["releases"]
    style = type(releases[0]) if releases else str
    pos = sum(Version(str(r)) < Version(release) for r in releases)
    releases.insert(pos, style(release) if style is not str else release)
    return dump_roundtrip(doc, y)


# ---------------------------------------------------------------------------------------------
# execution


def _excerpt(log: str | None, lines: int = 15) -> str | None:
    if not log or not Path(log).is_file():
        return None
    tail = Path(log).read_text(errors="replace").splitlines()[-lines:]
    return "\n".join(tail)


def _check_git_clean(root: Path) -> Any:
    import git

    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise GitError(f"{root} is not a git repository", field="--commit", hint="run the sweep in a git checkout") from None
    dirty = [p for p in repo.git.status("--porcelain", "--", "recipes", DISTRO_FILE).splitlines() if p.strip()]
    if dirty:
        raise GitError("recipes/ or distro.yaml have uncommitted changes", field="--commit",
                       hint="commit or stash them first: the sweep makes one commit per package")
    return repo


def run_sweep(root: Path | None, options: SweepOptions, reporter=None) -> SweepResult:
    from conda_distro.engine.run import BuildOptions, run_build
    from conda_distro.solve import SolveOptions, solve_distribution

    dist = load_distribution(root)
    plan = plan_sweep(dist, options.release)
    if plan.noop:
        return SweepResult(plan, message=f"pytorch {options.release} is already a supported release: nothing to do")
    if options.dry_run:
        return SweepResult(plan, message="dry run: nothing edited, built or committed")
    repo = _check_git_clean(dist.root) if options.commit else None
    bumped = [d for d in plan.decisions if d.status == "bumped"]
    originals = {d.name: dist.recipes[d.name].path.read_text() for d in bumped}
    new_texts = {d.name: edited_text(dist.recipes[d.name], d) for d in bumped}  # all edits computed before writing
    distro_text = dist.distro.path.read_text()
    atomic_write_text(dist.distro.path, add_release_text(dist.distro, options.release))
    for name, text in new_texts.items():
        atomic_write_text(dist.recipes[name].path, text)

    dist = load_distribution(dist.root)
    graph = RecipeGraph.from_recipes(dist.recipes)
    failed: set[str] = set()
    # not solvable with the new release: pins that clash once it is admitted
    solve = solve_distribution(dist, SolveOptions(pytorch=(options.release,)))
    for r in solve.results:
        for name in r.conflicting:
            folder = next((f for f, rec in dist.recipes.items() if rec.name == name), name)
            if folder in {d.name for d in plan.decisions}:
                dec = plan.get(folder)
                dec.status, dec.reason = "not-solvable", (r.conflict or "").splitlines()[0]
                failed.add(folder)
    if options.build:
        to_build = [d.name for d in plan.decisions if d.status in ("bumped", "unchanged")]
        run = run_build(dist, BuildOptions(names=tuple(to_build), jobs=options.jobs), reporter)
        _apply_results(plan, run.report, failed)
    for dec in plan.decisions:  # dependents of failures wait for their parents
        if dec.status in ("bumped", "unchanged") and graph.ancestors(dec.name) & failed:
            parents = sorted(graph.ancestors(dec.name) & failed)
            dec.status, dec.reason = "awaiting-parents", f"waits for {', '.join(parents)}"
    for dec in plan.decisions:  # revert what did not pass
        if dec.name in originals and dec.status != "bumped":
            atomic_write_text(dist.recipes[dec.name].path, originals[dec.name])
    result = SweepResult(plan)
    result.pr_bodies = {d.name: pr_body(d, plan.release) for d in plan.decisions if d.status == "bumped"}
    result.tracking_issue = tracking_issue(plan)
    if repo is not None:
        _commit(repo, dist, plan, options, result, distro_text)
    return result


def _apply_results(plan: SweepPlan, report, failed: set[str]) -> None:
    if report is None:
        return
    by_name: dict[str, list] = {}
    for t in report.tests:
        by_name.setdefault(t.name, []).append(t)
    builds = {b.name: b for b in report.builds}
    for dec in plan.decisions:
        if dec.status not in ("bumped", "unchanged"):
            continue
        tests = by_name.get(dec.name, [])
        dec.tests = [{"pytorch": t.pytorch, "variant": t.variant, "status": t.status} for t in tests]
        b = builds.get(dec.name)
        bad = sorted((t for t in tests if t.status == "failed"), key=lambda t: t.pytorch != plan.release)
        if b is not None and b.status == "failed":
            dec.status, dec.reason, dec.log = "failed", f"build failed: {b.reason}", _excerpt(b.log)
        elif bad:
            t = bad[0]
            dec.status = "failed"
            dec.reason = f"test failed on pytorch {t.pytorch} ({t.variant}): {t.reason}"
            dec.log = _excerpt(t.log)
        if dec.status == "failed":
            failed.add(dec.name)


def _commit(repo, dist: Distribution, plan: SweepPlan, options: SweepOptions, result: SweepResult, _old: str) -> None:
    import git

    name, _, email = options.author.partition("<")
    actor = git.Actor(name.strip(), email.rstrip(">").strip())
    branch = f"sweep/pytorch-{plan.release}"
    if branch in [h.name for h in repo.heads]:
        raise GitError(f"branch {branch} already exists", field="--commit", hint=f"delete it (git branch -D {branch}) and rerun")
    repo.git.checkout("-b", branch)
    top = Path(repo.working_tree_dir)

    def commit(paths: list[Path], message: str, package: str | None) -> None:
        repo.index.add([str(p.resolve().relative_to(top)) for p in paths])
        c = repo.index.commit(message, author=actor, committer=actor)
        result.commits.append({"package": package, "sha": c.hexsha, "message": message.splitlines()[0]})

    commit([dist.distro.path], f"Add pytorch {plan.release} to the supported releases", None)
    for dec in plan.decisions:
        if dec.status == "bumped":
            commit([dist.recipes[dec.name].path],
                   f"{dec.name}: admit pytorch {'.'.join(map(str, minor_of(plan.release)))} "
                   f"({dec.old_pin} -> {dec.new_pin}, build {dec.new_build})", dec.name)
    result.branch = branch


# ---------------------------------------------------------------------------------------------
# reports


def _mentions(handles: list[str]) -> str:
    return " ".join(f"@{h}" for h in handles) or "(no maintainers listed)"


def pr_body(dec: Decision, release: str) -> dict:
    rows = "\n".join(f"| {t['pytorch']} | {t['variant']} | {t['status']} |" for t in dec.tests) or "| – | – | not built |"
    body = (
        f"Admits pytorch {release} in `{dec.name}`.\n\n"
        f"- pin: `{dec.old_pin}` → `{dec.new_pin}`\n"
        f"- build number: {dec.old_build} → {dec.new_build}\n\n"
        f"| pytorch | variant | result |\n|---|---|---|\n{rows}\n\n"
        f"Maintainers: {_mentions(dec.maintainers)}: please review and merge.\n"
    )
    return {"title": f"{dec.name}: admit pytorch {release}", "body": body}


def tracking_issue(plan: SweepPlan) -> str:
    lines = [f"# PyTorch {plan.release} release sweep", "", "| package | status | pin | maintainers | note |", "|---|---|---|---|---|"]
    for d in plan.decisions:
        pin = f"`{d.old_pin}` → `{d.new_pin}`" if d.old_pin != d.new_pin else (f"`{d.old_pin}`" if d.old_pin else "–")
        note = (d.reason or "").replace("|", "\\|").splitlines()[0] if d.reason else ""
        ping = _mentions(d.maintainers) if d.status in ("failed", "needs-new-version", "not-solvable") else ", ".join(d.maintainers)
        lines.append(f"| {d.name} | {d.status} | {pin} | {ping} | {note} |")
    for d in plan.decisions:
        if d.status == "failed" and d.log:
            lines += ["", f"<details><summary>{d.name}: failing log</summary>", "", "```", d.log, "```", "</details>"]
    return "\n".join(lines) + "\n"


__all__ = ["SweepOptions", "SweepPlan", "SweepResult", "plan_sweep", "run_sweep", "widen", "load_config"]
