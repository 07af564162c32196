"""The places of a distribution repository that belong to something: no channel may be put there and no
command writes its output there (``channels.staging`` / ``channels.main`` in distro.yaml, ``status --out``).

A location is refused when it is one of these places, lies inside one, or holds one (a channel at the
repository's ``build/`` would hold ``build/results/``). Paths are compared resolved (``..`` and symbolic
links followed). Only stdlib: ``config`` imports this.
"""

from __future__ import annotations

from pathlib import Path

#: folders at the repository's root, and what they hold
REPOSITORY_FOLDERS = {
    ".git": "git's own folder",
    ".github": "the workflows",
    "channel_state": "the ledger of main (channel_state/)",
    "recipes": "the recipes",
    "proposals": "the package proposals",
    "distro": "the tool's own source",
    "tests": "the test suite",
    "bench": "the benchmarks",
}
#: files at the repository's root
REPOSITORY_FILES = ("distro.yaml", "hints.yaml", "variants.yaml", "package_owners.yaml")
#: folders under ``build/`` that commands read back: a channel or a page there would mix with them
BUILD_FOLDERS = {
    "results": "the test results promote reads (build/results/)",
    "logs": "the build and test logs (build/logs/)",
    "pr": "check-pr's own builds (build/pr/)",
    "sweep": "the sweep's reports and journals (build/sweep/)",
    "locks": "the lock files (build/locks/)",
    "work": "the build work folders (build/work/)",
    "release-views": "the release views (build/release-views/)",
}


def reserved_places(root: Path) -> list[tuple[Path, str]]:
    """(resolved path, what it holds) of every reserved place of the repository at ``root``."""
    base = root.resolve()
    out = [(base / name, what) for name, what in REPOSITORY_FOLDERS.items()]
    out += [(base / name, f"the repository's {name}") for name in REPOSITORY_FILES]
    out += [(base / "build" / name, what) for name, what in BUILD_FOLDERS.items()]
    out.append((base / "build" / "excuses.json", "the promotion gate's excuses (build/excuses.json)"))
    return out


def clash(path: Path, root: Path) -> str | None:
    """Why ``path`` may not be a channel or an output folder of the repository at ``root`` (None: it may):
    it is the repository itself, or is, lies inside or holds a reserved place."""
    try:
        where = path.resolve()
    except (OSError, ValueError):
        return None  # (the caller reports a path it cannot use)
    if where == root.resolve():
        return "it is the repository itself"
    for place, what in reserved_places(root):
        if where == place or where.is_relative_to(place):
            return f"it is inside {what}"
        if place.is_relative_to(where):
            return f"it holds {what}"
    return None
