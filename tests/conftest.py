"""Shared fixtures: small distribution repositories written into ``tmp_path`` (the plain functions behind them
are in ``tests/support/repos.py``).

Keep this file generic. A test module's own helpers live in that module; helpers shared by several test
modules live in ``tests/support/``.

* ``make_distro(recipes, config_extra=None, *, name="distro", distro_yaml=None)`` (fixture) writes
  ``distro.yaml`` (``BASE_CONFIG`` deep-merged with ``config_extra``, or ``distro_yaml`` verbatim) and
  ``recipes/<name>/recipe.yaml`` for each entry of ``recipes``; returns the root folder.
* ``clean_recipe(name, **kw)`` (fixture) returns the text of a recipe that passes every lint check;
  keyword arguments vary the parts that tests care about (see :func:`clean_recipe_text`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.repos import clean_recipe_text, write_distro

# session-wide sandbox worlds for end-to-end tests (tests/support/worlds.py); tiny packages built with
# rattler-build and the session's staging channel of them (tests/support/channel_builds.py); pytester runs a test session inside a test
# (tests/test_tiers.py)
pytest_plugins = ["support.worlds", "support.channel_builds", "pytester"]

@pytest.fixture()
def make_distro(tmp_path: Path) -> Callable[..., Path]:
    def make(recipes: dict[str, str] | None = None, config_extra: dict | None = None, *, name: str = "distro",
             distro_yaml: str | None = None, variants: bool = False) -> Path:
        return write_distro(tmp_path / name, recipes, config_extra, distro_yaml=distro_yaml, variants=variants)

    return make


@pytest.fixture()
def clean_recipe() -> Callable[..., str]:
    return clean_recipe_text
