"""Solving as conda does, with py-rattler: what a user of ``conda install -c MAIN -c UPSTREAM…`` gets.

Two rules of conda differ from rattler's defaults, and both are applied here:

* **Strict channel priority, conda's way.** A package name that a higher channel has (any version) is
  never taken from a lower channel. rattler's ``ChannelPriority.Strict`` still takes a version from a
  lower channel when the higher one lacks the requested version (main holding pytorch 2.5.1 only,
  ``pytorch ==2.6.0`` is found upstream by rattler and refused by conda). So the records of each channel
  are read (py-rattler's Gateway, recursively from the requested names), every name already seen in a
  higher channel is dropped, and the solve runs on what is left (``SparseRepoData`` per channel, so each
  record keeps its channel's URL and installs from there).
* **pip with python.** conda adds ``pip`` to the dependencies of every ``python`` record unless the user
  sets ``add_pip_as_python_dependency: false``; rattler can do the same (its solver's
  ``add_pip_as_python_dependency``), and :class:`CondaSolver` does it unless told otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conda_distro.channels.base import ChannelFile
from conda_distro.engine.releases import SOLVE_TIMEOUT
from conda_distro.errors import ChannelError
from conda_distro.recipe.specs import admits, parse_spec
from conda_distro.util.scratch import ScratchDir
from conda_distro.vocab import virtual_packages

if TYPE_CHECKING:
    from rattler import RepoDataRecord

#: conda's setting, and its environment variable (conda reads every setting from CONDA_<NAME>)
ADD_PIP_SETTING = "add_pip_as_python_dependency"
ADD_PIP_ENV = "CONDA_ADD_PIP_AS_PYTHON_DEPENDENCY"


@dataclass(frozen=True)
class CondaSettings:
    """The conda settings that change what a solve returns."""

    add_pip_as_python_dependency: bool = True  # conda's default

    @classmethod
    def of_user(cls, add_pip: bool | None = None, env: Mapping[str, str] | None = None) -> CondaSettings:
        """The setting given (a command-line flag), else conda's environment variable
        ``CONDA_ADD_PIP_AS_PYTHON_DEPENDENCY`` (false/no/off/0 turn it off), else conda's default (on)."""
        if add_pip is not None:
            return cls(add_pip_as_python_dependency=add_pip)
        value = (os.environ if env is None else env).get(ADD_PIP_ENV)
        if value is None:
            return cls()
        return cls(add_pip_as_python_dependency=value.strip().lower() not in ("false", "no", "off", "0"))


class CondaSolver:
    """``solve(specs, cuda)`` over ``channels`` (highest priority first) with conda's semantics.

    The records are read once per set of requested names (a fresh Gateway per solver: a Gateway caches
    repodata, engine-notes gotcha 5)."""

    name = "conda"

    def __init__(self, channels: Sequence[str], platforms: Sequence[str],
                 settings: CondaSettings = CondaSettings(), serve_as: Mapping[str, str] | None = None) -> None:
        """``serve_as``: a channel read from one URL (a local copy) whose records must name another (where
        users read it, e.g. a snapshot's final place): read URL -> served URL."""
        from rattler import Gateway

        self.channels = list(channels)
        self.serve_as = dict(serve_as or {})
        self.platforms = list(dict.fromkeys([*platforms, "noarch"]))
        self.settings = settings
        self.gateway = Gateway()
        self._tmp = ScratchDir("conda-distro-conda-solve-")
        self._sources: dict[frozenset[str], list[Any]] = {}

    def close(self) -> None:
        self._tmp.cleanup()

    def __enter__(self) -> CondaSolver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def records(self, names: Sequence[str]) -> list[list[dict]]:
        """Per channel, the repodata records (dicts, ``fn`` included) that conda's strict priority leaves
        there, for ``names`` and everything they depend on."""
        from rattler import Subdir

        wanted = sorted({n for n in names if n and not n.startswith("__")} | {"python", "pip"})
        try:
            groups = asyncio.run(self.gateway.query(self.channels, [Subdir(p) for p in self.platforms], wanted,
                                                    recursive=True))
        except Exception as exc:  # rattler raises several fetch errors
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ChannelError(f"cannot read the channels {', '.join(self.channels)}: {first}", field="channels",
                               hint="local channels must exist and be indexed; remote ones must be reachable") from None
        from rattler import Channel

        def key(url: str) -> str:
            return str(Channel(url).base_url).rstrip("/")

        buckets: dict[str, list[Any]] = {key(c): [] for c in self.channels}
        for group in groups:  # one group per channel × subdir
            for r in group:
                buckets.setdefault(key(str(r.channel)), []).append(r)
        seen: set[str] = set()
        out: list[list[dict]] = []
        for channel in self.channels:
            kept = []
            for r in buckets[key(channel)]:
                if r.name.normalized in seen:
                    continue
                rec = json.loads(r.to_json())
                rec["fn"] = str(r.file_name)
                for k in ("url", "channel"):
                    rec.pop(k, None)
                kept.append(rec)
            seen |= {r["name"] for r in kept}
            out.append(kept)
        return out

    def _sparse(self, names: Sequence[str]) -> list[Any]:
        from rattler import Channel, SparseRepoData

        key = frozenset(names)
        for known, sources in self._sources.items():
            if key <= known:  # records read for more names serve fewer (what is not asked for is never chosen)
                return sources
        sources = []
        base = Path(self._tmp.name) / str(len(self._sources))
        for i, (url, recs) in enumerate(zip(self.channels, self.records(names), strict=True)):
            for subdir in self.platforms:
                doc: dict[str, Any] = {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {},
                                       "repodata_version": 1}
                for rec in recs:
                    if rec.get("subdir", subdir) == subdir:
                        rec = dict(rec)
                        fn = rec.pop("fn")
                        doc["packages.conda" if fn.endswith(".conda") else "packages"][fn] = rec
                path = base / str(i) / subdir / "repodata.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(doc))
                sources.append(SparseRepoData(Channel(self.serve_as.get(url, url)), subdir, str(path)))
        self._sources[key] = sources
        return sources

    def solve(self, specs: Sequence[str], cuda: bool) -> list[RepoDataRecord]:
        """Records of a solution; rattler's SolverError when there is none, ChannelError when a channel
        cannot be read."""
        from rattler import MatchSpec, solve_with_sparse_repodata

        names = [MatchSpec(s).name.normalized for s in specs]
        result = solve_with_sparse_repodata(
            list(specs), self._sparse(names), virtual_packages=virtual_packages(cuda), timeout=SOLVE_TIMEOUT,
            add_pip_as_python_dependency=self.settings.add_pip_as_python_dependency)
        return asyncio.run(result) if asyncio.iscoroutine(result) else result


def admitting(files: list[ChannelFile], pytorch: str, release: str) -> list[str]:
    """The names in ``files`` (a channel's) with a build that admits ``release`` and whose distribution deps do too."""
    names = {f.name for f in files}
    ok: dict[str, bool] = {}

    def admits_release(name: str, seen: frozenset = frozenset()) -> bool:
        if name in ok:
            return ok[name]
        if name in seen:
            return False
        result = False
        for f in (f for f in files if f.name == name):
            specs = [s for s in (parse_spec(d) for d in f.depends) if s.ok]
            if not all(admits(s.version, release) for s in specs if s.name == pytorch):
                continue
            if all(admits_release(s.name, seen | {name}) for s in specs if s.name in names):
                result = True
                break
        ok[name] = result
        return result

    return sorted(n for n in names if admits_release(n))


__all__ = ["ADD_PIP_ENV", "CondaSettings", "CondaSolver", "admitting"]
