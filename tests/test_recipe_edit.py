"""The one recipe editor (conda_distro.recipe.edit): node paths, line edits that keep every other byte,
and the round-trip fallback that lint --fix uses."""

from __future__ import annotations

import pytest

from conda_distro.recipe.edit import EditError, LineEditor, Named, TreeEditor, get, parse_path

RECIPE = """\
context:
  version: "1.2.0"   # upstream
  bn: 3

package:
  name: demo
  version: ${{ version }}

build:
  number: ${{ bn }}

requirements:
  host:
    - python >=3.10
  run:
    - python >=3.10   # keep me
    - pytorch >=2.4,<2.7
    - numpy >=1.24,<3
extra:
  recipe-maintainers:
    - alice
    - bob
    # a comment after bob
    - Alice
"""


def test_paths_name_keys_indexes_and_package_names():
    assert parse_path("requirements.run[pytorch]") == ["requirements", "run", Named("pytorch")]
    assert parse_path("extra.recipe-maintainers[2]") == ["extra", "recipe-maintainers", 2]
    with pytest.raises(EditError):
        parse_path("requirements..run")
    tree = LineEditor(RECIPE).tree
    assert get(tree, "requirements.run[pytorch]") == "pytorch >=2.4,<2.7"
    assert get(tree, "requirements.run[scipy]") is None and get(tree, "build.number") == "${{ bn }}"


def test_line_edits_change_exactly_the_addressed_lines():
    editor = LineEditor(RECIPE)
    line = editor.line_of("requirements.run[pytorch]")
    assert line == 17
    editor.replace(line, "pytorch >=2.4,<2.7", "pytorch >=2.4,<2.8")
    editor.set_number("build.number", 4)  # ${{ bn }}: set in context:
    out = editor.text()
    changed = [(a, b) for a, b in zip(RECIPE.split("\n"), out.split("\n"), strict=True) if a != b]
    assert changed == [("  bn: 3", "  bn: 4"), ("    - pytorch >=2.4,<2.7", "    - pytorch >=2.4,<2.8")]
    assert editor.changed == {3, 17}
    with pytest.raises(EditError, match="cannot find"):
        editor.replace(line, "pytorch >=9", "x")


def test_tree_editor_deletes_one_item_and_keeps_comments():
    edit = TreeEditor(RECIPE)
    edit.delete("extra.recipe-maintainers[2]")
    edit.set("context.version", "1.3.0")
    out = edit.text()
    assert "    - Alice\n" not in out and "    # a comment after bob\n" in out
    assert 'version: "1.3.0"   # upstream' in out  # the quoting and the comment are kept
    assert out.replace('"1.3.0"', '"1.2.0"') == RECIPE.replace("    - Alice\n", "")
    with pytest.raises(EditError, match="no item 'scipy'"):
        edit.delete("requirements.run[scipy]")


def test_a_new_document_is_built_and_annotated_through_the_same_paths():
    """propose's skeletons are written with the editor: inserts at the end, comments addressed by path."""
    ed = TreeEditor.new()
    ed.insert("", "package", {"name": "kit", "version": "1.0"}, position=None)
    ed.insert("", "requirements", {"run": ["python >=3.10", "pytorch >=2.4,<2.7"]}, position=None)
    ed.insert("", "context", {"version": "1.0"})  # position 0: first
    ed.comment("", before="A skeleton.")
    ed.comment("requirements", before="\n")
    ed.comment("requirements.run[pytorch]", eol="every release")
    ed.comment("requirements.run", before="the run deps")
    assert ed.text() == (
        "# A skeleton.\n"
        "context:\n  version: '1.0'\n"
        "package:\n  name: kit\n  version: '1.0'\n"
        "\n"
        "requirements:\n"
        "  # the run deps\n"
        "  run:\n    - python >=3.10\n    - pytorch >=2.4,<2.7  # every release\n"
    )
    with pytest.raises(EditError, match="takes no comment before it"):
        ed.comment("requirements.run[0]", before="x")
    with pytest.raises(EditError, match="only a comment before it"):
        ed.comment("", eol="x")
    with pytest.raises(EditError, match="no key 'about'"):
        ed.comment("about.license", eol="x")
