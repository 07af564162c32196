"""The sweep's git work (through :mod:`conda_distro.util.gitutil`): the refusals before ``--commit``
writes anything, the branch ``sweep/pytorch-VER`` with one commit per bumped package, one branch per
bumped package, and the questions a rerun asks (is the release committed, is the branch where the
report says).

``--commit`` never checks a branch out: the commits are made as objects (private index), the journal
records them (phase ``committing``), then each branch is created by one ref update and the edited files
are put back as they were before the sweep (from the journal): HEAD and the index never move, so a kill
at any moment leaves either nothing or a state that :func:`finish_commits` completes (every step checks
before it acts)."""

from __future__ import annotations

from pathlib import Path

from conda_distro.channels.hooks import crash_point
from conda_distro.config import DISTRO_FILE, DistroRepo
from conda_distro.errors import DistroError, GitError
from conda_distro.recipe.specs import minor_of
from conda_distro.state.sweep_journal import SweepJournal
from conda_distro.sweep.model import SweepCommit, SweepOptions, SweepPlan, SweepResult
from conda_distro.util.fsutil import atomic_write_text
from conda_distro.util.gitutil import (
    Repo,
    branch_sha,
    branches_named,
    changed_paths,
    clear_stale_locks,
    commit_chain,
    create_branch,
    current_ref,
    find_repo,
    has_staged_changes,
    head_sha,
    open_repo,
    private_index,
    return_to,
    show_file,
    top_dir,
)
from conda_distro.util.yamlio import load_fast


def sweep_branch(release: str) -> str:
    return f"sweep/pytorch-{release}"


def package_branch(release: str, package: str) -> str:
    return f"sweep/pytorch-{release}-{package}"


def open_for_commit(root: Path, release: str, dirty_ok: bool = False, packages: list[str] | None = None) -> Repo:
    """The git repository for ``--commit``, refusing (nothing written yet) when recipes/ or distro.yaml
    have uncommitted changes (unless ``dirty_ok``: they are the edits being committed), something is
    staged, or a sweep branch of the release exists (``packages``, a late admission: a branch of one of
    these packages; the release day's branches may still be there)."""
    repo = open_repo(root, field="--commit", hint="run the sweep in a git checkout")
    if head_sha(repo) is None:
        raise GitError("the repository has no commit yet", field="--commit", hint="commit the distribution first")
    rel = root.resolve().relative_to(top_dir(repo))
    if changed_paths(repo, (rel / "recipes").as_posix(), (rel / DISTRO_FILE).as_posix()) and not dirty_ok:
        raise GitError("recipes/ or distro.yaml have uncommitted changes", field="--commit",
                       hint="commit or stash them first: the sweep makes one commit per package")
    if has_staged_changes(repo):
        raise GitError("the git index holds staged changes", field="--commit",
                       hint="commit or unstage them first: they would end up in the sweep's commits")
    branch = sweep_branch(release)
    taken = branches_named(repo, branch) if packages is None else \
        [b for p in packages for b in branches_named(repo, package_branch(release, p)) if b == package_branch(release, p)]
    if taken:
        raise GitError(f"branch {taken[0]} already exists", field="--commit",
                       hint=f"delete it (git branch -D {' '.join(taken)}) and rerun")
    return repo


def committed_releases(distro: DistroRepo) -> list[str] | None:
    """The releases distro.yaml lists in the checked-out commit; None when that cannot be read (no
    repository, no commit, no such file, not a distro.yaml)."""
    repo = find_repo(distro.root)
    if repo is None or head_sha(repo) is None:
        return None
    try:
        text: str | None = show_file(repo, "HEAD", distro.path.resolve().relative_to(top_dir(repo)).as_posix())
    except GitError:
        text = None
    if text is None:
        return None
    try:
        return [str(r) for r in load_fast(text)["pytorch"]["releases"]]
    except (ValueError, KeyError, TypeError, DistroError):
        return None


def branch_is_at(root: Path, branch: str | None, tip: str | None) -> bool:
    """Does ``branch`` exist and point at ``tip``?"""
    repo = find_repo(root)
    return bool(repo is not None and branch and tip and branch_sha(repo, branch) == tip)


def refuse_half_made(distro: DistroRepo, release: str) -> None:
    """``--commit`` on a release distro.yaml already lists, with no journal: exit 2 (with what to do)
    rather than "nothing to do" when the release is not committed, or the sweep branch is checked
    out with uncommitted recipe edits (what an interrupted older sweep left)."""
    repo = find_repo(distro.root)
    if repo is None or head_sha(repo) is None:
        return
    top = top_dir(repo)
    rel = distro.path.resolve().relative_to(top).as_posix()
    recipes = distro.recipes_dir.resolve().relative_to(top).as_posix()
    releases = committed_releases(distro) or []
    dirty = [ln[3:] for ln in changed_paths(repo, recipes, rel)]
    if release not in releases:
        raise GitError(f"distro.yaml lists pytorch {release}, but the checked-out commit does not: the edits of an "
                       f"interrupted sweep are not committed ({len(dirty)} file(s) changed)", field="--commit",
                       hint=f"discard them (git checkout -- {rel} {recipes}) and rerun the sweep, "
                            "or commit them yourself")
    branch = sweep_branch(release)
    if dirty and not repo.head.is_detached and repo.active_branch.name == branch:
        raise GitError(f"branch {branch} is checked out with {len(dirty)} uncommitted change(s) under "
                       f"{recipes}/ or {rel}: an interrupted sweep", field="--commit",
                       hint=f"discard them (git checkout -- {recipes} {rel}), switch back (git checkout -), "
                            f"delete the branch (git branch -D {branch}) and rerun the sweep")


def commit_sweep(repo: Repo, distro: DistroRepo, recipe_paths: dict[str, Path], plan: SweepPlan, options: SweepOptions,
                 result: SweepResult, journal: SweepJournal) -> None:
    """Release day: the branch sweep/pytorch-VER, one commit for distro.yaml, then one per bumped package,
    and a branch sweep/pytorch-VER-NAME per bumped package (the release commit and that package's). A late
    admission (distro.yaml lists the release already): only the package branches, each one commit on the
    checked-out commit. The commit objects are made first (nothing else changes), the journal records
    them, then the branches are created, each in a single ref update, and the work tree is put back:
    :func:`finish_commits`. ``recipe_paths``: each bumped package's recipe file."""
    release_day = plan.mode == "release-day"
    branch = sweep_branch(plan.release)
    top = top_dir(repo)
    rel = lambda p: p.resolve().relative_to(top).as_posix()  # noqa: E731
    planned: list[tuple[list[str], str, str | None]] = [
        ([rel(distro.path)], f"Add pytorch {plan.release} to the supported releases", None)] if release_day else []
    for dec in plan.decisions:
        if dec.status == "bumped":
            planned.append(([rel(recipe_paths[dec.name])],
                            f"{dec.name}: admit pytorch {'.'.join(map(str, minor_of(plan.release)))} "
                            f"({dec.old_pin} -> {dec.new_pin}, build {dec.new_build})", dec.name))
    base = head_sha(repo)
    assert base is not None  # open_for_commit refused a repository without commits
    crash_point("sweep-before-commits")
    if release_day:
        shas = commit_chain(repo, base, [(paths, message) for paths, message, _ in planned], options.author)
        result.commits = [SweepCommit(package=package, sha=sha, message=message.splitlines()[0])
                          for (_, message, package), sha in zip(planned, shas, strict=True)]
    # one branch per bumped package (one pull request each, as autotick opens them): the release commit
    # (release day) and that package's commit
    for (paths, message, package) in planned[1 if release_day else 0:]:
        [sha] = commit_chain(repo, shas[0] if release_day else base, [(paths, message)], options.author)
        assert package is not None
        result.pr_bodies.setdefault(package, {}).update(branch=package_branch(plan.release, package), sha=sha)
        if not release_day:
            result.commits.append(SweepCommit(package=package, sha=sha, message=message.splitlines()[0]))
            shas = [c.sha for c in result.commits]
    result.branch = branch if release_day else None
    result.start = current_ref(repo)
    journal.phase, journal.branch, journal.base, journal.tip = "committing", result.branch, base, shas[-1]
    journal.start = result.start
    journal.result = result.to_dict()
    journal.save(distro.build_dir)
    crash_point("sweep-after-commit-objects")
    finish_commits(repo, distro.root, result, journal)


def finish_commits(repo: Repo, root: Path, result: SweepResult, journal: SweepJournal) -> None:
    """From recorded commit objects to the finished state, each step done only when it is not done yet
    (a rerun after a kill anywhere in here runs it again): the sweep branch at the journal's tip, the
    per-package branches, the branch the sweep started from still checked out (an older version
    switched branches; a rerun of its journal switches back) and the files the sweep edited as they were
    before it (the edits are on the branches, the work tree is as it was)."""
    assert journal.tip is not None
    if result.branch is not None:  # (a late admission makes package branches only)
        create_branch(repo, result.branch, journal.tip)
    crash_point("sweep-after-branch")
    for pr in result.pr_bodies.values():
        if pr.get("branch") and pr.get("sha"):
            create_branch(repo, pr["branch"], pr["sha"])
    crash_point("sweep-after-package-branches")
    top = top_dir(repo)
    paths = [(root / rel).resolve().relative_to(top).as_posix() for rel in journal.originals]
    if result.start:
        return_to(repo, result.start, paths)
    for rel, text in journal.originals.items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            atomic_write_text(path, text)
    crash_point("sweep-after-restore")


def stale_git_locks(repo: Repo, journal: SweepJournal) -> list[Path]:
    """The lock files an interrupted sweep's git commands can have left, that exist: its branches' ref
    locks (``refs/heads/sweep/pytorch-VER[-NAME].lock``), its private index and that index's lock, and,
    when it was interrupted while committing, ``index.lock`` and ``HEAD.lock`` (an older version switched
    branches then). See :func:`conda_distro.util.gitutil.clear_stale_locks` for when they are removed."""
    git_dir = Path(repo.git_dir)
    heads = git_dir / "refs" / "heads"
    branch = sweep_branch(journal.release)
    found = [heads / f"{branch}.lock", *heads.glob(f"{branch}-*.lock")]
    index = private_index(repo)
    found += [index, Path(f"{index}.lock")]
    if journal.phase == "committing":
        found += [git_dir / "index.lock", git_dir / "HEAD.lock"]
    return [p for p in found if p.exists()]


def recover_git(root: Path, journal: SweepJournal) -> list[Path]:
    """Before a rerun finishes or rolls back an interrupted sweep: remove the git lock files it left
    (waiting for, or refusing with exit 2 over, a git command still running in the repository)."""
    repo = find_repo(root)
    if repo is None:
        return []
    return clear_stale_locks(repo, stale_git_locks(repo, journal))


def find_sweep_repo(root: Path) -> Repo:
    """The repository of a sweep that was interrupted while committing (it has one)."""
    return open_repo(root, hint="run the sweep in the checkout it was started in")
