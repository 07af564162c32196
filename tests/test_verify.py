"""verify-channel can fail: every file of main is checked against main's index and the ledger before
solving, the install uses a package cache of the run's own (a deleted file cannot come from a warm
cache), and an ``anaconda://`` main is read through ``ANACONDA_API_URL``, not conda.anaconda.org.

Repros (issue 11): delete an artifact from main / append a byte to one -> "ok"; ``--keep FILE`` ->
traceback; an anaconda:// main ignored ANACONDA_API_URL.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest
from support.anaconda_server import FakeAnaconda
from support.helpers import run_cli_at, run_json_at, upstream_pytorch_builds
from support.worlds import own_copy

from conda_distro.channels import LocalChannel
from conda_distro.gate.promote import PromoteOptions, promote

MAIN = Path("build/channels/pytorch")
STAGING = Path("build/channels/staging")


def name_of(artifact: str) -> str:
    return artifact.split("/")[-1].rsplit("-", 2)[0]


def drift_of(doc: dict) -> list[tuple[str, str]]:
    return [(d["kind"], name_of(d["artifact"])) for d in doc["drift"]]


def test_keep_onto_a_file_is_exit_2(tmp_path, capsys, make_distro):
    root = make_distro({})
    (root / "envs").write_text("not a folder")
    code, out, err = run_cli_at(capsys, root, "verify-channel", "--keep", str(root / "envs"))
    assert code == 2 and out == "" and "Traceback" not in err
    assert "--keep" in err and "not a folder" in err
    assert (root / "envs").read_text() == "not a folder"


@pytest.fixture()
def promoted(built_world: Path) -> Path:
    promote(PromoteOptions(root=built_world))
    return built_world


@pytest.mark.slow
def test_verify_checks_every_file_of_main_before_solving(promoted, capsys):
    root, main = promoted, promoted / MAIN
    code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
    assert code == 0 and doc["drift"] == [], doc
    files = LocalChannel(main).list_files()
    metrickit = next(f for f in files.values() if f.name == "metrickit")
    layerkit = next(f for f in files.values() if f.name == "layerkit")
    path = own_copy(main / metrickit.artifact)  # (written in place below: not through the template's inode)
    saved = path.read_bytes()

    # a deleted artifact: drift, and (fresh cache) the install fails instead of using a cached copy
    path.unlink()
    code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
    assert code == 1 and doc["ok"] is False
    assert drift_of(doc) == [("file-missing", "metrickit")]
    assert doc["drift"][0]["artifact"] == metrickit.artifact
    assert all(not r["ok"] and "install failed" in r["error"] for r in doc["results"]), doc["results"]

    # one byte appended: the sha256 no longer matches the index
    path.write_bytes(saved + b"\0")
    code, out, _ = run_cli_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
    assert code == 1 and out.rstrip().endswith("FAILED")
    assert f"drift: file-sha256-differs: {metrickit.artifact}" in out
    path.write_bytes(saved)

    # a package file in main that the index does not name
    [fastquant] = (root / STAGING / "noarch").glob("fastquant-*.conda")
    shutil.copy2(fastquant, main / "noarch" / fastquant.name)
    code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
    assert code == 1 and drift_of(doc) == [("not-indexed", "fastquant")]
    (main / "noarch" / fastquant.name).unlink()

    # the ledger records another sha256 than the index
    ledger = root / "channel_state" / "layerkit.json"
    text = ledger.read_text()
    ledger.write_text(text.replace(layerkit.sha256, "f" * 64))
    code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
    assert code == 1 and drift_of(doc) == [("sha256-differs", "layerkit")]
    ledger.write_text(text)

    code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
    assert code == 0 and doc["drift"] == []


@pytest.mark.slow
def test_verify_reads_an_anaconda_main_through_the_api_url(promoted, capsys, monkeypatch):
    root, main = promoted, promoted / MAIN
    files = LocalChannel(main).list_files()
    docs = [{"name": f.name, "version": f.version, "basename": f.artifact, "sha256": f.sha256, "size": f.size,
             "attrs": {"subdir": f.subdir, "build": f.build, "build_number": f.build_number,
                       "depends": list(f.depends)},
             "content_b64": base64.b64encode((main / f.artifact).read_bytes()).decode()} for f in files.values()]
    distro_yaml = root / "distro.yaml"
    distro_yaml.write_text(distro_yaml.read_text().replace("main: build/channels/pytorch", "main: anaconda://distro"))
    shutil.rmtree(main)  # nothing local to fall back on
    with FakeAnaconda("tok-VERIFY-1234567", lifetime=180) as srv:
        srv.seed("distro", docs, label="main")
        monkeypatch.setenv("ANACONDA_API_URL", srv.url)
        monkeypatch.delenv("ANACONDA_API_TOKEN", raising=False)  # reading needs no token
        code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
        assert code == 0 and doc["drift"] == [], doc
        assert {p.split()[0] for r in doc["results"] for p in r["installed"]} >= {f.name for f in files.values()}
        downloads = {r["path"].split("/", 5)[5] for r in srv.requests() if r["path"].startswith("/download/")}
        assert downloads == set(files)

        # the server serves other bytes than its listing's sha256 says
        metrickit = next(f for f in files.values() if f.name == "metrickit")
        tampered = next(d for d in docs if d["basename"] == metrickit.artifact)
        srv.seed("distro", [{**tampered, "content_b64": base64.b64encode(b"not a package").decode()}], label="main")
        code, doc = run_json_at(capsys, root, "verify-channel", "--pytorch", "2.5.1")
        assert code == 1 and drift_of(doc) == [("file-sha256-differs", "metrickit")]
        assert json.dumps(doc).count(metrickit.artifact) >= 1


# ---------------------------------------------------------------------------------------------
# cpu vs cuda from the solved pytorch record (issue 12): build string and __cuda, what users get;
# the import probe only where pytorch is a Python package


def build_from_text(text: str, recipe_dir: Path, out: Path, channels: list[Path], variants: dict | None = None,
                    zip_keys: list | None = None, cuda: str | None = None) -> list[Path]:
    """Build the recipe ``text`` (written into ``recipe_dir``) with rattler-build into the scratch folder
    ``out``; returns the package files."""
    from rattler_build import Stage0Recipe, VariantConfig

    from conda_distro.util.rattler_env import run_build

    recipe = Stage0Recipe.from_yaml(text, recipe_dir=str(recipe_dir))
    files = []
    for variant in recipe.render(VariantConfig(variants or {}, zip_keys=zip_keys)):
        res = run_build(variant, output_dir=out, channels=[out, *channels], cuda=cuda)
        files += [Path(p) for p in res.packages]
    return files


def publish(files: list[Path], channel: Path) -> list[Path]:
    """Copy package files into a local channel and index it."""
    from conda_distro.util.rattler_env import index_channel

    out = []
    for f in files:
        dest = channel / f.parent.name / f.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest)
        out.append(dest)
    index_channel(channel)
    return out


def record_in_ledger(root: Path, main: Path) -> None:
    """channel_state/ entries for everything in main (what promote would have recorded)."""
    from conda_distro.state.ledger import ArtifactEntry, Ledger, utcnow

    ledger = Ledger(root / "channel_state")
    for f in LocalChannel(main).list_files().values():
        ledger.add_artifacts(f.name, [ArtifactEntry(
            artifact=f.artifact, sha256=f.sha256, version=f.version, build=f.build, build_number=f.build_number,
            depends=list(f.depends), channel=str(main), promoted_at=utcnow(), commit=None)])


@pytest.mark.slow
def test_a_cuda_build_known_only_by_its_build_string_is_recognised(promoted, tmp_path, capsys):
    """conda-forge-like: the cuda build says so in its build string (cuda124_…); here without a __cuda
    dependency. A machine with a GPU gets it and that is right; so does one without (nothing stops the
    solver), and verify-channel now sees that the cpu variant got a cuda build."""
    from conda_distro.sandbox.upstream import data_dir, reindex

    up = promoted / "upstream"
    builds = upstream_pytorch_builds(promoted)
    recipe_dir = shutil.copytree(data_dir() / "upstream" / "pytorch", tmp_path / "standin")
    text = (recipe_dir / "recipe.yaml").read_text()
    no_cuda_dep = text.replace('    - if: torch_variant == "cuda"\n      then: __cuda\n', "") \
                      .replace('200 if torch_variant', '201 if torch_variant')
    assert "then: __cuda" not in no_cuda_dep and "201 if" in no_cuda_dep
    [built] = build_from_text(no_cuda_dep, recipe_dir, tmp_path / "out", [up], cuda="12.4", variants={
        "torch_version": ["2.5.1"], "cuda_version": ["12.4"], "torch_variant": ["cuda"]},
        zip_keys=[["torch_version", "cuda_version"]])
    assert built.name.startswith("pytorch-2.5.1-cuda124_") and built.name.endswith("_201.conda")
    (up / "linux-64" / f"pytorch-2.5.1-{builds[('2.5.1', 'cuda')]}.conda").unlink()  # the one with __cuda
    shutil.copyfile(built, up / "linux-64" / built.name)
    reindex(up)

    code, doc = run_json_at(capsys, promoted, "verify-channel", "--pytorch", "2.5.1")
    assert code == 1 and doc["drift"] == []
    by_variant = {r["variant"]: r for r in doc["results"]}
    cuda, cpu = by_variant["cuda"], by_variant["cpu"]
    build = built.name.removeprefix("pytorch-2.5.1-").removesuffix(".conda")
    assert f"pytorch 2.5.1 {build}" in cuda["installed"]
    checks = {c["check"]: c for c in cuda["checks"] if c["package"] == "pytorch"}
    assert checks["variant"]["ok"] and checks["variant"]["evidence"] == "record"
    assert f"cuda (build string '{build}' starts with 'cuda')" in checks["variant"]["output"]
    assert "__cuda" not in checks["variant"]["output"]  # said by the build string alone
    assert checks["import torch"]["ok"] and checks["import torch"]["evidence"] == "import-probe"
    assert checks["import torch"]["output"] == "cuda 12.4"
    assert cuda["ok"] and all(c["ok"] for c in cuda["checks"]), cuda

    assert not cpu["ok"] and f"pytorch 2.5.1 {build}" in cpu["installed"]
    assert f"the cpu variant installed pytorch build {build}" in cpu["error"] and "starts with 'cuda'" in cpu["error"]
    assert [(c["check"], c["evidence"], c["ok"]) for c in cpu["checks"]] == [("variant", "record", False)]


LIBTORCH = """\
context:
  number: ${{ 200 if torch_variant == "cuda" else 0 }}
package: {name: libtorch, version: "2.5.1"}
build:
  number: ${{ number }}
  string: ${{ "cpu" if torch_variant == "cpu" else "cuda126" }}_h${{ hash }}_${{ number }}
  script:
    - mkdir -p "$PREFIX/lib"
    - echo "stand-in libtorch (${{ torch_variant }})" > "$PREFIX/lib/libtorch-stand-in.txt"
requirements:
  run:
    - if: torch_variant == "cuda"
      then: __cuda
about: {summary: "STAND-IN for libtorch, no python"}
"""

TORCHAPP = """\
package: {name: torchapp, version: "0.1.0"}
build: {number: 0, noarch: generic, script: ["mkdir -p $PREFIX/share/torchapp", "echo 1 > $PREFIX/share/torchapp/v"]}
requirements:
  run: ["libtorch >=2.5,<2.6"]
"""


def test_a_pytorch_name_that_is_no_python_package_verifies_by_its_record(make_distro, tmp_path, capsys):
    """pytorch.name: libtorch, a package without python: no import probe (there is no python to run it);
    the cpu and cuda variants are told apart by the solved record."""
    root = make_distro({}, {"channels": {"upstream": ["./upstream"]},
                            "pytorch": {"name": "libtorch", "releases": ["2.5.1"], "variants": ["cpu", "cuda"]}})
    (root / "recipes").mkdir()
    built = build_from_text(LIBTORCH, tmp_path / "r-libtorch", tmp_path / "out-lib", [],
                            variants={"torch_variant": ["cpu", "cuda"]}, cuda="12.6")
    publish(built, root / "upstream")
    [app] = build_from_text(TORCHAPP, tmp_path / "r-app", tmp_path / "out-app", [root / "upstream"])
    main = root / "build" / "channels" / "main"
    publish([app], main)
    record_in_ledger(root, main)
    builds = {p.name.split("-")[2].split("_")[0]: p.name.removeprefix("libtorch-2.5.1-").removesuffix(".conda")
              for p in built}
    assert set(builds) == {"cpu", "cuda126"}

    keep = tmp_path / "envs"
    code, doc = run_json_at(capsys, root, "verify-channel", "--keep", str(keep))
    assert code == 0 and doc["ok"] and doc["drift"] == [], doc
    assert [(r["pytorch"], r["variant"], r["ok"]) for r in doc["results"]] == [("2.5.1", "cpu", True),
                                                                               ("2.5.1", "cuda", True)]
    for r, want in zip(doc["results"], ("cpu", "cuda126"), strict=True):
        assert sorted(r["installed"]) == [f"libtorch 2.5.1 {builds[want]}", "torchapp 0.1.0 " + app.name.split("-")[2][:-6]]
        [check] = r["checks"]  # the record check alone: no import probe
        assert (check["package"], check["check"], check["evidence"], check["ok"]) == ("libtorch", "variant", "record", True)
        assert check["output"].startswith(f"libtorch 2.5.1 {builds[want]}: {r['variant']} (")
        env = keep / f"env-2.5.1-{r['variant']}"
        assert (env / "lib" / "libtorch-stand-in.txt").read_text().strip() == f"stand-in libtorch ({r['variant']})"
        assert not (env / "bin" / "python").exists()
    assert "depends on __cuda" in doc["results"][1]["checks"][0]["output"]


@pytest.mark.parametrize("build, depends, variant, python, evidence", [
    ("cuda129_generic_py312_h1a2b3c4_200", ["__cuda", "python >=3.12,<3.13.0a0", "libtorch 2.8.0.*"], "cuda", True,
     "cuda (depends on __cuda; build string 'cuda129_generic_py312_h1a2b3c4_200' starts with 'cuda')"),
    ("cuda129_generic_py312_h1a2b3c4_200", ["python >=3.12,<3.13.0a0"], "cuda", True,
     "cuda (build string 'cuda129_generic_py312_h1a2b3c4_200' starts with 'cuda')"),
    ("h1a2b3c4_0", ["__cuda >=12"], "cuda", False, "cuda (depends on __cuda)"),
    ("cpu_generic_py312_h5d6e7f8_0", ["python >=3.12,<3.13.0a0", "python_abi 3.12.* *_cp312"], "cpu", True,
     "cpu (no __cuda dependency and build string 'cpu_generic_py312_h5d6e7f8_0' does not start with 'cuda')"),
    ("cpu_h5d6e7f8_0", ["libstdcxx >=14", "pythonic-lib"], "cpu", False, None),
])
def test_torch_build_from_conda_forge_records(build, depends, variant, python, evidence):
    from conda_distro.channels.pytorch_record import TorchBuild

    kind = TorchBuild.of(build, depends)
    assert (kind.variant, kind.python) == (variant, python)
    if evidence:
        assert kind.evidence == evidence
@pytest.mark.slow
def test_verify_text_shows_the_failing_checks_last_lines(promoted, capsys):
    """Text mode names the failing check and shows the end of its output (the exception), not only
    "import layerkit failed"."""
    recipe = promoted / "recipes" / "layerkit" / "recipe.yaml"
    text = recipe.read_text()
    assert "      imports:\n" in text
    recipe.write_text(text.replace("      imports:\n", "      imports:\n        - layerkit.gone_missing\n", 1))
    code, out, _ = run_cli_at(capsys, promoted, "verify-channel", "--pytorch", "2.5.1")
    assert code == 1 and out.rstrip().endswith("FAILED")
    lines = out.splitlines()
    i = lines.index("    layerkit: import layerkit.gone_missing failed")
    shown = [ln for ln in lines[i + 1:] if ln.startswith("      | ")]
    assert shown and shown[-1] == "      | ModuleNotFoundError: No module named 'layerkit.gone_missing'"
    assert any("Traceback" in ln for ln in shown)
    assert out.count("import layerkit.gone_missing failed") == 2  # once per variant, not repeated as the error
