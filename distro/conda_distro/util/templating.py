"""The one jinja2 environment: the status page, the reports, the PR comment and the sweep's pull requests
and tracking issue are rendered from templates in ``conda_distro/templates/``.

HTML templates are autoescaped; markdown ones are not (they get the ``md`` filter for table cells of our
own text). Text that comes from recipe code (failure reasons, log excerpts, anything quoting them) goes
through the ``shown`` filter (:func:`conda_distro.util.safetext.shown`) in every template, HTML included.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jinja2

from conda_distro.util.safetext import shown


def md_cell(value: Any) -> str:
    """Text safe inside a GitHub markdown table cell: one line, pipes escaped."""
    return " ".join(str(value if value is not None else "").split()).replace("|", "\\|")


def mentions(handles: list[str]) -> str:
    return " ".join(f"@{h}" for h in handles) or "(no maintainers listed)"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("conda_distro", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=False),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md"] = md_cell
    env.filters["mentions"] = mentions
    env.filters["shown"] = shown
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def static(name: str) -> str:
    """A template file's text as it is (style.css)."""
    env = environment()
    source, _, _ = env.loader.get_source(env, name)  # type: ignore[union-attr]
    return source
