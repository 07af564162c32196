"""Scratch folders in a shared temp folder converge after kill -9 (``conda_distro.util.scratch``).

Real processes, real folders: a child killed with SIGKILL leaves its folder and the next folder of the kind
removes it; a live child's folder is never removed; a folder naming a live pid with another start time (a
reused pid) is removed; foreign names, symbolic links, other kinds, other users' folders are left alone;
a sweep removes at most ``MAX_SWEPT`` folders. The temp folder is always the test's own ``tmp_path``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conda_distro.util.scratch import MAX_SWEPT, ScratchDir, new_scratch, owner_alive, owner_tag, sweep_dead

KIND = "conda-distro-solve-"
TIMEOUT = 120


@pytest.fixture()
def tmp(tmp_path: Path, monkeypatch) -> Path:
    """The temp folder of this test and of its children."""
    where = tmp_path / "tmp"
    where.mkdir()
    monkeypatch.setenv("TMPDIR", str(where))
    monkeypatch.setattr(tempfile, "tempdir", None)  # (tempfile reads TMPDIR once)
    return where


def child(code: str, **kw) -> subprocess.Popen:
    """A Python process running ``code`` (its temp folder: the test's, through TMPDIR)."""
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


MAKE_AND_DIE = f"""
import os, signal
from conda_distro.util.scratch import ScratchDir
s = ScratchDir({KIND!r})
(s.path / "inside").write_text("x")
print(s.path, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""

MAKE_AND_WAIT = f"""
import sys
from conda_distro.util.scratch import ScratchDir, owner_tag
with ScratchDir({KIND!r}) as path:
    print(path, owner_tag(), flush=True)
    sys.stdin.readline()  # (the test closes stdin; its timeout kills this process otherwise)
"""


def killed_folder(tmp: Path) -> Path:
    proc = child(MAKE_AND_DIE)
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == -signal.SIGKILL, err
    folder = Path(out.strip())
    assert folder.parent == tmp and folder.is_dir() and folder.name.startswith(f"{KIND}{proc.pid}-")
    return folder


def dead_tag() -> str:
    """The owner tag of a process that has ended (its pid not yet reused, almost surely)."""
    proc = subprocess.run([sys.executable, "-c", "from conda_distro.util.scratch import owner_tag; print(owner_tag())"],
                          capture_output=True, text=True, timeout=TIMEOUT, check=True)
    return proc.stdout.strip()


def names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_a_folder_left_by_a_killed_process_is_removed_by_the_next_of_its_kind(tmp: Path):
    left = killed_folder(tmp)
    other_kind = ScratchDir("conda-distro-render-")  # another kind does not touch it
    assert left.is_dir()
    with ScratchDir(KIND) as mine:
        assert not left.exists() and mine.is_dir()
        assert mine.name.startswith(f"{KIND}{owner_tag()}-")
    assert not mine.exists()
    other_kind.cleanup()
    assert names(tmp) == set()


def test_a_live_owners_folder_is_never_removed(tmp: Path):
    proc = child(MAKE_AND_WAIT)
    try:
        line = proc.stdout.readline().split()
        assert line, proc.stderr.read()
        theirs, tag = Path(line[0]), line[1]
        pid, start, _ = (int(x) for x in tag.split("-"))
        assert pid == proc.pid and owner_alive(pid, start)
        for _ in range(3):
            assert sweep_dead(KIND) == []
            with ScratchDir(KIND):
                pass
        assert theirs.is_dir()
    finally:
        proc.stdin.close()
        proc.wait(timeout=TIMEOUT)
    assert proc.returncode == 0
    assert not theirs.exists()  # (removed by its owner on its way out)
    assert not owner_alive(pid, start)


def test_a_reused_pid_is_not_the_owner(tmp: Path):
    pid, start, ns = (int(x) for x in owner_tag().split("-"))
    live_child = child(MAKE_AND_WAIT)
    try:
        their_pid = live_child.stdout.readline().split()[1].split("-")[0]  # (its folder made: it swept then)
        # this process's pid (alive), another start time: the pid's first owner is dead
        reused = tmp / f"{KIND}{pid}-{start - 1}-{ns}-abcd_123"
        reused.mkdir()
        (reused / "file").write_text("x")
        reused_child = tmp / f"{KIND}{their_pid}-{start + 12345}-{ns}-abcd_124"  # a live child's pid, another start
        reused_child.mkdir()
        own = tmp / f"{KIND}{pid}-{start}-{ns}-abcd_125"  # this process's own: alive
        own.mkdir()
        removed = sweep_dead(KIND)
        assert sorted(removed) == sorted([reused, reused_child])
        assert not reused.exists() and not reused_child.exists() and own.is_dir()
    finally:
        live_child.stdin.close()
        live_child.wait(timeout=TIMEOUT)


def test_foreign_names_links_other_kinds_and_other_users_are_left_alone(tmp: Path, tmp_path: Path):
    dead = dead_tag()
    ns = dead.rsplit("-", 1)[1]
    pid, start = dead.split("-")[:2]
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep").write_text("mine")
    kept = {
        f"{KIND}backup": "dir",                                   # similar name, not ours
        f"{KIND}{dead}-abcdefgh.old": "dir",                       # a suffix tempfile never makes
        f"{KIND}{dead}-ABCDEFGH": "dir",                           # not tempfile's alphabet
        f"{KIND}{pid}-{start}-{int(ns) + 1}-abcdefgh": "dir",      # another pid namespace: cannot be checked
        f"x{KIND}{dead}-abcdefgh": "dir",                          # does not start with the prefix
        f"conda-distro-render-{dead}-abcdefgh": "dir",            # another kind
        f"{KIND}{dead}-linkedto": "link",                          # a symbolic link (to a folder with files)
        f"{KIND}{dead}-afile000": "file",                          # a file
    }
    for name, what in kept.items():
        if what == "dir":
            (tmp / name).mkdir()
        elif what == "link":
            (tmp / name).symlink_to(target, target_is_directory=True)
        else:
            (tmp / name).write_text("x")
    if os.getuid() == 0:
        theirs = tmp / f"{KIND}{dead}-nobody00"  # another user's (dead owner)
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        kept[theirs.name] = "dir"
    gone = tmp / f"{KIND}{dead}-deadbeef"  # (what is removed: the same name shape, ours)
    gone.mkdir()
    with ScratchDir(KIND) as mine:
        assert names(tmp) == {*kept, mine.name}
    assert not gone.exists()
    assert (target / "keep").read_text() == "mine" and (tmp / f"{KIND}{dead}-linkedto").is_symlink()
    with pytest.raises(ValueError, match="conda-distro-"):
        new_scratch("tmp")  # only our own kinds


def test_a_sweep_is_bounded_and_ignores_what_it_cannot_remove(tmp: Path):
    dead = dead_tag()
    made = []
    for i in range(MAX_SWEPT + 5):
        d = tmp / f"{KIND}{dead}-{i:08d}"
        (d / "ro").mkdir(parents=True)
        (d / "ro" / "file").write_text("x")
        os.chmod(d / "ro", 0o500)  # (a read-only folder inside: removed all the same)
        made.append(d)
    first = ScratchDir(KIND)
    assert len([d for d in made if not d.exists()]) == MAX_SWEPT
    second = ScratchDir(KIND)
    assert not any(d.exists() for d in made)
    first.cleanup()
    second.cleanup()
    assert names(tmp) == set()
    assert sweep_dead(KIND, tmp / "missing") == []  # a folder that is not there: nothing, no error


def test_a_process_named_with_spaces_and_parentheses_is_still_recognised(tmp: Path):
    """``/proc/<pid>/stat`` holds the command name in parentheses, and a name can hold ``) (``."""
    code = "open('/proc/self/comm', 'w').write('a) (b c'); " + MAKE_AND_WAIT.strip()
    proc = child(code)
    try:
        line = proc.stdout.readline().split()
        assert line, proc.stderr.read()
        assert Path(f"/proc/{proc.pid}/comm").read_text().strip() == "a) (b c"
        pid, start, _ = (int(x) for x in line[1].split("-"))
        assert owner_alive(pid, start) and not owner_alive(pid, start + 1)
        assert sweep_dead(KIND) == [] and Path(line[0]).is_dir()
    finally:
        proc.stdin.close()
        proc.wait(timeout=TIMEOUT)


RENDER_THEN_CRASH = """
import sys
from pathlib import Path
import conda_distro.recipe.render as render
render.scratch_root = lambda: sys.argv[1]  # (the test's folder instead of /dev/shm)
from conda_distro.channels import crash_point
from conda_distro.recipe.model import parse_recipe
text = "package:\\n  name: tiny\\n  version: '1.0'\\nbuild:\\n  noarch: generic\\n"
parse_recipe(text, Path("/r/tiny/recipe.yaml"))
print(sorted(p.name for p in Path(sys.argv[1]).iterdir()), flush=True)
crash_point("test-step")
"""


def test_a_render_folder_left_at_a_crash_point_is_removed_by_the_next_render(tmp: Path, tmp_path: Path):
    """A crash point kills the process with SIGKILL while its render scratch folder (kept for the process's
    life) exists; the next process that renders removes it."""
    shm = tmp_path / "shm"
    shm.mkdir()
    killed = subprocess.run([sys.executable, "-c", RENDER_THEN_CRASH, str(shm)], capture_output=True, text=True,
                            timeout=TIMEOUT, env={**os.environ, "CONDA_DISTRO_TEST_CRASH_AT": "test-step"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    [left] = names(shm)
    assert left.startswith("conda-distro-render-") and left in killed.stdout
    again = subprocess.run([sys.executable, "-c", RENDER_THEN_CRASH, str(shm)], capture_output=True, text=True,
                           timeout=TIMEOUT)
    assert again.returncode == 0, again.stderr[-2000:]
    assert left not in again.stdout  # removed when the second process made its own
    assert names(shm) == set()  # and the second one's own removed at its exit
    assert names(tmp) == set()


def test_removing_a_scratch_folder_never_changes_the_folder_that_holds_it(tmp_path: Path):
    """What cannot be removed is left, and only folders inside the one removed are made writable: the
    shared temp folder keeps its mode (it once became 0700 when a removal failed)."""
    from conda_distro.util.scratch import remove_scratch

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    not_a_folder = shared / f"{KIND}0-0-0-notadir0"
    not_a_folder.write_text("x")
    remove_scratch(not_a_folder)  # (rmtree fails on a file: its retry must not touch the parent)
    assert not_a_folder.is_file() and (shared.stat().st_mode & 0o7777) == 0o1777
    inner = shared / f"{KIND}0-0-0-readonly"
    (inner / "a" / "b").mkdir(parents=True)
    (inner / "a" / "b" / "f").write_text("x")
    for d in (inner / "a" / "b", inner / "a", inner):
        os.chmod(d, 0o500)
    remove_scratch(inner)
    assert not inner.exists() and (shared.stat().st_mode & 0o7777) == 0o1777


def test_a_process_sweeps_a_kind_at_most_once_a_minute(tmp: Path, monkeypatch):
    import conda_distro.util.scratch as scratch

    ScratchDir(KIND).cleanup()  # (the first of the kind here: swept)
    left = killed_folder(tmp)
    ScratchDir(KIND).cleanup()
    assert left.is_dir()  # (swept less than a minute ago: not again)
    monkeypatch.setattr(scratch, "SWEEP_EVERY", 0.0)
    ScratchDir(KIND).cleanup()
    assert names(tmp) == set()
