"""Tiny real packages built with rattler-build, shared by the channel and promotion tests (a pytest plugin,
see conftest.py).

* ``PACKAGES`` — the scenario: name -> run requirements.
* ``build_package(out, name, run, ...)`` — one ``noarch: generic`` package built into a channel folder.
* ``template`` (session fixture) — a staging channel of the PACKAGES and an ``other`` channel.
"""

from __future__ import annotations

import json
import textwrap
from functools import cache
from pathlib import Path

import pytest

# name -> run requirements of the tiny test packages
PACKAGES = {
    "alpha": ["pytorch >=2.4,<2.6"],
    "beta": ["pytorch >=2.4,<2.7"],
    "gamma": ["alpha >=1.0,<2"],
    "delta": ["beta >=1.0,<2"],
    "eps": ["pytorch >=2.5,<2.7"],
    "zeta": ["pytorch >=2.4,<2.7"],
}


def build_package(out: Path, name: str, run: list[str], *, version: str = "1.0", content: str = "v1",
                  build_number: int = 0) -> Path:
    """Build one ``noarch: generic`` package with rattler-build into the channel folder ``out``."""
    from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig

    recipe_dir = out.parent / "recipes" / f"{name}-{content}"
    recipe_dir.mkdir(parents=True, exist_ok=True)
    text = textwrap.dedent(f"""\
        package: {{name: {name}, version: "{version}"}}
        build:
          number: {build_number}
          noarch: generic
          script: ["mkdir -p $PREFIX/share/{name}", "echo {content} > $PREFIX/share/{name}/VERSION"]
        requirements:
          run: {json.dumps(run)}
        """)
    recipe = Stage0Recipe.from_yaml(text, recipe_dir=recipe_dir)
    with pytest.MonkeyPatch.context() as mp:  # also called outside a test (the session's template)
        mp.setenv("PATH", "/usr/bin:/bin")  # engine-notes gotcha 6
        (variant,) = recipe.render(VariantConfig())
        res = variant.run_build(tool_config=ToolConfiguration(test_strategy="skip"), output_dir=str(out),
                                channels=[out.as_uri()])
    return Path(res.packages[0])


@cache
def _template(base: str) -> Path:
    out = Path(base) / "staging"
    for name, run in PACKAGES.items():
        build_package(out, name, run)
    other = Path(base) / "other"  # same filename as alpha, different content
    build_package(other, "alpha", PACKAGES["alpha"], content="v2")
    return Path(base)


@pytest.fixture(scope="session")
def template(tmp_path_factory) -> Path:
    """A staging channel of the PACKAGES (built once per session) and an ``other`` channel holding a
    different file with alpha's filename."""
    return _template(str(tmp_path_factory.mktemp("built")))
