"""One wheel -> one ``.conda`` package (the PyPI bridge's second step).

What is whl2conda's and what is ours:

* **whl2conda** (``Wheel2CondaConverter``) lays the wheel out as a conda package: pure wheels become
  ``noarch: python`` (files under ``site-packages/``, console scripts as ``link.json`` entry points),
  platform wheels become ``linux-64`` packages (files under ``lib/pythonX.Y/site-packages``, scripts in
  ``bin/``) with the python pins ``python >=X.Y,<X.(Y+1).0a0`` and ``python_abi X.Y.* *_cpXY``; it
  writes ``paths.json``, ``files``, ``about.json``, licenses, and translates version specifiers
  (``~=``, ``===``).
* **ours** (:func:`conda_depends`): the ``depends`` list. Every ``Requires-Dist`` is parsed with
  ``packaging``; its marker is evaluated for the target (python version, linux, x86_64, and the extras
  the package was asked for), requested extras of a dependency are expanded into the dependency's own
  extra requirements (a conda package cannot express extras: ``cuda-toolkit[cublas]`` becomes
  ``cuda-toolkit`` plus the ``nvidia-cublas`` it brings), and names are mapped with
  :mod:`conda_distro.upstream.names`. Also ours: the conda name/version/build string (``+cpu`` local
  labels move into the build string), extra depends (``__cuda``), ``run_exports.json``, and packing with
  conda-package-handling at a chosen zstd level (whl2conda always uses the default, far too slow for
  the 2 GB of a CUDA torch).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from conda_distro.errors import BridgeError
from conda_distro.upstream.names import conda_name, normalize
from conda_distro.upstream.resolve import Wheel

if TYPE_CHECKING:
    from packaging.requirements import Requirement

DEFAULT_COMPRESSION_LEVEL = 3  # zstd; conda-forge uses 19, which takes minutes for torch's libraries


@dataclass(frozen=True)
class TargetPython:
    """The interpreter the converted packages are for (markers are evaluated against it)."""

    version: str  # full version, e.g. 3.11.7

    @property
    def short(self) -> str:
        return ".".join(self.version.split(".")[:2])

    def marker_environment(self, extra: str = "") -> dict[str, str]:
        return {
            "os_name": "posix", "sys_platform": "linux", "platform_system": "Linux",
            "platform_machine": "x86_64", "platform_python_implementation": "CPython",
            "implementation_name": "cpython", "python_version": self.short,
            "python_full_version": self.version, "implementation_version": self.version,
            "platform_release": "", "platform_version": "", "extra": extra,
        }


@dataclass(frozen=True)
class ConvertOptions:
    """How one wheel becomes a conda package."""

    wheel: Wheel
    wheel_file: Path
    out_dir: Path  # the channel root: the package goes into out_dir/<subdir>/
    python: TargetPython
    closure: Mapping[str, Wheel] = field(default_factory=dict)  # by PyPI name: for expanding extras
    name: str | None = None  # conda name (default: names.conda_name of the wheel's name)
    build_prefix: str = ""  # e.g. "cpu_" or "cuda130_": prefixed to whl2conda's build string
    build_number: int = 0
    extra_depends: tuple[str, ...] = ()
    #: conda name -> the requirement that replaces the wheel's own on it (a lockstep package's pytorch pin)
    pin_depends: Mapping[str, str] = field(default_factory=dict)
    run_exports: Mapping[str, Sequence[str]] | None = None  # {"weak": [...]}
    compression_level: int = DEFAULT_COMPRESSION_LEVEL


@dataclass(frozen=True)
class Converted:
    """A converted package."""

    path: Path
    name: str
    version: str
    build: str
    subdir: str
    depends: tuple[str, ...]
    seconds: float


def _requirement(text: str) -> Requirement:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        raise BridgeError(f"unreadable Requires-Dist '{text}': {exc}", field="Requires-Dist") from None


def _applies(req: Requirement, python: TargetPython, extras: Sequence[str]) -> bool:
    if req.marker is None:
        return True
    envs = [python.marker_environment(e) for e in (extras or [""])]
    return any(req.marker.evaluate(env) for env in envs)


@functools.cache
def _translator():
    from whl2conda.api.converter import Wheel2CondaConverter

    conv = Wheel2CondaConverter(Path("translate.whl"), Path("."))
    conv.logger.setLevel("ERROR")
    return conv


def _spec(specifier: str) -> str:
    """A pip version specifier in conda's syntax (whl2conda's translation; ``==1.0`` stays exact,
    ``==1.2.*`` becomes ``1.2.*``)."""
    pieces = []
    for piece in (p.strip() for p in specifier.split(",") if p.strip()):
        translated = piece if piece.startswith("==") and not piece.startswith("===") else \
            _translator().translate_version_spec(piece)
        # whl2conda gives ``~=0.1`` as ``>=0.1,==0.*``; rattler reads ``==0.*`` as exactly ``0`` (and
        # writes it so into repodata): a glob is written as conda's ``0.*``
        pieces += [p[2:] if p.startswith("==") and p.endswith(".*") else p for p in translated.split(",") if p]
    return ",".join(pieces)


def conda_depends(wheel: Wheel, python: TargetPython, closure: Mapping[str, Wheel] = {},  # noqa: B006
                  extras: Sequence[str] = ()) -> list[str]:
    """The conda ``depends`` of a wheel: Requires-Dist with markers evaluated for ``python`` on
    linux-64 (and the given extras), extras of dependencies expanded through ``closure``, names mapped.
    ``Requires-Python`` becomes a ``python`` floor (binary packages get whl2conda's exact pins instead)."""
    out: dict[str, list[str]] = {}
    seen: set[tuple[str, str]] = set()

    def add(req_text: str, owner_extras: Sequence[str]) -> None:
        req = _requirement(req_text)
        if not _applies(req, python, owner_extras):
            return
        name = normalize(req.name)
        spec = _spec(str(req.specifier))
        out.setdefault(conda_name(name), [])
        if spec:
            out[conda_name(name)].append(spec)
        dep = closure.get(name)
        for extra in sorted(req.extras):
            key = (name, normalize(extra))
            if key in seen or dep is None:
                continue
            seen.add(key)
            for sub in dep.requires_dist:
                sreq = _requirement(sub)
                if sreq.marker is not None and "extra" in str(sreq.marker) and _applies(sreq, python, [extra]) \
                        and not _applies(sreq, python, [""]):
                    add(sub, [extra])

    for text in wheel.requires_dist:
        add(text, extras)
    deps = [f"{n} {','.join(s)}".strip() for n, s in out.items() if n != conda_name(wheel.name)]
    if wheel.pure and wheel.requires_python:
        deps.insert(0, f"python {_spec(wheel.requires_python)}")
    elif wheel.pure:
        deps.insert(0, "python")
    return deps


def _restore_metadata(conda_dir: Path, wheel_file: Path) -> None:
    """Put the wheel's own ``*.dist-info/METADATA`` back (and fix its ``paths.json`` entry).

    whl2conda re-serialises METADATA through ``email`` and folds long ``Requires-Dist`` lines, which
    pip cannot parse: ``pip check`` then reported torch, psutil, huggingface-hub, ... as not installed."""
    import hashlib
    import zipfile

    with zipfile.ZipFile(wheel_file) as zf:
        originals = {n: zf.read(n) for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)}
    if not originals:
        return
    paths_file = conda_dir / "info" / "paths.json"
    paths = json.loads(paths_file.read_text())
    for entry in paths["paths"]:
        for name, data in originals.items():
            if entry["_path"].endswith("/" + name) or entry["_path"] == name:
                (conda_dir / entry["_path"]).write_bytes(data)
                entry["sha256"] = hashlib.sha256(data).hexdigest()
                entry["size_in_bytes"] = len(data)
    paths_file.write_text(json.dumps(paths, indent=2))


def _compile_bytecode(conda_dir: Path, python: TargetPython) -> None:
    """Byte-compile a platform package's ``site-packages`` (and list the ``.pyc`` in ``paths.json``), as
    conda-forge's packages ship them: without, every test interpreter compiles what it imports (tests
    run with ``PYTHONDONTWRITEBYTECODE=1``; importing torch compiles hundreds of modules). Checked-hash
    ``.pyc`` (valid whatever mtimes the installer gives the sources), no temporary path in the code
    objects. Only when this interpreter is the target's version (its bytecode is the target's); a
    source that does not compile (a template, Python 2) is left without. ``noarch: python`` packages
    stay without: their ``.pyc`` would depend on the python they are installed with."""
    import compileall
    import hashlib
    import py_compile
    import sys

    site = conda_dir / "lib" / f"python{python.short}" / "site-packages"
    if python.short != f"{sys.version_info.major}.{sys.version_info.minor}" or not site.is_dir():
        return
    before = set(site.rglob("*.pyc"))
    compileall.compile_dir(str(site), quiet=2, stripdir=str(conda_dir), workers=1,
                           invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    added = sorted(p.relative_to(conda_dir).as_posix() for p in set(site.rglob("*.pyc")) - before)
    if not added:
        return
    paths_file = conda_dir / "info" / "paths.json"
    paths = json.loads(paths_file.read_text())
    for rel in added:
        data = (conda_dir / rel).read_bytes()
        paths["paths"].append({"_path": rel, "path_type": "hardlink", "sha256": hashlib.sha256(data).hexdigest(),
                               "size_in_bytes": len(data)})
    paths["paths"].sort(key=lambda e: e["_path"])
    paths_file.write_text(json.dumps(paths, indent=2))
    files_list = conda_dir / "info" / "files"
    if files_list.is_file():
        files_list.write_text("".join(f"{f}\n" for f in sorted({*files_list.read_text().splitlines(), *added})))


def _filename_platform(filename: str) -> str | None:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return None
    return next((t.platform for t in sorted(tags, key=str) if t.platform.startswith("manylinux")), None)


def public_version(version: str) -> tuple[str, str]:
    """``2.13.0+cpu`` -> (``2.13.0``, ``cpu``); conda versions carry no local label here."""
    base, _, local = version.partition("+")
    return base, local


def convert(options: ConvertOptions) -> Converted:
    """Convert one wheel (see the module docstring). Returns where the ``.conda`` went."""
    from conda_package_handling.conda_fmt import CondaFormat_v2
    from whl2conda.api.converter import Wheel2CondaConverter, Wheel2CondaError
    from whl2conda.impl.pyproject import CondaPackageFormat

    t0 = time.monotonic()
    opts = options
    depends = conda_depends(opts.wheel, opts.python, opts.closure)
    name = opts.name or conda_name(opts.wheel.name)
    version, _local = public_version(opts.wheel.version)
    result: dict = {}

    class _Converter(Wheel2CondaConverter):
        def _check_binary_conversion(self, wheel_md):  # local labels (+cpu) are handled by us
            return None

        def _compute_conda_dependencies(self, dependencies, marker_env=None):  # ours, see conda_depends
            return list(depends)

        def _parse_wheel_metadata(self, wheel_dir):
            md = super()._parse_wheel_metadata(wheel_dir)
            # a platform wheel for any python 3 (``py3-none-manylinux_x86_64``: the nvidia wheels) is
            # installed into the target's site-packages like a cpXY wheel; whl2conda would put it
            # under lib/python3/site-packages, where no interpreter looks
            if not md.is_pure_python and re.fullmatch(r"py\d", md.python_tag.split(".")[-1]):
                md.python_tag = "cp" + opts.python.short.replace(".", "")
            # abi3 wheels (psutil, safetensors, tokenizers, ...): whl2conda lays them out for CEP-20
            # (files under site-packages/, relocated at install time), which rattler 0.28 does not
            # relocate: the files stayed in $PREFIX/site-packages and `pip check` saw no psutil. They
            # are installed for the target python like a cpXY wheel instead.
            if not md.is_pure_python and md.abi_tag == "abi3":
                md.abi_tag = md.python_tag = "cp" + opts.python.short.replace(".", "")
            # a WHEEL file that still says linux_x86_64 (torchvision's) while its filename, which
            # installers go by, says manylinux: take the filename's tag
            if md.platform_tag.startswith("linux_"):
                md.platform_tag = _filename_platform(opts.wheel.filename) or md.platform_tag
            return md

        def _write_conda_package(self, conda_dir: Path, conda_pkg_path: Path) -> Path:
            info = conda_dir / "info"
            _restore_metadata(conda_dir, opts.wheel_file)
            index = json.loads((info / "index.json").read_text())
            if index.get("noarch") != "python":
                _compile_bytecode(conda_dir, opts.python)
            build = f"{opts.build_prefix}{index['build']}"
            deps = [opts.pin_depends.get(d.split()[0], d) for d in index["depends"]] + list(opts.extra_depends)
            if index.get("noarch") == "python" and not any(d.split()[0] == "python" for d in deps):
                deps.insert(0, "python")  # a purelib wheel with a platform tag (the nvidia wheels)
            index.update(name=name, version=version, build=build, build_number=opts.build_number, depends=deps)
            (info / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True))
            if opts.run_exports:
                (info / "run_exports.json").write_text(json.dumps(dict(opts.run_exports), sort_keys=True))
            subdir_dir = opts.out_dir / index["subdir"]
            subdir_dir.mkdir(parents=True, exist_ok=True)
            fn = f"{name}-{version}-{build}.conda"
            files = sorted(p.relative_to(conda_dir).as_posix() for p in conda_dir.rglob("*")
                           if p.is_file() or p.is_symlink())
            part = subdir_dir / f".part-{fn}"  # written under its final name in a side folder, then moved
            shutil.rmtree(part, ignore_errors=True)
            part.mkdir()
            CondaFormat_v2.create(str(conda_dir), files, fn, out_folder=str(part),
                                  compression_level=opts.compression_level, compression_threads=os.cpu_count() or 1)
            os.replace(part / fn, subdir_dir / fn)
            part.rmdir()
            result.update(path=subdir_dir / fn, build=build, subdir=index["subdir"], depends=tuple(deps))
            return subdir_dir / fn

    conv = _Converter(opts.wheel_file, opts.out_dir)
    conv.allow_impure = True
    conv.overwrite = True
    conv.out_format = CondaPackageFormat.V2
    conv.build_number = opts.build_number
    conv.logger.setLevel("ERROR")
    try:
        conv.convert()
    except Wheel2CondaError as exc:
        raise BridgeError(f"whl2conda cannot convert {opts.wheel.filename}: {exc}", path=opts.wheel_file) from None
    return Converted(result["path"], name, version, result["build"], result["subdir"], result["depends"],
                     time.monotonic() - t0)


def metadata_package(out_dir: Path, *, name: str, version: str, build: str, subdir: str,
                     depends: Sequence[str] = (), constrains: Sequence[str] = (),
                     run_exports: Mapping[str, Sequence[str]] | None = None) -> Path:
    """A package with no files, only metadata (e.g. ``python_abi 3.11 2_cp311``)."""
    from conda_package_handling.conda_fmt import CondaFormat_v2

    from conda_distro.util.scratch import ScratchDir

    with ScratchDir("conda-distro-meta-") as td:
        root = Path(td)
        info = root / "info"
        info.mkdir()
        index = {"name": name, "version": version, "build": build, "build_number": int(build.rsplit("_", 1)[-1])
                 if build.rsplit("_", 1)[-1].isdigit() else 0, "depends": list(depends),
                 "constrains": list(constrains), "subdir": subdir, "license": "BSD-3-Clause",
                 "timestamp": 0}
        if subdir != "noarch":
            index.update(platform=subdir.split("-")[0], arch="x86_64")
        (info / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True))
        (info / "paths.json").write_text(json.dumps({"paths": [], "paths_version": 1}))
        (info / "files").write_text("")
        if run_exports:
            (info / "run_exports.json").write_text(json.dumps(dict(run_exports)))
        dest = out_dir / subdir
        dest.mkdir(parents=True, exist_ok=True)
        fn = f"{name}-{version}-{build}.conda"
        files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        CondaFormat_v2.create(str(root), files, fn, out_folder=str(dest))
    return dest / fn


__all__ = ["ConvertOptions", "Converted", "TargetPython", "conda_depends", "convert", "metadata_package",
           "public_version"]
