"""Where the tool keeps caches that outlive a repository checkout (sandbox upstream, renders)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "CONDA_DISTRO_CACHE"


def default_cache_dir() -> Path:
    """``$CONDA_DISTRO_CACHE``, else ``$XDG_CACHE_HOME/conda-distro``, else ``~/.cache/conda-distro``
    (read when called, never at import)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "conda-distro"
