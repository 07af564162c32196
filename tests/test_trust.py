"""Trust: recipe code runs sandboxed, results are written by the
orchestrator and sealed with the artifact's sha256, and a recipe publishes only the names it declares.

Real engines throughout: builds and tests with rattler-build inside bubblewrap, promotion into a local
main channel. Each attack is also run with ``--no-sandbox`` where that shows the test can fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from support.helpers import run_cli_at, run_json_at, sha256
from support.worlds import own_copy

from conda_distro.engine import intake
from conda_distro.engine.sandbox import Layout, bwrap_path, require_bwrap, wrap
from conda_distro.errors import EngineUnavailableError

STAGING = Path("build/channels/staging")
MAIN = Path("build/channels/pytorch")
REPO = Path(__file__).resolve().parents[1]

needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed (run .ci/install-sandbox)")


def add_recipe(root: Path, name: str, text: str, files: dict[str, bytes] | None = None) -> Path:
    folder = root / "recipes" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "recipe.yaml").write_text(text)
    for fname, data in (files or {}).items():
        (folder / fname).write_bytes(data)
    return folder


def generic_recipe(name: str, script: list[str], tests: list[str] | None = None, *, package_name: str | None = None) -> str:
    """A noarch: generic recipe (no python, no pytorch: tested in seconds)."""
    lines = [
        "package:", f"  name: {package_name or name}", '  version: "0.1.0"', "",
        "build:", "  number: 0", "  noarch: generic", "  script:",
        *[f"    - {json.dumps(s)}" for s in [f"mkdir -p $PREFIX/share/{name}", *script]], "",
    ]
    if tests:
        lines += ["tests:", "  - script:", *[f"      - {json.dumps(t)}" for t in tests], ""]
    lines += ["about:", "  license: MIT", f"  summary: {name} (trust test)", "",
              "extra:", "  recipe-maintainers:", "    - octocat", ""]
    return "\n".join(lines)


def staging_files(root: Path) -> dict[str, str]:
    st = root / STAGING
    return {p.relative_to(st).as_posix(): sha256(p) for p in st.glob("*/*.conda")}


def results_files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "build/results").glob("*.json"))}


# ---------------------------------------------------------------------------------------------
# the sandbox itself (real bwrap, no rattler-build)


@needs_bwrap
def test_sandbox_hides_the_repository_and_allows_writes_only_to_its_own_folder(tmp_path):
    repo = tmp_path / "repo"
    (repo / "recipes/mine").mkdir(parents=True)
    (repo / "recipes/other").mkdir(parents=True)
    (repo / "build/results").mkdir(parents=True)
    (repo / "build/results/x.json").write_text('{"status": "failed"}')
    (repo / "recipes/mine/recipe.yaml").write_text("mine")
    work = repo / "build/work/mine-1"
    work.mkdir(parents=True)
    lay = Layout(True)
    work_in = lay.show(work, "work", writable=True)
    mine = lay.show(repo / "recipes/mine", "repo/recipes/mine")
    script = (
        f"cat {repo}/build/results/x.json /job/repo/build/results/x.json 2>/dev/null && echo RESULTS_READ; "
        f"cat {mine}/recipe.yaml; echo; "
        "ls /job/repo/recipes; "
        f"touch {mine}/new 2>/dev/null && echo RECIPE_WRITTEN; "
        f"mkdir -p {repo}/build/results 2>/dev/null && echo evil > {repo}/build/results/evil.json; "
        "touch /evil 2>/dev/null && echo ROOT_WRITTEN; "
        f"touch {work_in}/out && echo WORK_WRITTEN; "
        f"echo PROCS $(ls -d /proc/[0-9]* | wc -l); "
        f"ls /proc/{os.getpid()} >/dev/null 2>&1 && echo PARENT_VISIBLE; "
        "ls -d /root/* /home /run /var /opt 2>/dev/null | tr '\\n' ' '; echo; "
        "grep CapEff /proc/self/status"
    )
    proc = subprocess.run(wrap(["/bin/sh", "-c", script], lay.spec(), require_bwrap()), capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin"})
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert "RESULTS_READ" not in out and "failed" not in out
    assert "mine" in out.splitlines()[0]  # its own recipe folder is readable
    assert out.splitlines()[1].split() == ["mine"]  # other recipes are not even listed
    assert "RECIPE_WRITTEN" not in out and "ROOT_WRITTEN" not in out
    assert not (repo / "build/results/evil.json").exists()  # (its own /tmp took the write, if any)
    assert "WORK_WRITTEN" in out and (work / "out").is_file()
    host_procs = sum(name.isdigit() for name in os.listdir("/proc"))
    assert int(out.split("PROCS ")[1].split()[0]) < min(10, host_procs)  # its own pid namespace
    assert "PARENT_VISIBLE" not in out or os.getpid() < 5
    shown = out.split("\n")[-3] if "CapEff" in out.split("\n")[-2] else ""
    assert all(p not in shown for p in ("/home", "/run", "/var", "/opt")), shown  # no host home, sockets, ...
    assert "CapEff:\t0000000000000000" in out
    # and without the sandbox the same script sees and writes everything (the test can fail)
    unboxed = script.replace("/job/repo", str(repo)).replace(str(mine), str(repo / "recipes/mine"))
    proc = subprocess.run(wrap(["/bin/sh", "-c", unboxed], None, None), capture_output=True, text=True, timeout=60)
    assert "RESULTS_READ" in proc.stdout and "RECIPE_WRITTEN" in proc.stdout
    assert (repo / "recipes/mine/new").exists()


@pytest.mark.slow
def test_missing_bubblewrap_fails_closed_with_exit_2_and_writes_nothing(sandbox_world, capsys, monkeypatch, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    (empty / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    monkeypatch.setenv("PATH", str(empty))
    for args in (["build", "tensorutils"], ["build", "--all", "--jobs", "2"]):
        code, out, err = run_cli_at(capsys, sandbox_world, *args)
        assert code == 2, (out, err)
        assert "bubblewrap (bwrap) is not installed" in err and "apt-get install -y bubblewrap" in err
        assert "--no-sandbox" in err
        assert not (sandbox_world / "build").exists()
    with pytest.raises(EngineUnavailableError):
        require_bwrap()
    # the dry run needs no sandbox
    code, _, _ = run_cli_at(capsys, sandbox_world, "build", "tensorutils", "--dry-run")
    assert code == 0


@pytest.mark.slow
def test_sweep_fails_closed_before_editing_anything(sandbox_world, capsys, monkeypatch, tmp_path):
    cfg = sandbox_world / "distro.yaml"
    cfg.write_text(cfg.read_text().replace('releases: ["2.4.1", "2.5.1", "2.6.0"]', 'releases: ["2.4.1", "2.5.1"]'))
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap (and no git: the sweep must stop before needing it)
    before = {p: p.read_bytes() for p in sandbox_world.rglob("*.yaml")}
    code, out, err = run_cli_at(capsys, sandbox_world, "sweep", "--pytorch", "2.6.0")
    assert code == 2, (out, err)
    assert "bubblewrap" in err
    assert {p: p.read_bytes() for p in sandbox_world.rglob("*.yaml")} == before


def test_install_script_is_what_the_readme_and_ci_run(tmp_path):
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci/run").read_text()
    test_cmd = next(ln for ln in ci.splitlines() if "pytest" in ln)
    assert test_cmd.startswith(".ci/install-sandbox && ")
    assert f"\n{test_cmd}\n" in readme  # .ci/run runs exactly the README's test command
    main_cmd = next(ln for ln in readme.splitlines() if "conda-distro sandbox " in ln and ln.startswith(".ci/"))
    assert main_cmd.startswith(".ci/install-sandbox && ")
    # a world folder of its own per run (two people on one machine never wipe each other's), never --force
    assert 'W=$(mktemp -d ' in main_cmd and 'conda-distro sandbox "$W"' in main_cmd and "--force" not in main_cmd
    script = REPO / ".ci/install-sandbox"
    assert os.access(script, os.X_OK)
    # where bwrap already is, it does nothing and succeeds; without it and without a way to install, it
    # says what to install and fails
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\nexit 0\n")
    (fake / "bwrap").chmod(0o755)
    for tool in ("sh", "id"):
        (fake / tool).symlink_to(shutil.which(tool))
    ok = subprocess.run([str(script)], env={"PATH": str(fake)}, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and not ok.stderr
    (fake / "bwrap").unlink()
    no = subprocess.run([shutil.which("sh"), str(script)], env={"PATH": str(fake)}, capture_output=True, text=True,
                        timeout=60)
    assert no.returncode != 0 and "bubblewrap" in no.stderr


# ---------------------------------------------------------------------------------------------
# names: an artifact is named as its recipe declares


PROBE = generic_recipe("probepkg", ["echo probe > $PREFIX/share/probepkg/README"],
                       ["test -f $PREFIX/share/probepkg/README"],
                       package_name='${{ "tensorutils" if env.exists("CI") else "probepkg" }}')


@pytest.mark.slow
def test_ci_env_cannot_rename_an_artifact_repro(sandbox_world, capsys, monkeypatch):
    """A repro: `CI=true conda-distro build probepkg` built and promoted tensorutils-0.1.0."""
    add_recipe(sandbox_world, "probepkg", PROBE)
    monkeypatch.setenv("CI", "true")
    code, doc = run_json_at(capsys, sandbox_world, "build", "probepkg", "--pytorch", "2.6.0")
    assert code == 0, doc
    assert [b["artifact"].split("/")[1].split("-")[0] for b in doc["builds"]] == ["probepkg"]
    assert [a for a in staging_files(sandbox_world)] == [doc["builds"][0]["artifact"]]
    code, doc = run_json_at(capsys, sandbox_world, "promote")
    assert [p["artifact"] for p in doc["promoted"]] == [a for a in staging_files(sandbox_world)]
    assert not list((sandbox_world / MAIN).glob("*/tensorutils-*"))
    assert not (sandbox_world / "channel_state/tensorutils.json").exists()
    assert (sandbox_world / "channel_state/probepkg.json").is_file()


@pytest.mark.slow
def test_a_build_that_leaves_another_packages_artifact_fails_and_stages_nothing(built_world, capsys):
    staged = staging_files(built_world)
    victim = next(a for a in staged if "/tensorutils-" in a)
    payload = (built_world / STAGING / victim).read_bytes()
    add_recipe(built_world, "dropper", generic_recipe("dropper", [
        'mkdir -p "$BUILD_DIR/../../noarch"',
        f'cp "$RECIPE_DIR/payload.conda" "$BUILD_DIR/../../{victim}"',
    ], ["true"]), {"payload.conda": payload + b"tampered"})
    code, doc = run_json_at(capsys, built_world, "build", "dropper", "--pytorch", "2.6.0")
    assert code == 1
    (b,) = doc["builds"]
    assert b["status"] == "failed", b
    assert victim in b["reason"] and "declares only: dropper" in b["reason"], b["reason"]
    assert {t["status"] for t in doc["tests"]} == {"blocked"}
    assert staging_files(built_world) == staged  # the victim untouched, and no dropper either
    assert not list((built_world / "build/results").glob("*dropper*"))
    assert not list((built_world / "build/work").glob("*")), "the private work folder was not cleaned"


@pytest.mark.slow
def test_intake_checks_name_file_name_and_plan_on_a_real_package(built_template, tmp_path):
    src = next((built_template / STAGING / "noarch").glob("tensorutils-*.conda"))
    art = f"noarch/{src.name}"
    out = tmp_path / "out"
    (out / "noarch").mkdir(parents=True)
    shutil.copy(src, out / art)
    (out / "bld").mkdir()
    (out / "bld" / "ignored.conda").write_bytes(b"scratch folders are never taken")
    files, why = intake.check(out, {art}, frozenset({"tensorutils"}), "recipes/tensorutils")
    assert why is None and [p.artifact for p in files] == [art]
    _, why = intake.check(out, {art}, frozenset({"probepkg"}), "recipes/probepkg")
    assert "package 'tensorutils'" in why and "declares only: probepkg" in why
    _, why = intake.check(out, set(), frozenset({"tensorutils"}), "recipes/tensorutils")
    assert "not one of the planned variants" in why
    _, why = intake.check(out, {art, "noarch/tensorutils-0.3.2-h0_9.conda"}, frozenset({"tensorutils"}), "r")
    assert "did not produce noarch/tensorutils-0.3.2-h0_9.conda" in why
    renamed = out / "noarch/tensorutils-0.3.2-h0_9.conda"
    shutil.copy(src, renamed)
    _, why = intake.check(out, {art, "noarch/tensorutils-0.3.2-h0_9.conda"}, frozenset({"tensorutils"}), "r")
    assert "does not match the package" in why
    renamed.unlink()
    (out / "noarch/evil.conda").symlink_to(src)
    _, why = intake.check(out, {art}, frozenset({"tensorutils"}), "r")
    assert "not a regular file" in why
    # accepting copies into staging and hashes the copy
    (out / "noarch/evil.conda").unlink()
    res = intake.accept(out, {art}, frozenset({"tensorutils"}), tmp_path / "staging", "r")
    assert res.rejected is None and res.sha256[art] == sha256(src) == sha256(tmp_path / "staging" / art)


@pytest.mark.slow
def test_an_intake_killed_with_9_leaves_no_copy_in_staging_after_the_next_build(built_world, capsys, tmp_path):
    """Killed with -9 while it copies a package into staging, an intake leaves its temp copy there: never
    indexed, never removed, a package's size each. The next build (it holds staging's lock before its own
    intakes) removes it; any other file stays."""
    import signal
    import sys

    staging = built_world / STAGING
    src = next((staging / "noarch").glob("tensorutils-*.conda"))
    art = f"noarch/{src.name}"
    out = tmp_path / "out"
    (out / "noarch").mkdir(parents=True)
    shutil.copy(src, out / art)
    script = ("import os, signal\nfrom pathlib import Path\nfrom conda_distro.engine import intake\n"
              "intake.sha256_of = lambda p: os.kill(os.getpid(), signal.SIGKILL)  # killed once the copy is written\n"
              f"intake.accept(Path({str(out)!r}), {{{art!r}}}, frozenset({{'tensorutils'}}), Path({str(staging)!r}), 'r')\n")
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = [p.name for p in (staging / "noarch").iterdir() if ".intake" in p.name]
    assert left, "the killed intake left nothing behind: this test would not test"
    other = staging / "noarch" / ".kept-by-someone"
    other.write_text("not an intake's")
    before = staging_files(built_world)
    code, doc = run_json_at(capsys, built_world, "build", "tensorutils", "--pytorch", "2.6.0")
    assert code == 0, doc
    assert [p.name for p in (staging / "noarch").iterdir() if ".intake" in p.name] == []
    assert other.read_text() == "not an intake's"
    assert set(staging_files(built_world)) == set(before)


@pytest.mark.slow
def test_an_unreadable_package_in_staging_is_named_not_a_traceback(built_world, capsys):
    """A package file in staging that cannot be read (a copy killed midway by an older version, a damaged disk)
    made rattler's indexer panic: every later build died with a traceback (exit 1) and no word of which file.
    Now the build exits 2 naming the file and what to do."""
    junk = built_world / STAGING / "noarch" / "zzjunk-1.0-pyh4616a5c_0.conda"
    junk.write_bytes(os.urandom(3000))
    (built_world / STAGING / "noarch" / "repodata.json").unlink()  # (so that this build indexes staging)
    code, out, err = run_cli_at(capsys, built_world, "build", "tensorutils", "--pytorch", "2.6.0")
    assert code == 2, err
    assert "Traceback" not in err and "zzjunk-1.0-pyh4616a5c_0.conda" in err and "is not a readable package" in err
    assert "hint: move the unreadable package file away" in err


def test_a_copy_across_devices_killed_midway_leaves_no_file_under_the_packages_name(tmp_path):
    """``link_or_copy`` across devices (a main channel on another disk than staging): killed with -9 before
    the copy is complete, it leaves a hidden temp file, never a file under the package's name that the next
    run would take for the package (before, ``shutil.copy2`` wrote straight to it); a build clears the temp."""
    import signal
    import sys

    src, dst = tmp_path / "main" / "a-1.0-0.conda", tmp_path / "staging" / "noarch" / "a-1.0-0.conda"
    src.parent.mkdir()
    dst.parent.mkdir(parents=True)
    src.write_bytes(os.urandom(1 << 20))
    script = ("import errno, os, shutil, signal\nfrom pathlib import Path\nfrom conda_distro.util import fsutil\n"
              "def exdev(a, b): raise OSError(errno.EXDEV, 'Invalid cross-device link')\n"
              "os.link = exdev\n"
              "shutil.copystat = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # killed in the copy\n"
              f"fsutil.link_or_copy(Path({str(src)!r}), Path({str(dst)!r}))\n")
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not dst.exists()
    [left] = [p.name for p in dst.parent.iterdir()]
    assert left.startswith(".a-1.0-0.conda.") and left.endswith(".copy")
    assert intake.clear_temps(tmp_path / "staging") == [dst.parent / left]
    assert list(dst.parent.iterdir()) == []


@pytest.mark.slow
def test_build_takes_a_package_name_for_the_recipe_that_makes_it(built_world, capsys):
    """The gate's advice (`conda-distro build NAME`) names the package held, which for an output of a
    multi-output recipe is not its recipe folder: build takes it for the recipe that produces it (before:
    "no recipe named 'split-extra'")."""
    add_recipe(built_world, "split", "\n".join([
        'context: {version: "0.1.0"}', 'recipe: {name: split, version: "${{ version }}"}', "outputs:",
        "  - package: {name: split}", "    build: {number: 0, noarch: generic, script: [echo]}",
        "  - package: {name: split-extra}", "    build: {number: 0, noarch: generic, script: [echo]}", ""]))
    code, doc = run_json_at(capsys, built_world, "build", "split-extra", "--dry-run")
    assert code == 0, doc
    assert [p["name"] for p in doc["plan"]["packages"]] == ["split"]
    code, _, err = run_cli_at(capsys, built_world, "build", "split-extar", "--dry-run")
    assert code == 2 and "no recipe named 'split-extar'" in err


def test_declared_names_single_and_multi_output(tmp_path, monkeypatch):
    from conda_distro.engine.backends import RattlerBuildBackend
    from conda_distro.recipe.render import RenderSettings

    single = add_recipe(tmp_path, "probepkg", PROBE) / "recipe.yaml"
    multi = add_recipe(tmp_path, "split", "\n".join([
        'context: {version: "0.1.0"}', "recipe: {name: split, version: \"${{ version }}\"}", "outputs:",
        '  - package: {name: "${{ \'tensorutils\' if env.exists(\'CI\') else \'split\' }}"}',
        "    build: {number: 0, noarch: generic, script: [echo]}",
        "  - package: {name: split-extra}", "    build: {number: 0, noarch: generic, script: [echo]}", ""])) / "recipe.yaml"
    monkeypatch.setenv("CI", "true")
    be = RattlerBuildBackend()
    none = RenderSettings()
    assert be.declared_names(single, none) == {"probepkg"}
    assert [s.name for s in be.render(single, none)] == ["probepkg"]
    assert be.declared_names(multi, none) == {"split", "split-extra"}
    assert os.environ["CI"] == "true"  # the caller's environment is back


# ---------------------------------------------------------------------------------------------
# build and test scripts cannot reach the repository, the results or the ledger


#: the forging script: it looks for repositories through every process's working folder (``/proc/*/cwd``:
#: what the issue's script did) and through the world's own path, and rewrites fastquant's results there.
#: It touches only a folder holding the marker file with this test's token (the test's own world):
#: unsandboxed (the test's second half), ``/proc`` shows every process on the machine, and other tests'
#: worlds (other xdist workers, other test runs) are someone's cwd too. It once left a results file of
#: another test's world empty (two copies of the script, the cpu and the cuda test, racing on one shared
#: ``$f.new``; the other test then failed closed on it). The marker is read through the same path as the
#: results, so a sandbox that let the script reach the world would let it forge (and fail the test) as
#: before; each copy writes a temp file of its own (``$$``).
FORGE_MARKER = Path("build") / "forge-target"
FORGE = ("for d in /proc/[0-9]*/cwd {root}; do "
         "[ \"$(cat \"$d\"/build/forge-target 2>/dev/null)\" = {token} ] || continue; "
         "for f in \"$d\"/build/results/*fastquant*.json; do "
         "if [ -f \"$f\" ]; then sed 's/\"failed\"/\"passed\"/g' \"$f\" > \"$f.$$\" && mv \"$f.$$\" \"$f\" "
         "|| rm -f \"$f.$$\"; fi; "
         "done; done; true")


def forge_script(world: Path) -> str:
    """:data:`FORGE` aimed at ``world`` alone: a fresh token, written in its marker file."""
    token = uuid.uuid4().hex
    (world / FORGE_MARKER).parent.mkdir(parents=True, exist_ok=True)
    (world / FORGE_MARKER).write_text(token)
    return FORGE.format(root=world, token=token)



def test_the_forging_script_run_unsandboxed_touches_its_own_world_only(tmp_path):
    """The forging script as the test below runs it without the sandbox (two copies at once, as the cpu
    and the cuda test run): another world that is some process's working folder (another test's, in
    another xdist worker) is left alone; its own world is forged, whole."""
    doc = {"artifact": "noarch/fastquant-0.2.0-h0_0.conda", "tests": [{"status": "failed"}] * 50}
    worlds = {}
    for name in ("own", "bystander"):
        results = tmp_path / name / "build" / "results"
        results.mkdir(parents=True)
        (results / "noarch__fastquant-0.2.0-h0_0.conda.json").write_text(json.dumps(doc, indent=2))
        worlds[name] = results / "noarch__fastquant-0.2.0-h0_0.conda.json"
    script = forge_script(tmp_path / "own")
    bystander = subprocess.Popen(["sleep", "120"], cwd=tmp_path / "bystander")  # (as git's processes in a world)
    try:
        forgers = [subprocess.Popen(["bash", "-c", script], stderr=subprocess.DEVNULL) for _ in range(2)]
        assert [f.wait(timeout=120) for f in forgers] == [0, 0]
    finally:
        bystander.kill()
        bystander.wait(timeout=60)
    assert json.loads(worlds["bystander"].read_text()) == doc
    assert {t["status"] for t in json.loads(worlds["own"].read_text())["tests"]} == {"passed"}
    assert sorted(p.name for p in worlds["own"].parent.iterdir()) == [worlds["own"].name]  # no temp file left

@pytest.mark.slow
@needs_bwrap
def test_a_test_script_cannot_forge_another_packages_results_repro(built_world, capsys):
    """A repro: a test script looped over /proc/*/cwd and rewrote build/results/*fastquant*.json
    from failed to passed; promote then promoted fastquant, which fails everywhere."""
    add_recipe(built_world, "forger", generic_recipe("forger", [], [forge_script(built_world)]))
    before = results_files(built_world)
    assert any("fastquant" in n for n in before)
    code, doc = run_json_at(capsys, built_world, "build", "forger", "--pytorch", "2.6.0")
    assert code == 0, doc
    assert {t["status"] for t in doc["tests"]} == {"passed"}  # the forging script ran, and got nowhere
    after = results_files(built_world)
    assert {n: b for n, b in after.items() if "forger" not in n} == before
    code, doc = run_json_at(capsys, built_world, "promote")
    assert code == 1
    held = {h["artifact"].split("/")[1].split("-")[0]: h["reason"] for h in doc["held"]}
    assert held["fastquant"] == "test-failed"
    assert not list((built_world / MAIN).glob("*/fastquant-*"))
    assert list((built_world / MAIN).glob("*/forger-*"))

    # the same script without the sandbox forges the results (what the issue reproduced)
    for p in (built_world / "build/results").glob("*forger*"):
        p.unlink()
    code, out, err = run_cli_at(capsys, built_world, "build", "forger", "--pytorch", "2.6.0", "--no-sandbox")
    assert "--no-sandbox: build and test scripts run unsandboxed" in err
    forged = results_files(built_world)
    name = next(n for n in before if "fastquant" in n)
    assert forged[name] != before[name] and '"failed"' not in forged[name].decode()
    assert json.loads(forged[name])["tests"]  # forged whole (each copy of the script has its own temp file)


@pytest.mark.slow
@needs_bwrap
def test_a_build_script_cannot_write_the_repository_or_read_results(built_world, capsys, monkeypatch):
    root = built_world
    monkeypatch.setenv("ANACONDA_API_TOKEN", "tok-SECRET-4711")  # the caller's environment never reaches recipe code
    monkeypatch.setenv("CI", "true")
    (root / "channel_state").mkdir(exist_ok=True)
    (root / "channel_state/keep.json").write_text('{"schema_version": 1, "name": "keep", "artifacts": []}\n')
    script = [
        f'echo "RESULTS_SEEN=$(cat {root}/build/results/*.json 2>/dev/null | wc -c)"',
        f'echo "LEDGER_SEEN=$(cat {root}/channel_state/*.json 2>/dev/null | wc -c)"',
        f'echo "OTHER_RECIPE_SEEN=$(cat {root}/recipes/tensorutils/recipe.yaml 2>/dev/null | wc -c)"',
        f"(mkdir -p {root}/.git/hooks && printf '#!/bin/sh\\nexit 0\\n' > {root}/.git/hooks/pre-push) 2>/dev/null || echo HOOK_DENIED",
        f"(mkdir -p {root}/channel_state && echo '{{}}' > {root}/channel_state/evil.json) 2>/dev/null || echo LEDGER_DENIED",
        f"(echo '# x' >> {root}/recipes/tensorutils/recipe.yaml) 2>/dev/null || echo RECIPE_DENIED",
        "(echo '# x' >> $RECIPE_DIR/recipe.yaml) 2>/dev/null || echo OWN_RECIPE_DENIED",
        f"(mkdir -p {root}/build/results && echo '{{}}' > {root}/build/results/noarch__evil.json) 2>/dev/null || echo RESULTS_DENIED",
        'echo "PROCS=$(ls -d /proc/[0-9]* | wc -l)"',
        'echo "TOKEN=${ANACONDA_API_TOKEN:-none} CI=${CI:-unset}"',
    ]
    add_recipe(root, "snoop", generic_recipe("snoop", script, ["true"]))
    guarded = {p: p.read_bytes() for p in [*(root / "build/results").glob("*.json"), *(root / "recipes").rglob("*"),
                                           *(root / "channel_state").glob("*")] if p.is_file()}
    code, doc = run_json_at(capsys, root, "build", "snoop", "--pytorch", "2.6.0")
    assert code == 0, doc
    log = Path(doc["builds"][0]["log"]).read_text()
    # (the world lies under /tmp: writes to its host paths land in the sandbox's own /tmp, if anywhere;
    # the host files are checked below)
    for denied in ("OWN_RECIPE_DENIED", "RESULTS_SEEN=0", "LEDGER_SEEN=0", "OTHER_RECIPE_SEEN=0"):
        assert denied in log, (denied, log[-3000:])
    assert int(log.split("PROCS=")[1].split()[0]) < 10
    assert "TOKEN=none CI=unset" in log and "tok-SECRET-4711" not in log
    assert not (root / ".git/hooks/pre-push").exists()
    assert not (root / "channel_state/evil.json").exists()
    assert not (root / "build/results/noarch__evil.json").exists()
    assert {p: p.read_bytes() for p in guarded} == guarded

    # control: unsandboxed, the same script reads and writes all of it
    shutil.rmtree(root / "build/results")
    run_cli_at(capsys, root, "build", "snoop", "--pytorch", "2.6.0", "--no-sandbox")
    assert (root / ".git/hooks/pre-push").exists() and (root / "channel_state/evil.json").exists()


# ---------------------------------------------------------------------------------------------
# sealed results: promote re-checks the artifact's sha256


@pytest.mark.slow
def test_promote_holds_a_staging_file_that_is_not_the_one_tested(built_world, capsys):
    staged = staging_files(built_world)
    victim = next(a for a in staged if "/tensorutils-" in a)
    result = json.loads((built_world / "build/results" / (victim.replace("/", "__") + ".json")).read_text())
    assert result["sha256"] == staged[victim]  # the result names the artifact's sha256
    with open(own_copy(built_world / STAGING / victim), "ab") as fh:  # changed after it was tested (index untouched)
        fh.write(b"\0")
    code, doc = run_json_at(capsys, built_world, "promote")
    assert code == 1
    held = {h["artifact"]: h for h in doc["held"]}
    assert held[victim]["reason"] == "not-tested"
    assert "the staging file on disk has" in held[victim]["detail"]
    promoted = {p["artifact"] for p in doc["promoted"]}
    assert victim not in promoted and not (built_world / MAIN / victim).exists()
    assert not [a for a in promoted if "/layerkit-" in a or "/trainloop-" in a]  # its dependents wait for it
    assert any("/metrickit-" in a for a in promoted)  # the rest goes on


@pytest.mark.slow
def test_a_build_that_kills_its_worker_fails_cleanly(built_world, capsys):
    kill = ("for p in /proc/[0-9]*; do if tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q conda_distro.engine.worker; "
            "then kill -9 ${p#/proc/}; fi; done; sleep 5")
    add_recipe(built_world, "killer", generic_recipe("killer", [kill], ["true"]))
    staged, results = staging_files(built_world), results_files(built_world)
    code, doc = run_json_at(capsys, built_world, "build", "killer", "--pytorch", "2.6.0")
    assert code == 1
    (b,) = doc["builds"]
    assert b["status"] == "failed" and "the build worker exited with status" in b["reason"], b
    assert staging_files(built_world) == staged and results_files(built_world) == results
    assert not list((built_world / "build/work").glob("*"))
