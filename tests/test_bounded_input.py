"""Every input bounded and validated, and no traceback from what the machine refuses.

* the one bounded reader (``fsutil.read_bounded``, ``jsonio``): regular files only, size caps, a depth
  limit checked before any parser recurses (the table of every file kind is tests/test_bad_inputs.py);
* paths taken from files stay where they belong: a sweep journal cannot make the rollback write outside the
  repository, the status page copies only logs of the build's log folder;
* promote and retire check everything they will write before writing anything;
* the traceback causes of the probe, each a clear message and exit 2 (or 1 for a failure of the run):
  a closed stdout, an ascii stdout, git missing, a file size limit (EFBIG) in promote and retire, a recipe
  that is a link to /proc/self/mem (NUL in a path option, a 5,000-digit release and ``--keep /proc/x``
  are cases of the harness).
"""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from support.helpers import run_cli_at
from support.repos import clean_recipe_text, write_distro
from test_bad_inputs import make_world, snapshot
from test_promote import make_root

from conda_distro.errors import DistroError, ExitCode, FileSystemError
from conda_distro.state.sweep_journal import SweepJournal
from conda_distro.util.fsutil import check_writable, read_bounded
from conda_distro.util.jsonio import MAX_DEPTH, parse_json, read_json, too_deep

# ---------------------------------------------------------------------------------------------
# the reader


def test_depth_scan_counts_brackets_outside_strings_only():
    assert not too_deep(b"[[[]]]", 3) and too_deep(b"[[[[]]]]", 3)
    assert not too_deep(json.dumps({"a": "[[[[[[[[", "b": ["]]]]]]"]}).encode(), 2)
    assert not too_deep(json.dumps({"a": '\\"[[[[[[\\', "b": "]"}).encode(), 1)
    assert too_deep(("[" + '"]", [' * 200 + "1" + "]" * 201).encode(), 100)  # strings cannot hide the depth
    assert not too_deep(b"[" + b"[], " * 10_000 + b"[]]", 2)
    assert too_deep(("[" * 100_000 + "]" * 100_000).encode())
    nested = json.dumps(json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH))
    assert parse_json(nested, Path("x.json")) is not None
    with pytest.raises(DistroError, match="nest deeper than"):
        parse_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), Path("x.json"))


def test_a_downloaded_repodata_is_checked_as_a_local_one_is(tmp_path):
    """A remote main's repodata (read over a URL; here a file: URL) is refused, with a message naming the
    channel, when it nests too deep, repeats a key or is not JSON, as a local channel's file is."""
    from conda_distro.errors import ChannelError
    from conda_distro.reports.watch_main import read_repodata

    bad = {"deep.json": b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
           "dup.json": b'{"packages": {}, "packages": {"x-1-0.tar.bz2": {}}}',
           "junk.json": b"{not json"}
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ChannelError, match="cannot read the main channel 'ref'.*not valid JSON"):
            read_repodata((tmp_path / name).as_uri(), "ref")
    (tmp_path / "ok.json").write_bytes(b'{"packages": {}}')
    assert read_repodata((tmp_path / "ok.json").as_uri(), "ref") == {"packages": {}}


def test_the_reader_refuses_special_files_without_reading_them(tmp_path):
    os.mkfifo(tmp_path / "fifo")  # opened non-blocking: no writer, no hang
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "mem").symlink_to("/proc/self/mem")
    for name, words in (("fifo", "FIFO"), ("zero", "character device"), ("mem", "kernel")):
        with pytest.raises(DistroError, match=words) as err:
            read_bounded(tmp_path / name, 1 << 20)
        assert err.value.path == str(tmp_path / name)
    with pytest.raises(DistroError, match="folder"):
        read_bounded(tmp_path, 100)
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(10 << 30)  # sparse: refused by its size, nothing is read
    with pytest.raises(DistroError, match="at most"):
        read_json(big, "results")
    with pytest.raises(FileNotFoundError):
        read_bounded(tmp_path / "missing", 100)
    with pytest.raises(DistroError, match="cannot read"):
        read_bounded(tmp_path / "nul\0name", 100)


def test_check_writable_says_what_is_in_the_way(tmp_path):
    (tmp_path / "file").write_text("x")
    check_writable(tmp_path / "new" / "deeper", folder=True)
    check_writable(tmp_path / "file", folder=False)
    for path, folder, words in ((tmp_path / "file", True, "not a folder"), (tmp_path, False, "not a regular file"),
                                (tmp_path / "file" / "x", True, "is not a folder"),
                                (Path("/proc/x"), True, "kernel"), (Path("/sys/x"), False, "kernel")):
        with pytest.raises(DistroError, match=words):
            check_writable(path, folder=folder)


def test_an_oserror_naming_a_file_is_a_message_and_one_naming_none_is_not_hidden():
    err = FileSystemError.of(OSError(errno.EFBIG, "File too large", "/x/ledger.json"))
    assert err.exit_code == ExitCode.FAILURES and err.path == "/x/ledger.json" and "EFBIG" in err.message
    assert "ulimit" in (err.hint or "")
    err = FileSystemError.of(PermissionError(errno.EACCES, "Permission denied", "/x"))
    assert err.exit_code == ExitCode.BAD_INPUT and "EACCES" in err.message
    # the handler turns only an OSError that names a file into a message: anything else is a bug to see
    from conda_distro.cli import _main

    class Boom(OSError):
        pass

    import conda_distro.cli as cli

    def explode(*a, **k):
        raise Boom("no file named")

    original = cli.command
    cli.command = lambda: type("C", (), {"main": staticmethod(explode)})()
    try:
        with pytest.raises(Boom):
            _main(["lint"])
    finally:
        cli.command = original


def test_render_cache_entries_that_are_special_files_are_cache_misses(tmp_path, capsys, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CONDA_DISTRO_CACHE", str(cache))
    root = write_distro(tmp_path / "repo", {"alpha": clean_recipe_text("alpha")})
    assert run_cli_at(capsys, root, "lint")[0] == 0  # fills the cache
    # the per-recipe entries and the packed cache (many entries in one file) alike
    entries = [p for p in cache.rglob("*") if p.is_file() and p.suffix in (".json", ".pack")]
    assert any(p.suffix == ".pack" for p in entries)
    for i, p in enumerate(entries):
        p.unlink()
        if i % 3 == 0:
            os.mkfifo(p)
        elif i % 3 == 1:
            p.symlink_to("/dev/zero")
        else:
            p.write_text("[" * 100_000 + "]" * 100_000)
    code, out, err = run_cli_at(capsys, root, "lint")
    assert code == 0 and "Traceback" not in out + err
    packs = [p for p in entries if p.suffix == ".pack"]
    assert all(p.is_file() and not p.is_symlink() for p in packs)  # written again, atomically, in their place


# ---------------------------------------------------------------------------------------------
# paths taken from files


def test_a_sweep_journal_cannot_make_the_rollback_write_outside_the_repository(tmp_path, capsys):
    root = make_world(tmp_path / "world")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    for name in ("../victim.txt", str(victim), "recipes/alpha/../../../victim.txt", "channel_state/alpha.json"):
        SweepJournal(release="2.6.0", originals={name: "overwritten\n"}, written={name: "x"}).save(root / "build")
        ledger = (root / "channel_state" / "alpha.json").read_text()
        code, out, err = run_cli_at(capsys, root, "sweep", "--pytorch", "2.6.0", "--no-build")
        assert code == 2 and "Traceback" not in out + err and "pytorch-2.6.0.journal.json" in err, err
        assert "not a file a sweep edits" in err
        assert victim.read_text() == "precious\n" and (root / "channel_state" / "alpha.json").read_text() == ledger


def test_a_symlinked_recipe_folder_cannot_take_the_rollback_out_either(tmp_path, capsys):
    root = make_world(tmp_path / "world")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "recipe.yaml").write_text("precious\n")
    (root / "recipes" / "gamma").symlink_to(outside)
    SweepJournal(release="2.6.0", originals={"recipes/gamma/recipe.yaml": "overwritten\n"},
                 written={"recipes/gamma/recipe.yaml": "precious\n"}).save(root / "build")
    code, out, err = run_cli_at(capsys, root, "sweep", "--pytorch", "2.6.0", "--no-build")
    assert code == 2 and "not a file a sweep edits" in err
    assert (outside / "recipe.yaml").read_text() == "precious\n"


def test_the_status_page_copies_only_logs_of_the_build_log_folder(tmp_path, capsys):
    root = make_world(tmp_path / "world")
    results = root / "build" / "results" / "noarch__beta-1.2.0-pyh4616a5c_0.conda.json"
    logs = root / "build" / "logs" / "beta"
    logs.mkdir(parents=True)
    (logs / "good.log").write_text("AssertionError: the real failure\n")
    (logs / "escape.log").symlink_to("/etc/hostname")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not publish\n")
    doc = json.loads(results.read_text())
    paths = ["../../../../../../../../etc/passwd", str(secret), str(logs / "escape.log"), str(logs / "good.log"),
             "build/logs/beta/../../../../secret.txt", "/proc/self/environ"]
    for t, log in zip(doc["tests"], paths, strict=False):
        t["log"] = log
    results.write_text(json.dumps(doc))
    code, out, err = run_cli_at(capsys, root, "status", "--out", str(root / "site"))
    assert code in (0, 1) and "Traceback" not in out + err, err
    copied = sorted(p.relative_to(root / "site").as_posix() for p in (root / "site").rglob("*") if p.is_file())
    assert copied == ["index.html", "logs/beta/good.log", "style.css"]
    page = (root / "site" / "index.html").read_text()
    assert "do not publish" not in page and "root:" not in page


# ---------------------------------------------------------------------------------------------
# promote and retire check what they will write first


@pytest.fixture()
def staged(template: Path, tmp_path: Path) -> Path:
    return make_root(template, tmp_path)


def _main_files(root: Path) -> list[str]:
    main = root / "build" / "channels" / "main"
    return sorted(p.relative_to(main).as_posix() for p in main.rglob("*") if p.is_file()) if main.is_dir() else []


@pytest.mark.parametrize("where", ["ledger-a-file", "ledger-under-a-file", "excuses-a-folder", "main-a-file",
                                   "main-subdir-a-file", "main-index-a-folder"])
def test_promote_writes_nothing_when_a_place_it_writes_is_in_the_way(staged, capsys, where):
    main = staged / "build" / "channels" / "main"
    if where == "ledger-a-file":
        (staged / "channel_state").write_text("not a folder\n")
    elif where == "ledger-under-a-file":
        (staged / "channel_state").symlink_to(staged / "distro.yaml")
    elif where == "excuses-a-folder":
        (staged / "build" / "excuses.json").mkdir()
    elif where == "main-a-file":
        main.parent.mkdir(parents=True, exist_ok=True)
        main.write_text("not a folder\n")
    elif where == "main-subdir-a-file":
        main.mkdir(parents=True)
        (main / "noarch").write_text("not a folder\n")
    else:
        (main / "noarch" / "repodata.json").mkdir(parents=True)
    before = snapshot(staged)
    code, out, err = run_cli_at(capsys, staged, "promote")
    assert code == 2 and "Traceback" not in out + err and "cannot be written" in err, err
    assert snapshot(staged) == before


def test_retire_writes_nothing_when_a_place_it_writes_is_in_the_way(staged, capsys):
    assert run_cli_at(capsys, staged, "promote")[0] == 1  # alpha and gamma go to main
    records = staged / "channel_state" / "retirements"
    records.write_text("not a folder\n")
    before = snapshot(staged)
    code, out, err = run_cli_at(capsys, staged, "retire", "gamma", "--reason", "broken", "--force")
    assert code == 2 and "Traceback" not in out + err and "channel_state/retirements" in err
    assert snapshot(staged) == before


# ---------------------------------------------------------------------------------------------
# the machine refuses: the probe's traceback causes, run as a user runs them (a subprocess)


def cli(root: Path | None, *args: str, env: dict | None = None, preexec=None, stdout=subprocess.PIPE,
        timeout: float = 180) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "conda_distro", *args, *(["--root", str(root)] if root else [])]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GIT_PYTHON")}
    return subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=timeout,
                          env={**environ, **(env or {})}, preexec_fn=preexec)


def test_a_closed_stdout_is_refused_before_anything_runs(tmp_path):
    root = make_world(tmp_path / "world")
    before = snapshot(root)
    r = subprocess.run(f'"{sys.executable}" -m conda_distro lint --root "{root}" >&-', shell=True,
                       capture_output=False, stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "standard output is closed" in r.stderr
    r = subprocess.run(f'"{sys.executable}" -m conda_distro promote --root "{root}" >&-', shell=True,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 2 and "standard output is closed" in r.stderr
    assert snapshot(root) == before


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"PYTHONIOENCODING": "ascii:strict", "LC_ALL": "C"}])
def test_non_ascii_output_on_an_ascii_stream_is_escaped(tmp_path, env):
    root = make_world(tmp_path / "world")
    (root / "recipes" / "alpha" / "recipe.yaml").write_text(
        clean_recipe_text("alpha", extra="recipe-maintainers-note: ok").replace(
            "summary: The alpha test package", "summary: Die Größe der Tensoren — «schnell» ✓").replace(
            "  license: BSD-3-Clause", "  license: Größe"))
    r = cli(root, "lint", env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr + r.stdout, r.stderr
    assert "Gr\\xf6\\xdfe" in r.stdout or "Gr\\u00f6\\u00dfe" in r.stdout or "Gr\\xf6\\xdfe" in r.stderr
    r = cli(root, "promote", "--dry-run", env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr


def test_git_missing_from_path_is_a_message(tmp_path):
    root = make_world(tmp_path / "world")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {"PATH": str(bin_dir)}
    for args in (("graph", "--changed-since", "HEAD~1"), ("check-pr", "--base", "HEAD~1"),
                 ("build", "--changed-since", "HEAD", "--dry-run")):
        r = cli(root, *args, env=env)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (args, r.stderr)
        assert "git is not installed" in r.stderr, r.stderr


def _fsize_limit(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_file_size_limit_in_promote_and_retire_is_a_message_and_a_rerun_converges(staged):
    r = cli(staged, "promote", preexec=_fsize_limit(100))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "File too large (EFBIG)" in r.stderr and "ulimit -f" in r.stderr
    r = cli(staged, "promote", "--format", "json")
    assert r.returncode == 1, r.stderr  # the scenario holds failed packages on purpose
    assert {p["artifact"].split("/")[1].split("-")[0] for p in json.loads(r.stdout)["promoted"]} == {"alpha", "gamma"}
    ledger = (staged / "channel_state" / "gamma.json").read_text()
    r = cli(staged, "retire", "gamma", "--reason", "broken", "--force", preexec=_fsize_limit(100))
    assert r.returncode == 1 and "Traceback" not in r.stderr and "EFBIG" in r.stderr, r.stderr
    assert (staged / "channel_state" / "gamma.json").read_text() == ledger  # nothing half-written
    r = cli(staged, "retire", "gamma", "--reason", "broken", "--force")
    assert r.returncode == 0, r.stderr
    assert '"retired"' in (staged / "channel_state" / "gamma.json").read_text()


def test_a_recipe_that_is_a_link_to_proc_self_mem_is_refused(tmp_path, capsys):
    root = make_world(tmp_path / "world")
    recipe = root / "recipes" / "alpha" / "recipe.yaml"
    recipe.unlink()
    recipe.symlink_to("/proc/self/mem")
    for argv in (("lint", "alpha"), ("build", "alpha", "--dry-run"), ("graph",)):
        code, out, err = run_cli_at(capsys, root, *argv)
        assert code in (1, 2) and "Traceback" not in out + err, (argv, err)
        assert "recipes/alpha/recipe.yaml" in out + err and "kernel" in out + err
    # a file beside the recipe that links there: its input hash cannot be taken
    recipe.unlink()
    recipe.write_text(clean_recipe_text("alpha"))
    (root / "recipes" / "alpha" / "notes").symlink_to("/proc/self/mem")
    code, out, err = run_cli_at(capsys, root, "build", "alpha", "--dry-run")
    assert code == 2 and "Traceback" not in out + err and "recipes/alpha/notes" in err, err


def test_a_reader_that_stops_early_gives_no_traceback(tmp_path):
    root = make_world(tmp_path / "world")
    r = subprocess.run(f'"{sys.executable}" -m conda_distro lint --list-checks --root "{root}" | true',
                       shell=True, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr


@pytest.mark.parametrize("make", ["fifo", "dev-zero", "nested"])
def test_sandbox_cache_entries_and_indexes_go_through_the_reader(tmp_path, make):
    """The sandbox's upstream index and `sandbox --real`'s cache entry: refused (named), never read blindly."""
    from conda_distro.errors import BridgeError, ChannelError
    from conda_distro.sandbox.real import _read_entry
    from conda_distro.sandbox.upstream import read_repodata

    index, entry = tmp_path / "noarch" / "repodata.json", tmp_path / "cache-entry.json"
    index.parent.mkdir()
    for p in (index, entry):
        if make == "fifo":
            os.mkfifo(p)
        elif make == "dev-zero":
            p.symlink_to("/dev/zero")
        else:
            p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ChannelError) as err:
        read_repodata(tmp_path, "noarch")
    assert err.value.path == str(index)
    with pytest.raises(BridgeError) as err:
        _read_entry(entry)
    assert err.value.path == str(entry)
