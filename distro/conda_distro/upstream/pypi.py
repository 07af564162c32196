"""The PyPI bridge: a local conda channel converted from PyPI wheels.

:func:`bridge_locked` (:class:`BridgeOptions` and a :class:`~conda_distro.upstream.lock.RealLock` in,
:class:`BridgeResult` out) makes the channel from a lock, resolving nothing:

1. **download** exactly the locked wheels of the chosen closures (one per pytorch build) into the wheel
   cache (:func:`~conda_distro.upstream.resolve.download`: pip, ``--require-hashes``, in passes that each
   hold one version of a project); each wheel's metadata is then read from its file;
2. **convert** each wheel (:mod:`.convert`): ``torch`` becomes ``pytorch`` with a ``cpu_`` or
   ``cuda<XY>_`` build string; the cuda build depends on ``__cuda`` (build number +200, as
   conda-forge does), and both carry pytorch's run_export ``pytorch >=X.Y.Z,<X.(Y+1).0a0`` (weak) as
   conda-forge's do; lockstep packages get the same variant treatment;
3. add ``python_abi`` (metadata only) and **index** with rattler (``repodata.json`` only; a caller that
   wants conda-forge's ``run_exports.json`` writes it from there).

:func:`bridge` resolves first (:func:`~conda_distro.upstream.closures.resolve_lock`), then does the same.
Names the distribution builds itself (``exclude``) are never converted.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from conda_distro.errors import BridgeError
from conda_distro.upstream.closures import (
    LOCKSTEP_VERSIONS,
    VARIANTS,
    LockRequest,
    TorchBuild,
    lockstep_requirement,
    resolve_lock,
)
from conda_distro.upstream.convert import (
    DEFAULT_COMPRESSION_LEVEL,
    Converted,
    ConvertOptions,
    TargetPython,
    convert,
    metadata_package,
)
from conda_distro.upstream.lock import LockedClosure, RealLock
from conda_distro.upstream.names import normalize
from conda_distro.upstream.resolve import Closure, PipOptions, Wheel, download, wheel_from_file
from conda_distro.util.rattler_env import assert_no_colon, index_channel

log = logging.getLogger(__name__)

CUDA_BUILD_OFFSET = 200  # conda-forge's build number offset of cuda builds


@dataclass(frozen=True)
class BridgeOptions:
    """What to bridge, and where."""

    channel: Path  # the local channel to write (created; packages already there are kept)
    wheel_cache: Path  # where wheels are downloaded once
    python: TargetPython
    torch: tuple[TorchBuild, ...] = ()
    requirements: tuple[str, ...] = ()  # pip requirements of the distribution (besides torch)
    lockstep: tuple[str, ...] = ()  # PyPI names released with torch (torchvision): per build, same variant
    exclude: frozenset[str] = frozenset()  # PyPI names (normalised) the distribution builds itself
    pip: PipOptions = field(default_factory=PipOptions)
    compression_level: int = DEFAULT_COMPRESSION_LEVEL
    jobs: int = 2  # conversions in parallel (spawned processes; rattler-build/whl2conda hold the GIL)
    skip_unavailable: bool = False  # a pytorch build pip cannot resolve is left out (and reported), not an error
    public_urls: bool = False  # bridge(): record PyPI's URL of wheels pip took from a local folder
    progress: Callable[[str], None] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class BridgeResult:
    """What :func:`bridge` made, and what it cost."""

    channel: Path
    packages: tuple[Converted, ...]
    pytorch: dict[tuple[str, str], Path]  # (release, variant) -> package
    excluded: tuple[str, ...]  # wheels of the closure not converted (the distribution builds them)
    unavailable: tuple[tuple[str, str, str], ...]  # (release, variant, why) of builds left out
    not_converted: tuple[tuple[str, str], ...]  # (wheel filename, why) of wheels whl2conda could not convert
    wheels: int
    bytes_downloaded: int
    download_passes: int
    resolve_seconds: float
    download_seconds: float
    convert_seconds: float
    index_seconds: float

    def summary(self) -> BridgeSummary:
        return BridgeSummary(
            channel=str(self.channel),
            packages=[p.path.name for p in self.packages],
            pytorch=[PytorchFile(release=r, variant=v, file=p.name) for (r, v), p in sorted(self.pytorch.items())],
            excluded=list(self.excluded),
            unavailable=[Unavailable(release=r, variant=v, why=w) for r, v, w in self.unavailable],
            not_converted=[NotConverted(wheel=f, why=w) for f, w in self.not_converted],
            wheels=self.wheels,
            bytes_downloaded=self.bytes_downloaded,
            download_passes=self.download_passes,
            seconds={"resolve": round(self.resolve_seconds, 1), "download": round(self.download_seconds, 1),
                     "convert": round(self.convert_seconds, 1), "index": round(self.index_seconds, 1)})


class PytorchFile(BaseModel):
    release: str
    variant: str
    file: str  # the package's file name in the channel


class Unavailable(BaseModel):
    """A pytorch build left out: pip could not resolve it for this release and variant."""

    release: str
    variant: str
    why: str


class NotConverted(BaseModel):
    wheel: str  # the wheel's file name
    why: str


class BridgeSummary(BaseModel):
    """What a bridge made, as JSON: the ``bridge`` section of `sandbox --real`'s cache entry (written when the
    channel is made, read back on every later run)."""

    channel: str
    packages: list[str] = []
    pytorch: list[PytorchFile] = []
    excluded: list[str] = []
    unavailable: list[Unavailable] = []
    not_converted: list[NotConverted] = []
    wheels: int = 0
    bytes_downloaded: int = 0
    download_passes: int = 0
    seconds: dict[str, float] = {}


def cuda_tag(wheel_file: Path) -> str | None:
    """The CUDA version a torch wheel was built for (``torch/version.py``: ``cuda = '13.0'``) as
    ``130``; None for a CPU wheel."""
    try:
        with zipfile.ZipFile(wheel_file) as zf:
            text = zf.read("torch/version.py").decode()
    except (KeyError, zipfile.BadZipFile, OSError):
        return None
    m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([\d.]+)['\"]", text, re.M)
    return m.group(1).replace(".", "") if m else None


def wheel_is_cuda(wheel_file: Path, name: str) -> bool:
    """Whether a wheel is a CUDA build: torch's ``version.py`` names a CUDA version; other packages
    (torchvision) carry a ``+cuNNN`` local version label or bundle the CUDA runtime (``libcudart``)."""
    if name == "torch":
        return cuda_tag(wheel_file) is not None
    try:
        with zipfile.ZipFile(wheel_file) as zf:
            names = zf.namelist()
            version_py = next((n for n in names if n.endswith("/version.py") and n.count("/") == 1), None)
            text = zf.read(version_py).decode(errors="replace") if version_py else ""
    except (zipfile.BadZipFile, OSError):
        return False
    return bool(re.search(r"__version__\s*=\s*['\"][^'\"]*\+cu\d+", text)) or any("libcudart" in n for n in names)


def _minor_bound(release: str) -> str:
    major, minor = (int(x) for x in release.split(".")[:2])
    return f"pytorch >={release},<{major}.{minor + 1}.0a0"


def _lockstep_pin(release: str, variant: str) -> str:
    """What a lockstep package (torchvision) of one pytorch build depends on, as conda-forge's do: that
    minor of pytorch, and the same variant (a CUDA torchvision cannot load with a CPU torch)."""
    major, minor = (int(x) for x in release.split(".")[:2])
    return f"pytorch >={major}.{minor}.0,<{major}.{minor + 1}.0a0 {variant}*"


@dataclass(frozen=True)
class _Job:
    wheel: Wheel
    closure: Closure
    build: TorchBuild | None  # the pytorch build this wheel is a variant of (torch or lockstep), else None


def _plan(options: BridgeOptions, shared: Closure | None, per_build: dict[TorchBuild, Closure]) -> list[_Job]:
    lock = {normalize(n) for n in options.lockstep} | {"torch"}
    jobs: dict[tuple, _Job] = {}
    for build, closure in per_build.items():
        for w in closure.wheels:
            if w.name in lock:
                jobs[(w.filename, build.variant)] = _Job(w, closure, build)
    closures = ([shared] if shared else []) + list(per_build.values())
    for closure in closures:
        for w in closure.wheels:
            if w.name in lock or w.name in options.exclude:
                continue
            jobs.setdefault((w.filename, None), _Job(w, closure, None))
    return sorted(jobs.values(), key=lambda j: (j.wheel.name, j.wheel.version, j.build.variant if j.build else ""))


def _try_convert(options: ConvertOptions) -> Converted | str:
    try:
        return convert(options)
    except BridgeError as exc:  # one wheel that cannot be converted leaves only its dependents unsolvable
        return exc.message


def _convert_all(work: list[ConvertOptions], jobs: int) -> list[Converted | str]:
    if jobs <= 1 or len(work) <= 1:
        return [_try_convert(o) for o in work]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn, never fork (engine-notes gotcha 8)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_try_convert, work))


def _chosen(options: BridgeOptions, lock: RealLock) -> tuple[LockedClosure | None, dict[TorchBuild, LockedClosure]]:
    """The closures of ``lock`` that ``options`` asks for: one per pytorch build, or (no builds) the
    requirements' own. A build the lock lacks is an error naming it."""
    per_build: dict[TorchBuild, LockedClosure] = {}
    for b in options.torch:
        c = lock.closure(b.release, b.variant)
        if c is None:
            raise BridgeError(f"the lock has no closure for PyTorch {b.release} {b.variant}", field="closures",
                              hint="re-resolve with `sandbox --real --refresh`")
        per_build[b] = c
    shared = None
    if not options.torch:
        shared = next((c for c in lock.closures if c.target is None), None)
        if shared is None:
            raise BridgeError("the lock has no closure for the requirements alone", field="closures",
                              hint="re-resolve with `sandbox --real --refresh`")
    return shared, per_build


def bridge(options: BridgeOptions) -> BridgeResult:
    """Resolve (:func:`resolve_lock`), then :func:`bridge_locked`."""
    if not options.torch and not options.requirements:
        raise BridgeError("nothing to bridge", hint="give pytorch builds and/or requirements")
    t0 = time.monotonic()
    lock = resolve_lock(LockRequest(
        python=options.python.short, torch=options.torch, requirements=options.requirements,
        lockstep=options.lockstep, exclude=options.exclude, pip=options.pip, skip_unavailable=options.skip_unavailable,
        public_urls=options.public_urls, progress=options.progress))
    resolve_s = time.monotonic() - t0
    return dataclasses.replace(bridge_locked(options, lock), resolve_seconds=resolve_s)


def bridge_locked(options: BridgeOptions, lock: RealLock) -> BridgeResult:
    """Download, convert and index exactly what ``lock`` names for ``options.torch`` (module docstring)."""
    say = options.progress or (lambda msg: log.info("%s", msg))
    channel = assert_no_colon(options.channel, what="channel")
    shared_lock, build_locks = _chosen(options, lock)
    chosen = [c for c in [shared_lock, *build_locks.values()] if c is not None]
    unavailable: list[tuple[str, str, str]] = [(c.release or "", c.variant or "", why) for c in chosen
                                               for why in c.unavailable]
    files = {fn: w for fn, w in lock.files_of(chosen).items() if w.name not in options.exclude}
    excluded = sorted(set(lock.excluded) | {w.name for w in lock.files_of(chosen).values() if w.name in options.exclude})

    t1 = time.monotonic()
    say(f"downloading {len(files)} locked wheels into {options.wheel_cache} (files already there are kept)")
    dl = download([Wheel(w.name, w.version, fn, w.url or "", w.sha256) for fn, w in files.items()],
                  options.wheel_cache, options.pip)
    known = {fn: wheel_from_file(dl.files[fn], name=w.name, version=w.version, sha256=w.sha256, url=w.url)
             for fn, w in files.items()}

    def closure(c: LockedClosure) -> Closure:
        return Closure(tuple(c.request), tuple(known[fn] for fn in sorted(c.wheels.values()) if fn in known), 0.0)

    shared = closure(shared_lock) if shared_lock else None
    per_build = {b: closure(c) for b, c in build_locks.items() if c.wheels}
    download_s = time.monotonic() - t1

    jobs = _plan(options, shared, per_build)
    unique = {j.wheel.filename for j in jobs}

    t2 = time.monotonic()
    converted: list[Converted] = []
    pytorch: dict[tuple[str, str], Path] = {}
    work: list[tuple[_Job, ConvertOptions]] = []
    not_converted: list[tuple[str, str]] = []
    for job in jobs:
        w, build = job.wheel, job.build
        kw: dict = {}
        if build is not None:
            torch_wheel = next((x for x in job.closure.wheels if x.name == "torch"), None)
            tag = cuda_tag(dl.files[torch_wheel.filename]) if torch_wheel else None
            if build.variant == "cuda":
                if tag is None:
                    raise BridgeError(f"{build.pip_requirement} gave a wheel without CUDA ({w.filename})",
                                      field="torch", hint="ask for a CUDA build's requirement (torch==X from PyPI)")
                kw.update(build_prefix=f"cuda{tag}_", build_number=CUDA_BUILD_OFFSET, extra_depends=("__cuda",))
            else:
                if tag is not None and w.name == "torch":
                    raise BridgeError(f"{build.pip_requirement} gave a CUDA {tag} wheel ({w.filename}), not a CPU one",
                                      field="torch", hint="a cpu build needs a CPU wheel (torch==X+cpu)")
                kw.update(build_prefix="cpu_")
            if w.name == "torch":
                kw["run_exports"] = {"weak": [_minor_bound(build.release)]}
            else:
                if build.variant == "cpu" and wheel_is_cuda(dl.files[w.filename], w.name):
                    unavailable.append((build.release, build.variant,
                                        f"{w.name} {w.version} on PyPI is a CUDA build only: no CPU build to pair with "
                                        f"a CPU torch (its CUDA extension cannot load there)"))
                    continue
                kw["pin_depends"] = {"pytorch": _lockstep_pin(build.release, build.variant)}
        work.append((job, ConvertOptions(wheel=w, wheel_file=dl.files[w.filename], out_dir=channel, python=options.python,
                                         closure=job.closure.by_name(), compression_level=options.compression_level, **kw)))
    work.sort(key=lambda jw: -jw[1].wheel_file.stat().st_size)  # the big ones first: the pool ends together
    say(f"converting {len(work)} wheels ({options.jobs} at a time)")
    results = _convert_all([o for _, o in work], options.jobs)
    for (job, _), pkg in zip(work, results, strict=True):
        if isinstance(pkg, str):
            say(f"not converted: {job.wheel.filename}: {pkg}")
            not_converted.append((job.wheel.filename, pkg))
            continue
        converted.append(pkg)
        if job.build is not None and job.wheel.name == "torch":
            pytorch[(job.build.release, job.build.variant)] = pkg.path
    py = options.python
    cp = f"cp{py.short.replace('.', '')}"
    metadata_package(channel, name="python_abi", version=py.short, build=f"8_{cp}", subdir="linux-64",
                     constrains=[f"python {py.short}.*"])
    convert_s = time.monotonic() - t2

    t3 = time.monotonic()
    index_channel(channel, subdirs=["linux-64"])
    index_s = time.monotonic() - t3
    return BridgeResult(channel, tuple(converted), pytorch, tuple(excluded), tuple(unavailable), tuple(not_converted),
                        len(unique), dl.bytes_fetched, dl.passes, 0.0, download_s, convert_s, index_s)


__all__ = ["LOCKSTEP_VERSIONS", "VARIANTS", "BridgeOptions", "BridgeResult", "BridgeSummary", "NotConverted",
           "PytorchFile", "TorchBuild", "Unavailable", "bridge", "bridge_locked", "cuda_tag", "lockstep_requirement"]
