"""gitutil: the one module of the package that uses git, on real repositories."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from conda_distro import gitutil
from conda_distro.errors import GitError

git = pytest.importorskip("git")


@pytest.fixture
def repo_dir(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "recipes" / "a").mkdir(parents=True)
    (root / "recipes" / "a" / "recipe.yaml").write_text("one\n")
    (root / "distro.yaml").write_text("pytorch:\n  releases: [2.5.1]\n")
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    gitutil.init_repository(root, "first\n\nbody", "Ada", "ada@example.org", when)
    return root


def test_init_repository_commits_everything_with_the_identity_and_date(repo_dir):
    repo = gitutil.open_repo(repo_dir)
    head = repo.head.commit
    assert gitutil.current_commit(repo_dir) == head.hexsha
    assert (head.author.name, head.author.email, head.committer.name) == ("Ada", "ada@example.org", "Ada")
    assert head.committed_datetime == dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert sorted(b.path for b in head.tree.traverse() if b.type == "blob") == ["distro.yaml", "recipes/a/recipe.yaml"]
    assert gitutil.configured_user(repo_dir) == "Ada <ada@example.org>"
    assert gitutil.current_branch(repo) == "main" and gitutil.current_ref(repo) == "main"
    assert gitutil.has_commits(repo) and gitutil.top_dir(repo) == repo_dir.resolve()


def test_outside_git_the_questions_have_no_answer_and_open_repo_refuses(tmp_path):
    assert gitutil.find_repo(tmp_path) is None
    assert gitutil.current_commit(tmp_path) is None
    assert gitutil.file_versions(tmp_path, tmp_path / "distro.yaml") == []
    assert gitutil.folder_log(tmp_path, tmp_path) == []
    with pytest.raises(GitError) as err:
        gitutil.open_repo(tmp_path, field="--commit", hint="run it in a git checkout")
    assert err.value.field == "--commit" and err.value.hint == "run it in a git checkout"
    git.Repo.init(tmp_path / "empty")
    assert gitutil.find_repo(tmp_path / "empty") is not None
    assert gitutil.find_repo(tmp_path / "empty", with_commit=True) is None


def test_status_staging_show_and_history(repo_dir):
    repo = gitutil.open_repo(repo_dir)
    first = repo.head.commit.hexsha
    assert gitutil.changed_paths(repo, "recipes", "distro.yaml") == []
    (repo_dir / "recipes" / "a" / "recipe.yaml").write_text("two\n")
    (repo_dir / "recipes" / "b").mkdir()
    (repo_dir / "recipes" / "b" / "recipe.yaml").write_text("new\n")
    assert gitutil.changed_paths(repo, "recipes") == [" M recipes/a/recipe.yaml", "?? recipes/b/"]
    assert not gitutil.has_staged_changes(repo)
    repo.git.add("-A")
    assert gitutil.has_staged_changes(repo)
    repo.index.commit("second", author=git.Actor("Bot", "bot@example.org"), committer=git.Actor("Bot", "bot@example.org"))
    assert gitutil.show_file(repo, first, "recipes/a/recipe.yaml") == "one"
    with pytest.raises(GitError):
        gitutil.show_file(repo, first, "recipes/b/recipe.yaml")
    versions = gitutil.file_versions(repo_dir, repo_dir / "recipes" / "a" / "recipe.yaml")
    assert [(v.sha, v.data) for v in versions] == [(first, b"one\n"), (repo.head.commit.hexsha, b"two\n")]
    log = gitutil.folder_log(repo_dir, repo_dir / "recipes")
    assert [(e.summary, e.author, sorted(e.paths)) for e in log] == [
        ("second", "Bot", ["a/recipe.yaml", "b/recipe.yaml"]), ("first", "Ada", ["a/recipe.yaml"])]


def test_branches_are_created_once_and_checked_out(repo_dir):
    repo = gitutil.open_repo(repo_dir)
    sha = repo.head.commit.hexsha
    gitutil.create_branch(repo, "sweep/pytorch-2.6.0", sha)
    gitutil.create_branch(repo, "sweep/pytorch-2.6.0", sha)  # there already at that commit: nothing to do
    gitutil.create_branch(repo, "sweep/pytorch-2.6.0-a", sha)
    gitutil.create_branch(repo, "sweep/pytorch-2.6.00", sha)
    assert gitutil.branches_named(repo, "sweep/pytorch-2.6.0") == ["sweep/pytorch-2.6.0", "sweep/pytorch-2.6.0-a"]
    (repo_dir / "distro.yaml").write_text("changed\n")
    repo.git.commit("-am", "third")
    with pytest.raises(GitError) as err:
        gitutil.create_branch(repo, "sweep/pytorch-2.6.0", repo.head.commit.hexsha)
    assert "git branch -D sweep/pytorch-2.6.0" in err.value.hint
    gitutil.checkout(repo, sha)
    assert gitutil.current_branch(repo) is None and gitutil.current_ref(repo) == sha
    gitutil.checkout(repo, "sweep/pytorch-2.6.0")
    assert gitutil.current_ref(repo) == "sweep/pytorch-2.6.0"
