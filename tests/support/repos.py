"""Small distribution repositories written into a folder: a ``distro.yaml`` and recipes that lint clean
(behind the ``make_distro`` and ``clean_recipe`` fixtures of ``tests/conftest.py``)."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

import yaml

BASE_CONFIG: dict[str, Any] = {
    "name": "test-distro",
    "channels": {"upstream": ["conda-forge"], "staging": "build/channels/staging", "main": "build/channels/main"},
    "pytorch": {"name": "pytorch", "releases": ["2.4.1", "2.5.1", "2.6.0"], "variants": ["cpu", "cuda"]},
    "platforms": ["linux-64"],
    "policy": {"upper_bounds": "required", "unbounded_allowed": ["python"], "unmaintained_grace_days": 60},
}

SHA256 = "0123456789abcdef" * 4


def deep_merge(base: dict, extra: dict | None) -> dict:
    """A copy of ``base`` with ``extra`` merged in (mappings recursively; anything else replaced)."""
    out = copy.deepcopy(base)
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def write_distro(root: Path, recipes: dict[str, str] | None = None, config_extra: dict | None = None,
                 *, distro_yaml: str | None = None, variants: bool = False) -> Path:
    """A distribution folder; ``variants``: with the repository's variants.yaml (conda-forge's pinning
    values), which real-world recipes need to render."""
    root.mkdir(parents=True, exist_ok=True)
    if variants:
        (root / "variants.yaml").write_text((Path(__file__).resolve().parents[2] / "variants.yaml").read_text())
        config_extra = deep_merge(config_extra or {}, {"variant_config": ["variants.yaml"]})
    text = distro_yaml if distro_yaml is not None else yaml.safe_dump(deep_merge(BASE_CONFIG, config_extra),
                                                                       sort_keys=False)
    (root / "distro.yaml").write_text(text)
    for name, recipe in (recipes or {}).items():
        folder = root / "recipes" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "recipe.yaml").write_text(recipe)
    return root


def clean_recipe_text(name: str, *, version: str = "1.2.0", run: list[str] | tuple[str, ...] = (),
                      pytorch: str | None = "pytorch >=2.4,<2.7", host: list[str] | tuple[str, ...] = (),
                      extra: str = "") -> str:
    """A noarch python recipe that lints clean. ``run``/``host`` are added requirements, ``pytorch``
    the pytorch run requirement (None: none), ``extra`` lines appended under ``extra:``."""
    run_lines = ["python >=3.10", *([pytorch] if pytorch else []), *run]
    host_lines = ["python >=3.10", "pip", *host]
    extra_lines = textwrap.indent(textwrap.dedent(extra).strip("\n"), "  ") + "\n" if extra.strip() else ""
    return (
        f'context:\n  version: "{version}"\n\n'
        f"package:\n  name: {name}\n  version: ${{{{ version }}}}\n\n"
        f"source:\n  url: https://example.org/{name}/{name}-${{{{ version }}}}.tar.gz\n  sha256: {SHA256}\n\n"
        "build:\n  number: 0\n  noarch: python\n  script: python -m pip install . --no-deps\n\n"
        "requirements:\n  host:\n" + "".join(f"    - {d}\n" for d in host_lines)
        + "  run:\n" + "".join(f"    - {d}\n" for d in run_lines) + "\n"
        f"tests:\n  - python:\n      imports:\n        - {name.replace('-', '_')}\n\n"
        f"about:\n  homepage: https://example.org/{name}\n  summary: The {name} test package\n"
        "  license: BSD-3-Clause\n  license_file: LICENSE\n\n"
        "extra:\n  recipe-maintainers:\n    - octocat\n" + extra_lines
    )
