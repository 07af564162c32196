"""The limits of one package's builds and tests: distro.yaml's ``limits:``, overridden by the recipe's
``extra: limits:`` (the same keys: ``build_timeout``, ``test_timeout``, ``log_limit``).

```yaml
extra:
  limits:
    build_timeout: 7200      # seconds per build (per variant)
    test_timeout: 600        # seconds per test (release × variant)
    log_limit: 256 MiB       # per log
```

A bad value is a :class:`~conda_distro.errors.RecipeError` (exit 2) naming the recipe, its line and the
key, raised before anything is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from conda_distro.config import Limits
from conda_distro.errors import RecipeError
from conda_distro.util.validation import to_error
from conda_distro.util.yamlio import LDict, load_fast

SEE = "see docs/operate.md, section \"Build sandbox\" (limits)"


def recipe_limits(path: Path, text: str, defaults: Limits) -> Limits:
    """``defaults`` with the recipe's own ``extra: limits:`` applied."""
    doc: Any = load_fast(text, path=path)
    extra = doc.get("extra") if isinstance(doc, dict) else None
    raw = extra.get("limits") if isinstance(extra, dict) else None
    if raw is None:
        return defaults
    if not isinstance(raw, dict):
        line = extra.line_of("limits") if isinstance(extra, LDict) else None
        raise RecipeError("extra.limits must be a mapping of build_timeout, test_timeout and log_limit", path=path,
                          field="extra.limits", line=line, hint=SEE)
    try:
        return Limits.model_validate({**defaults.model_dump(), **raw})
    except ValidationError as exc:
        err = to_error(exc, raw, path, root=Limits, error=RecipeError, see=SEE)
        err.field = f"extra.limits.{err.field}" if err.field else "extra.limits"
        raise err from None


def describe(limits: Limits) -> str:
    """How the limits read in a reason."""
    return (f"limits: build {limits.build_timeout:g} s, test {limits.test_timeout:g} s, log {limits.log_limit} bytes "
            "(distro.yaml `limits:`, or the recipe's `extra: limits:`)")
