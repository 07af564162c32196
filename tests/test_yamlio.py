"""yamlio's refusals, the same on every reading path: duplicate keys (both lines named), alias bombs,
recursive aliases and oversized documents. (The block parser's agreement with libyaml is in test_recipe.py.)"""

from __future__ import annotations

import json

import pytest

from conda_distro.errors import DistroError
from conda_distro.util.yamlio import MAX_DOCUMENT_BYTES, YamlSyntaxError, load_fast, load_fast_file, load_roundtrip, load_typed

LOADERS = {
    "fast": lambda text: load_fast(text, path="x.yaml"),
    "typed": lambda text: load_typed(text, path="x.yaml"),
    "roundtrip": lambda text: load_roundtrip(text, path="x.yaml")[0],
}

DUPLICATES = {
    # the repro: a second `pytorch:` silently replaced the releases
    "top-level": ("name: d\npytorch:\n  releases: ['2.5.1', '2.6.0']\nplatforms: [linux-64]\npytorch:\n"
                  "  releases: ['2.6.0']\n", "pytorch", 2, 5),
    "nested": ("a:\n  b: 1\n  c: 2\n  b: 3\n", "b", 2, 4),
    "in-a-list-item": ("run:\n  - name: x\n    name: y\n", "name", 2, 3),
    "flow-mapping": ("a: {x: 1, y: 2, x: 3}\n", "x", 1, 1),
    "quoted-and-plain": ("'a': 1\na: 2\n", "a", 1, 2),
    "after-a-comment": ("a: 1  # first\n# comment\n\na: 2\n", "a", 1, 4),
    "multi-line-scalar-path": ("a: >\n  folded\nb: 1\na: 2\n", "a", 1, 4),
}


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("case", DUPLICATES)
def test_duplicate_keys_are_refused_naming_both_lines(loader, case):
    text, key, first, second = DUPLICATES[case]
    with pytest.raises(YamlSyntaxError) as info:
        LOADERS[loader](text)
    err = info.value
    assert err.message == f"duplicate key '{key}' at lines {first} and {second}"
    assert err.path == "x.yaml" and err.line == second and err.hint


@pytest.mark.parametrize("loader", LOADERS)
def test_the_same_key_in_different_mappings_is_fine(loader):
    doc = LOADERS[loader]("a:\n  name: x\nb:\n  name: y\nlist:\n  - name: 1\n  - name: 2\n")
    assert doc["a"]["name"] == "x" and doc["b"]["name"] == "y" and len(doc["list"]) == 2


@pytest.mark.parametrize("loader", LOADERS)
def test_merge_keys_and_modest_aliases_still_load(loader):
    doc = LOADERS[loader]("base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\nagain: *b\n")
    assert str(doc["derived"]["x"]) == "1" and str(doc["derived"]["y"]) == "3" and str(doc["again"]["y"]) == "2"


def laughs(levels: int) -> str:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("loader", LOADERS)
def test_billion_laughs_is_refused(loader):
    text = laughs(10)  # 10**10 strings when expanded; under 1 KB of text
    assert len(text) < 1000
    with pytest.raises(YamlSyntaxError, match="expands to more than 4 MB through its aliases"):
        LOADERS[loader](text)


def test_billion_laughs_message_is_short():
    """The issue's lint message was 52 MB: the error carries no expansion of the document."""
    with pytest.raises(YamlSyntaxError) as info:
        load_fast(laughs(10), path="recipes/x/recipe.yaml")
    assert len(str(info.value)) + len(info.value.hint or "") < 300


def test_a_few_levels_of_aliases_are_fine():
    doc = load_fast(laughs(4))  # 10**4 items
    assert len(json.dumps(doc["l3"])) > 50_000


def test_one_long_scalar_repeated_through_aliases_is_refused():
    text = "a: &a " + "x" * 100_000 + "\nb: [" + ", ".join(["*a"] * 100) + "]\n"  # 100 KB text, 10 MB expanded
    with pytest.raises(YamlSyntaxError, match="through its aliases"):
        load_fast(text)


@pytest.mark.parametrize("loader", LOADERS)
def test_recursive_alias_is_refused(loader):
    with pytest.raises(YamlSyntaxError, match="recursive alias"):
        LOADERS[loader]("a: &x\n  - *x\n")


@pytest.mark.parametrize("loader", LOADERS)
def test_oversized_document_is_refused(loader):
    text = "a: 1\n" + "#" * MAX_DOCUMENT_BYTES + "\n"
    with pytest.raises(YamlSyntaxError, match="limited to 4 MB"):
        LOADERS[loader](text)


def test_load_fast_file_names_the_file(tmp_path):
    p = tmp_path / "distro.yaml"
    p.write_text("a: 1\na: 2\n")
    with pytest.raises(DistroError) as info:
        load_fast_file(p)
    assert str(info.value).startswith(f"{p}:2: duplicate key 'a' at lines 1 and 2")


def test_load_typed_types_scalars():
    assert load_typed("a: 1\nb: true\nc: '1'\nd: 2025-01-01T00:00:00Z\n")["a"] == 1
