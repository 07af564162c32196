"""What a build sandbox is given, wherever things live: url sources fetched beforehand into the cache,
path sources only from inside the repository, local channels at plain paths (any repository path),
limits from distro.yaml and the recipe, no temporary folder left behind (remote upstream channels:
tests/test_mirror.py)."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.helpers import run_cli_at, run_json_at, sha256
from support.worlds import copy_world

from conda_distro.engine.sandbox import bwrap_path

needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed (run .ci/install-sandbox)")

SERVER = textwrap.dedent("""\
    import functools, http.server, sys
    class H(http.server.SimpleHTTPRequestHandler):
        def log_message(self, fmt, *args):
            sys.stderr.write("GET " + self.path + "\\n"); sys.stderr.flush()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(H, directory=sys.argv[1]))
    print(srv.server_address[1], flush=True)
    srv.serve_forever()
    """)


def tarball(folder: Path, name: str, text: str) -> tuple[Path, str]:
    """``folder/<name>.tar.gz`` holding ``<name>/hello.txt``; its path and sha256."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = text.encode()
        info = tarfile.TarInfo(f"{name}/hello.txt")
        info.size, info.mtime = len(data), 0
        tar.addfile(info, io.BytesIO(data))
    path = folder / f"{name}.tar.gz"
    path.write_bytes(buf.getvalue())
    return path, hashlib.sha256(buf.getvalue()).hexdigest()


def url_recipe(name: str, url: str, sha: str, text: str) -> str:
    return textwrap.dedent(f"""\
        package:
          name: {name}
          version: "1.0"

        source:
          url: {url}
          sha256: {sha}

        build:
          number: 0
          noarch: generic
          script:
            - mkdir -p $PREFIX/share/{name}
            - cp hello.txt $PREFIX/share/{name}/

        tests:
          - script:
              - grep -q "{text}" $PREFIX/share/{name}/hello.txt

        about:
          license: MIT
          summary: {name} (a recipe with a url source)

        extra:
          recipe-maintainers:
            - octocat
        """)


@pytest.fixture()
def http_folder(tmp_path: Path) -> Iterator[tuple[Path, int, Path]]:
    """A loopback HTTP server (its own process) serving a folder: (folder, port, its request log)."""
    folder = tmp_path / "served"
    folder.mkdir()
    log = tmp_path / "server.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-c", SERVER, str(folder)], stdout=subprocess.PIPE, stderr=err,
                                text=True)
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            yield folder, port, log
        finally:
            proc.kill()
            proc.wait(timeout=60)


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.slow
@needs_bwrap
def test_cache_work_and_tmpdir_under_tmp_build_real_sources_and_leave_nothing_repro(sandbox_world, tmp_path, capsys,
                                                                                    monkeypatch, http_folder):
    """The probe: with CONDA_DISTRO_CACHE under /tmp every real recipe failed in ~1 s with "File not found:
    …/sources/…/NAME.tar.gz" (the sandbox's own /tmp hid the cache). Here the cache, the work folders
    (the world) and TMPDIR all lie under /tmp; one recipe's url is http (fetched by the orchestrator),
    another's is the cached file itself (as `sandbox --real` writes them)."""
    served, port, requests = http_folder
    assert str(tmp_path).startswith("/tmp/") and str(sandbox_world).startswith("/tmp/")
    cache, tmpdir, scratch = tmp_path / "cache", tmp_path / "tmpdir", tmp_path / "scratch"
    tmpdir.mkdir()
    scratch.mkdir()
    monkeypatch.setenv("CONDA_DISTRO_CACHE", str(cache))
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    monkeypatch.setenv("CONDA_DISTRO_TEST_TMPDIR", str(scratch))  # test environments: a chosen place
    monkeypatch.setattr(tempfile, "tempdir", None)  # (tempfile reads TMPDIR once)
    _, sha_a = tarball(served, "fetched-1.0", "hello-from-http")
    src_b, sha_b = tarball(tmp_path, "cachedsrc-1.0", "hello-from-the-cache")
    local = cache / "sources" / sha_b  # the real world's layout: <cache>/sources/<sha256>/<file>
    local.mkdir(parents=True)
    cached_b = local / src_b.name
    src_b.rename(cached_b)
    root = sandbox_world
    for name, url, sha, text in (("fetched", f"http://127.0.0.1:{port}/fetched-1.0.tar.gz", sha_a, "hello-from-http"),
                                 ("cachedsrc", cached_b.as_uri(), sha_b, "hello-from-the-cache")):
        (root / "recipes" / name).mkdir()
        (root / "recipes" / name / "recipe.yaml").write_text(url_recipe(name, url, sha, text))
    code, doc = run_json_at(capsys, root, "build", "fetched", "cachedsrc", "--pytorch", "2.6.0")
    assert code == 0, doc
    assert {b["status"] for b in doc["builds"]} == {"built"} and {t["status"] for t in doc["tests"]} == {"passed"}
    assert all("Collecting tests from '/job/scratch/" in Path(t["log"]).read_text() for t in doc["tests"])
    assert requests.read_text().count("GET /fetched-1.0.tar.gz") == 1
    fetched = list((cache / "sources" / sha_a).iterdir())
    assert [p.name for p in fetched] == ["fetched-1.0.tar.gz"] and sha256(fetched[0]) == sha_a
    assert listing(cache / "sources") == sorted([sha_a, f"{sha_a}/fetched-1.0.tar.gz", sha_b,
                                                 f"{sha_b}/cachedsrc-1.0.tar.gz"])  # no part files left
    # no temporary folder is left: not in TMPDIR, not where test environments went, not in the work root
    assert listing(tmpdir) == [] and listing(scratch) == []
    assert not list((root / "build/work").iterdir())
    # built again from the cache: no second download
    code, doc = run_json_at(capsys, root, "build", "fetched", "--pytorch", "2.6.0", "--dry-run")
    assert code == 0
    (root / "build/channels/staging" / doc["plan"]["packages"][0]["variants"][0]["artifact"]).unlink()
    code, doc = run_json_at(capsys, root, "build", "fetched", "--pytorch", "2.6.0")
    assert code == 0 and doc["builds"][0]["status"] == "built"
    assert requests.read_text().count("GET /fetched-1.0.tar.gz") == 1
    assert listing(tmpdir) == [] and listing(scratch) == [] and not list((root / "build/work").iterdir())


@pytest.mark.slow
@needs_bwrap
def test_a_url_source_with_other_bytes_fails_its_build_and_caches_nothing(sandbox_world, capsys, tmp_path, monkeypatch,
                                                                         http_folder):
    served, port, _ = http_folder
    monkeypatch.setenv("CONDA_DISTRO_CACHE", str(tmp_path / "cache"))
    tarball(served, "fetched-1.0", "hello")
    (sandbox_world / "recipes/fetched").mkdir()
    (sandbox_world / "recipes/fetched/recipe.yaml").write_text(
        url_recipe("fetched", f"http://127.0.0.1:{port}/fetched-1.0.tar.gz", "ab" * 32, "hello"))
    code, doc = run_json_at(capsys, sandbox_world, "build", "fetched", "--pytorch", "2.6.0")
    assert code == 1
    (b,) = doc["builds"]
    assert b["status"] == "failed" and "the source could not be fetched" in b["reason"] and "ab" * 32 in b["reason"]
    assert not list((tmp_path / "cache/sources").glob("*/*"))


ODD = "w x+=@,#'é"


@pytest.mark.slow
@needs_bwrap
def test_a_repository_path_with_spaces_and_symbols_builds_repro(sandbox_template, tmp_path, capsys, monkeypatch,
                                                                http_folder):
    """The probe: a repository path with a space or `+ = @ , # '` or non-ASCII failed every build
    ("Failed to resolve dependencies": the file:// channel URLs are percent-encoded)."""
    served, port, _ = http_folder
    root = copy_world(sandbox_template, tmp_path / ODD / "world")
    monkeypatch.setenv("CONDA_DISTRO_CACHE", str(tmp_path / ODD / "cache"))
    _, sha = tarball(served, "fetched-1.0", "hello-odd")
    (root / "recipes/fetched").mkdir()
    (root / "recipes/fetched/recipe.yaml").write_text(
        url_recipe("fetched", f"http://127.0.0.1:{port}/fetched-1.0.tar.gz", sha, "hello-odd"))
    code, doc = run_json_at(capsys, root, "build", "tensorutils", "layerkit", "fetched", "--pytorch", "2.6.0")
    assert code == 0, doc
    assert {b["status"] for b in doc["builds"]} == {"built"}
    assert len(doc["tests"]) == 2 * len(doc["builds"]) >= 6 and {t["status"] for t in doc["tests"]} == {"passed"}


# ---------------------------------------------------------------------------------------------
# refused before anything runs (exit 2, nothing written)


def _generic(name: str, source: str = "", extra: str = "") -> str:
    return (f'package:\n  name: {name}\n  version: "1.0"\n\n{source}'
            f"build:\n  number: 0\n  noarch: generic\n  script:\n    - mkdir -p $PREFIX/share/{name}\n\n"
            "about:\n  license: MIT\n  summary: a test recipe\n\n"
            f"extra:\n  recipe-maintainers:\n    - octocat\n{extra}")


@pytest.mark.parametrize(("source", "extra", "field", "line", "message"), [
    ("source:\n  path: /etc\n\n", "", "source.path", 6, "source path '/etc' leads outside the repository"),
    ("source:\n  - path: ../../..\n\n", "", "source.path", 6, "source path '../../..' leads outside"),
    ("source:\n  url: https://example.org/x-1.0.tar.gz\n\n", "", "source.sha256", 6, "has no sha256"),
    ("", "  limits:\n    test_timeout: forever\n", "extra.limits.test_timeout", 19, "'forever' is not a number of seconds"),
    ("", "  limits:\n    log_limit: 12 parsecs\n", "extra.limits.log_limit", 19, "is not a log size"),
    ("", "  limits:\n    build_timout: 5\n", "extra.limits.build_timout", 19, "unknown key 'build_timout'"),
    ("", "  limits: 5\n", "extra.limits", 18, "extra.limits must be a mapping"),
], ids=["absolute-path", "climbing-path", "url-without-sha256", "bad-timeout", "bad-size", "unknown-key", "not-a-map"])
def test_bad_sources_and_limits_of_a_recipe_are_refused_before_anything_runs(make_distro, capsys, source, extra, field,
                                                                              line, message):
    root = make_distro({"probe": _generic("probe", source, extra)})
    for args in (["build", "probe", "--dry-run"], ["build", "probe"]):
        code, out, err = run_cli_at(capsys, root, *args)
        assert code == 2, (out, err)
        assert f"recipes/probe/recipe.yaml:{line}" in err and f"field '{field}'" in err and message in err, err
        assert not (root / "build").exists()


def test_the_source_path_check_is_a_function_lint_can_call(tmp_path):
    from conda_distro.recipe.model import load_recipe
    from conda_distro.recipe.sources import source_path_problems

    root = tmp_path / "repo"
    (root / "recipes/probe/src").mkdir(parents=True)
    (root / "shared").mkdir()
    (root / "recipes/probe/escape").symlink_to("/etc")
    for path, bad in (("src", False), ("../../shared", False), ("/etc", True), ("../../..", True), ("escape", True),
                      (str(root / "shared"), False)):
        (root / "recipes/probe/recipe.yaml").write_text(_generic("probe", f"source:\n  path: {path}\n\n"))
        problems = source_path_problems(load_recipe(root / "recipes/probe/recipe.yaml"), root)
        assert bool(problems) is bad, (path, problems)
        if bad:
            assert problems[0].line == 6 and problems[0].field == "source.path"


@pytest.mark.parametrize(("limits", "field", "message"), [
    ({"test_timeout": 0}, "limits.test_timeout", "is not a number of seconds"),
    ({"build_timeout": "1h"}, "limits.build_timeout", "is not a number of seconds"),
    ({"log_limit": "10 bytes"}, "limits.log_limit", "is not a log size"),
    ({"log_limit": 10}, "limits.log_limit", "is not a log size"),
    ({"wall_clock": 5}, "limits.wall_clock", "unknown key 'wall_clock'"),
])
def test_bad_limits_in_distro_yaml_exit_2_naming_the_field(make_distro, capsys, limits, field, message):
    root = make_distro({}, {"limits": limits})
    code, out, err = run_cli_at(capsys, root, "lint")
    assert code == 2 and f"field '{field}'" in err and message in err and "distro.yaml:" in err, err


def test_limits_read_from_distro_yaml_and_the_recipe(tmp_path):
    from conda_distro.config import Limits
    from conda_distro.engine.limits import recipe_limits

    defaults = Limits.model_validate({"test_timeout": "30", "log_limit": "2 MiB"})
    assert (defaults.build_timeout, defaults.test_timeout, defaults.log_limit) == (3600, 30, 2 << 20)
    text = _generic("probe", "", "  limits:\n    build_timeout: 7200\n    log_limit: 256 MiB\n")
    got = recipe_limits(tmp_path / "recipe.yaml", text, defaults)
    assert (got.build_timeout, got.test_timeout, got.log_limit) == (7200, 30, 256 << 20)
    assert recipe_limits(tmp_path / "recipe.yaml", _generic("probe"), defaults) == defaults


def test_the_sandbox_layout_is_plain_whatever_the_host_path(tmp_path):
    from conda_distro.engine.sandbox import Layout

    odd = tmp_path / ODD
    a, b = odd / "staging", tmp_path / "other" / "staging"
    lay = Layout(True)
    url_a = lay.channel(a.as_uri())
    assert url_a == "file:///job/channels/staging" and "%" in a.as_uri()
    assert lay.channel(b.as_uri()) == "file:///job/channels/staging-2"
    assert lay.channel(a.as_uri()) == url_a  # shown once
    assert lay.channel("https://conda.anaconda.org/conda-forge") == "https://conda.anaconda.org/conda-forge"
    assert [(m.host, str(m.inside), m.writable) for m in lay.mounts] == [
        (a, "/job/channels/staging", False), (b, "/job/channels/staging-2", False)]
    assert Layout(False).channel(a.as_uri()) == a.as_uri()  # unsandboxed: the host path


def test_a_sandbox_shows_no_host_home_socket_or_secret_file():
    from conda_distro.engine.sandbox import ETC, SandboxSpec, bwrap_args

    args = bwrap_args(SandboxSpec())
    shown = {args[i + 2] for i, a in enumerate(args) if a in ("--ro-bind", "--bind", "--dev-bind")}
    assert "/" not in shown and not {"/home", "/root", "/run", "/var", "/var/run", "/opt", "/tmp", "/dev/shm"} & shown
    assert not [p for p in shown if p.startswith("/etc/") and p[5:] not in ETC]
    assert not {"ssl", "ssl/private", "shadow", "pip.conf", "npmrc", "gitconfig"} & set(ETC)
    for flag in ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--cap-drop", "--die-with-parent"):
        assert flag in args
    assert args[args.index("--remount-ro") + 1] == "/"


def test_a_private_folder_left_by_a_killed_build_is_removed_and_one_in_use_is_kept(tmp_path):
    from conda_distro.engine.phases import claim_folder, clear_stale_folders

    root = tmp_path / "work"
    mine, fd = claim_folder(root, "held-")
    (mine / "build").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from conda_distro.engine.phases import claim_folder; "
        f"d, fd = claim_folder(Path({str(root)!r}), 'killed-'); (d / 'out').mkdir(); (d / 'out').chmod(0o500); "
        "print(d, flush=True); time.sleep(600)")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    theirs = Path(holder.stdout.readline().strip())
    assert clear_stale_folders(root) == [] and theirs.is_dir()  # both in use
    holder.kill()  # kill -9: its lock goes with it
    holder.wait(timeout=60)
    assert clear_stale_folders(root) == [theirs] and not theirs.exists()
    assert mine.is_dir()
    os.close(fd)
    assert clear_stale_folders(root) == [mine] and list(root.iterdir()) == []


def test_a_download_temp_in_the_source_cache_is_never_taken_for_the_source(tmp_path):
    """The sandbox's own downloads write a hidden temp in the same cache folder (``.download-*``). Killed after
    its last write, before its rename, the temp holds the right bytes under a name rattler-build cannot unpack
    by: the source is fetched again under its own name, and such temps are removed once a day old."""
    import hashlib

    from conda_distro.engine.sources import UrlSource, fetch_source

    src = tmp_path / "pkg-1.0.tar.gz"
    src.write_bytes(b"the source's bytes")
    sha = hashlib.sha256(src.read_bytes()).hexdigest()
    folder = tmp_path / "cache" / sha
    folder.mkdir(parents=True)
    (folder / ".download-x1").write_bytes(src.read_bytes())  # (complete, not renamed)
    old = folder / ".download-x2"
    old.write_bytes(b"cut short")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    got = fetch_source(UrlSource(url=src.as_uri(), sha256=sha, line=1), tmp_path / "cache")
    assert got == folder / "pkg-1.0.tar.gz" and got.read_bytes() == src.read_bytes()
    assert sorted(p.name for p in folder.iterdir()) == [".download-x1", "pkg-1.0.tar.gz"]  # (a fresh temp: kept)
