"""Every git access of the package (gitpython): which recipes changed, the checkout's commit and
state, a file's history, commit chains and branches (sweep), a new repository (sandbox).

Functions taking ``root`` open the repository that holds it; those taking ``repo`` work on an open one
(:func:`open_repo`, :func:`find_repo`). Questions whose answer is "unknown" outside git (no repository,
no commit, no git binary) return None or an empty result; actions raise :class:`GitError`.

Crash safety: every git command of the package runs with ``GIT_OPTIONAL_LOCKS=0``, so questions
(``status``, ``diff``) never write ``.git/index.lock``; the sweep's commits are written through a private
index and its branches made by single ref updates (:func:`commit_chain`, :func:`create_branch`); no
command of the package checks a branch out. What a git command killed mid-way can still leave (a
``refs/heads/….lock`` of a ref being created, the private index's lock) is removed by
:func:`clear_stale_locks` under the rule written there.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
        return _quiet(git.Repo(root, search_parent_directories=True))
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise GitError(f"{root} is not inside a git repository", path=root, field=field, hint=hint) from None


def _quiet(repo: Repo) -> Repo:
    """``repo`` with ``GIT_OPTIONAL_LOCKS=0`` for every git command: a question (status, diff) never takes
    ``index.lock`` to refresh the index's stat data, so a process killed while asking leaves no lock."""
    repo.git.update_environment(GIT_OPTIONAL_LOCKS="0")
    return repo


def find_repo(root: Path, *, with_commit: bool = False) -> Repo | None:
    """The repository holding ``root``, None when there is none (or, ``with_commit``, it has no commit yet)."""
    try:
        import git

        repo = _quiet(git.Repo(root, search_parent_directories=True))
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


def is_ancestor(repo: Repo, commit: str, rev: str) -> bool:
    """Whether ``commit`` is ``rev`` or one of its ancestors (False when either is unknown, or git takes
    more than a minute to say)."""
    import git

    try:
        repo.git.merge_base("--is-ancestor", commit, rev, kill_after_timeout=60)
    except git.GitCommandError:
        return False
    return True


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
    # always a date of our own: left None, GitPython parses $GIT_AUTHOR_DATE / $GIT_COMMITTER_DATE itself and
    # raises on forms git accepts (ISO 8601 with a "+00:00" offset); now is the tool's clock (util/dates.py)
    from conda_distro.util.dates import utcnow

    stamp = utcnow() if date is None else date if date.tzinfo else date.astimezone()  # GitPython wants it aware
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

PRIVATE_INDEX = "conda-distro-sweep.index"  # in the git folder: the index commit_chain builds trees in


def private_index(repo: Repo) -> Path:
    return Path(repo.git_dir) / PRIVATE_INDEX


def commit_chain(repo: git.Repo, base: str, commits: list[tuple[list[str], str]], author: str) -> list[str]:
    """Commit objects for ``commits`` ((paths relative to the repository's top, message), in order) on
    top of ``base``, each taking its paths' content from the work tree. Only objects are written, through
    a private index (:data:`PRIVATE_INDEX`, removed afterwards): no ref, the index and the work tree are
    unchanged, so a process killed here leaves nothing half-made (a rerun removes the private index and
    its lock, see :func:`clear_stale_locks`). The caller holds the repository's lock (only one chain is
    made at a time). ``author`` is ``Name <email>`` (author and committer). Returns the shas in order."""
    name, _, email = author.partition("<")
    index = private_index(repo)
    _remove(index, Path(f"{index}.lock"))
    env = {"GIT_INDEX_FILE": str(index),
           "GIT_AUTHOR_NAME": name.strip(), "GIT_AUTHOR_EMAIL": email.rstrip(">").strip(),
           "GIT_COMMITTER_NAME": name.strip(), "GIT_COMMITTER_EMAIL": email.rstrip(">").strip()}
    try:
        with git_errors("git could not make the sweep's commits", _LOCKED_HINT):
            repo.git.read_tree(base, env=env)
            parent, shas = base, []
            for paths, message in commits:
                repo.git.update_index("--add", "--", *paths, env=env)
                tree = repo.git.write_tree(env=env)
                parent = repo.git.commit_tree(tree, "-p", parent, "-m", message, env=env).strip()
                shas.append(parent)
    finally:
        _remove(index)
    return shas


@contextmanager
def git_errors(what: str, hint: str) -> Iterator[None]:
    """A failing git command inside the block is a :class:`GitError` (exit 2) saying ``what`` failed, with
    the first line git wrote on stderr and ``hint``: never a traceback."""
    import git

    try:
        yield
    except git.GitCommandError as exc:
        raise GitError(f"{what}: {_git_message(exc)}", field="--commit", hint=hint) from None


_LOCKED_HINT = ("another git command holds a lock in this repository: wait for it to finish and rerun (if none "
                "runs, remove the lock file git names)")


def _remove(*paths: Path) -> None:
    for p in paths:
        p.unlink(missing_ok=True)


def branch_sha(repo: git.Repo, branch: str) -> str | None:
    """The commit ``refs/heads/<branch>`` points at, None when there is no such branch."""
    import git

    try:
        return repo.git.rev_parse("--verify", "-q", f"refs/heads/{branch}^{{commit}}").strip() or None
    except git.GitCommandError:
        return None


def create_branch(repo: git.Repo, branch: str, sha: str) -> None:
    """Create ``branch`` at ``sha`` in one atomic ref update (the work tree, the index and HEAD are not
    touched); nothing to do when it is there already; :class:`GitError` when it exists at another commit,
    or when git cannot lock the ref (another git command holds it)."""
    current = branch_sha(repo, branch)
    if current is None:
        with git_errors(f"git could not create branch {branch}", _LOCKED_HINT):
            repo.git.update_ref(f"refs/heads/{branch}", sha, "")  # "": only if the branch does not exist
    elif current != sha:
        raise GitError(f"branch {branch} exists at {current[:12]}, not at the sweep's commit {sha[:12]}",
                       field="--commit", hint=f"delete it (git branch -D {branch}) and rerun the sweep")


def _git_message(exc: Exception) -> str:
    """The first line of what git said on stderr."""
    stderr = str(getattr(exc, "stderr", "") or exc).strip().strip("'").strip()
    first = next((ln.strip() for ln in stderr.splitlines() if ln.strip()), "failed")
    return first.removeprefix("stderr: ").strip("'").removeprefix("fatal: ")


def return_to(repo: git.Repo, start: str, paths: list[str]) -> bool:
    """Make ``start`` (a branch name, or a commit for a detached HEAD) the checked-out ref again, and the
    index entries of ``paths`` (relative to the top) those of its commit, when a command moved them (the
    work tree is the caller's). Nothing is written when they are there already; returns whether
    something was. (The sweep never moves them itself; a sweep of an older version, killed while it
    switched branches, did.)"""
    import git

    moved = False
    try:
        head = repo.git.symbolic_ref("-q", "HEAD").strip()
    except git.GitCommandError:  # a detached HEAD
        head = repo.git.rev_parse("HEAD").strip()
    is_branch = branch_sha(repo, start) is not None
    with git_errors(f"git could not check out {start} again", _LOCKED_HINT):
        if head != (f"refs/heads/{start}" if is_branch else start):
            if is_branch:
                repo.git.symbolic_ref("HEAD", f"refs/heads/{start}")
            else:
                repo.git.update_ref("--no-deref", "HEAD", start)
            moved = True
        if paths and repo.git.diff("--cached", "--name-only", "HEAD", "--", *paths).strip():
            repo.git.reset("-q", "HEAD", "--", *paths)
            moved = True
    return moved


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


# ---------------------------------------------------------------------------------------------
# lock files a git command killed mid-way leaves behind


#: git commands that only read (objects, refs, the work tree): they never take a lock file
READ_ONLY_GIT = frozenset({"log", "show", "cat-file", "rev-parse", "rev-list", "ls-tree", "ls-files", "blame",
                           "describe", "shortlog", "for-each-ref", "show-ref", "grep", "help", "version", "var"})
_GIT_OPTIONS_WITH_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                                     "--super-prefix", "--exec-path"})


def git_subcommand(argv: list[str]) -> str | None:
    """The subcommand of a git command line (``git -C x --no-pager log`` -> ``log``)."""
    skip = False
    for arg in argv[1:]:
        if skip:
            skip = False
        elif arg in _GIT_OPTIONS_WITH_VALUE:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def git_processes(repo: Repo) -> list[tuple[int, str]]:
    """The git processes running in ``repo`` that may hold a lock file (pid, command line): a ``git``
    whose working folder is in the work tree or the git folder, or whose command line names either,
    other than this process's own children and the commands of :data:`READ_ONLY_GIT` (a person reading
    ``git log`` in a pager holds nothing). (Linux: read from /proc; processes of other users, whose
    folders cannot be read, are not seen: they cannot write this repository.)"""
    top, git_dir = top_dir(repo), Path(repo.git_dir).resolve()
    me = os.getpid()
    out = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if (proc / "comm").read_text().strip() != "git":
                continue
            if int((proc / "stat").read_text().rpartition(")")[2].split()[1]) == me:
                continue  # our own (gitpython keeps `git cat-file --batch` running for its reads)
            cwd = (proc / "cwd").resolve()
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv if a]
        if git_subcommand(args) in READ_ONLY_GIT:
            continue
        cmdline = " ".join(args)
        if (cwd.is_relative_to(top) or cwd.is_relative_to(git_dir)
                or str(top) in cmdline or str(git_dir) in cmdline):
            out.append((int(proc.name), cmdline))
    return out


def clear_stale_locks(repo: Repo, candidates: list[Path], *, wait: float = 3.0) -> list[Path]:
    """Remove those of ``candidates`` (lock files in the git folder that a git command of ours, killed
    mid-way, can have left) that exist, when no git process that may hold a lock runs in the repository
    (:func:`git_processes`); return the ones removed.

    The rule: git creates ``X.lock`` exclusively and removes (or renames) it before it exits, so a lock
    file while no git process that could hold it runs was left by a killed one. A git process that
    runs (a git child of a killed conda-distro, which ends within moments, or a person's command) is
    waited for at most ``wait`` seconds; if one still runs, nothing is removed (it may be holding the
    lock): a git command that then needs the lock fails with a clear error (exit 2) naming the file. The
    caller holds the repository's lock, so no other conda-distro process makes these locks meanwhile;
    lock files of refs and files the caller does not own are never candidates."""
    present = [p for p in candidates if p.exists()]
    deadline = time.monotonic() + wait
    while present and git_processes(repo):
        if time.monotonic() >= deadline:
            return []
        time.sleep(0.1)
        present = [p for p in present if p.exists()]  # a running git command finishes and removes its lock
    for p in present:
        p.unlink(missing_ok=True)
    return present


# ---------------------------------------------------------------------------------------------
# the small questions the sweep asks


def head_sha(repo: Repo) -> str | None:
    """The checked-out commit, None before the first commit."""
    return repo.head.commit.hexsha if repo.head.is_valid() else None
