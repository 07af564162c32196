"""gitutil: the one module of the package that uses git, on real repositories."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conda_distro.errors import GitError
from conda_distro.util import gitutil

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
    repo.git.checkout(sha)
    assert gitutil.current_branch(repo) is None and gitutil.current_ref(repo) == sha
    repo.git.checkout("sweep/pytorch-2.6.0")
    assert gitutil.current_ref(repo) == "sweep/pytorch-2.6.0"


# ---------------------------------------------------------------------------------------------
# crash safety: questions take no lock, commits go through a private index, stale locks are removed
# only while no git process that could hold them runs


def test_questions_take_no_index_lock_and_commit_chain_leaves_nothing(repo_dir):
    repo = gitutil.open_repo(repo_dir)
    assert repo.git.environment()["GIT_OPTIONAL_LOCKS"] == "0"
    assert gitutil.find_repo(repo_dir).git.environment()["GIT_OPTIONAL_LOCKS"] == "0"
    base = repo.head.commit.hexsha
    index_before = (repo_dir / ".git" / "index").read_bytes()
    (repo_dir / "distro.yaml").write_text("pytorch:\n  releases: [2.5.1, 2.6.0]\n")
    private = gitutil.private_index(repo)
    private.write_text("a stale private index")  # as a killed chain leaves it, with its lock
    lock = Path(f"{private}.lock")
    lock.write_text("")
    [sha] = gitutil.commit_chain(repo, base, [(["distro.yaml"], "add 2.6.0")], "Bot <bot@example.org>")
    assert repo.commit(sha).parents[0].hexsha == base and repo.head.commit.hexsha == base
    assert (repo_dir / ".git" / "index").read_bytes() == index_before  # the index is not touched
    assert not private.exists() and not lock.exists()
    assert sorted(p.name for p in (repo_dir / ".git").glob("*.lock")) == []


def test_git_subcommand_skips_global_options():
    assert gitutil.git_subcommand(["git", "-C", "/x", "--no-pager", "-c", "a=b", "log", "-1"]) == "log"
    assert gitutil.git_subcommand(["git", "--git-dir", "/x/.git", "update-ref", "refs/heads/a", "0"]) == "update-ref"
    assert gitutil.git_subcommand(["git"]) is None


def _git_holding_the_index_lock(repo_dir: Path) -> subprocess.Popen:
    """A person's `git commit` waiting for its editor: a live git process holding .git/index.lock (started
    from a shell, as a person's is: not a child of this process)."""
    (repo_dir / "distro.yaml").write_text("edited\n")
    subprocess.run(["git", "-C", str(repo_dir), "add", "distro.yaml"], check=True, timeout=60)
    proc = subprocess.Popen(["sh", "-c", "git commit -a; true"], cwd=repo_dir, env={**os.environ, "GIT_EDITOR": "sleep 60; :"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 30
    while not (repo_dir / ".git" / "index.lock").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "git commit did not take index.lock"
        time.sleep(0.05)
    return proc


def test_a_lock_a_running_git_command_may_hold_is_left_alone(repo_dir):
    repo = gitutil.open_repo(repo_dir)
    stale_ref = repo_dir / ".git" / "refs" / "heads" / "sweep" / "pytorch-2.6.0.lock"
    stale_ref.parent.mkdir(parents=True)
    stale_ref.write_text("")
    index_lock = repo_dir / ".git" / "index.lock"
    person = _git_holding_the_index_lock(repo_dir)
    try:
        [(_, cmdline)] = gitutil.git_processes(repo)
        assert cmdline == "git commit -a"
        t0 = time.monotonic()
        assert gitutil.clear_stale_locks(repo, [stale_ref, index_lock], wait=0.5) == []
        assert time.monotonic() - t0 >= 0.5  # it waited for the command to end
        assert index_lock.exists() and stale_ref.exists()  # nothing removed while it runs
        with pytest.raises(GitError) as err:  # a git command that needs a held lock: exit 2, no traceback
            gitutil.create_branch(repo, "sweep/pytorch-2.6.0", repo.head.commit.hexsha)
        assert "git could not create branch sweep/pytorch-2.6.0" in err.value.message and "lock" in err.value.hint
    finally:
        os.killpg(person.pid, signal.SIGKILL)  # killed inside its command: index.lock stays, as after a crash
        person.wait(timeout=60)
    deadline = time.monotonic() + 10
    while gitutil.git_processes(repo) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert index_lock.exists()
    assert gitutil.clear_stale_locks(repo, [stale_ref, index_lock]) == [stale_ref, index_lock]
    assert not index_lock.exists() and not stale_ref.exists()
    assert gitutil.clear_stale_locks(repo, [stale_ref, index_lock]) == []  # nothing left: nothing to do


def test_reading_git_commands_do_not_keep_a_stale_lock(repo_dir):
    """`git log` in a pager or gitpython's `git cat-file --batch` hold no lock: they do not stop the cleanup."""
    repo = gitutil.open_repo(repo_dir)
    stale = repo_dir / ".git" / "refs" / "heads" / "sweep" / "pytorch-2.6.0-a.lock"
    stale.parent.mkdir(parents=True)
    stale.write_text("")
    reader = subprocess.Popen(["git", "cat-file", "--batch"], cwd=repo_dir, stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL)
    try:
        repo.head.commit.tree.traverse()  # gitpython's own readers (children of this process) run too
        assert gitutil.git_processes(repo) == []
        assert gitutil.clear_stale_locks(repo, [stale], wait=0) == [stale]
    finally:
        reader.kill()
        reader.wait(timeout=60)


def test_return_to_moves_head_and_the_index_back_only_when_moved(repo_dir):
    repo = gitutil.open_repo(repo_dir)
    base = repo.head.commit.hexsha
    (repo_dir / "distro.yaml").write_text("swept\n")
    [tip] = gitutil.commit_chain(repo, base, [(["distro.yaml"], "sweep")], "Bot <bot@example.org>")
    gitutil.create_branch(repo, "sweep/x", tip)
    (repo_dir / "distro.yaml").write_text("pytorch:\n  releases: [2.5.1]\n")
    assert gitutil.return_to(repo, "main", ["distro.yaml"]) is False  # nothing moved: nothing written
    repo.git.symbolic_ref("HEAD", "refs/heads/sweep/x")  # what an older sweep, killed while switching, left
    repo.git.read_tree(tip)
    assert gitutil.return_to(repo, "main", ["distro.yaml"]) is True
    assert gitutil.current_ref(repo) == "main" and not repo.is_dirty()
    repo.git.checkout(tip)  # detached
    assert gitutil.return_to(repo, base, ["distro.yaml"]) is True
    assert gitutil.current_ref(repo) == base and repo.git.diff("--cached", "--name-only") == ""
    assert (repo_dir / "distro.yaml").read_text() == "swept\n"  # the work tree is the caller's to put back
