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
