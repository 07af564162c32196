"""The sandbox world's upstream channel: the host python, repackaged, and stand-in pytorch packages.

Everything is built offline with rattler-build from the recipes in ``sandbox/data/upstream/``:

* ``python``: the running interpreter (``sys.base_prefix``, a pyenv ``--enable-shared`` CPython),
  copied into a conda package (engine-notes section 2). Its source folder and version are passed
  through ``RenderConfig(extra_context=...)``.
* ``pip``: the wheel the interpreter bundles for ``ensurepip``, as a ``noarch: python`` package: conda
  adds ``pip`` to every ``python`` record by default (``add_pip_as_python_dependency``), so without it a
  user with conda's default settings could install nothing.
* ``pytorch``: per release, a cpu build (``cpu_h<hash>_0``) and a cuda build
  (``cuda<ver>_h<hash>_200``, depends on ``__cuda``), both linux-64, ``python`` in host and run,
  run_export ``pytorch >=X.Y.Z,<X.(Y+1).0a0``, and a small shared library whose symbols carry the minor
  (an extension built against one minor fails to load against another). Summaries say "STAND-IN for
  pytorch X".
* compiler packages as conda-forge's (``gcc_linux-64``, ``gxx_linux-64``, ``sysroot_linux-64`` and, where
  the machine has nvcc, ``cuda-nvcc_linux-64``): activation scripts pointing at the machine's compilers
  (:class:`Toolchain`).

Builds run serially in this process (rattler-build holds the GIL; engine-notes gotcha 8) inside
:func:`conda_distro.util.rattler_env.rattler_env`. Packages are built into a throwaway folder and then
published into the channel, which is re-indexed and gets a conda-forge style ``run_exports.json``
per subdir (rattler's indexer does not write one).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import sys
import sysconfig
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from conda_distro.errors import ChannelError, DistroError
from conda_distro.util.fsutil import copy_atomic
from conda_distro.util.jsonio import read_json
from conda_distro.util.rattler_env import assert_no_colon, channel_url, index_channel, run_build
from conda_distro.util.scratch import ScratchDir
from conda_distro.vocab import Release, Target, Variant

log = logging.getLogger(__name__)

DEFAULT_RELEASES: tuple[str, ...] = ("2.4.1", "2.5.1", "2.6.0")
VARIANTS: tuple[str, ...] = ("cpu", "cuda")
PLATFORM = "linux-64"
SUBDIRS: tuple[str, ...] = (PLATFORM, "noarch")
CPU_BUILD_NUMBER = 0
CUDA_BUILD_NUMBER = 200  # conda-forge adds 200 to the build number of cuda builds
# CUDA version of the stand-in cuda build, by PyTorch minor (roughly what conda-forge shipped).
CUDA_BY_MINOR: dict[tuple[int, int], str] = {(2, 4): "12.4", (2, 5): "12.4", (2, 6): "12.6"}
DEFAULT_CUDA = "12.8"
# Builds use a private rattler package cache inside their work folder: every build of python has the
# same filename but another sha256, and a shared cache re-extracts on each mismatch (two concurrent
# builders thrashed: 80 s instead of 15 s).
RATTLER_CACHE = "rattler-cache"


PROBE_TIMEOUT_S = 120.0  # seconds for a compiler to print its version (it answers in well under one)


def probe_output(argv: Sequence[str], timeout: float = PROBE_TIMEOUT_S) -> str:
    """What ``argv`` (a version probe: ``gcc -dumpversion``) prints, or ``""`` when it cannot run or has
    not ended within ``timeout`` seconds (it is killed then: a broken compiler wrapper cannot hang
    ``sandbox``; the caller treats no answer as no version)."""
    import subprocess

    try:
        return subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=timeout,
                              stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


class SandboxError(DistroError):
    """The sandbox world cannot be created (bad target folder, unusable host python, failed build)."""


# ---------------------------------------------------------------------------------------- data


def data_dir() -> Path:
    """The folder holding the sandbox's data files (upstream recipes and the distribution template)."""
    return Path(str(resources.files("conda_distro.sandbox") / "data"))


def upstream_recipe(name: str) -> Path:
    return data_dir() / "upstream" / name / "recipe.yaml"


def iter_data_files(root: Path) -> Iterable[Path]:
    """Files under ``root``, sorted, without caches (``__pycache__``, ``*.pyc``)."""
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
            yield p


def tree_sha256(root: Path) -> str:
    """The sha256 of the files under ``root`` (:func:`iter_data_files`: names relative to it and contents),
    for cache keys: it changes when any file's name or bytes do."""
    h = hashlib.sha256()
    for f in iter_data_files(root):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def cuda_version_for(release: str) -> str:
    """The CUDA version of the stand-in cuda build for a PyTorch release (``2.5.1`` -> ``12.4``)."""
    return CUDA_BY_MINOR.get(Release(release).major_minor, DEFAULT_CUDA)


# ---------------------------------------------------------------------------------------- host python


@dataclass(frozen=True)
class HostPython:
    """The interpreter to repackage: its prefix and version."""

    prefix: Path  # sys.base_prefix
    version: str  # 3.11.7
    short: str  # 3.11

    @classmethod
    def current(cls) -> HostPython:
        """The running interpreter, checked for what the python recipe needs."""
        prefix = Path(sys.base_prefix).resolve()
        short = f"{sys.version_info.major}.{sys.version_info.minor}"
        version = ".".join(str(x) for x in sys.version_info[:3])
        hp = cls(prefix, version, short)
        if sys.version_info.releaselevel != "final":
            raise SandboxError(f"the host python {sys.version.split()[0]} is a pre-release",
                               hint="run conda-distro with a released CPython (e.g. pyenv 3.11.7)")
        if not sysconfig.get_config_var("Py_ENABLE_SHARED") or not (prefix / "lib" / f"libpython{short}.so.1.0").is_file():
            raise SandboxError(
                f"the host python at {prefix} is not built with --enable-shared (no lib/libpython{short}.so.1.0)",
                path=prefix,
                hint="the sandbox repackages the running interpreter; use a pyenv CPython built with "
                     "PYTHON_CONFIGURE_OPTS=--enable-shared",
            )
        assert_no_colon(prefix, what="host python")
        return hp


@dataclass(frozen=True)
class Toolchain:
    """The machine's compilers the stand-in compiler packages point at. Build sandboxes show ``/usr`` (and
    ``/usr/local``, where a CUDA toolkit lives) read-only, so a compiler elsewhere could not run there."""

    gcc: str
    gxx: str
    gcc_version: str  # major: 12
    glibc_version: str  # 2.36
    nvcc: str  # "" when the machine has no nvcc (the compiled recipes' cuda builds are then left out)
    nvcc_version: str  # 13.0, or ""

    @classmethod
    def detect(cls) -> Toolchain:
        def which(*names: str) -> str:
            for name in names:
                found = shutil.which(name, path="/usr/local/bin:/usr/bin:/bin")
                if found:
                    return found
            return ""

        gcc, gxx = which("gcc"), which("g++")
        if not gcc or not gxx:
            raise SandboxError("the machine has no gcc/g++ under /usr", hint="install Debian's build-essential")
        version = probe_output([gcc, "-dumpversion"]).strip()
        glibc = (os.confstr("CS_GNU_LIBC_VERSION") or "glibc 2.17").split()[-1]
        nvcc = which("nvcc")
        nvcc_version = ""
        if nvcc:
            out = probe_output([nvcc, "--version"])
            found = re.search(r"release (\d+\.\d+)", out)
            nvcc_version = found.group(1) if found else ""
            nvcc = os.path.realpath(nvcc) if nvcc_version else ""
        if nvcc and not nvcc.startswith("/usr/"):
            nvcc, nvcc_version = "", ""  # a toolkit outside /usr is not visible in a build sandbox
        return cls(os.path.realpath(gcc), os.path.realpath(gxx), version.split(".")[0] or "0", glibc, nvcc, nvcc_version)

    def to_dict(self) -> dict[str, str]:
        return {"gcc": self.gcc, "gxx": self.gxx, "gcc_version": self.gcc_version,
                "glibc_version": self.glibc_version, "nvcc": self.nvcc, "nvcc_version": self.nvcc_version}


# ---------------------------------------------------------------------------------------- channel I/O


def _packages(channel_dir: Path, subdir: str) -> list[Path]:
    d = channel_dir / subdir
    return sorted([*d.glob("*.conda"), *d.glob("*.tar.bz2")]) if d.is_dir() else []


def read_repodata(channel_dir: Path, subdir: str) -> dict:
    f = channel_dir / subdir / "repodata.json"
    try:
        return read_json(f, "repodata", error=ChannelError,
                         hint="make the world again: `conda-distro sandbox DIR --force` (with --real for the real world)")
    except FileNotFoundError:
        return {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}}


def write_run_exports(channel_dir: str | os.PathLike[str], subdirs: Sequence[str] = SUBDIRS) -> None:
    """Write ``<subdir>/run_exports.json`` in conda-forge's format from the subdir's repodata.json
    (rattler's indexer puts ``run_exports`` into repodata records but writes no run_exports.json)."""
    root = Path(channel_dir)
    for subdir in subdirs:
        repodata = read_repodata(root, subdir)
        doc: dict = {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}}
        for key in ("packages", "packages.conda"):
            for fn, rec in sorted((repodata.get(key) or {}).items()):
                doc[key][fn] = {"run_exports": rec.get("run_exports") or {}}
        tmp = root / subdir / "run_exports.json.tmp"
        tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, root / subdir / "run_exports.json")


def reindex(channel_dir: str | os.PathLike[str]) -> None:
    """Index a local channel (repodata.json only) and refresh its run_exports.json files."""
    root = Path(channel_dir)
    index_channel(root, subdirs=[PLATFORM])
    write_run_exports(root)


def is_published(channel_dir: Path, subdir: str, filename: str) -> bool:
    """Does the channel's index name the file? (A file its index does not name was left by a publish
    interrupted before its re-index: not published.)"""
    doc = read_repodata(channel_dir, subdir)
    return any(filename in (doc.get(key) or {}) for key in ("packages", "packages.conda"))


def publish_packages(files: Iterable[Path], channel_dir: Path) -> list[Path]:
    """Copy built packages into the channel (readable by all; rattler-build writes them 0600), each
    through a temp name and a rename (never a truncated file under a package's name). A file the index
    already names is never replaced; one it does not name is a leftover of an interrupted publish and is."""
    out = []
    for f in files:
        dest = channel_dir / f.parent.name / f.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists() and is_published(channel_dir, f.parent.name, f.name):
            raise ChannelError(f"{dest.name} is already in the channel", path=dest,
                               hint="a package filename is never overwritten (conda clients cache a package by its filename, so "
                                    "changed bytes under the same name would not reach them); bump the build number")
        copy_atomic(f, dest)
        dest.chmod(0o644)
        out.append(dest)
    return out


def pytorch_packages(channel_dir: str | os.PathLike[str]) -> dict[Target, Path]:
    """The pytorch packages in a channel's linux-64 subdir: ``(version, "cpu"|"cuda") -> file``."""
    root = Path(channel_dir)
    out: dict[Target, Path] = {}
    for key in ("packages", "packages.conda"):
        for fn, rec in (read_repodata(root, PLATFORM).get(key) or {}).items():
            if rec.get("name") == "pytorch":
                variant = "cuda" if any(d.split()[0] == "__cuda" for d in rec.get("depends", [])) else "cpu"
                out[Target(rec["version"], Variant(variant))] = root / PLATFORM / fn
    return out


# ---------------------------------------------------------------------------------------- builds


def _build_failed(what: str, exc: Exception) -> SandboxError:
    lines = [str(x) for x in (getattr(exc, "log", None) or [])][-15:]
    detail = ("\n" + "\n".join(lines)) if lines else ""
    return SandboxError(f"building {what} failed: {getattr(exc, 'message', None) or exc}{detail}",
                        hint="the last lines of the build log are above; the sandbox data files or the host python are at fault")


def build_python_package(work_dir: Path, host: HostPython) -> list[Path]:
    from rattler_build import RattlerBuildError, RenderConfig, Stage0Recipe, VariantConfig
    from rattler_build.render import ContextValue

    recipe = Stage0Recipe.from_file(str(upstream_recipe("python")))
    ctx: dict[str, ContextValue] = {"src": str(host.prefix), "py_full": host.version, "py_short": host.short}
    out: list[Path] = []
    for variant in recipe.render(VariantConfig(), RenderConfig(extra_context=ctx)):
        t0 = time.monotonic()
        try:
            # zstd level 1: 3.5 s instead of 6.5 s, 10.5 MiB instead of 8.7 MiB
            res = run_build(variant, output_dir=work_dir, channels=[work_dir], package_format="conda:1",
                            rattler_cache=work_dir / RATTLER_CACHE)
        except RattlerBuildError as exc:
            raise _build_failed(f"python {host.version}", exc) from None
        log.info("built %s in %.1fs", ", ".join(p.name for p in res.packages), time.monotonic() - t0)
        out.extend(Path(p) for p in res.packages)
    return out


def _build_upstream_recipe(work_dir: Path, name: str, ctx: dict[str, Any], what: Callable[[Any], str]) -> list[Path]:
    """Build every output of the stand-in upstream recipe ``name`` (rendered with ``ctx``) into
    ``work_dir``, against what is already there; ``what(variant)`` names a failed output in the error."""
    from rattler_build import RattlerBuildError, RenderConfig, Stage0Recipe, VariantConfig

    recipe = Stage0Recipe.from_file(str(upstream_recipe(name)))
    out: list[Path] = []
    for variant in recipe.render(VariantConfig(), RenderConfig(extra_context=ctx)):
        try:
            res = run_build(variant, output_dir=work_dir, channels=[work_dir], rattler_cache=work_dir / RATTLER_CACHE)
        except RattlerBuildError as exc:
            raise _build_failed(what(variant), exc) from None
        out.extend(Path(p) for p in res.packages)
    return out


def build_compiler_packages(work_dir: Path, toolchain: Toolchain) -> list[Path]:
    """The stand-in compiler packages (their recipe's outputs), pointing at ``toolchain``."""
    return _build_upstream_recipe(work_dir, "compilers", dict(toolchain.to_dict()),
                                  lambda v: f"the compiler stand-in {v.recipe.package.name}")


def bundled_pip_wheel(host: HostPython) -> Path:
    """The pip wheel ``ensurepip`` bundles with the host interpreter."""
    wheels = sorted((host.prefix / "lib" / f"python{host.short}" / "ensurepip" / "_bundled").glob("pip-*-py3-none-any.whl"))
    if not wheels:
        raise SandboxError(f"the host python at {host.prefix} bundles no pip wheel (ensurepip/_bundled/pip-*.whl)",
                           path=host.prefix, hint="use a CPython built with ensurepip (pyenv's are)")
    return wheels[-1]


def build_pip_package(work_dir: Path, host: HostPython) -> list[Path]:
    """pip, from the host's bundled wheel, built against the python package already in ``work_dir``."""
    wheel = bundled_pip_wheel(host)
    assert_no_colon(wheel, what="pip wheel")
    version = wheel.name.split("-")[1]
    return _build_upstream_recipe(work_dir, "pip", {"wheel": str(wheel), "pip_version": version},
                                  lambda v: f"pip {version}")


def _build_standins(work_dir: Path, channels: Sequence[str | Path], wanted: Sequence[Target]) -> list[Path]:
    """Build the wanted ``(release, variant)`` stand-ins into ``work_dir``; ``channels`` must provide python."""
    from rattler_build import RattlerBuildError, Stage0Recipe, VariantConfig

    if not wanted:
        return []
    releases = sorted({r for r, _ in wanted}, key=lambda r: tuple(int(x) for x in r.split(".")[:3]))
    vc = VariantConfig(
        {"torch_version": releases, "cuda_version": [cuda_version_for(r) for r in releases],
         "torch_variant": sorted({v for _, v in wanted})},
        zip_keys=[["torch_version", "cuda_version"]],
    )
    recipe = Stage0Recipe.from_file(str(upstream_recipe("pytorch")))
    out: list[Path] = []
    for variant in recipe.render(vc):
        release, kind = str(variant.variant["torch_version"]), str(variant.variant["torch_variant"])
        if (release, kind) not in wanted:
            continue
        t0 = time.monotonic()
        # The cuda build's own test needs __cuda in its test environment.
        cuda = str(variant.variant["cuda_version"]) if Variant(kind).cuda else None
        try:
            res = run_build(variant, output_dir=work_dir, channels=[work_dir, *channels], cuda=cuda,
                            rattler_cache=work_dir / RATTLER_CACHE)
        except RattlerBuildError as exc:
            raise _build_failed(f"the pytorch {release} ({kind}) stand-in", exc) from None
        log.info("built %s in %.1fs", ", ".join(p.name for p in res.packages), time.monotonic() - t0)
        out.extend(Path(p) for p in res.packages)
    return out


def check_releases(releases: Sequence[str]) -> list[str]:
    """Validate X.Y.Z release strings; duplicates dropped, order kept."""
    from conda_distro.config import RELEASE_RE

    out = []
    for r in releases:
        r = str(r)
        if not RELEASE_RE.match(r):
            raise SandboxError(f"'{r}' is not a release version like 2.5.1", field="releases",
                               hint="stand-ins are built for full X.Y.Z releases")
        if r not in out:
            out.append(r)
    if not out:
        raise SandboxError("no pytorch releases given", field="releases", hint="e.g. ['2.4.1', '2.5.1', '2.6.0']")
    return out


def _workdir() -> ScratchDir:
    td = ScratchDir("conda-distro-sandbox-")
    assert_no_colon(td.name, what="temporary folder")
    return td


def build_pytorch_standins(channel_dir: str | os.PathLike[str], releases: Sequence[str],
                           variants: Sequence[str] = VARIANTS) -> list[Path]:
    """Add stand-in ``pytorch`` packages for ``releases`` (each in the given ``variants``) to an existing
    local channel that already holds ``python``, then re-index it and refresh run_exports.json.

    Releases already in the channel (same version and variant) are skipped, so calling this twice is
    harmless. This is how a test "publishes" a new PyTorch release upstream, e.g.
    ``build_pytorch_standins(sandbox / "upstream", ["2.7.0"])`` (about 1 s per package).
    Returns the paths of the packages added to the channel.
    """
    channel = assert_no_colon(channel_dir, what="channel")
    wanted_releases = check_releases(releases)
    for v in variants:
        if v not in VARIANTS:
            raise SandboxError(f"unknown variant '{v}'", field="variants", hint="use cpu and/or cuda")
    python_present = any(rec.get("name") == "python"
                         for key in ("packages", "packages.conda")
                         for rec in (read_repodata(channel, PLATFORM).get(key) or {}).values())
    if not python_present:
        raise SandboxError(f"{channel} has no python package in {PLATFORM}/repodata.json", path=channel,
                           hint="stand-ins are built against the channel's python: create the channel with "
                                "build_upstream_channel() or `conda-distro sandbox` first")
    have = pytorch_packages(channel)
    wanted = [t for t in (Target(r, Variant(v)) for r in wanted_releases for v in variants) if t not in have]
    if not wanted:
        return []
    with _workdir() as td:
        built = _build_standins(Path(td), [channel_url(channel)], wanted)
        added = publish_packages(built, channel)
    reindex(channel)
    return added


@dataclass(frozen=True)
class UpstreamChannel:
    """A built upstream channel: where it is and what is in it."""

    path: Path
    python: Path
    pytorch: dict[Target, Path]  # (release, "cpu"|"cuda") -> package file
    build_seconds: float


def build_upstream_channel(channel_dir: str | os.PathLike[str], releases: Sequence[str] = DEFAULT_RELEASES,
                           host: HostPython | None = None, toolchain: Toolchain | None = None) -> UpstreamChannel:
    """Build a fresh upstream channel in ``channel_dir`` (created; must not hold packages yet):
    the host python, pip, and cpu and cuda pytorch stand-ins for each release. About 15 s on 2 cores."""
    t0 = time.monotonic()
    channel = assert_no_colon(channel_dir, what="channel")
    wanted_releases = check_releases(releases)
    host = host or HostPython.current()
    if any(_packages(channel, s) for s in SUBDIRS):
        raise SandboxError(f"{channel} already holds packages", path=channel,
                           hint="use build_pytorch_standins() to add releases to an existing channel")
    channel.mkdir(parents=True, exist_ok=True)
    with _workdir() as td:
        work = Path(td)
        py = build_python_package(work, host)
        py += build_pip_package(work, host)
        standins = _build_standins(work, [], [Target(r, Variant(v)) for r in wanted_releases for v in VARIANTS])
        compilers = build_compiler_packages(work, toolchain or Toolchain.detect())
        published = publish_packages([*py, *standins, *compilers], channel)
    reindex(channel)
    python_file = next(p for p in published if p.name.startswith("python-"))
    return UpstreamChannel(channel, python_file, pytorch_packages(channel), time.monotonic() - t0)
