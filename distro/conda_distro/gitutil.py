"""Every git access of the package (gitpython): which recipes changed, the checkout's commit and
state, a file's history, commit chains and branches (sweep), a new repository (sandbox).

Functions taking ``root`` open the repository that holds it; those taking ``repo`` work on an open one
(:func:`open_repo`, :func:`find_repo`). Questions whose answer is "unknown" outside git (no repository,
no commit, no git binary) return None or an empty result; actions raise :class:`GitError`.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conda_distro.errors import GitError

if TYPE_CHECKING:
    import git

Repo = Any  # a git.Repo (gitpython is imported only when git is used)


# ---------------------------------------------------------------------------------------------
# the repository


def open_repo(root: Path, *, field: str | None = None,
              hint: str = "--changed-since needs the distribution to be a git checkout") -> Repo:
    """The repository holding ``root``; :class:`GitError` (naming ``field`` and ``hint``) when there is none."""
    import git

    try:
        return git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise GitError(f"{root} is not inside a git repository", path=root, field=field, hint=hint) from None


def find_repo(root: Path, *, with_commit: bool = False) -> Repo | None:
    """The repository holding ``root``, None when there is none (or, ``with_commit``, it has no commit yet)."""
    try:
        import git

        repo = git.Repo(root, search_parent_directories=True)
        if with_commit:
            repo.head.commit  # noqa: B018 - raises on a repository without commits
        return repo
    except Exception:  # noqa: BLE001 - not a repo, no commits, no git binary: all mean "none"
        return None


def has_commits(repo: Repo) -> bool:
    return bool(repo.head.is_valid())


def top_dir(repo: Repo) -> Path:
    """The repository's work tree (resolved): git paths are relative to it."""
    return Path(repo.working_tree_dir).resolve()


def relpath(repo: Repo, path: Path) -> str:
    """``path`` as git names it (relative to the work tree, '/'-separated); ValueError outside it."""
    return path.resolve().relative_to(top_dir(repo)).as_posix()


def current_commit(root: Path) -> str | None:
    """The git HEAD commit of the repository holding ``root``; None outside git (or before the first commit)."""
    repo = find_repo(root, with_commit=True)
    return repo.head.commit.hexsha if repo is not None else None


def configured_user(root: Path) -> str | None:
    """git's ``user.name <user.email>`` for the repository holding ``root``; None when not configured."""
    try:
        import git

        reader = git.Repo(root, search_parent_directories=True).config_reader()
        name = reader.get_value("user", "name", default="")
        email = reader.get_value("user", "email", default="")
    except Exception:  # noqa: BLE001 - not a repo, no git binary, unreadable config
        return None
    if not name:
        return None
    return f"{name} <{email}>" if email else str(name)


def origin_url(repo: Repo) -> str | None:
    """The URL of the ``origin`` remote, None when there is none."""
    return next((r.url for r in repo.remotes if r.name == "origin"), None)


def status_lines(repo: Repo, *paths: str, z: bool = False, untracked_all: bool = False) -> str:
    """``git status --porcelain`` of ``paths`` (relative to the work tree): uncommitted changes, untracked
    files included. ``z``: NUL-separated entries (rename sources follow their entry)."""
    args = ["--porcelain"] + (["-z"] if z else []) + (["--untracked-files=all"] if untracked_all else [])
    return repo.git.status(*args, "--", *paths)


def changed_paths(repo: Repo, *paths: str) -> list[str]:
    """The porcelain status lines of ``paths`` that show a change ("XY path")."""
    return [ln for ln in status_lines(repo, *paths).splitlines() if ln.strip()]


def has_staged_changes(repo: Repo) -> bool:
    """Does the index hold changes not yet committed?"""
    return bool(repo.git.diff("--cached", "--name-only").strip())


def show_file(repo: Repo, rev: str, path: str) -> str:
    """The text of ``path`` (relative to the work tree) at ``rev``; GitError when it is not there."""
    import git

    try:
        return repo.git.show(f"{rev}:{path}")
    except git.GitCommandError:
        raise GitError(f"{path} is not in commit {rev}") from None


def current_branch(repo: Repo) -> str | None:
    """The checked-out branch, None on a detached HEAD."""
    try:
        return repo.active_branch.name
    except TypeError:
        return None


def current_ref(repo: Repo) -> str:
    """The checked-out branch's name, or the commit on a detached HEAD."""
    return current_branch(repo) or repo.head.commit.hexsha


def branches_named(repo: Repo, name: str) -> list[str]:
    """Local branches called ``name`` or ``name-*``."""
    return [h.name for h in repo.heads if h.name == name or h.name.startswith(name + "-")]


def checkout(repo: Repo, ref: str) -> None:
    repo.git.checkout(ref)


# ---------------------------------------------------------------------------------------------
# history


@dataclass(frozen=True)
class FileVersion:
    """One committed version of a file."""

    sha: str
    date: dt.datetime  # the commit date
    data: bytes | None  # None: the commit deleted the file


@dataclass(frozen=True)
class LogEntry:
    """One commit of a folder's history and the paths it touched there (relative to the folder)."""

    sha: str
    author: str
    email: str
    date: dt.datetime  # the commit date
    summary: str
    paths: tuple[str, ...]


def file_versions(root: Path, path: Path) -> list[FileVersion]:
    """Every commit touching ``path`` with its content then, oldest first; [] outside git or when the
    history cannot be read."""
    repo = find_repo(root, with_commit=True)
    if repo is None:
        return []
    try:
        rel = relpath(repo, path)
        commits = list(repo.iter_commits(paths=rel, reverse=True))
    except Exception:  # noqa: BLE001 - outside the work tree, a broken repository: no history
        return []
    out = []
    for c in commits:
        try:
            data = (c.tree / rel).data_stream.read()
        except KeyError:  # the commit deleted it
            data = None
        out.append(FileVersion(c.hexsha, c.committed_datetime, data))
    return out


_SEP_RECORD, _SEP_FIELD = "\x1e", "\x1f"


def folder_log(root: Path, folder: Path) -> list[LogEntry]:
    """The commits touching ``folder``, newest first, each with its paths under ``folder`` (no renames
    followed); [] outside git or when the log cannot be read."""
    repo = find_repo(root, with_commit=True)
    if repo is None or not folder.exists():
        return []
    try:
        prefix = relpath(repo, folder)
        log = repo.git.log(f"--format={_SEP_RECORD}%H{_SEP_FIELD}%an{_SEP_FIELD}%ae{_SEP_FIELD}%cI{_SEP_FIELD}%s",
                           "--name-only", "--no-renames", "--", prefix)
    except Exception:  # noqa: BLE001
        return []
    out = []
    for record in log.split(_SEP_RECORD)[1:]:
        header, _, names = record.partition("\n")
        sha, author, email, date, summary = header.split(_SEP_FIELD, 4)
        paths = tuple(n[len(prefix) + 1:] for n in names.splitlines() if n.startswith(prefix + "/"))
        out.append(LogEntry(sha, author, email, dt.datetime.fromisoformat(date), summary, paths))
    return out


# ---------------------------------------------------------------------------------------------
# a new repository


def init_repository(root: Path, message: str, author_name: str, author_email: str,
                    date: dt.datetime | None = None) -> str:
    """``git init`` ``root`` (branch main) with ``author`` as its configured identity, and commit everything
    in it. ``date``: the author and commit date (default: now). Returns the commit."""
    import git

    repo = git.Repo.init(root, initial_branch="main")
    with repo.config_writer() as cw:  # later commits (sweep --commit) need an identity
        cw.set_value("user", "name", author_name)
        cw.set_value("user", "email", author_email)
    repo.git.add("-A")
    actor = git.Actor(author_name, author_email)
    stamp = None  # None: now
    if date is not None:
        stamp = date if date.tzinfo else date.astimezone()  # gitpython wants an aware datetime
    commit = repo.index.commit(message, author=actor, committer=actor, author_date=stamp, commit_date=stamp)
    repo.close()
    return commit.hexsha


def changed_files(root: Path, ref: str, *, flag: str = "--changed-since") -> list[str]:
    """Paths (relative to ``root``) changed between ``ref`` and the working tree, untracked included.
    ``flag`` names the option the ref came from, for the error message."""
    import git

    repo = open_repo(root)
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


def commit_chain(repo: git.Repo, base: str, commits: list[tuple[list[str], str]], author: str) -> list[str]:
    """Commit objects for ``commits`` ((paths relative to the repository's top, message), in order) on
    top of ``base``, each taking its paths' content from the work tree. Only objects are written (in a
    private index): no ref, the index and the work tree are unchanged, so a process killed here leaves
    nothing half-made. ``author`` is ``Name <email>`` (author and committer). Returns the shas in order."""
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


def branch_sha(repo: git.Repo, branch: str) -> str | None:
    """The commit ``refs/heads/<branch>`` points at, None when there is no such branch."""
    import git

    try:
        return repo.git.rev_parse("--verify", "-q", f"refs/heads/{branch}^{{commit}}").strip() or None
    except git.GitCommandError:
        return None


def create_branch(repo: git.Repo, branch: str, sha: str) -> None:
    """Create ``branch`` at ``sha`` in one atomic ref update; nothing to do when it is there already;
    :class:`GitError` when it exists at another commit."""
    current = branch_sha(repo, branch)
    if current is None:
        repo.git.update_ref(f"refs/heads/{branch}", sha, "")  # "": only if the branch does not exist
    elif current != sha:
        raise GitError(f"branch {branch} exists at {current[:12]}, not at the sweep's commit {sha[:12]}",
                       field="--commit", hint=f"delete it (git branch -D {branch}) and rerun the sweep")


def publish_branch(repo: git.Repo, branch: str, tip: str) -> None:
    """Create ``branch`` at ``tip`` (in one atomic ref update; an existing branch at another commit is
    an error), check it out without touching the work tree (which already holds ``tip``'s content for
    every path the branch changed), and make the index ``tip``'s tree. Safe to repeat after a kill."""
    import git

    create_branch(repo, branch, tip)

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
    repo = open_repo(root)
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
# the small questions the sweep asks


def head_sha(repo: Repo) -> str | None:
    """The checked-out commit, None before the first commit."""
    return repo.head.commit.hexsha if repo.head.is_valid() else None
