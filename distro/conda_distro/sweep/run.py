"""The sweep, run: where the release stands (:mod:`.state`) -> plan (release day, or a late admission:
:mod:`.admit`) -> edits (all computed before anything is written, journaled) -> solve and build/test of
the affected set against the release -> statuses -> the document in ``build/sweep/pytorch-VER.json`` ->
optional git branches (``--commit``).

Everything but ``--dry-run`` runs under the repository's lock and is journaled: a rerun after a kill
rolls the interrupted sweep's edits back and sweeps again, or finishes its commits.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from conda_distro.channels.hooks import crash_point
from conda_distro.config import DistroConfig, DistroRepo
from conda_distro.distribution import Distribution, distribution_of_texts, load_distribution, open_distro
from conda_distro.errors import DistroError, GitError, UsageError
from conda_distro.graph import RecipeGraph
from conda_distro.pins import own_admitted
from conda_distro.recipe.edit import EditError
from conda_distro.recipe.model import RECIPE_FILE
from conda_distro.state.locks import Deadline, repository_lock
from conda_distro.state.provenance import recipe_digest
from conda_distro.state.sweep_journal import SweepJournal, UncommittedEdits, find_journal, journal_path, roll_back
from conda_distro.sweep.admit import plan_admission
from conda_distro.sweep.edit import add_release_text, edited_text
from conda_distro.sweep.git import (
    commit_sweep,
    finish_commits,
    open_for_commit,
    open_git,
    recover_git,
    refuse_half_made,
    require_git,
)
from conda_distro.sweep.model import (
    FAILURES,
    STATUSES,
    Outcome,
    ReleaseTest,
    SweepDocument,
    SweepOptions,
    SweepPlan,
    SweepResult,
    planned_outcomes,
)
from conda_distro.sweep.plan import check_release, is_new_minor, mark_awaiting, plan_sweep, to_test
from conda_distro.sweep.render import pr_body, tracking_issue
from conda_distro.sweep.state import ReleaseState, load_report, refuse, release_state, report_path
from conda_distro.util.fsutil import atomic_write_text, clear_stale_temps
from conda_distro.util.gitutil import Repo
from conda_distro.util.jsonio import read_json_text
from conda_distro.util.yamlio import load_fast

if TYPE_CHECKING:
    from conda_distro.engine.executor import ExecutionResult
    from conda_distro.engine.plan import BuildPlan
    from conda_distro.util.progress import ProgressSink


def sweep(options: SweepOptions) -> SweepResult:
    """`conda-distro sweep`: :func:`run_sweep` of the repository at ``options.root``, with progress unless
    it is a dry run."""
    return run_sweep(options, options.progress if not options.dry_run else None)


def run_sweep(options: SweepOptions, reporter: ProgressSink | None = None) -> SweepResult:
    """The sweep. Where the release stands (:mod:`.state`) decides what it does: release day for a release
    distro.yaml does not list, late admission (:mod:`.admit`) for one it lists, the commits of an earlier
    run's edits with ``--commit``, or a refusal (exit 2, nothing written) naming ``sweep report``.

    Everything but ``--dry-run`` runs under the repository's lock, exclusive (another sweep, a build,
    promote or retire of the same checkout is waited for, at most ``options.lock_timeout`` seconds in all
    with the staging lock its build takes, then exit 2; see :mod:`conda_distro.state.locks`), and is journaled: a
    rerun after a kill rolls the interrupted sweep's edits back and sweeps again, or finishes its commits.

    The root is named once (:func:`open_distro`) and the git repository opened once (:func:`open_git`);
    both are passed down."""
    distro = open_distro(options.root)  # (a folder without distro.yaml is refused before a malformed --pytorch)
    check_release(options.release)
    git = open_git(distro.root)
    state = release_state(distro, options.release, git)
    dist = None
    if state.journal is None:
        refuse(git, distro, state, options)  # before any lock is taken: a refusal writes nothing
        if state.state == "supported":  # (no live record of uncommitted edits: that state is "uncommitted")
            dist = load_distribution(strict=False, distro=distro)
            plan_admission(dist, options.release, options.package, load_report(distro, options.release),
                           state.branches)  # (nothing ready: exit 2 here)
    if options.dry_run:
        return _dry_run(dist or load_distribution(strict=False, distro=distro), options, state)
    budget = Deadline(options.lock_timeout) if not isinstance(options.lock_timeout, Deadline) else options.lock_timeout
    with repository_lock(distro.build_dir, distro.root, budget, shared=False):
        return _sweep_locked(distro, git, dataclasses.replace(options, lock_timeout=budget), reporter)


def _dry_run(dist: Distribution, options: SweepOptions, state: ReleaseState) -> SweepResult:
    """``--dry-run``: the frozen plan, printed; nothing is edited, built or committed."""
    unfinished = find_journal(dist.distro.build_dir)
    if unfinished is not None:
        plan = plan_sweep(dist, options.release)
        return SweepResult(plan, message=f"dry run: an interrupted sweep of pytorch {unfinished.release} "
                                         "is unfinished; a sweep would finish it first", state=state.state)
    if state.state == "uncommitted":
        return SweepResult(SweepPlan(options.release, (), noop=True), state=state.state,
                           message="dry run: a sweep with --commit would commit the edits an earlier sweep left")
    if state.state == "supported":
        plan = plan_admission(dist, options.release, options.package, load_report(dist.distro, options.release),
                              state.branches)
    else:
        plan = plan_sweep(dist, options.release)
    _check_published(dist, options.release)  # exit 2, as the real run would
    plan = dataclasses.replace(plan, dry_run=True)
    result = SweepResult(plan, message="dry run: nothing edited, built or committed", state=state.state)
    result.pr_bodies = {o.name: pr_body(o, plan.release, dry_run=True) for o in result.outcomes if o.status == "bumped"}
    result.tracking_issue = tracking_issue(plan, result)
    return result


def _clear_own_temps(distro: DistroRepo) -> None:
    """A sweep killed inside a write leaves ``.recipe.yaml.*.tmp`` (or ``.distro.yaml.*.tmp``) behind: not
    the sweep's edits (the journal rolls those back), but untracked files that ``--commit`` would take for
    uncommitted changes. Under the repository's lock no other sweep is writing them."""
    clear_stale_temps(distro.path)
    if distro.recipes_dir.is_dir():
        for folder in sorted(p for p in distro.recipes_dir.iterdir() if p.is_dir()):
            clear_stale_temps(folder / RECIPE_FILE)


def _sweep_locked(distro: DistroRepo, git: Repo | None, options: SweepOptions, reporter: ProgressSink | None) -> SweepResult:
    _clear_own_temps(distro)
    build_dir = distro.build_dir
    journal = find_journal(build_dir)
    note = None
    if journal is not None:
        if journal.release != options.release:
            raise UsageError(f"the sweep of pytorch {journal.release} was interrupted and is unfinished",
                             field="--pytorch", path=journal_path(build_dir, journal.release),
                             hint=f"finish it first: conda-distro sweep --pytorch {journal.release}"
                                  f"{' --commit' if journal.commit else ''}")
        recover_git(git, journal)  # it may have been killed inside a git command
        if journal.phase == "committing":
            return _finish_commits(distro, git, journal)
        restored = roll_back(journal, distro.root)
        journal.delete(build_dir)
        note = (f"an interrupted sweep of pytorch {journal.release} was rolled back "
                f"({len(restored)} file(s) restored) and run again")
    # read again under the lock, at the root named once: as rolled back (and as another sweep may have left it)
    dist = load_distribution(distro.root, strict=False)
    state = release_state(dist.distro, options.release, git)
    refuse(git, dist.distro, state, options)
    result = _dispatch(dist, git, state, options, reporter)
    if note:
        result.message = f"{note}; {result.message}" if result.message else note
    return result


def _dispatch(dist: Distribution, git: Repo | None, state: ReleaseState, options: SweepOptions,
              reporter: ProgressSink | None) -> SweepResult:
    """What the release's state asks for (see :func:`run_sweep`)."""
    release = options.release
    if state.state == "uncommitted":  # (refuse() let only --commit through)
        left = _left_edits(dist.distro, release, state)
        if left is not None:
            return _commit_left_edits(dist, git, options, left)
        refuse_half_made(git, dist.distro, release)
        raise UsageError(f"distro.yaml lists pytorch {release} and no record says which sweep edited it",
                         field="--commit", hint="commit the edits yourself, or discard them (git checkout -- "
                                                "distro.yaml recipes) and sweep again")
    if state.state == "supported":
        left = _left_edits(dist.distro, release, state)
        if left is not None and options.commit:
            return _commit_left_edits(dist, git, options, left)
        plan = plan_admission(dist, release, options.package, load_report(dist.distro, release), state.branches)
    else:
        plan = plan_sweep(dist, release)
    return _sweep(_Run(dist, options, reporter, plan, _prepare(dist, git, options, plan)))


# ---------------------------------------------------------------------------------------------
# one sweep, phase by phase: prepare -> edit (computed) -> journal -> write -> test -> revert -> commit
# (or record the edits) -> save. The plan is frozen; each phase that learns something returns new outcomes.


@dataclass(frozen=True)
class _Run:
    """What the phases of one sweep share."""

    dist: Distribution  # as loaded under the lock, before any edit
    options: SweepOptions
    reporter: ProgressSink | None
    plan: SweepPlan  # frozen: release day (distro.yaml gains the release) or a late admission (only recipes change)
    repo: Repo | None  # the git handle to commit with (``--commit``), else None

    @property
    def release_day(self) -> bool:
        return self.plan.mode == "release-day"

    def rel(self, path: Path) -> str:
        return path.relative_to(self.dist.root).as_posix()


@dataclass(frozen=True)
class _Edits:
    """Every file the sweep writes, computed before any is written (what the journal records)."""

    texts: dict[str, str]  # package -> its edited recipe text
    new_distro: str  # distro.yaml as the edited distribution reads it (release day: listing the release)
    originals: dict[str, str]  # path (relative to the root) -> text before the sweep
    written: dict[str, str]  # path -> the text the sweep writes
    recipe_files: dict[str, str]  # package -> the path of its recipe (relative to the root)


def _sweep(run: _Run) -> SweepResult:
    """Edit, build and test, put back what failed, then commit (``--commit``) or record the edits; save the
    report. A kill anywhere is undone or finished by the next run (the journal)."""
    edits, outcomes = _edit(run)
    journal = _journal(run, edits)
    try:
        _write(run, edits.written)
        crash_point("sweep-after-edits")
        outcomes = _test(run, edits, outcomes)
    except BaseException:  # leave the tree as it was
        _write(run, edits.originals)
        journal.delete(run.dist.distro.build_dir)
        raise
    _revert(run, edits, outcomes)
    crash_point("sweep-after-build")
    result = _commit(run, edits, outcomes, journal)
    _save(run, result, journal)
    return result


def _prepare(dist: Distribution, git: Repo | None, options: SweepOptions, plan: SweepPlan) -> Repo | None:
    """Refuse (exit 2, nothing written) what would fail later: the release not published upstream, no
    sandbox, a repository ``--commit`` cannot commit in. The git handle to commit with (``--commit``)."""
    _check_published(dist, options.release)
    if options.build:
        from conda_distro.engine.sandbox import check_sandbox

        check_sandbox(options.sandbox, dist.distro)  # fail closed before anything is edited
    if not options.commit:
        return None
    return open_for_commit(git, dist.root, options.release, packages=None if plan.mode == "release-day" else
                           [d.name for d in plan.decisions if d.status == "bumped"])


def _edit(run: _Run) -> tuple[_Edits, dict[str, Outcome]]:
    """Phase edit: every edit computed (nothing written); a pin that cannot be edited fails its package."""
    dist, release = run.dist, run.options.release
    outcomes = planned_outcomes(run.plan)
    texts: dict[str, str] = {}
    for dec in run.plan.decisions:
        if dec.status != "bumped":
            continue
        recipe = dist.recipes[dec.name]
        if outcomes[dec.name].recipe_hash is None:
            outcomes[dec.name] = dataclasses.replace(outcomes[dec.name], recipe_hash=recipe_digest(recipe.folder))
        try:
            texts[dec.name] = edited_text(recipe, dec, dist.config.pytorch.name, release)
        except EditError as exc:
            outcomes[dec.name] = outcomes[dec.name].but(
                "failed", f"the pin cannot be edited automatically: {exc} ({run.rel(recipe.path)})")
    distro_text = dist.distro.path.read_text()
    new_distro = add_release_text(dist.distro, release, distro_text) if run.release_day else distro_text
    distro_file = {run.rel(dist.distro.path): (distro_text, new_distro)} if run.release_day else {}
    recipe_files = {n: run.rel(dist.recipes[n].path) for n in texts}
    return _Edits(texts, new_distro,
                  originals={**{k: v[0] for k, v in distro_file.items()},
                             **{recipe_files[n]: dist.recipes[n].text for n in texts}},
                  written={**{k: v[1] for k, v in distro_file.items()}, **{recipe_files[n]: t for n, t in texts.items()}},
                  recipe_files=recipe_files), outcomes


def _journal(run: _Run, edits: _Edits) -> SweepJournal:
    """Phase journal (``edited``): saved before any file is written; a rerun after a kill rolls back from it."""
    journal = SweepJournal(release=run.options.release, commit=run.options.commit, originals=dict(edits.originals),
                           written=dict(edits.written))
    journal.save(run.dist.distro.build_dir)
    return journal


def _write(run: _Run, texts: dict[str, str]) -> None:
    """Phase write (and its undo): each file (relative to the root) as given."""
    for rel, text in texts.items():
        atomic_write_text(run.dist.root / rel, text)


def _test(run: _Run, edits: _Edits, outcomes: dict[str, Outcome]) -> dict[str, Outcome]:
    """Phase test: solve and build/test the distribution as written, against the release (a late admission:
    every supported release its edits newly admit)."""
    dist, options = run.dist, run.options
    edited = _edited_distribution(dist, edits.new_distro, edits.texts)
    releases: tuple[str, ...] = ()
    if not run.release_day:
        releases = newly_admitted(dist, edited, [d.name for d in run.plan.decisions if d.name in edits.texts])
    new_minor = run.release_day and is_new_minor(dist, options.release)
    return _execute(outcomes, edited, options, run.reporter, new_minor, releases or (options.release,))


def _revert(run: _Run, edits: _Edits, outcomes: dict[str, Outcome]) -> None:
    """Phase revert: every edited recipe whose package did not pass is put back."""
    for name, rel in edits.recipe_files.items():
        if outcomes[name].status != "bumped":
            atomic_write_text(run.dist.root / rel, edits.originals[rel])


def _commit(run: _Run, edits: _Edits, outcomes: dict[str, Outcome], journal: SweepJournal) -> SweepResult:
    """Phase commit (``committing``, ``--commit``): the branches; without ``--commit`` the record of the edits
    a later ``sweep --commit`` commits. The result, with where the release stands after it."""
    dist, plan = run.dist, run.plan
    result = SweepResult(plan, list(outcomes.values()))
    result.pr_bodies = {o.name: pr_body(o, plan.release) for o in result.outcomes if o.status == "bumped"}
    saved = report_path(dist.distro, plan.release)
    result.report_file = saved.relative_to(dist.root).as_posix() if saved.is_relative_to(dist.root) else str(saved)
    bumped = [o.name for o in result.outcomes if o.status == "bumped"]
    if not (run.release_day or bumped):
        result.state = "supported"
    elif run.repo is not None:
        commit_sweep(run.repo, dist.distro, {n: r.path for n, r in dist.recipes.items()}, run.options, result, journal)
        result.state = "committed" if run.release_day else "supported"
    else:  # what a later `sweep --commit` of this release commits
        kept = {rel for rel in edits.written if rel not in edits.recipe_files.values()} | \
            {edits.recipe_files[n] for n in bumped}
        UncommittedEdits(release=plan.release, originals={k: v for k, v in journal.originals.items() if k in kept},
                         written={k: v for k, v in journal.written.items() if k in kept}).save(dist.distro.build_dir)
        result.state = "uncommitted"
    result.tracking_issue = tracking_issue(plan, result)
    return result


def _save(run: _Run, result: SweepResult, journal: SweepJournal) -> None:
    """Phase save: the report, kept for `report unmaintained` and `sweep report` (open statuses are
    evidence; build/ is not versioned); then the journal goes."""
    distro = run.dist.distro
    _saved_document(distro, result).write(report_path(distro, run.plan.release))
    journal.delete(distro.build_dir)


def newly_admitted(before: Distribution, after: Distribution, names: list[str]) -> tuple[str, ...]:
    """The supported releases that the edits of ``names`` admit and their pins left out before: what a late
    admission tests them against (the release swept, and older ones of the same minor it now admits)."""
    pytorch = before.config.pytorch.name
    releases = list(before.config.pytorch.releases)
    out: set[str] = set()
    for name in names:
        out |= own_admitted(after.recipes[name], pytorch, releases) - own_admitted(before.recipes[name], pytorch, releases)
    return tuple(r for r in releases if r in out)


def _saved_document(distro: DistroRepo, result: SweepResult) -> SweepDocument:
    """What ``build/sweep/pytorch-VER.json`` keeps: a release day's report as printed; a late admission
    merged into the release's saved report (each package's newest entry, its pull-request bodies, one
    ``admissions`` entry per run), so that the file always says where every package of the release ended."""
    doc = result.document()
    if result.plan.mode == "release-day":
        return doc
    old = load_report(distro, result.plan.release)
    if old is None:
        return doc
    entries = {p.name: p for p in old.packages}
    entries.update({p.name: p for p in doc.packages})
    old.packages = [entries[n] for n in [*(p.name for p in old.packages), *(p.name for p in doc.packages
                                                                          if p.name not in {q.name for q in old.packages})]]
    old.pull_requests = {**old.pull_requests, **doc.pull_requests}
    old.admissions = [*old.admissions, {"packages": [p.name for p in doc.packages], "admitted": doc.admitted,
                                        "commits": [c.model_dump(mode="json") for c in doc.commits],
                                        "summary": doc.summary}]
    old.state, old.waiting, old.next_command, old.next_steps = doc.state, doc.waiting, doc.next_command, doc.next_steps
    old.admitted = [*old.admitted, *(n for n in doc.admitted if n not in old.admitted)]
    old.ok = all(p.status not in FAILURES for p in old.packages)
    old.summary = {st: n for st in STATUSES if (n := sum(p.status == st for p in old.packages))}
    return old


def _edited_distribution(dist: Distribution, distro_text: str, new_texts: dict[str, str]) -> Distribution:
    """The distribution as the sweep wrote it (distro.yaml listing the release, the edited recipes),
    made from the texts it wrote rather than read back from disk; the readable part of it."""
    distro = DistroRepo(DistroConfig.model_validate(load_fast(distro_text, path=dist.distro.path)), dist.root)
    texts = [(new_texts.get(folder, recipe.text), recipe.path) for folder, recipe in dist.recipes.items()]
    return distribution_of_texts(distro, texts, list(dist.errors)).readable()


def _execute(outcomes: dict[str, Outcome], dist: Distribution, options: SweepOptions, reporter: ProgressSink | None,
             new_minor: bool, releases: tuple[str, ...]) -> dict[str, Outcome]:
    """Solve and build/test the edited distribution against ``releases``: the outcomes after it
    (not-solvable / failed / awaiting-parents / awaiting-upstream)."""
    from conda_distro.engine.run import BuildOptions, run_build
    from conda_distro.solve import SolveOptions, solve_distribution

    graph = RecipeGraph.from_recipes(dist.recipes)
    folders = {rec.name: f for f, rec in dist.recipes.items()}
    outcomes = dict(outcomes)
    solve = solve_distribution(dist, SolveOptions(pytorch=releases))
    for r in solve.results:  # not solvable with the new release: pins that clash once it is admitted
        for name in r.conflicting:
            folder = folders.get(name, name)
            if folder in outcomes and outcomes[folder].status in ("bumped", "unchanged"):
                outcomes[folder] = outcomes[folder].but("not-solvable", (r.conflict or "").splitlines()[0])
    outcomes = mark_awaiting(outcomes, graph)
    if options.build:
        names = to_test(outcomes.values(), graph, new_minor)
        if names:
            run = (options.execute or run_build)(dist, BuildOptions(
                names=tuple(names), pytorch=releases, jobs=options.jobs, sandbox=options.sandbox,
                lock_timeout=options.lock_timeout, holds_repository_lock=True), reporter)
            outcomes = mark_awaiting(_apply_results(outcomes, run.report, set(names), releases, run.plan), graph)
    return outcomes


def _apply_results(outcomes: dict[str, Outcome], report: ExecutionResult | None, tested: set[str],
                   releases: tuple[str, ...] | str, build_plan: BuildPlan | None = None) -> dict[str, Outcome]:
    """The sweep's outcomes after the build of the packages ``tested`` against ``releases`` (the release
    swept; a late admission: every release its edits newly admit)."""
    if report is None:
        return outcomes
    releases = (releases,) if isinstance(releases, str) else releases
    release = releases[-1]
    # targets of the release the build could not test for a package (upstream lacks pytorch or a
    # lockstep build of them): a bump with no test of the release at all would be admitted untested
    untestable = {p.name: [why for t, why in p.unavailable if t.release in releases]
                  for p in (build_plan.packages if build_plan is not None else ())}
    by_name: dict[str, list] = {}
    for t in report.tests:
        if t.pytorch in releases:
            by_name.setdefault(t.name, []).append(t)
    builds: dict[str, list] = {}
    for b in report.builds:
        builds.setdefault(b.name, []).append(b)
    out = dict(outcomes)
    for name, o in outcomes.items():
        if name not in tested or o.status not in ("bumped", "unchanged"):
            continue
        tests = by_name.get(name, [])
        o = dataclasses.replace(o, tests=[ReleaseTest(pytorch=t.pytorch, variant=t.variant, status=t.status,
                                                      reason=t.reason or None, gpu=getattr(t, "gpu", None))
                                                      for t in tests])
        failed_build = next((b for b in builds.get(name, []) if b.status in ("failed", "error")), None)
        blocked_build = next((b for b in builds.get(name, []) if b.status == "blocked"), None)
        bad = [t for t in tests if t.status == "failed"]
        blocked = [t for t in tests if t.status == "blocked"]
        if failed_build is not None:
            o = o.but("failed", f"build failed: {failed_build.reason}", log=_excerpt(failed_build.log))
        elif bad:
            t = bad[0]
            o = o.but("failed", f"test failed on pytorch {t.pytorch} ({t.variant}): {t.reason}", log=_excerpt(t.log))
        elif blocked_build is not None or blocked:
            o = o.but("awaiting-parents",
                      (blocked_build.reason if blocked_build is not None else blocked[0].reason) or "a dependency failed")
        elif o.status == "bumped" and not tests and untestable.get(name):
            o = o.but("awaiting-upstream", f"not tested against pytorch {release}: {untestable[name][0]}; its pins stay "
                                           "as they are until upstream has it (then sweep again)")
        out[name] = o
    return out


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


def _check_published(dist: Distribution, release: str) -> None:
    """When every upstream channel is a readable local folder, the release must be in one of them."""
    from conda_distro.channels.upstream_index import UpstreamIndex

    index = UpstreamIndex.load(dist.distro)
    pytorch = dist.config.pytorch.name
    if index.complete and release not in index.versions.get(pytorch, set()):
        have = sorted(index.versions.get(pytorch, set()), key=lambda v: [int(x) if x.isdigit() else 0 for x in v.split(".")])
        raise UsageError(f"{pytorch} {release} is not in the upstream channels "
                         f"({', '.join(dist.config.channels.upstream)}; they have {', '.join(have) or 'none'})",
                         field="--pytorch", hint="sweep once the release is published upstream")


# ---------------------------------------------------------------------------------------------
# reruns: a finished sweep, the edits of a sweep without --commit, a sweep killed while committing


def _left_edits(distro: DistroRepo, release: str, state: ReleaseState) -> UncommittedEdits | None:
    """The edits an earlier sweep of ``release`` without --commit left, when they are still to be committed
    (:func:`~conda_distro.sweep.state.release_state` found the record live); a stale record is removed."""
    if state.uncommitted is not None:
        return state.uncommitted
    left = UncommittedEdits.load(distro.build_dir, release)
    if left is not None:  # committed some other way since, or discarded
        left.delete(distro.build_dir)
    return None


def _commit_left_edits(dist: Distribution, git: Repo | None, options: SweepOptions, left: UncommittedEdits) -> SweepResult:
    """``sweep --commit`` after a sweep without it: commit what that sweep left (its report says which
    packages were bumped), on the same branches a ``--commit`` run makes, then return to the starting branch."""
    changed = left.changed_since(dist.root)
    if changed:
        raise GitError(f"{', '.join(changed)} changed after the sweep of pytorch {left.release} edited it",
                       field="--commit", hint="commit the edits yourself, or discard them "
                                              "(git checkout -- distro.yaml recipes) and sweep again with --commit")
    saved = report_path(dist.distro, left.release)
    try:
        doc = SweepDocument.model_validate_json(read_json_text(saved, "sweep"))
    except (OSError, ValueError) as exc:
        raise DistroError(f"the report of the earlier sweep cannot be read: {exc}", path=saved,
                          hint="discard the edits (git checkout -- distro.yaml recipes) and sweep again with --commit") from None
    result = doc.result()
    result.plan = dataclasses.replace(result.plan, noop=False)
    release_day = result.plan.mode == "release-day"
    if not release_day:  # the merged report: commit the packages whose edits are in the work tree
        edited = {Path(rel).parent.name for rel in left.written}
        result.plan = dataclasses.replace(result.plan, decisions=tuple(d for d in result.plan.decisions if d.name in edited))
        result.outcomes = [o for o in result.outcomes if o.name in edited]
        result.pr_bodies = {n: pr for n, pr in result.pr_bodies.items() if n in edited}
    bumped = [o.name for o in result.outcomes if o.status == "bumped"]
    repo = open_for_commit(git, dist.root, left.release, dirty_ok=True, packages=None if release_day else bumped)
    journal = SweepJournal(release=left.release, commit=True, originals=left.originals, written=left.written)
    commit_sweep(repo, dist.distro, {n: r.path for n, r in dist.recipes.items()}, options, result, journal)
    result.tracking_issue = tracking_issue(result.plan, result)
    where = f"branch {result.branch}" if result.branch else f"{len(result.pr_bodies)} package branch(es)"
    result.message = (f"committed the edits of the earlier sweep of pytorch {left.release}: {where}, "
                      f"{len(result.commits)} commit(s); back on {result.start}")
    result.state = "committed" if release_day else "supported"
    _saved_document(dist.distro, result).write(saved)
    journal.delete(dist.distro.build_dir)
    left.delete(dist.distro.build_dir)
    return result


def _finish_commits(distro: DistroRepo, git: Repo | None, journal: SweepJournal) -> SweepResult:
    """A rerun after a kill while the sweep made its branches: the commits exist (as objects); make
    what is not made yet (:func:`~conda_distro.sweep.git.finish_commits`) and report what the interrupted
    sweep found. Each file it edited must hold the sweep's text or the original (or be missing: an older
    version's interrupted checkout), else someone changed it since: exit 2, nothing written."""
    root = distro.root
    repo = require_git(git, root, hint="run the sweep in the checkout it was started in")
    for rel, text in journal.written.items():
        path = root / rel
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current not in (text, journal.originals.get(rel), None):
            raise GitError(f"{rel} was changed after the sweep of pytorch {journal.release} was interrupted",
                           path=path, hint=f"the branch {journal.branch} is made from the commits already recorded: "
                                           f"keep a copy of your change, git checkout -- {rel}, and rerun the sweep")
    result = SweepDocument.model_validate(journal.result).result()
    result.branch, result.start = journal.branch, journal.start
    finish_commits(repo, root, result, journal)
    where = f"branch {journal.branch}" if journal.branch else f"{len(result.pr_bodies)} package branch(es)"
    result.message = (f"finished the commits of the interrupted sweep of pytorch {journal.release}: "
                      f"{where}, {len(result.commits)} commit(s)" + (f"; back on {result.start}" if result.start else ""))
    result.state = "committed" if result.plan.mode == "release-day" else "supported"
    _saved_document(distro, result).write(report_path(distro, journal.release))
    journal.delete(distro.build_dir)
    return result
