"""Publish a stand-in PyTorch release into a sandbox world's upstream channel (``conda-distro sandbox
publish-release DIR VERSION``): what "PyTorch X.Y.Z is out on conda-forge" is in the sandbox, the
starting point of a release-day sweep. A cpu and a cuda stand-in are built and the channel re-indexed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.sandbox.upstream import VARIANTS, SandboxError, build_pytorch_standins, check_releases, pytorch_packages

UPSTREAM = "upstream"  # the sandbox world's upstream channel folder (distro.yaml: channels.upstream [./upstream])


@dataclass(frozen=True)
class PublishOptions:
    world: Path
    version: str
    variants: tuple[str, ...] = VARIANTS


@dataclass
class PublishResult:
    world: Path
    upstream: Path
    version: str
    added: list[Path] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"ok": True, "world": str(self.world), "upstream": str(self.upstream), "version": self.version,
                "added": [p.relative_to(self.upstream).as_posix() for p in self.added]}

    @property
    def exit_code(self) -> int:
        return 0

    def text_lines(self) -> list[str]:
        return [f"published stand-in pytorch {self.version} in {self.upstream}:",
                *(f"  {p.relative_to(self.upstream).as_posix()}" for p in self.added),
                f"next: cd {self.world} && conda-distro sweep --pytorch {self.version} --dry-run"]


def sandbox_upstream(world: Path) -> Path:
    """The upstream channel of a sandbox world; exit 2 when ``world`` is not one."""
    upstream = world / UPSTREAM
    if not (world / "distro.yaml").is_file() or not (upstream / "linux-64" / "repodata.json").is_file():
        raise SandboxError(f"not a sandbox world (no distro.yaml, or no upstream channel in {UPSTREAM}/)",
                           path=world, hint="create one with `conda-distro sandbox DIR` first")
    return upstream


def publish_release(options: PublishOptions) -> PublishResult:
    """Add stand-in pytorch ``options.version`` (each variant) to the world's upstream channel. Refuses
    (exit 2, nothing written) a folder that is not a sandbox world, a version that is not X.Y.Z, and a
    release already published there."""
    world = Path(options.world).resolve()
    upstream = sandbox_upstream(world)
    try:
        [version] = check_releases([options.version])
    except SandboxError as exc:
        raise SandboxError(exc.message, field="VERSION", hint="pass a full release version such as 2.7.0") from None
    have = [v for (r, v) in pytorch_packages(upstream) if r == version and v in options.variants]
    if have:
        raise SandboxError(f"pytorch {version} ({', '.join(sorted(have))}) is already published in {upstream}",
                           field="VERSION", hint="a published package is never replaced; publish another version")
    added = build_pytorch_standins(upstream, [version], options.variants)
    return PublishResult(world, upstream, version, added)


# ---------------------------------------------------------------------------------------------
# `conda-distro sandbox publish-package DIR NAME VERSION --source FOLDER`: any other upstream package


PACKAGE_RECIPE = """\
# A plain noarch: python package published into a sandbox world's upstream channel by
# `conda-distro sandbox publish-package` (a STAND-IN for a package of conda-forge). Its build only copies
# the files it was given into site-packages: no recipe code of anyone's runs.
package:
  name: {name}
  version: "{version}"
source:
  path: src
build:
  number: {number}
  string: h{digest}_{number}
  noarch: python
  script:
    - mkdir -p "$SP_DIR"
    - cp -r "$SRC_DIR"/. "$SP_DIR"/
requirements:
  host:
    - python
  run:
{run}
about:
  summary: STAND-IN upstream package {name} {version}, sandbox world only
  license: BSD-3-Clause
"""
_RESERVED = ("python", "pytorch")  # the world's own: publish-release publishes pytorch


@dataclass(frozen=True)
class PackageOptions:
    world: Path
    name: str
    version: str
    source: Path  # a folder whose files go into site-packages as they are (import packages, modules)
    build_number: int = 0
    depends: tuple[str, ...] = ()  # run requirements besides python (MatchSpecs)


@dataclass
class PackageResult:
    world: Path
    upstream: Path
    name: str
    version: str
    added: list[Path] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"ok": True, "world": str(self.world), "upstream": str(self.upstream), "name": self.name,
                "version": self.version, "added": [p.relative_to(self.upstream).as_posix() for p in self.added]}

    @property
    def exit_code(self) -> int:
        return 0

    def text_lines(self) -> list[str]:
        return [f"published {self.name} {self.version} in {self.upstream}:",
                *(f"  {p.relative_to(self.upstream).as_posix()}" for p in self.added)]


def _source_digest(folder: Path) -> str:
    """sha256 over the folder's files (relative path and bytes), its first 7 hex digits: the build string
    tells two builds of one version and build number apart by what they hold."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(f.relative_to(folder).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:7]


def _check_package(options: PackageOptions) -> tuple[str, list[str]]:
    from rattler import MatchSpec, PackageName, Version
    from rattler.exceptions import InvalidMatchSpecError, InvalidPackageNameError, InvalidVersionError

    try:
        PackageName(options.name)
    except InvalidPackageNameError:
        raise SandboxError(f"'{options.name}' is not a conda package name", field="NAME",
                           hint="letters, digits, '-', '_' and '.'") from None
    if options.name.lower() in _RESERVED:
        raise SandboxError(f"{options.name} is the sandbox world's own package", field="NAME",
                           hint="`conda-distro sandbox publish-release DIR VERSION` publishes pytorch")
    try:
        if not options.version.strip() or " " in options.version:
            raise InvalidVersionError(options.version)
        Version(options.version)
    except (InvalidVersionError, ValueError):
        raise SandboxError(f"'{options.version}' is not a conda version", field="VERSION", hint="e.g. 1.0.0") from None
    if not 0 <= options.build_number <= 999_999:
        raise SandboxError(f"build number {options.build_number} is out of range", field="--build-number",
                           hint="a number from 0 to 999999")
    source = Path(options.source)
    if not source.is_dir() or not any(p.is_file() for p in source.rglob("*")):
        raise SandboxError(f"{source} is not a folder holding files", path=source, field="--source",
                           hint="a folder with the import package(s) to put into site-packages")
    if any(p.is_symlink() for p in source.rglob("*")):
        raise SandboxError(f"{source} holds a symbolic link", path=source, field="--source",
                           hint="copy the files themselves")
    run = []
    for spec in options.depends:
        try:
            MatchSpec(spec, strict=True)
        except (InvalidMatchSpecError, ValueError):
            raise SandboxError(f"'{spec}' is not a dependency spec", field="--depends",
                               hint="e.g. 'arraylib >=1,<2'") from None
        run.append(spec)
    return _source_digest(source), run


def publish_package(options: PackageOptions) -> PackageResult:
    """Build ``options.name`` ``options.version`` (noarch: python, the files of ``options.source`` in
    site-packages, run requirements python and ``options.depends``) and publish it into the world's upstream
    channel, re-indexed: what "conda-forge published a new package, version or build" is in the sandbox. A
    second build of a published version (same build number, other files) gets another build string and a
    newer timestamp. Refuses (exit 2, nothing written) a folder that is not a sandbox world, bad input and a
    file name already published."""
    import shutil

    from rattler_build import RattlerBuildError, Stage0Recipe, VariantConfig

    from conda_distro.sandbox.upstream import is_published, publish_packages, reindex
    from conda_distro.util.rattler_env import channel_url, native_tool_config, run_build
    from conda_distro.util.scratch import ScratchDir

    world = Path(options.world).resolve()
    upstream = sandbox_upstream(world)
    digest, run = _check_package(options)
    filename = f"{options.name}-{options.version}-h{digest}_{options.build_number}.conda"
    if (upstream / "noarch" / filename).exists() and is_published(upstream, "noarch", filename):
        raise SandboxError(f"noarch/{filename} is already published in {upstream}", field="--source",
                           hint="a published package is never replaced; change its files, its version or --build-number")
    text = PACKAGE_RECIPE.format(name=options.name, version=options.version, number=options.build_number, digest=digest,
                                 run="\n".join(f"    - {d}" for d in ["python", *run]))
    with ScratchDir("conda-distro-publish-") as td:
        work = Path(td)
        shutil.copytree(options.source, work / "recipe" / "src")
        (work / "recipe" / "recipe.yaml").write_text(text)
        out = work / "out"
        built: list[Path] = []
        try:
            for variant in Stage0Recipe.from_file(str(work / "recipe" / "recipe.yaml")).render(VariantConfig()):
                res = run_build(variant, output_dir=out, channels=[channel_url(upstream)],
                                tool_config=native_tool_config(test_strategy="skip"), rattler_cache=work / "cache")
                built.extend(Path(p) for p in res.packages)
        except RattlerBuildError as exc:
            raise SandboxError(f"building {options.name} {options.version} failed: "
                               f"{getattr(exc, 'message', None) or exc}", field="--source",
                               hint="check the files and --depends (each must be in the world's upstream channel)") from None
        added = publish_packages(built, upstream)
    reindex(upstream)
    return PackageResult(world, upstream, options.name, options.version, added)
