"""``conda-distro sandbox DIR --real``: this repository's own distribution against real PyTorch.

The world::

    DIR/
      distro.yaml     the repository's, with channels pointing at ./upstream and local staging/main
      variants.yaml   the repository's, with the machine's compilers, CUDA row and python (sandbox.real_toolchain)
      recipes/        the repository's; each PyPI ``url:`` points at the cached sdist (sha256 unchanged)
      real-world.lock.json   the lock it was made from (a copy of the repository's)
      upstream/       local channel: the host python + everything converted from PyPI wheels by the
                      bridge (conda_distro.upstream): pytorch cpu/cuda builds of every release in
                      distro.yaml, torchvision, and every host/run/test dependency of the recipes
      toolchain/      local channel: compiler packages pointing at the machine's gcc/g++ (and nvcc), for the
                      compiled recipes (sandbox.real_toolchain)
      .gitignore, .git/

**The lock** (``real-world.lock.json`` at the repository's root, :mod:`conda_distro.upstream.lock`) records
what the world is made of: per release × variant every wheel (name, version, sha256, URL), and the
recipes' sdists. With a lock, nothing is resolved: exactly the locked files are downloaded (pip,
``--require-hashes``), whatever PyPI has published since. Without one, or with ``refresh``, pip resolves
(:mod:`conda_distro.upstream.closures`), the lock is written and what changed is reported. A lock that no
longer satisfies the repository (a release, lockstep package or recipe requirement it does not cover) is
refused, naming what is missing; the sdists section follows the recipes, which pin them.

Caches (``$CONDA_DISTRO_CACHE``, default ``~/.cache/conda-distro``): ``pypi/wheels/`` (downloaded wheels),
``sources/<sha256>/`` (sdists), ``real-upstream/<key>/`` (the converted channel, keyed by the lock's
content for the builds made, the host python and the bridge's tools and code: an unchanged lock is a hit
that needs no network, a changed one builds a new entry; entries unused for
:data:`CACHE_IDLE_DAYS` days are removed). A second run with the same lock copies (hard-links) the
channel and the sources and takes seconds.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from conda_distro.distribution import Distribution, load_distribution
from conda_distro.errors import BridgeError, UsageError
from conda_distro.sandbox.cache import EntrySpec, copy_channel, ensure_entry, prune_entries, rattler_build_version_string
from conda_distro.sandbox.real_toolchain import TOOLCHAIN_CHANNEL, build_toolchain_channel, real_variants
from conda_distro.sandbox.sources import SourceFile, SourceRequest, fetch_sources, point_recipe_at
from conda_distro.sandbox.upstream import (
    HostPython,
    Toolchain,
    build_python_package,
    data_dir,
    publish_packages,
    tree_sha256,
    write_run_exports,
)
from conda_distro.sandbox.world import commit_world, target_folder
from conda_distro.upstream import BridgeOptions, TargetPython, TorchBuild, bridge_locked, pypi_name
from conda_distro.upstream.closures import LockRequest, resolve_lock
from conda_distro.upstream.lock import (
    LOCK_FILE,
    REFRESH_HINT,
    LockChanges,
    LockedSource,
    RealLock,
    Wanted,
    lock_changes,
    read_lock,
    source_changes,
    stale_reasons,
    write_lock,
)
from conda_distro.upstream.names import normalize
from conda_distro.upstream.pypi import BridgeSummary, NotConverted, Unavailable
from conda_distro.util.cachedir import default_cache_dir
from conda_distro.util.fsutil import clear_folder
from conda_distro.util.jsonio import read_json_text
from conda_distro.util.scratch import ScratchDir, new_scratch
from conda_distro.vocab import Target, Variant

log = logging.getLogger(__name__)

CACHE_FORMAT = 2  # 2: keyed by the lock
CACHE_KIND = "real-upstream"
CACHE_IDLE_DAYS = 14.0  # a real-upstream entry unused this long is removed (6 GB each)
ENTRY_FILE = "cache-entry.json"
#: the bridge's modules that decide what the channel's packages hold (resolving and downloading do not:
#: the lock says which files, and their sha256 is checked)
CHANNEL_CODE = ("convert.py", "names.py", "pypi.py")
LOCK_TIMEOUT_S = 3 * 3600.0
#: PyPI projects released in lockstep with torch: resolved with each pytorch build, same variant.
LOCKSTEP = ("torchvision",)
#: Never asked of pip: the interpreter (the host python is repackaged) and virtual packages.
NOT_FROM_PYPI = {"python", "pytorch"}
GITIGNORE = "build/\nupstream/\ntoolchain/\n__pycache__/\n"
COMMIT_MESSAGE = "Real world created by conda-distro sandbox --real\n\nPyTorch releases: {releases}\n"


@dataclass(frozen=True)
class RealOptions:
    """What :func:`create_real_world` makes, and how."""

    path: Path
    repo: Path  # the repository holding distro.yaml and recipes/
    force: bool = False
    refresh: bool = False  # re-resolve and rewrite the lock (module docstring)
    lock: Path | None = None  # default: <repo>/real-world.lock.json
    use_cache: bool = True
    cache_dir: Path | None = None
    cuda: bool = True  # bridge cuda builds (about 3 GB of wheels per release); the lock covers them either way
    git: bool = True
    progress: Callable[[str], None] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class LockReport:
    """What happened to the lock in this run."""

    path: Path
    action: str  # "read" (used as it was) | "resolved" (there was none) | "refreshed" | "sources-updated"
    changes: LockChanges | None  # vs the lock before (None when it was used as it was)
    lock: RealLock

    def to_dict(self) -> dict:
        return {
            "path": str(self.path), "action": self.action,
            "changes": self.changes.to_dict() if self.changes is not None else None,
            "closures": [{"release": c.release, "variant": c.variant, "wheels": len(c.wheels),
                          "unavailable": list(c.unavailable)} for c in self.lock.closures],
            "wheels": len(self.lock.wheels), "sources": len(self.lock.sources),
        }

    def lines(self) -> list[str]:
        what = {"read": "used as it is", "resolved": "resolved and written (there was none)",
                "refreshed": "re-resolved and rewritten", "sources-updated": "sdists updated from the recipes"}
        out = [f"  lock: {self.path} ({what[self.action]}; {len(self.lock.wheels)} wheels, "
               f"{len(self.lock.sources)} sdists)"]
        if self.action == "resolved":  # everything is new: one line per release x variant
            out += [f"    {c.label}: {len(c.wheels)} wheels" + (f" ({'; '.join(c.unavailable)})" if c.unavailable else "")
                    for c in self.lock.closures]
        elif self.changes is not None:
            out.append("  what changed in the lock:")
            out += ["  " + ln for ln in self.changes.lines()]
        return out


@dataclass(frozen=True)
class RealResult:
    path: Path
    upstream: Path
    recipes: list[str]
    releases: tuple[str, ...]
    pytorch: dict[Target, str]  # (release, variant) -> filename
    unavailable: list[Unavailable]
    not_converted: list[NotConverted]
    cache_hit: bool
    timings: dict[str, float]
    bytes_downloaded: int
    upstream_bytes: int
    seconds: float
    lock: LockReport

    def to_dict(self) -> dict:
        return {
            "path": str(self.path), "upstream": str(self.upstream), "recipes": self.recipes,
            "releases": list(self.releases),
            "pytorch": [{"release": r, "variant": v, "file": f} for (r, v), f in sorted(self.pytorch.items())],
            "unavailable": [u.model_dump(mode="json") for u in self.unavailable],
            "not_converted": [n.model_dump(mode="json") for n in self.not_converted], "cache_hit": self.cache_hit,
            "timings": {k: round(v, 1) for k, v in self.timings.items()},
            "bytes_downloaded": self.bytes_downloaded, "upstream_bytes": self.upstream_bytes,
            "seconds": round(self.seconds, 1), "lock": self.lock.to_dict(),
        }

    @property
    def exit_code(self) -> int:
        return 0

    def text_lines(self) -> list[str]:
        lines = [f"real world created in {self.path} ({self.seconds:.1f}s"
                 f"{', upstream from cache' if self.cache_hit else ''})"]
        lines += self.lock.lines()
        lines.append(f"  upstream channel: {self.upstream} ({self.upstream_bytes / 2**30:.1f} GiB)")
        lines += [f"    {f}  (PyTorch {release}, {variant})" for (release, variant), f in sorted(self.pytorch.items())]
        lines += [f"    not on PyPI for PyTorch {u.release} ({u.variant}): {u.why}" for u in self.unavailable]
        lines += [f"    not converted: {n.wheel}: {n.why}" for n in self.not_converted]
        lines.append(f"  recipes: {', '.join(self.recipes)}")
        lines.append(f"next: cd {self.path} && conda-distro build --all --jobs 2")
        return lines


# ------------------------------------------------------------------------------------ what to bridge


def _pip_spec(name: str, version: str | None) -> str:
    """A conda requirement as a pip requirement (constraints pip cannot express are dropped)."""
    project = pypi_name(name)
    if not version or "|" in version:
        return project
    parts = []
    for piece in version.split(","):
        piece = piece.strip()
        if not piece or piece == "*":
            continue
        if m := re.match(r"^(>=|<=|>|<|==|!=|~=)", piece):
            op = m.group(1)
            v = piece[len(op):]
            if op == "<" and v.endswith("a0"):
                v = v[:-2].rstrip(".")
            parts.append(op + v)
        elif piece.endswith(".*"):
            parts.append("==" + piece)
        else:
            parts.append("==" + piece)
    return project + ",".join(parts) if parts else project


@dataclass(frozen=True)
class RealWorldNeeds:
    """What the real world must hold for the distribution (named apart from the build's ``engine.needs.Needs``)."""

    requirements: tuple[str, ...]  # pip requirements
    exclude: frozenset[str]  # PyPI names the distribution builds
    sources: tuple[SourceRequest, ...]


def distribution_needs(repo: Path) -> tuple[Distribution, RealWorldNeeds]:
    """The distribution in ``repo`` and what its recipes need from PyPI (read as rattler-build renders them)."""
    dist = load_distribution(repo)
    dist.raise_errors()
    own = {o for r in dist.recipes.values() for o in r.output_names}
    specs: dict[str, set[str]] = {}
    sources: list[SourceRequest] = []

    def want(name: str, version: str | None) -> None:
        if name in own or name in NOT_FROM_PYPI or name.startswith("__"):
            return
        specs.setdefault(name, set())
        if version:
            specs[name].add(version)

    for r in dist.recipes.values():
        for section in ("host", "run"):
            for d in r.requirements.get(section, []):
                if d.spec and d.spec.ok:
                    want(d.spec.name, d.spec.version)
        if any(isinstance(t, dict) and "python" in t for t in r.tests):
            want("pip", None)  # pip_check
        for dep in r.test_requirements():
            parts = dep.split(None, 1)
            want(parts[0], parts[1] if len(parts) > 1 else None)
        for s in r.sources:
            if s.url and s.sha256:
                sources.append(SourceRequest(r.path, s.line, s.url, s.sha256, r.version))
    reqs = []
    for name in sorted(specs):
        versions = sorted(specs[name])
        if normalize(pypi_name(name)) in LOCKSTEP:
            continue
        spec = ",".join(v for v in versions if "|" not in v) or None
        reqs.append(_pip_spec(name, spec))
    exclude = frozenset(normalize(pypi_name(o)) for o in own)
    return dist, RealWorldNeeds(tuple(reqs), exclude, tuple(sources))


def torch_builds(releases: tuple[str, ...], variants: tuple[str, ...], cuda: bool) -> tuple[TorchBuild, ...]:
    out = []
    for r in releases:
        for v in variants:
            if Variant(v).cuda and not cuda:
                continue
            out.append(TorchBuild(r, v))
    return tuple(out)


# ------------------------------------------------------------------------------------ the lock


def _wanted(needs: RealWorldNeeds, releases: tuple[str, ...], variants: tuple[str, ...], host: HostPython) -> Wanted:
    return Wanted(python=host.short, targets=tuple(Target(r, Variant(v)) for r in releases for v in variants), lockstep=LOCKSTEP,
                  requirements=needs.requirements)


def _locked_sources(files: list[SourceFile]) -> list[LockedSource]:
    return [LockedSource(recipe=f.request.recipe.parent.name, name=normalize(f.request.project),
                         version=f.request.version, filename=f.path.name, sha256=f.request.sha256, url=f.url)
            for f in files]


@dataclass(frozen=True)
class LockInput:
    """What :func:`obtain_lock` reads or resolves."""

    path: Path
    needs: RealWorldNeeds
    builds: tuple[TorchBuild, ...]  # every pytorch build of distro.yaml (the lock covers them all)
    wanted: Wanted
    host: HostPython
    refresh: bool


def _resolve(inp: LockInput, say: Callable[[str], None]) -> RealLock:
    say(f"resolving the real world with pip (lock: {inp.path})")
    return resolve_lock(LockRequest(python=inp.host.short, torch=inp.builds, requirements=inp.needs.requirements,
                                    lockstep=LOCKSTEP, exclude=inp.needs.exclude, skip_unavailable=True, progress=say))


def obtain_lock(inp: LockInput, say: Callable[[str], None]) -> tuple[RealLock | None, RealLock, str]:
    """(the lock as it was, the lock to build from without its sources, what happened): read and checked, or
    resolved (module docstring). Nothing is written here."""
    old = read_lock(inp.path) if inp.path.exists() or inp.path.is_symlink() else None
    if old is not None and not inp.refresh:
        reasons = stale_reasons(old, inp.wanted)
        if reasons:
            raise BridgeError("the lock no longer fits the repository:\n" + "\n".join(f"  {r}" for r in reasons[:20])
                              + (f"\n  ... and {len(reasons) - 20} more" if len(reasons) > 20 else ""),
                              path=inp.path, hint=REFRESH_HINT.format(lock=inp.path.name))
        return old, old, "read"
    return old, _resolve(inp, say), "refreshed" if old is not None else "resolved"


# ------------------------------------------------------------------------------------ the upstream cache


@dataclass(frozen=True)
class UpstreamRequest:
    """The channel to make from a lock: its pytorch builds, for this host, with the caches in ``cache_root``."""

    lock: RealLock
    needs: RealWorldNeeds
    builds: tuple[TorchBuild, ...]
    host: HostPython
    cache_root: Path


def _inputs(req: UpstreamRequest) -> dict:
    code = hashlib.sha256()
    pkg = Path(__file__).resolve().parent.parent / "upstream"
    for name in CHANNEL_CODE:
        code.update((pkg / name).read_bytes())
    closures = [c for b in req.builds if (c := req.lock.closure(b.release, b.variant)) is not None]
    return {
        "format": CACHE_FORMAT, "python_version": req.host.version, "python_prefix": str(req.host.prefix),
        "rattler_build": rattler_build_version_string(), "whl2conda": dist_version("whl2conda"),
        "lock": req.lock.channel_key(closures, req.needs.exclude),
        "builds": [[b.release, b.variant] for b in req.builds], "bridge_code": code.hexdigest(),
        "python_recipe": tree_sha256(data_dir() / "upstream" / "python"),  # the host python is repackaged by it
    }


def _build_upstream(tmp: Path, req: UpstreamRequest, say: Callable[[str], None]) -> BridgeSummary:
    tmp.mkdir(parents=True, exist_ok=True)
    with ScratchDir("conda-distro-python-") as td:
        say(f"repackaging the host python {req.host.version}")
        publish_packages(build_python_package(Path(td), req.host), tmp)
    result = bridge_locked(BridgeOptions(
        channel=tmp, wheel_cache=req.cache_root / "pypi" / "wheels", python=TargetPython(req.host.version),
        torch=req.builds, lockstep=LOCKSTEP, exclude=req.needs.exclude, skip_unavailable=True, progress=say), req.lock)
    write_run_exports(tmp)
    return result.summary()


class CacheEntry(BaseModel):
    """``cache-entry.json`` of a bridged upstream channel: the inputs it was made from (their hash is its
    key; kept as extra fields), when it was made, and what the bridge made."""

    model_config = ConfigDict(extra="allow")
    key: str
    created: str
    bridge: BridgeSummary


def _read_entry(path: Path) -> CacheEntry:
    try:
        return CacheEntry.model_validate_json(read_json_text(path, "cache", error=BridgeError, hint=f"remove {path.parent}"))
    except ValidationError as exc:
        raise BridgeError(f"the cache entry cannot be read: {exc.errors()[0]['msg']}", path=path,
                          hint=f"remove {path.parent} (it is made again on the next run)") from None


def ensure_real_upstream(req: UpstreamRequest, say: Callable[[str], None]) -> tuple[Path, BridgeSummary, bool]:
    """The cache entry of the bridged channel for ``req``: (path, what the bridge made, built now?). Entries
    of other locks left unused for :data:`CACHE_IDLE_DAYS` are removed afterwards."""

    def build(tmp: Path) -> dict[str, Any]:
        return {"bridge": _build_upstream(tmp, req, say).model_dump(mode="json")}

    built = sum(1 for b in req.builds if (c := req.lock.closure(b.release, b.variant)) is not None and c.wheels)
    entry = ensure_entry(EntrySpec(CACHE_KIND, _inputs(req), build,
                                   f"the real upstream channel from the lock ({built} pytorch builds)",
                                   lock_timeout=LOCK_TIMEOUT_S), cache_dir=req.cache_root, progress=say)
    prune_entries(CACHE_KIND, keep=[entry.key], max_idle_days=CACHE_IDLE_DAYS, cache_dir=req.cache_root)
    return entry.path, _read_entry(entry.path / ENTRY_FILE).bridge, entry.built


def offline_gaps(repo: Path, cache_dir: Path | None = None, cuda: bool = True) -> list[str]:
    """What keeps ``sandbox --real`` of ``repo`` from running without the network, [] when nothing does: no
    lock, a lock that no longer fits, no cache entry of its upstream channel, an sdist not in the cache or
    not in the lock (e.g. for a test that must skip on a machine without the real world's caches)."""
    from conda_distro.sandbox.cache import cache_key
    from conda_distro.sandbox.sources import cached

    repo = Path(repo).resolve()
    lock_path = repo / LOCK_FILE
    if not lock_path.is_file():
        return [f"no lock {lock_path}"]
    host = HostPython.current()
    cache_root = (cache_dir or default_cache_dir()).expanduser().absolute()
    dist, needs = distribution_needs(repo)
    cfg = dist.config.pytorch
    releases, variants = tuple(cfg.releases), tuple(cfg.variants)
    lock = read_lock(lock_path)
    gaps = list(stale_reasons(lock, _wanted(needs, releases, variants, host)))
    entry = cache_root / CACHE_KIND / cache_key(_inputs(UpstreamRequest(lock, needs, torch_builds(releases, variants, cuda),
                                                                          host, cache_root)))
    if not (entry / ENTRY_FILE).is_file():
        gaps.append(f"no cached upstream channel for this lock ({entry})")
    locked = {s.sha256 for s in lock.sources}
    for s in needs.sources:
        if s.sha256 not in locked:
            gaps.append(f"{s.recipe.parent.name}: sdist {s.sha256[:12]}… not in the lock")
        elif cached(cache_root / "sources", s.sha256) is None:
            gaps.append(f"{s.recipe.parent.name}: sdist {s.sha256[:12]}… not in {cache_root / 'sources'}")
    return gaps


# ------------------------------------------------------------------------------------ the world


def _distro_yaml(text: str) -> str:
    """The repository's distro.yaml with local channels: ./upstream, build/channels/{staging,pytorch}."""
    out, in_channels = [], False
    for line in text.splitlines(keepends=True):
        if re.match(r"^channels:\s*$", line):
            in_channels = True
            out.append(line)
            out.append(f"  upstream: [./upstream, ./{TOOLCHAIN_CHANNEL}]   # sandbox --real: converted from PyPI wheels; "
                       "the machine's compilers\n")
            out.append("  staging: build/channels/staging\n")
            out.append("  main: build/channels/pytorch\n")
            continue
        if in_channels and re.match(r"^\s+\S", line):
            continue
        in_channels = False
        out.append(line)
    return "".join(out)


def _dir_bytes(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total


def _sources(needs: RealWorldNeeds, lock: RealLock, cache_root: Path, say: Callable[[str], None]) -> list[SourceFile]:
    say(f"fetching {len(needs.sources)} recipe sources (by URL, sha256-checked) into {cache_root / 'sources'}")
    return fetch_sources(needs.sources, cache_root / "sources", known={s.sha256: s.url for s in lock.sources})[0]


@dataclass(frozen=True)
class WorldFiles:
    """What :func:`_write_world` puts into the world besides the repository's files."""

    entry: Path  # the bridged upstream channel (cache entry) to hard-link
    sources: list[SourceFile]
    lock_path: Path
    toolchain: Toolchain
    host: HostPython


def _write_world(path: Path, repo: Path, files: WorldFiles, releases: tuple[str, ...], git: bool) -> Path:
    if path.is_dir():
        clear_folder(path)
    path.mkdir(parents=True, exist_ok=True)
    upstream = path / "upstream"
    copy_channel(files.entry, upstream)
    (upstream / ENTRY_FILE).unlink(missing_ok=True)
    build_toolchain_channel(path / TOOLCHAIN_CHANNEL, files.toolchain)
    shutil.copytree(repo / "recipes", path / "recipes", ignore=shutil.ignore_patterns("__pycache__", "build"))
    if (repo / "variants.yaml").is_file():
        (path / "variants.yaml").write_text(real_variants((repo / "variants.yaml").read_text(), files.toolchain,
                                                          files.host, repo / "variants.yaml"))
    shutil.copyfile(files.lock_path, path / LOCK_FILE)
    sources = files.sources
    (path / "distro.yaml").write_text(_distro_yaml((repo / "distro.yaml").read_text()))
    by_recipe: dict[Path, list] = {}
    for s in sources:
        by_recipe.setdefault(s.request.recipe, []).append(s)
    for recipe, items in by_recipe.items():
        target = path / "recipes" / recipe.relative_to(repo / "recipes")
        text = target.read_text()
        for s in sorted(items, key=lambda x: -x.request.line):
            text = point_recipe_at(text, s.request.line, s.path.as_uri())
        target.write_text(text)
    (path / ".gitignore").write_text(GITIGNORE)
    if git:
        commit_world(path, releases, None)
    return upstream


#: what only ``sandbox --real`` needs (the PyPI bridge), installed by the ``real`` extra of the package
REAL_EXTRA = {"whl2conda": "whl2conda", "conda_package_handling": "conda-package-handling"}


def require_real_extra() -> None:
    """Exit 2 (nothing written) naming the extra to install when the PyPI bridge's libraries are missing."""
    import importlib.util

    missing = [dist for module, dist in REAL_EXTRA.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise UsageError(f"sandbox --real needs {' and '.join(missing)}, which are not installed", field="--real",
                         hint="pip install 'conda-distro[real]' (from a checkout: pip install -e '.[real]')")


def create_real_world(options: RealOptions) -> RealResult:
    """Create the real world (module docstring). Raises :class:`BridgeError` when the lock cannot be read or
    no longer fits, pip cannot resolve or download, or a conversion fails; :class:`~conda_distro.errors.UsageError`
    for a bad target folder (nothing written)."""
    require_real_extra()
    t0 = time.monotonic()
    say = options.progress or (lambda msg: log.info("%s", msg))
    path = target_folder(options)
    repo = Path(options.repo).resolve()
    if not (repo / "distro.yaml").is_file():
        raise BridgeError(f"{repo} holds no distro.yaml", path=repo, field="--repo",
                          hint="run in (or name) the repository of the distribution")
    host = HostPython.current()
    cache_root = (options.cache_dir or default_cache_dir()).expanduser().absolute()
    dist, needs = distribution_needs(repo)
    cfg = dist.config.pytorch
    releases, variants = tuple(cfg.releases), tuple(cfg.variants)
    builds = torch_builds(releases, variants, options.cuda)
    lock_path = (options.lock or repo / LOCK_FILE).absolute()
    timings: dict[str, float] = {}

    t = time.monotonic()
    inp = LockInput(lock_path, needs, torch_builds(releases, variants, True), _wanted(needs, releases, variants, host),
                     host, options.refresh)
    old, lock, action = obtain_lock(inp, say)
    timings["resolve"] = time.monotonic() - t
    t = time.monotonic()
    sources = _sources(needs, old or lock, cache_root, say)
    timings["sources"] = time.monotonic() - t
    locked_sources = _locked_sources(sources)
    lock = lock.model_copy(update={"sources": locked_sources})
    if action == "read":
        if old is not None and old.text() != lock.text():  # the recipes moved their sdists: the lock follows
            action = "sources-updated"
            changes: LockChanges | None = LockChanges(sources=source_changes(old.sources, locked_sources))
        else:
            changes = None
    else:
        changes = lock_changes(old, lock)
    if old is None or old.text() != lock.text():
        write_lock(lock_path, lock)
        say(f"wrote {lock_path}")

    t = time.monotonic()
    req = UpstreamRequest(lock, needs, builds, host, cache_root)
    if options.use_cache:
        entry, summary, built = ensure_real_upstream(req, say)
    else:
        entry = new_scratch("conda-distro-real-") / "upstream"
        summary, built = _build_upstream(entry, req, say), True
    timings["upstream"] = time.monotonic() - t

    t = time.monotonic()
    upstream = _write_world(path, repo, WorldFiles(entry, sources, lock_path, Toolchain.detect(), host), releases,
                            options.git)
    if not options.use_cache:
        shutil.rmtree(entry.parent, ignore_errors=True)
    timings["world"] = time.monotonic() - t

    pytorch = {Target(p.release, Variant(p.variant)): p.file for p in summary.pytorch}
    return RealResult(
        path=path, upstream=upstream, recipes=sorted(dist.recipes), releases=releases, pytorch=pytorch,
        unavailable=list(summary.unavailable), not_converted=list(summary.not_converted), cache_hit=not built,
        timings={**timings, **({f"bridge_{k}": v for k, v in summary.seconds.items()} if built else {})},
        bytes_downloaded=summary.bytes_downloaded if built else 0,
        upstream_bytes=_dir_bytes(upstream), seconds=time.monotonic() - t0,
        lock=LockReport(lock_path, action, changes, lock))


__all__ = ["LockInput", "LockReport", "RealOptions", "RealResult", "UpstreamRequest", "create_real_world",
           "distribution_needs", "ensure_real_upstream", "obtain_lock", "offline_gaps"]
