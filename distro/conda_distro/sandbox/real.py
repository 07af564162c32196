"""``conda-distro sandbox DIR --real``: this repository's own distribution against real PyTorch.

The world::

    DIR/
      distro.yaml     the repository's, with channels pointing at ./upstream and local staging/main
      variants.yaml   the repository's
      recipes/        the repository's; each PyPI ``url:`` points at the cached sdist (sha256 unchanged)
      upstream/       local channel: the host python + everything converted from PyPI wheels by the
                      bridge (conda_distro.upstream): pytorch cpu/cuda builds of every release in
                      distro.yaml, torchvision, and every host/run/test dependency of the recipes
      .gitignore, .git/

Caches (``$CONDA_DISTRO_CACHE``, default ``~/.cache/conda-distro``):
``pypi/wheels/`` (downloaded wheels), ``sources/<sha256>/`` (sdists), ``real-upstream/<key>/`` (the
converted channel, keyed by everything it depends on). A second run with the same inputs copies
(hard-links) the channel and the sources and takes seconds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version as dist_version
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from conda_distro.cachedir import default_cache_dir
from conda_distro.distribution import Distribution, load_distribution
from conda_distro.errors import BridgeError, LockTimeoutError
from conda_distro.fsutil import clear_folder
from conda_distro.jsonio import read_json_text
from conda_distro.sandbox.cache import copy_channel, rattler_build_version_string
from conda_distro.sandbox.sources import SourceRequest, fetch_sources, point_recipe_at
from conda_distro.sandbox.upstream import HostPython, build_python_package, publish_packages, write_run_exports
from conda_distro.sandbox.world import commit_world, target_folder
from conda_distro.upstream import BridgeOptions, BridgeResult, TargetPython, TorchBuild, bridge, pypi_name
from conda_distro.upstream.names import normalize
from conda_distro.upstream.pypi import BridgeSummary, NotConverted, Unavailable

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
ENTRY_FILE = "cache-entry.json"
LOCK_TIMEOUT_S = 3 * 3600.0
#: PyPI projects released in lockstep with torch: resolved with each pytorch build, same variant.
LOCKSTEP = ("torchvision",)
#: Never asked of pip: the interpreter (the host python is repackaged) and virtual packages.
NOT_FROM_PYPI = {"python", "pytorch"}
GITIGNORE = "build/\nupstream/\n__pycache__/\n"
COMMIT_MESSAGE = "Real world created by conda-distro sandbox --real\n\nPyTorch releases: {releases}\n"


@dataclass(frozen=True)
class RealOptions:
    """What :func:`create_real_world` makes, and how."""

    path: Path
    repo: Path  # the repository holding distro.yaml and recipes/
    force: bool = False
    use_cache: bool = True
    cache_dir: Path | None = None
    cuda: bool = True  # bridge cuda builds (about 3 GB of wheels per release)
    git: bool = True
    progress: Callable[[str], None] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class RealResult:
    path: Path
    upstream: Path
    recipes: list[str]
    releases: tuple[str, ...]
    pytorch: dict[tuple[str, str], str]  # (release, variant) -> filename
    unavailable: list[Unavailable]
    not_converted: list[NotConverted]
    cache_hit: bool
    timings: dict[str, float]
    bytes_downloaded: int
    upstream_bytes: int
    seconds: float

    def to_dict(self) -> dict:
        return {
            "path": str(self.path), "upstream": str(self.upstream), "recipes": self.recipes,
            "releases": list(self.releases),
            "pytorch": [{"release": r, "variant": v, "file": f} for (r, v), f in sorted(self.pytorch.items())],
            "unavailable": [u.model_dump(mode="json") for u in self.unavailable],
            "not_converted": [n.model_dump(mode="json") for n in self.not_converted], "cache_hit": self.cache_hit,
            "timings": {k: round(v, 1) for k, v in self.timings.items()},
            "bytes_downloaded": self.bytes_downloaded, "upstream_bytes": self.upstream_bytes,
            "seconds": round(self.seconds, 1),
        }

    @property
    def exit_code(self) -> int:
        return 0

    def text_lines(self) -> list[str]:
        lines = [f"real world created in {self.path} ({self.seconds:.1f}s"
                 f"{', upstream from cache' if self.cache_hit else ''})",
                 f"  upstream channel: {self.upstream} ({self.upstream_bytes / 2**30:.1f} GiB)"]
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
class Needs:
    requirements: tuple[str, ...]  # pip requirements
    exclude: frozenset[str]  # PyPI names the distribution builds
    sources: tuple[SourceRequest, ...]


def distribution_needs(repo: Path) -> tuple[Distribution, Needs]:
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
    return dist, Needs(tuple(reqs), exclude, tuple(sources))


def torch_builds(releases: tuple[str, ...], variants: tuple[str, ...], cuda: bool) -> tuple[TorchBuild, ...]:
    out = []
    for r in releases:
        for v in variants:
            if v == "cuda" and not cuda:
                continue
            out.append(TorchBuild(r, v))
    return tuple(out)


# ------------------------------------------------------------------------------------ the upstream cache


def _inputs(needs: Needs, builds: tuple[TorchBuild, ...], host: HostPython) -> dict:
    code = hashlib.sha256()
    pkg = Path(__file__).resolve().parent.parent / "upstream"
    for f in sorted(pkg.glob("*.py")):
        code.update(f.read_bytes())
    return {
        "format": CACHE_FORMAT, "python_version": host.version, "python_prefix": str(host.prefix),
        "rattler_build": rattler_build_version_string(), "whl2conda": dist_version("whl2conda"),
        "requirements": list(needs.requirements), "exclude": sorted(needs.exclude), "lockstep": list(LOCKSTEP),
        "torch": [[b.release, b.variant, b.pip_requirement] for b in builds], "bridge_code": code.hexdigest(),
    }


def _build_upstream(tmp: Path, needs: Needs, builds: tuple[TorchBuild, ...], host: HostPython, cache_root: Path,
                    say: Callable[[str], None]) -> BridgeResult:
    tmp.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="conda-distro-python-") as td:
        say(f"repackaging the host python {host.version}")
        publish_packages(build_python_package(Path(td), host), tmp)
    result = bridge(BridgeOptions(
        channel=tmp, wheel_cache=cache_root / "pypi" / "wheels", python=TargetPython(host.version), torch=builds,
        requirements=needs.requirements, lockstep=LOCKSTEP, exclude=needs.exclude, skip_unavailable=True,
        progress=say))
    write_run_exports(tmp)
    return result


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


def ensure_real_upstream(needs: Needs, builds: tuple[TorchBuild, ...], *, cache_root: Path, host: HostPython,
                         say: Callable[[str], None]) -> tuple[Path, BridgeSummary, bool]:
    """The cache entry of the bridged channel: (path, what the bridge made, built now?)."""
    from filelock import FileLock, Timeout

    inputs = _inputs(needs, builds, host)
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:24]
    root = cache_root / "real-upstream"
    entry = root / key
    if (entry / ENTRY_FILE).is_file():
        return entry, _read_entry(entry / ENTRY_FILE).bridge, False
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(root / f"{key}.lock"))
    try:
        lock.acquire(timeout=LOCK_TIMEOUT_S)
    except Timeout:
        raise LockTimeoutError(f"another process has been building {entry} for over {LOCK_TIMEOUT_S:.0f} s",
                               path=root / f"{key}.lock", hint="wait for it, or remove the lock if none runs") from None
    try:
        if (entry / ENTRY_FILE).is_file():
            return entry, _read_entry(entry / ENTRY_FILE).bridge, False
        for stale in root.glob(f"{key}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = root / f"{key}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            res = _build_upstream(tmp, needs, builds, host, cache_root, say)
            doc = CacheEntry(**inputs, key=key, created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             bridge=res.summary())
            (tmp / ENTRY_FILE).write_text(doc.model_dump_json(indent=2) + "\n")
            if entry.exists():
                shutil.rmtree(entry)
            os.rename(tmp, entry)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return entry, doc.bridge, True
    finally:
        lock.release()


# ------------------------------------------------------------------------------------ the world


def _distro_yaml(text: str) -> str:
    """The repository's distro.yaml with local channels: ./upstream, build/channels/{staging,pytorch}."""
    out, in_channels = [], False
    for line in text.splitlines(keepends=True):
        if re.match(r"^channels:\s*$", line):
            in_channels = True
            out.append(line)
            out.append("  upstream: [./upstream]            # sandbox --real: converted from PyPI wheels\n")
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


def create_real_world(options: RealOptions) -> RealResult:
    """Create the real world (module docstring). Raises :class:`BridgeError` when pip or a conversion
    fails, :class:`~conda_distro.errors.UsageError` for a bad target folder (nothing written)."""
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
    releases = tuple(cfg.releases)
    builds = torch_builds(releases, tuple(cfg.variants), options.cuda)
    timings: dict[str, float] = {}

    t = time.monotonic()
    if options.use_cache:
        entry, summary, built = ensure_real_upstream(needs, builds, cache_root=cache_root, host=host, say=say)
    else:
        entry = Path(tempfile.mkdtemp(prefix="conda-distro-real-")) / "upstream"
        res = _build_upstream(entry, needs, builds, host, cache_root, say)
        summary, built = res.summary(), True
    timings["upstream"] = time.monotonic() - t
    t = time.monotonic()
    say(f"fetching {len(needs.sources)} recipe sources (pip download --no-binary :all:) into {cache_root / 'sources'}")
    sources, _ = fetch_sources(needs.sources, cache_root / "sources")
    timings["sources"] = time.monotonic() - t

    t = time.monotonic()
    if path.is_dir():
        clear_folder(path)
    path.mkdir(parents=True, exist_ok=True)
    upstream = path / "upstream"
    copy_channel(entry, upstream)
    (upstream / ENTRY_FILE).unlink(missing_ok=True)
    if not options.use_cache:
        shutil.rmtree(entry.parent, ignore_errors=True)
    shutil.copytree(repo / "recipes", path / "recipes", ignore=shutil.ignore_patterns("__pycache__", "build"))
    for extra in ("variants.yaml",):
        if (repo / extra).is_file():
            shutil.copyfile(repo / extra, path / extra)
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
    commit = commit_world(path, releases, None) if options.git else None
    del commit
    timings["world"] = time.monotonic() - t

    pytorch = {(p.release, p.variant): p.file for p in summary.pytorch}
    return RealResult(
        path=path, upstream=upstream, recipes=sorted(dist.recipes), releases=releases, pytorch=pytorch,
        unavailable=list(summary.unavailable), not_converted=list(summary.not_converted), cache_hit=not built,
        timings={**timings, **({f"bridge_{k}": v for k, v in summary.seconds.items()} if built else {})},
        bytes_downloaded=summary.bytes_downloaded if built else 0,
        upstream_bytes=_dir_bytes(upstream), seconds=time.monotonic() - t0)


__all__ = ["RealOptions", "RealResult", "create_real_world", "distribution_needs"]
