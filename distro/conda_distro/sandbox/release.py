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
