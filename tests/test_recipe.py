"""The v1 recipe model (conda_distro.recipe.model) and the YAML layer under it (conda_distro.util.yamlio)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conda_distro.distribution import load_distribution
from conda_distro.errors import DistroError, RecipeError
from conda_distro.lint import lint_distribution
from conda_distro.recipe.model import parse_recipe
from conda_distro.recipe.render import RenderSettings
from conda_distro.recipe.specs import parse_spec
from conda_distro.recipe.variants import read_variant_files
from conda_distro.util.yamlio import LDict, LList, dump_roundtrip, load_fast, load_roundtrip

HERE = Path(__file__).parent
REPO = HERE.parent
REAL_WORLD = sorted((HERE / "data" / "recipes_real_world").glob("*.yaml"))
# every YAML file the tool reads and may edit (variant files are read, never edited)
ALL_YAML = sorted({*REPO.glob("recipes/*/recipe.yaml"), *(HERE / "data").rglob("*.yaml")} - {
    *(HERE / "data").rglob("conda_build_config.yaml")})


def cf_settings(platform: str = "linux-64") -> RenderSettings:
    """The repository's variants.yaml (conda-forge's pinning values) plus three pytorch minors."""
    variants, zips = read_variant_files([REPO / "variants.yaml"])
    return RenderSettings.make(variants, zips, platform).with_minors("pytorch", ["2.7", "2.8", "2.9"])


def parse(text: str, platform: str = "linux-64", folder: str = "pkg"):
    return parse_recipe(textwrap.dedent(text), Path(f"/r/{folder}/recipe.yaml"), cf_settings(platform))


def names(recipe, section: str) -> list[str]:
    return [d.raw for d in recipe.deps(section)]


# ---------------------------------------------------------------------------------------------
# the model

FULL = """\
# leading comment
context:
  name: Torch-Thing        # mixed case on purpose
  version: "1.10"          # stays a string, not 1.1
  full: ${{ name|lower }}-${{ version }}   # context entries can use earlier ones
  build: 3
  use_cuda: false

package:
  name: ${{ name|lower }}
  version: ${{ version }}

source:
  - url: https://example.org/${{ full }}.tar.gz   # a list of sources
    sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  - git: https://github.com/example/thing.git

build:
  number: ${{ build }}
  skip:
    - win
    - match(python, "<3.9")    # unknown variant: does not skip

requirements:
  build:
    - ${{ compiler('cxx') }}
    - ${{ stdlib('c') }}
    - if: unix
      then: ninja             # a scalar then:
      else:
        - if: win
          then: m2-make       # nested if/then/else
  host:
    - python
    - pytorch
    - ${{ "pywin32" if win }}  # renders empty on linux: dropped
    - if: use_cuda
      then: cuda-version >=12
  run:
    - python >=3.10
    - ${{ pin_compatible('pytorch', upper_bound='x.x') }}
    - numpy >=1.24,<3  # comment after a spec
  run_exports:
    weak:
      - ${{ pin_subpackage(name|lower, upper_bound='x.x') }}

tests:
  - python:
      imports: [torch_thing]
  - if: linux
    then:
      script:
        - echo linux

about:
  summary: ${{ name }} does things
  license: MIT
  homepage: https://example.org

extra:
  recipe-maintainers: [octocat, conda-distro/core]
  pytorch-lockstep: "true"
  skip-lints: [tests-no-import]
"""


def test_full_recipe_model():
    r = parse(FULL, folder="torch-thing")
    assert (r.name, r.version, r.build_number, r.noarch, r.skip) == ("torch-thing", "1.10", 3, None, False)
    # rattler-build renders compiler()/stdlib() with the variant config (gcc 15 and, for CUDA, 14)
    # and, since it does not use the CUDA key, without the CUDA rows of the compilers' zip: gcc 15 only
    assert names(r, "build") == ["gxx_linux-64 15.*", "sysroot_linux-64 2.17.*", "ninja"]
    assert [d.func for d in r.deps("build")] == ["compiler", "stdlib", None]
    assert [d.line for d in r.deps("build")] == [26, 27, 29]
    assert r.outputs[0].variants == 4 * 3  # python x pytorch minors (no CUDA row: it does not use CUDA)
    assert names(r, "host") == ["python", "pytorch"]
    assert names(r, "run") == ["python >=3.10", "${{ pin_compatible('pytorch', upper_bound='x.x') }}", "numpy >=1.24,<3"]
    pin = list(r.deps("run"))[1]
    assert (pin.func, pin.name, pin.kw("upper_bound"), pin.spec) == ("pin_compatible", "pytorch", "x.x", None)
    numpy = list(r.deps("run"))[2]
    assert numpy.spec == parse_spec("numpy >=1.24,<3") and numpy.version == ">=1.24,<3"
    assert numpy.line == FULL.splitlines().index("    - numpy >=1.24,<3  # comment after a spec") + 1
    assert [(d.func, d.name) for d in r.run_exports] == [("pin_subpackage", "torch-thing")]
    assert r.tests == [{"python": {"imports": ["torch_thing"]}}, {"script": "echo linux"}]
    assert r.about == {"summary": "Torch-Thing does things", "license": "MIT", "homepage": "https://example.org/"}
    assert r.maintainers == ["octocat", "conda-distro/core"] and r.lockstep is True
    assert r.skip_lints == ["tests-no-import"]
    assert [(s.url, s.git) for s in r.sources] == [
        ("https://example.org/torch-thing-1.10.tar.gz", None), (None, "https://github.com/example/thing.git")]
    lines = FULL.splitlines()
    assert r.lines["package.name"] == lines.index("  name: ${{ name|lower }}") + 1
    assert r.lines["build.number"] == lines.index("  number: ${{ build }}") + 1
    assert r.dep_names("host", "run") == {"python", "pytorch", "numpy"}


def test_conditional_flags_and_platforms():
    r = parse(FULL)
    assert [d.conditional for d in r.deps("build")] == [False, False, True]
    win = parse(FULL, "win-64")
    assert win.skip is True and win.outputs == []  # build.skip: win
    osx = parse(FULL, "osx-arm64")
    assert "ninja" in names(osx, "build") and osx.skip is False and "gxx_osx-arm64 15.*" in names(osx, "build")


@pytest.mark.parametrize("skip,expected", [
    ("true", True), ("false", False), ("[win]", False), ("[linux]", True), ("linux", True),
    ("win", False), ("${{ linux }}", True), ("${{ win or osx }}", False), ('["true"]', True),
    ('${{ match(python, "<3.9") }}', False),  # no python variant of the config matches
    ("\n    - win\n    - ${{ linux and not osx }}", True),
    ("\n    - if: linux\n      then: true", True),
    ("\n    - if: win\n      then: true\n      else: false", False),
])
def test_skip_forms(skip, expected):
    text = f"package: {{name: a, version: '1'}}\nbuild:\n  skip: {skip}\nrequirements:\n  host: [python]\n"
    assert parse(text).skip is expected


def test_skip_per_variant():
    """build.skip is evaluated per variant: only the python variants it does not skip remain."""
    r = parse("package: {name: a, version: '1'}\nbuild:\n  skip: ${{ match(python, '<3.12') }}\n"
              "requirements:\n  host: [python]\n")
    assert r.skip is False and r.outputs[0].variants == 2  # 3.12 and 3.13 of conda-forge's four

def test_multi_output_recipe():
    r = parse("""\
        recipe:
          name: fam
          version: "2.0"
        outputs:
          - package:
              name: libfam
            requirements:
              host: [pytorch]
              run:
                - pytorch >=2.4,<2.6
          - package:
              name: fam-py
            requirements:
              run:
                - ${{ pin_subpackage('libfam', exact=True) }}
                - pytorch >=2.4,<2.6
        """)
    assert (r.name, r.version, r.output_names) == ("libfam", "2.0", ["libfam", "fam-py"])
    assert [(d.raw, d.output) for d in r.deps("run")] == [
        ("pytorch >=2.4,<2.6", 0), ("${{ pin_subpackage('libfam', exact=True) }}", 1), ("pytorch >=2.4,<2.6", 1)]
    single = parse("outputs:\n  - package: {name: solo, version: '1.0'}\n")
    assert (single.name, single.version) == ("solo", "1.0")


def test_context_values_are_typed_like_yaml():
    r = parse("""\
        context:
          flag: true
          quoted: "true"
          n: 7
        package: {name: a, version: "1"}
        requirements:
          run:
            - ${{ "yes" if flag else "no" }}
            - ${{ "q" if quoted == "true" else "bad" }}
            - x${{ n + 1 }}
        """)
    assert names(r, "run") == ["yes", "q", "x8"]


# ---------------------------------------------------------------------------------------------
# errors carry file and line

@pytest.mark.parametrize("text,field,line,words", [
    ("- a\n- b\n", None, 1, "must be a YAML mapping"),
    ("about: {}\n", None, 1, "missing required field 'package'"),
    ("package:\n  version: '1'\n", None, 1, "missing required field 'name'"),
    ("package:\n  name: a\n", None, 1, "missing required field 'version'"),
    ("package:\n  name: [a, b]\n  version: '1'\n", None, 1, "expected scalar"),
    ("package: 3\n", None, 1, "expected mapping"),
    ("package: {name: a, version: '1'}\nbuild: {number: one}\n", "build.number", 2, "invalid digit"),
    ("package: {name: a, version: '1'}\nrequirements:\n  run: numpy\n", None, 1, "expected sequence"),
    ("package: {name: a, version: '1'}\nrequirements:\n  run:\n    - {a: 1}\n", None, 1, "expected scalar"),
    ("package: {name: a, version: '1'}\nsource: 3\n", None, 1, "expected mapping or sequence"),
    ("package: {name: a, version: '1'}\noutputs: 3\n", None, 1, "expected sequence"),
    ("package: {name: a, version: '1'}\nscriptt: x\n", "scriptt", 2, "unknown top-level field 'scriptt'"),
    ("package: {name: a, version: '1'}\nrequirements:\n  run:\n    - ${{ pin_subpackage() }}\n", None, 4, "missing argument"),
    ("package: {name: a, version: '1'}\nrequirements:\n  run:\n    - ${{ foo( }}\n", None, 1, "syntax error"),
    ("package: {name: a, version: '1'}\nrequirements:\n  run:\n    - if: foo(\n      then: x\n", None, 1, "Failed to parse if"),
    ("package: {name: a, version: '1'}\nrequirements:\n  run:\n    - ${{ python_min }}\n", None, 4, "undefined value"),
    ("package: {name: a, version: '1'}\nrequirements:\n  run:\n    - ${{ 'a' * 300000000 }}\n", None, 4, "repeats a value"),
    ("package: {name: a, version: '1'}\npackage: {name: b, version: '1'}\n", None, 2, "duplicate key 'package' at lines 1 and 2"),
    ("{% set v = '1' %}\npackage: {name: a, version: '{{ v }}'}\n", None, 1, "v0 meta.yaml"),
    ("package: {name: a\n", None, 2, "invalid YAML"),
    ("&a [*a]\n", None, 1, "recursive alias"),
])
def test_recipe_errors(text, field, line, words):
    yaml_level = any(w in words for w in ("YAML", "alias", "duplicate key"))
    with pytest.raises(DistroError if yaml_level else RecipeError) as info:
        parse_recipe(text, Path("/r/pkg/recipe.yaml"), RenderSettings())
    err = info.value
    assert words in str(err), str(err)
    assert err.path == "/r/pkg/recipe.yaml" and err.line == line
    if field:
        assert err.field == field


# ---------------------------------------------------------------------------------------------
# real-world recipes (modelled on conda-forge's)

REAL_WORLD_EXPECT = {
    # file: (package, pytorch unbounded under upper_bounds: pytorch-only, ... with run_exports unknown)
    "kornia.yaml": ("kornia", True, True),
    "timm.yaml": ("timm", True, True),
    "torchvision.yaml": ("torchvision", False, True),  # bounded by the host pytorch's run_exports
    "torch-scatter-multi-output.yaml": ("torch-scatter", False, False),
}


def test_real_world_files_are_all_listed():
    assert {p.name for p in REAL_WORLD} == set(REAL_WORLD_EXPECT)


@pytest.mark.parametrize("path", REAL_WORLD, ids=lambda p: p.stem)
@pytest.mark.parametrize("platform", ["linux-64", "osx-arm64", "win-64"])
def test_real_world_recipes_parse(path, platform):
    folder = REAL_WORLD_EXPECT[path.name][0]
    r = parse_recipe(path.read_text(), Path(f"/r/{folder}/recipe.yaml"), cf_settings(platform))
    assert r.name == folder and r.version[0].isdigit()
    if r.skip:  # (build.skip: osx / win)
        assert platform != "linux-64" and "skip" in path.read_text()
        return
    assert r.maintainers and r.tests and r.build_number is not None
    assert all(d.spec is None or d.spec.ok for d in r.deps()), [d.raw for d in r.deps() if d.spec and not d.spec.ok]
    assert not any("${{" in d.raw and d.func is None for d in r.deps())
    assert all(d.line > 1 for d in r.deps())  # every entry found in the text


@pytest.mark.parametrize("path", REAL_WORLD, ids=lambda p: p.stem)
@pytest.mark.parametrize("run_exports_known", [True, False])
def test_real_world_recipes_flag_exactly_the_pytorch_bound(path, run_exports_known, make_distro):
    name, unbounded_known, unbounded_unknown = REAL_WORLD_EXPECT[path.name]
    policy = {"upper_bounds": "pytorch-only", **({} if run_exports_known else {"run_exports": {}})}
    root = make_distro({name: path.read_text()}, {"policy": policy}, variants=True)
    result = lint_distribution(load_distribution(root))
    expected = unbounded_known if run_exports_known else unbounded_unknown
    assert [(f.check, "pytorch" in f.message) for f in result.findings] == ([("run-dep-unbounded", True)] if expected else [])
    # under the default policy (every run requirement bounded) only unbounded requirements are reported
    root = make_distro({name: path.read_text()}, name="required", variants=True)
    assert {f.check for f in lint_distribution(load_distribution(root)).findings} <= {"run-dep-unbounded"}


# ---------------------------------------------------------------------------------------------
# round trip (the editing view)

@pytest.mark.parametrize("path", ALL_YAML, ids=lambda p: str(p.relative_to(REPO)))
def test_roundtrip_is_byte_faithful(path):
    text = path.read_text()
    assert dump_roundtrip(*load_roundtrip(text)) == text


def test_roundtrip_covers_the_data():
    assert len(ALL_YAML) >= len(REAL_WORLD) + 50


# ---------------------------------------------------------------------------------------------
# fuzz: the parser raises DistroError or nothing


_FRAGMENTS = st.sampled_from([
    "package:", "  name: a", "  version: '1'", "  name: ${{ x }}", "requirements:", "  run:", "    - numpy",
    "    - if: linux", "      then: x", "      else: [y]", "    - ${{ pin_compatible('a') }}", "build:", "  number: 1",
    "  skip: [win]", "  noarch: python", "outputs:", "  - package: {name: b}", "recipe: {name: c, version: 2}",
    "context:", "  x: ${{ y }}", "  y: 1", "tests:", "  - python: {imports: [a]}", "about: {license: MIT}",
    "extra:", "  recipe-maintainers: [me]", "source:", "  url: http://x", "- a", "{", "]", "'", "&a", "*a", "${{",
    "}}", ":", "  ", "\t", "#", "${{ 1/0 }}", "${{ foo( }}", "{% set x = 1 %}", "? a", "!!python/object:os.system",
])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.lists(_FRAGMENTS, max_size=14).map("\n".join), st.text(max_size=200)))
def test_recipe_parser_raises_only_distro_errors(text):
    try:
        r = parse_recipe(text, Path("/r/pkg/recipe.yaml"), RenderSettings.make({"y": ["1"]}))
    except DistroError as exc:
        assert exc.path == "/r/pkg/recipe.yaml"
        return
    assert r.name and r.version
    json.dumps([d.raw for d in r.deps()])


def test_load_fast_keeps_scalars_as_strings():
    doc = load_fast("a: 1.10\nb: on\nc: 010\nd: true\ne: ~\nf:\n  - 1\n")
    assert isinstance(doc, LDict) and isinstance(doc["f"], LList)
    assert (doc["a"], doc["b"], doc["c"], doc["d"], doc["e"]) == ("1.10", "on", "010", "true", None)
    assert doc.line_of("f") == 6 and doc["f"].line_of(0) == 7 and doc["a"].line == 1


# ---------------------------------------------------------------------------------------------
# loading a distribution


def test_recipe_paths_and_loading(make_distro, clean_recipe):
    from conda_distro.recipe.model import recipe_paths

    root = make_distro({"b": clean_recipe("b"), "a": clean_recipe("a"), "c-broken": "package: {name: c\n"})
    (root / "recipes" / "empty-folder").mkdir()
    (root / "recipes" / "stray-file.yaml").write_text("x: 1\n")
    paths = recipe_paths(root / "recipes")
    assert [p.parent.name for p in paths] == ["a", "b", "c-broken"] and all(p.name == "recipe.yaml" for p in paths)
    assert recipe_paths(root / "nowhere") == []
    assert recipe_paths(root / "recipes", ["b"]) == [root / "recipes" / "b" / "recipe.yaml"]

    dist = load_distribution(root, strict=False)
    assert sorted(dist.recipes) == ["a", "b"] and len(dist.errors) == 1
    assert dist.errors[0].path.endswith("c-broken/recipe.yaml")
    with pytest.raises(DistroError, match="invalid YAML"):
        load_distribution(root)
    (root / "recipes" / "d-broken").mkdir()
    (root / "recipes" / "d-broken" / "recipe.yaml").write_text("about: {}\n")
    with pytest.raises(DistroError) as info:
        load_distribution(root)
    assert "1 more recipe error(s)" in info.value.hint
    with pytest.raises(RecipeError, match="no recipe named 'aa'") as missing:
        load_distribution(root, strict=False).get("aa")
    assert missing.value.hint == "did you mean 'a'?"


def test_bulk_work_pauses_the_garbage_collector_and_restores_it(make_distro, clean_recipe, monkeypatch):
    import gc

    from conda_distro import distribution
    from conda_distro.util import fsutil

    seen = []
    real = distribution.parse_recipes

    def spy(items, **kw):
        seen.append((len(items), gc.isenabled()))
        return real(items, **kw)

    monkeypatch.setattr(distribution, "parse_recipes", spy)
    root = make_distro({"a": clean_recipe("a"), "b": clean_recipe("b")})
    assert gc.isenabled()
    dist = load_distribution(root)
    assert seen == [(2, False)] and gc.isenabled()
    lint_distribution(dist)
    assert gc.isenabled()
    gc.disable()
    try:
        load_distribution(root)
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
    with fsutil.paused_gc():
        with fsutil.paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
