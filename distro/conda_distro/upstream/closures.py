"""Resolving the real world's lock: one pip closure per release × variant (the PyPI bridge's first step).

For each pytorch build (:class:`TorchBuild`), pip resolves ``torch`` (its pin), the lockstep packages
released with it (``torchvision==0.(Y+15).*`` for torch 2.Y) and every requirement of the recipes
*together*, so that each closure is one set of wheels that installs together with that torch. When that
fails, the build is examined piece by piece:

* ``torch`` alone does not resolve: upstream has no such build (PyPI has no CPU wheel of 2.14.1): the
  closure is recorded with no wheels and the reason (``unavailable``), and later runs do not ask again;
* a lockstep package does not resolve with it (no torchvision 0.30 for 2.15.0): recorded the same way,
  and the closure is resolved without it;
* otherwise the recipes' requirements conflict with that torch: a real conflict. Every build is tried
  first; then one error names each build that conflicts with pip's explanation (the packages and the
  versions they need), the builds that resolved, and what to do. Nothing is written.

Wheels pip took from a local mirror or find-links folder (``file://``) are recorded with their public
PyPI URL when PyPI's simple index (its JSON form, PEP 691) lists the same file (same name and sha256), so
that the lock does not depend on the machine that resolved it.
"""

from __future__ import annotations

import json
import logging
import re
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from conda_distro.errors import BridgeError
from conda_distro.upstream.lock import LockBuilder, LockedWheel, RealLock
from conda_distro.upstream.names import normalize
from conda_distro.upstream.resolve import Closure, PipFailed, PipOptions, Wheel, resolve
from conda_distro.vocab import Release, Variant

log = logging.getLogger(__name__)

VARIANTS = ("cpu", "cuda")
PYPI_SIMPLE = "https://pypi.org/simple/{name}/"  # PEP 691: the simple index as JSON (files with hashes)
URL_LOOKUP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class TorchBuild:
    """One pytorch package to bridge: a release and a variant, and the pip requirement that gives it."""

    release: str  # 2.13.0
    variant: str  # cpu | cuda
    requirement: str = ""  # default: torch==RELEASE+cpu for cpu, torch===RELEASE (exactly, no local label) for cuda

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise BridgeError(f"unknown pytorch variant '{self.variant}'", field="variant", hint="cpu or cuda")
        if not re.fullmatch(r"\d+\.\d+\.\d+", self.release):
            raise BridgeError(f"'{self.release}' is not a release like 2.13.0", field="release",
                              hint="give full X.Y.Z releases")

    @property
    def pip_requirement(self) -> str:
        if self.requirement:
            return self.requirement
        return f"torch=={self.release}+cpu" if not Variant(self.variant).cuda else f"torch==={self.release}"


#: Packages released in lockstep with torch, and the version that goes with torch X.Y (PyTorch's
#: compatibility table: torchvision 0.(Y+15) goes with torch 2.Y). Asking pip for the matching
#: version fails at once when there is none; a bare ``torchvision`` makes pip backtrack through every
#: older release (each pins another torch) for many minutes.
LOCKSTEP_VERSIONS: dict[str, Callable[[int, int], str]] = {
    "torchvision": lambda major, minor: f"==0.{minor + 15}.*",
    "torchaudio": lambda major, minor: f"=={major}.{minor}.*",
}


def lockstep_requirement(name: str, release: str) -> str:
    major, minor = Release(release).major_minor
    rule = LOCKSTEP_VERSIONS.get(normalize(name))
    return f"{name}{rule(major, minor)}" if rule else name


@dataclass(frozen=True)
class LockRequest:
    """What to resolve."""

    python: str  # the target python's minor (3.11): pip runs in it, its tags choose the wheels
    torch: tuple[TorchBuild, ...] = ()
    requirements: tuple[str, ...] = ()  # pip requirements of the recipes
    lockstep: tuple[str, ...] = ()
    exclude: frozenset[str] = frozenset()  # projects the distribution builds itself (left out of closures)
    pip: PipOptions = field(default_factory=PipOptions)
    skip_unavailable: bool = True  # a build upstream cannot serve is recorded (else: an error)
    public_urls: bool = True  # look file:// wheels up on PyPI's JSON API
    progress: Callable[[str], None] | None = field(default=None, compare=False)


_NETWORK = re.compile(r"Max retries exceeded|NewConnectionError|ConnectionError|ProxyError|Read timed out|"
                      r"Could not fetch URL|Temporary failure in name resolution|Network is unreachable|"
                      r"Connection refused|SSLError", re.I)


def _why(exc: PipFailed) -> str:
    """The reason recorded for what upstream cannot serve; a network failure is never such a reason (the lock
    would keep it): it is raised instead."""
    if any(_NETWORK.search(ln) for ln in exc.problem):
        raise BridgeError("pip could not reach an index while resolving:\n" + "\n".join(exc.problem[-10:]),
                          hint="check the network (and pip's index settings) and run again; the lock was not changed")
    lines = [ln.strip() for ln in exc.problem if ln.strip()]
    return lines[-1] if lines else "pip cannot resolve it"


@dataclass(frozen=True)
class _Resolved:
    build: TorchBuild
    closure: Closure | None  # None: torch itself is unavailable
    request: tuple[str, ...]
    unavailable: tuple[str, ...]
    conflict: PipFailed | None = None


def _resolve_build(b: TorchBuild, req: LockRequest) -> _Resolved:
    pin = b.pip_requirement
    lockstep = [lockstep_requirement(n, b.release) for n in req.lockstep]
    try:
        return _Resolved(b, resolve([pin, *lockstep, *req.requirements], req.pip), (pin, *lockstep), ())
    except PipFailed as whole:
        first = whole
    try:  # why? torch alone first
        resolve([pin], req.pip)
    except PipFailed as exc:
        if not req.skip_unavailable:
            raise
        return _Resolved(b, None, (pin,), (f"{pin}: {_why(exc)}",))
    kept: list[str] = []
    unavailable: list[str] = []
    for ls in lockstep:
        try:
            resolve([pin, *kept, ls], req.pip)
            kept.append(ls)
        except PipFailed as exc:
            if not req.skip_unavailable:
                raise
            unavailable.append(f"{ls} with {pin}: {_why(exc)}")
    if not unavailable:
        return _Resolved(b, None, (pin, *kept), (), conflict=first)
    try:
        return _Resolved(b, resolve([pin, *kept, *req.requirements], req.pip), (pin, *kept), tuple(unavailable))
    except PipFailed as exc:
        return _Resolved(b, None, (pin, *kept), tuple(unavailable), conflict=exc)


def _conflict_error(conflicts: Sequence[_Resolved], resolved: Sequence[_Resolved]) -> BridgeError:
    parts = []
    for r in conflicts:
        assert r.conflict is not None
        parts.append(f"PyTorch {r.build.release} {r.build.variant} ({' '.join(r.request)} with the recipes' "
                     f"requirements):\n" + "\n".join(f"  {ln.strip()}" for ln in r.conflict.problem))
    ok = ", ".join(f"{r.build.release} {r.build.variant}" for r in resolved if r.closure is not None) or "none"
    return BridgeError(
        "the recipes' requirements cannot be installed together with " +
        ", ".join(f"PyTorch {r.build.release} {r.build.variant}" for r in conflicts) + " (pip's explanation below; "
        f"builds that resolve: {ok}):\n" + "\n".join(parts), field="requirements",
        hint="the requirements are the recipes' host/run/test requirements in pip's spelling: widen the recipe pin "
             "that excludes what this PyTorch needs (or drop the release from distro.yaml's pytorch.releases), then "
             "run `conda-distro sandbox DIR --real --refresh`; the lock was not changed")


def _public_url(w: Wheel) -> str:
    """Module docstring: the PyPI URL of a file pip took from a local folder, when PyPI has the same file."""
    if not w.url.startswith("file:"):
        return w.url
    request = urllib.request.Request(PYPI_SIMPLE.format(name=w.name),
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=URL_LOOKUP_TIMEOUT_S) as resp:  # noqa: S310 - a fixed https URL
            doc = json.loads(resp.read())
    except (OSError, ValueError):
        return w.url
    for f in doc.get("files") or [] if isinstance(doc, dict) else []:
        if isinstance(f, dict) and f.get("filename") == w.filename and (f.get("hashes") or {}).get("sha256") == w.sha256:
            return str(f.get("url") or w.url)
    return w.url


def _locked(wheels: Sequence[Wheel], public_urls: bool) -> dict[str, LockedWheel]:
    unique = {w.filename: w for w in wheels}
    missing = [w.filename for w in unique.values() if not w.sha256]
    if missing:
        raise BridgeError(f"pip reported no sha256 for {', '.join(missing)}",
                          hint="the lock records every file's sha256; use an index that serves hashes")
    if public_urls:
        with ThreadPoolExecutor(max_workers=8) as pool:
            urls = dict(zip(unique, pool.map(_public_url, unique.values()), strict=True))
    else:
        urls = {fn: w.url for fn, w in unique.items()}
    return {fn: LockedWheel(name=w.name, version=w.version, sha256=w.sha256 or "", url=urls[fn] or None)
            for fn, w in unique.items()}


def resolve_lock(req: LockRequest) -> RealLock:
    """Resolve every closure (module docstring) and return the lock (without sources)."""
    say = req.progress or (lambda msg: log.info("%s", msg))
    builder = LockBuilder(python=req.python, lockstep=req.lockstep, requirements=req.requirements)
    results: list[_Resolved] = []
    for b in req.torch:
        say(f"resolving PyTorch {b.release} {b.variant} ({b.pip_requirement}) with the recipes' "
            f"{len(req.requirements)} requirements (pip)")
        results.append(_resolve_build(b, req))
    conflicts = [r for r in results if r.conflict is not None]
    if conflicts:
        raise _conflict_error(conflicts, results)
    closures: list[tuple[str | None, str | None, tuple[str, ...], Closure | None, tuple[str, ...]]] = [
        (r.build.release, r.build.variant, r.request, r.closure, r.unavailable) for r in results]
    if not req.torch:
        say(f"resolving the recipes' {len(req.requirements)} requirements (pip)")
        closures.append((None, None, (), resolve(list(req.requirements), req.pip), ()))
    taken = [w for *_, c, _ in closures if c for w in c.wheels if w.name not in req.exclude]
    files = _locked(taken, req.public_urls)
    for release, variant, request, closure, unavailable in closures:
        wheels = {w.name: (w.filename, files[w.filename]) for w in (closure.wheels if closure else ())
                  if w.name not in req.exclude}
        builder.excluded |= {w.name for w in (closure.wheels if closure else ()) if w.name in req.exclude}
        builder.add(release, variant, request, wheels, unavailable)
    return builder.build()


__all__ = ["LOCKSTEP_VERSIONS", "VARIANTS", "LockRequest", "TorchBuild", "lockstep_requirement", "resolve_lock"]
