"""Git questions the flows ask (gitpython): which recipes changed, who last touched a recipe."""

from __future__ import annotations

from pathlib import Path

from conda_distro.errors import GitError


def _repo(root: Path):
    import git

    try:
        return git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise GitError(f"{root} is not inside a git repository", path=root,
                       hint="--changed-since needs the distribution to be a git checkout") from None


def changed_files(root: Path, ref: str, *, flag: str = "--changed-since") -> list[str]:
    """Paths (relative to ``root``) changed between ``ref`` and the working tree, untracked included.
    ``flag`` names the option the ref came from, for the error message."""
    import git

    repo = _repo(root)
    try:
        base = repo.commit(ref)
    except (git.BadName, ValueError, git.GitCommandError):
        raise GitError(f"unknown git reference '{ref}'", field=flag,
                       hint="pass a branch, tag or commit that exists, e.g. origin/main or HEAD~1") from None
    top = Path(repo.working_tree_dir).resolve()
    names = set(repo.git.diff("--name-only", base.hexsha, "--").splitlines())
    names |= set(repo.untracked_files)
    rel_root = root.resolve().relative_to(top) if root.resolve() != top else Path()
    out = []
    for n in names:
        p = Path(n)
        try:
            out.append(p.relative_to(rel_root).as_posix() if rel_root.parts else p.as_posix())
        except ValueError:
            continue
    return sorted(out)


def recipe_names(paths: list[str]) -> list[str]:
    """Recipe folder names with any change under recipes/<name>/, from changed paths."""
    return sorted({p.split("/")[1] for p in paths if p.startswith("recipes/") and p.count("/") >= 2})


def changed_recipes(root: Path, ref: str) -> list[str]:
    """Recipe folder names with any change under recipes/<name>/ since ``ref``."""
    return recipe_names(changed_files(root, ref))


# ---------------------------------------------------------------------------------------------
# a chain of commits made without touching the index, the work tree or any ref until the end


def commit_chain(repo, base: str, commits: list[tuple[list[str], str]], author: str) -> list[str]:
    """Commit objects for ``commits`` ((paths relative to the repository's top, message), in order) on
    top of ``base``, each taking its paths' content from the work tree. Only objects are written (in a
    private index): no ref, the index and the work tree are unchanged, so a process killed here leaves
    nothing half-made. ``author`` is ``Name <email>`` (author and committer). Returns the shas in order."""
    import tempfile

    name, _, email = author.partition("<")
    with tempfile.TemporaryDirectory(prefix="conda-distro-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"),
               "GIT_AUTHOR_NAME": name.strip(), "GIT_AUTHOR_EMAIL": email.rstrip(">").strip(),
               "GIT_COMMITTER_NAME": name.strip(), "GIT_COMMITTER_EMAIL": email.rstrip(">").strip()}
        repo.git.read_tree(base, env=env)
        parent, shas = base, []
        for paths, message in commits:
            repo.git.update_index("--add", "--", *paths, env=env)
            tree = repo.git.write_tree(env=env)
            parent = repo.git.commit_tree(tree, "-p", parent, "-m", message, env=env).strip()
            shas.append(parent)
    return shas


def branch_sha(repo, branch: str) -> str | None:
    """The commit ``refs/heads/<branch>`` points at, None when there is no such branch."""
    import git

    try:
        return repo.git.rev_parse("--verify", "-q", f"refs/heads/{branch}^{{commit}}").strip() or None
    except git.GitCommandError:
        return None


def publish_branch(repo, branch: str, tip: str) -> None:
    """Create ``branch`` at ``tip`` (in one atomic ref update; an existing branch at another commit is
    an error), check it out without touching the work tree (which already holds ``tip``'s content for
    every path the branch changed), and make the index ``tip``'s tree. Safe to repeat after a kill."""
    import os

    current = branch_sha(repo, branch)
    if current is None:
        repo.git.update_ref(f"refs/heads/{branch}", tip, "")  # "": only if the branch does not exist
    elif current != tip:
        raise GitError(f"branch {branch} exists at {current[:12]}, not at the sweep's commit {tip[:12]}",
                       field="--commit", hint=f"delete it (git branch -D {branch}) and rerun the sweep")
    import git

    try:
        head = repo.git.symbolic_ref("-q", "HEAD").strip()
    except git.GitCommandError:  # a detached HEAD
        head = None
    if head != f"refs/heads/{branch}":
        repo.git.symbolic_ref("HEAD", f"refs/heads/{branch}")
    git_dir = Path(repo.git_dir)
    tmp = git_dir / "index.conda-distro.tmp"
    repo.git.read_tree(tip, env={"GIT_INDEX_FILE": str(tmp)})
    os.replace(tmp, git_dir / "index")  # atomic: never a half-written index, never a stale index.lock


def scope_name(root: Path) -> str:
    """A folder name for the checkout's current ref (check-pr's build scope): the branch name with
    anything but letters, digits, '.', '_' and '-' replaced by '-', or the commit (12 hex digits) on a
    detached HEAD; 'worktree' before the first commit."""
    import re

    repo = _repo(root)
    try:
        name = repo.active_branch.name
    except (TypeError, ValueError):  # detached HEAD
        name = None
    if name:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
        if slug:
            return slug
    try:
        return repo.head.commit.hexsha[:12]
    except ValueError:
        return "worktree"


def clear_stale_index_lock(root: Path) -> bool:
    """Remove ``.git/index.lock`` when no process has it open: what a git command killed mid-way (an
    interrupted sweep's checkout) leaves behind, and what would make every later git command fail.
    Returns True when one was removed. (Linux: open files are read from /proc.)"""
    lock = root / ".git" / "index.lock"
    if not lock.is_file():
        return False
    target = str(lock.resolve())
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            fds = list(fd_dir.iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if str(fd.readlink()) == target:
                    return False  # a live git process is using it
            except OSError:
                continue
    lock.unlink(missing_ok=True)
    return True


# ---------------------------------------------------------------------------------------------
# the small questions and ref updates the sweep needs (its branches, the committed distro.yaml)


def find_repo(root: Path):
    """The repository ``root`` is in, None when it is not in one."""
    import git

    try:
        return git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def top_dir(repo) -> Path:
    """The repository's work tree (resolved): paths given to git are relative to it."""
    return Path(repo.working_tree_dir).resolve()


def head_sha(repo) -> str | None:
    """The checked-out commit, None before the first commit."""
    return repo.head.commit.hexsha if repo.head.is_valid() else None


def current_ref(repo) -> str:
    """The checked-out branch's name, or the commit on a detached HEAD."""
    try:
        return repo.active_branch.name
    except TypeError:
        return repo.head.commit.hexsha


def show_file(repo, rev: str, path: str) -> str | None:
    """``path`` (relative to the top) as committed in ``rev``, None when it is not there."""
    import git

    try:
        return repo.git.show(f"{rev}:{path}")
    except git.GitCommandError:
        return None


def changed_paths(repo, paths: list[str]) -> list[str]:
    """``git status --porcelain`` lines of the changes (staged, unstaged, untracked) under ``paths``."""
    return [ln for ln in repo.git.status("--porcelain", "--", *paths).splitlines() if ln.strip()]


def has_staged(repo) -> bool:
    return bool(repo.git.diff("--cached", "--name-only").strip())


def branch_names(repo) -> list[str]:
    return [h.name for h in repo.heads]


def create_branch(repo, branch: str, sha: str) -> None:
    """Make ``branch`` at ``sha`` in one ref update (only if it does not exist), without checking it out."""
    repo.git.update_ref(f"refs/heads/{branch}", sha, "")


def checkout(repo, ref: str) -> None:
    repo.git.checkout(ref)
