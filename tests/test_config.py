"""distro.yaml: the strict model, its error messages (file, field, line, did-you-mean) and paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from conda_distro.cli import main
from conda_distro.config import DISTRO_FILE, UpperBounds, find_root, load_config
from conda_distro.errors import ConfigError, DistroError, ExitCode

GOOD = """\
# a distribution
name: pytorch-distro
channels:
  upstream: [conda-forge, ./local-upstream]
  staging: build/channels/staging
  main: anaconda://pytorch/main
pytorch:
  name: pytorch
  releases: ["2.4.1", "2.5.1", "2.6.0"]   # oldest first
  variants: [cpu, cuda]
platforms: [linux-64, osx-arm64]
policy:
  upper_bounds: pytorch-only
  unbounded_allowed: [python, numpy]
  unmaintained_grace_days: 30
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / DISTRO_FILE).write_text(text)
    return tmp_path


def error_for(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    return info.value


def test_good_config_is_typed(tmp_path):
    distro = load_config(write(tmp_path, GOOD))
    c = distro.config
    assert c.name == "pytorch-distro"
    assert c.pytorch.releases == ["2.4.1", "2.5.1", "2.6.0"] and c.pytorch.variants == ["cpu", "cuda"]
    assert c.policy.upper_bounds is UpperBounds.PYTORCH_ONLY
    assert c.policy.unbounded_allowed == ["python", "numpy"] and c.policy.unmaintained_grace_days == 30
    assert c.policy.run_exports == {"pytorch": "x.x"}
    assert distro.subdirs == ["linux-64", "osx-arm64", "noarch"]
    assert distro.root == tmp_path.resolve() and distro.recipes_dir == tmp_path.resolve() / "recipes"


def test_defaults(tmp_path):
    c = load_config(write(tmp_path, 'name: d\npytorch:\n  releases: ["2.5.1"]\n')).config
    assert c.channels.upstream == ["conda-forge"] and c.platforms == ["linux-64"]
    assert c.pytorch.name == "pytorch" and c.pytorch.variants == ["cpu", "cuda"]
    assert c.policy.upper_bounds is UpperBounds.REQUIRED and c.policy.unbounded_allowed == ["python"]
    assert c.policy.unmaintained_grace_days == 60


def test_versions_stay_strings(tmp_path):
    # 2.10 must not become the float 2.1, and the list must still be oldest first
    c = load_config(write(tmp_path, "name: d\npytorch:\n  releases: [2.9.0, 2.10.0]\n")).config
    assert c.pytorch.releases == ["2.9.0", "2.10.0"]


def test_channel_references(tmp_path):
    distro = load_config(write(tmp_path, GOOD))
    root = tmp_path.resolve()
    assert distro.is_local_ref("./local-upstream") and not distro.is_local_ref("conda-forge")
    assert not distro.is_local_ref("https://conda.anaconda.org/conda-forge")
    assert distro.upstream_urls == ["conda-forge", (root / "local-upstream").as_uri()]
    assert distro.channel_url("build/channels/staging") == (root / "build/channels/staging").as_uri()
    assert distro.channel_url("anaconda://pytorch/main") == "https://conda.anaconda.org/pytorch"
    assert distro.channel_url("anaconda://pytorch/staging") == "https://conda.anaconda.org/pytorch/label/staging"
    assert distro.resolve_local("/abs/path") == Path("/abs/path")


@pytest.mark.parametrize("old,new,field,line,words", [
    ("  upstream: [conda-forge, ./local-upstream]", "  upsteam: [conda-forge]", "channels.upsteam", 4,
     ["unknown key 'upsteam'", "did you mean 'upstream'?"]),
    ('  releases: ["2.4.1", "2.5.1", "2.6.0"]   # oldest first', '  relases: ["2.4.1"]', "pytorch.relases", 9,
     ["unknown key 'relases'", "did you mean 'releases'?"]),
    ("policy:\n", "polcy:\n", "polcy", 12, ["unknown key 'polcy'", "did you mean 'policy'?"]),
    ("  upper_bounds: pytorch-only", "  upper_bound: pytorch-only", "policy.upper_bound", 13,
     ["did you mean 'upper_bounds'?"]),
    ("  unmaintained_grace_days: 30", "  colour: blue", "policy.colour", 15, ["unknown key 'colour'", "known keys here"]),
])
def test_unknown_key_gives_a_did_you_mean_hint(tmp_path, old, new, field, line, words):
    assert old in GOOD
    err = error_for(tmp_path, GOOD.replace(old, new))
    text = f"{err} {err.hint}"
    assert err.field == field and err.line == line and err.path == str(tmp_path / DISTRO_FILE)
    assert all(w in text for w in words), text
    assert f"distro.yaml:{line}" in str(err)


@pytest.mark.parametrize("old,new,field,words", [
    ('["2.4.1", "2.5.1", "2.6.0"]', '["2.5.1", "2.4.1", "2.6.0"]', "pytorch.releases", ["oldest first"]),
    ('["2.4.1", "2.5.1", "2.6.0"]', '["2.4.1", "2.4.1"]', "pytorch.releases", ["duplicate"]),
    ('["2.4.1", "2.5.1", "2.6.0"]', '["2.4.1", "latest"]', "pytorch.releases", ["'latest'", "release version"]),
    ('["2.4.1", "2.5.1", "2.6.0"]', "[]", "pytorch.releases", ["at least 1"]),
    ("[linux-64, osx-arm64]", "[linux-64, linux-65]", "platforms", ["unknown platform 'linux-65'"]),
    ("[linux-64, osx-arm64]", "[linux-64, noarch]", "platforms", ["noarch is always included"]),
    ("[cpu, cuda]", "[cpu, rocm]", "pytorch.variants.1", ["'cpu' or 'cuda'"]),
    ("upper_bounds: pytorch-only", "upper_bounds: sometimes", "policy.upper_bounds", ["'required', 'pytorch-only' or 'off'"]),
    ("unmaintained_grace_days: 30", "unmaintained_grace_days: -1", "policy.unmaintained_grace_days", ["greater than or equal to 0"]),
    ("main: anaconda://pytorch/main", "main: anaconda://a/b/c", "channels.main", ["anaconda://OWNER[/LABEL]"]),
    ("name: pytorch-distro\n", "", "name", ["required key is missing"]),
    ("  upstream: [conda-forge, ./local-upstream]", "  upstream: []", "channels.upstream", ["at least 1"]),
])
def test_bad_values_name_the_field_and_line(tmp_path, old, new, field, words):
    assert old in GOOD
    err = error_for(tmp_path, GOOD.replace(old, new))
    assert err.field == field, (err.field, str(err))
    assert err.line is not None and err.line >= 1
    assert all(w in str(err) for w in words), str(err)
    assert err.exit_code == ExitCode.BAD_INPUT


def test_missing_section_points_at_its_parent(tmp_path):
    err = error_for(tmp_path, "name: d\nplatforms: [linux-64]\n")
    assert err.field == "pytorch" and "required key is missing" in str(err) and "add 'pytorch:'" in err.hint


@pytest.mark.parametrize("text,words", [
    ("- a\n- b\n", "must be a mapping"),
    ("", "must be a mapping"),
    ("name: [unclosed\n", "invalid YAML"),
])
def test_not_a_mapping_or_not_yaml(tmp_path, text, words):
    with pytest.raises(DistroError) as info:
        load_config(write(tmp_path, text))
    assert words in str(info.value) and info.value.path.endswith(DISTRO_FILE)


def test_missing_file_and_root_discovery(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path)
    with pytest.raises(ConfigError, match="no distro.yaml found") as info:
        find_root(tmp_path)
    assert "--root" in info.value.hint
    write(tmp_path, GOOD)
    deep = tmp_path / "recipes" / "foo"
    deep.mkdir(parents=True)
    assert find_root(deep) == tmp_path.resolve()


@pytest.mark.parametrize("command", [["lint"], ["lint", "--fix"], ["graph"], ["graph", "--format", "json"]])
def test_cli_exits_2_naming_the_field_and_writes_nothing(tmp_path, capsys, command, clean_recipe):
    write(tmp_path, GOOD.replace("  upstream: [conda-forge, ./local-upstream]", "  upsteam: [conda-forge]"))
    recipe = tmp_path / "recipes" / "foo" / "recipe.yaml"
    recipe.parent.mkdir(parents=True)
    text = clean_recipe("foo").replace("  number: 0\n", "")  # --fix would add it
    recipe.write_text(text)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))

    assert main([*command, "--root", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "distro.yaml:4" in err and "channels.upsteam" in err and "did you mean 'upstream'?" in err
    assert recipe.read_text() == text
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_cli_finds_the_root_from_a_subfolder(tmp_path, capsys, monkeypatch, clean_recipe):
    write(tmp_path, GOOD)
    folder = tmp_path / "recipes" / "foo"
    folder.mkdir(parents=True)
    (folder / "recipe.yaml").write_text(clean_recipe("foo"))
    monkeypatch.chdir(folder)
    assert main(["graph", "--format", "json"]) == 0
    assert '"foo"' in capsys.readouterr().out
    monkeypatch.chdir(tmp_path.parent)
    assert main(["graph"]) == 2
    assert "no distro.yaml found" in capsys.readouterr().err


def test_repository_distro_yaml_is_valid():
    root = Path(__file__).resolve().parents[1]
    distro = load_config(root)
    assert distro.config.pytorch.releases and distro.config.name


# ---------------------------------------------------------------------------------------------
# channels: distinct, not nested, inside the repository

LAYOUT = """\
name: d
channels:
  upstream: [conda-forge, ./upstream]
  staging: {staging}
  main: {main}
pytorch:
  releases: ["2.5.1"]
"""


@pytest.mark.parametrize("staging,main,field,words", [
    ("build/channels/staging", "build/channels/staging", "channels.main", ["same channel as channels.staging"]),
    ("build/channels/staging", "./build/channels/../channels/staging/", "channels.main", ["same channel"]),
    ("build/channels/staging", "./upstream", "channels.main", ["same channel as channels.upstream.1"]),
    ("build/channels/staging", "upstream/inner", "channels.main", ["nested", "channels.main lies inside channels.upstream.1"]),
    ("build/channels/staging", "build/channels", "channels.main", ["nested", "channels.staging lies inside channels.main"]),
    ("build/channels/main/staging", "build/channels/main", "channels.main", ["nested"]),
    ("build/channels/staging", "../../x", "channels.main", ["leads outside the repository"]),
    ("../staging", "build/channels/main", "channels.staging", ["leads outside the repository"]),
    ("build/channels/staging", ".", "channels.main", ["is the repository itself"]),
    ("build/channels/staging", "https://example.org/ch", "channels.main", ["local folder or anaconda://"]),
    ("anaconda://owner/staging", "anaconda://owner/staging", "channels.main", ["same channel"]),
    ("anaconda://owner/main", "anaconda://owner", "channels.main", ["same channel"]),
    ("build/channels/staging", "anaconda://conda-forge", "channels.main", ["same channel as channels.upstream.0"]),
])
def test_channels_are_distinct_not_nested_and_inside_the_repo(tmp_path, staging, main, field, words):
    """Repros: `main: build/channels/staging` promoted failed packages; `main: ./upstream` copied into
    the upstream channel; `main: ../../x` wrote outside the repository."""
    err = error_for(tmp_path, LAYOUT.format(staging=staging, main=main))
    assert err.field == field and err.exit_code == ExitCode.BAD_INPUT, (err.field, str(err))
    assert err.line == (4 if field == "channels.staging" else 5) and err.hint
    assert all(w in str(err) for w in words), str(err)


def test_channel_symlinked_onto_another_is_the_same_channel(tmp_path):
    (tmp_path / "build" / "channels" / "staging").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(tmp_path / "build" / "channels" / "staging")
    err = error_for(tmp_path, LAYOUT.format(staging="build/channels/staging", main="alias"))
    assert err.field == "channels.main" and "same channel as channels.staging" in str(err)


@pytest.mark.parametrize("staging,main", [
    ("build/channels/staging", "build/channels/main"),
    ("build/channels/staging", "/srv/channels/main"),  # absolute: taken as written
    ("anaconda://owner/staging", "anaconda://owner"),
    ("anaconda://builds/staging", "anaconda://owner/staging"),
    ("build/channels/staging", "file:///srv/channels/main"),
])
def test_good_channel_layouts_load(tmp_path, staging, main):
    assert load_config(write(tmp_path, LAYOUT.format(staging=staging, main=main))).config.channels.main == main


def test_cli_refuses_an_aliased_main_before_writing(tmp_path, capsys):
    write(tmp_path, LAYOUT.format(staging="build/channels/staging", main="build/channels/staging"))
    assert main(["promote", "--root", str(tmp_path)]) == 2
    assert "channels.main" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == [DISTRO_FILE]


@pytest.mark.parametrize("name", ['""', '"Py Torch"', '"../x"'])
def test_pytorch_name_must_be_a_package_name(tmp_path, name):
    err = error_for(tmp_path, f'name: d\npytorch:\n  name: {name}\n  releases: ["2.5.1"]\n')
    assert err.field == "pytorch.name" and err.line == 3 and "not a conda package name" in str(err)
