"""A lockfile per supported release × variant of a snapshot: pytorch plus every distribution package that
installs with it, solved as conda does (:class:`~conda_distro.enduser.conda_solve.CondaSolver`) from the
snapshot's channel and upstream, written in rattler's lock format (``pixi.lock``'s format, written by
py-rattler; pixi and py-rattler install from it, ``rattler.LockFile.from_path``).

Each lockfile has one environment, ``default``, for the distribution's platform; a cuda lockfile's
platform declares the ``__cuda`` virtual package. The records name the snapshot's own URL (never main's),
so an install from the lockfile gets exactly the snapshot's files. When the whole set does not install
together, packages are added one at a time (in name order) and those that break the solve are left out
and named in :attr:`LockResult.left_out`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from conda_distro.channels.base import ChannelFile
from conda_distro.enduser.conda_solve import CondaSettings, CondaSolver, admitting
from conda_distro.vocab import Target, Variant

if TYPE_CHECKING:
    from rattler import RepoDataRecord


@dataclass(frozen=True)
class LockInputs:
    channel: str  # URL the snapshot's index is read from
    served: str  # URL users read the snapshot from (written into the records)
    upstream: tuple[str, ...]
    platform: str  # linux-64
    pytorch: str  # the pytorch package name
    targets: tuple[Target, ...]
    files: tuple[ChannelFile, ...]  # the snapshot's files
    settings: CondaSettings = CondaSettings()


@dataclass
class LockResult:
    written: dict[str, Path] = field(default_factory=dict)  # "<release>-<variant>" -> lockfile
    left_out: dict[str, list[str]] = field(default_factory=dict)  # "<release>-<variant>" -> names
    failed: dict[str, str] = field(default_factory=dict)  # "<release>-<variant>" -> why (pytorch alone fails)


def lockfile_name(release: str, variant: str) -> str:
    return f"pytorch-{release}-{variant}.lock"


def _solve_most(solver: CondaSolver, fixed: list[str], names: list[str], cuda: bool) -> tuple[list[RepoDataRecord], list[str]]:
    from rattler.exceptions import SolverError

    try:
        return solver.solve([*fixed, *names], cuda), []
    except SolverError:
        pass
    kept: list[str] = []
    records = solver.solve(fixed, cuda)  # SolverError: the release itself does not install
    for name in names:
        try:
            records = solver.solve([*fixed, *kept, name], cuda)
            kept.append(name)
        except SolverError:
            continue
    return records, [n for n in names if n not in kept]


def write_lockfiles(inputs: LockInputs, folder: Path) -> LockResult:
    """Write ``folder/pytorch-<release>-<variant>.lock`` for each target."""
    from rattler import LockChannel, LockFile, LockPlatform
    from rattler.exceptions import SolverError

    folder.mkdir(parents=True, exist_ok=True)
    result = LockResult()
    files = list(inputs.files)
    with CondaSolver([inputs.channel, *inputs.upstream], [inputs.platform], inputs.settings,
                     serve_as={inputs.channel: inputs.served}) as solver:
        for release, variant in inputs.targets:
            key = f"{release}-{variant}"
            cuda = Variant(variant).cuda
            fixed = [f"{inputs.pytorch} =={release}"] + (["__cuda"] if cuda else [])
            try:
                records, left_out = _solve_most(solver, fixed, admitting(files, inputs.pytorch, release), cuda)
            except SolverError as exc:
                result.failed[key] = (str(exc).strip().splitlines() or ["unsatisfiable"])[0]
                continue
            platform = LockPlatform(inputs.platform, virtual_packages=["__cuda"] if cuda else None)
            lock = LockFile([platform])
            lock.set_channels("default", [LockChannel(inputs.served), *(LockChannel(u) for u in inputs.upstream)])
            for r in sorted(records, key=lambda r: r.name.normalized):
                lock.add_conda_package("default", platform, r)
            path = folder / lockfile_name(release, variant)
            lock.to_path(path)
            result.written[key] = path
            if left_out:
                result.left_out[key] = left_out
    return result


def locked_records(path: Path, platform: str) -> list[RepoDataRecord]:
    """The records of the ``default`` environment of a lockfile for ``platform`` (what installs from it)."""
    from rattler import LockFile

    env = LockFile.from_path(path).default_environment()
    for p in (env.platforms() if env is not None else []):
        if str(p.name) == platform:
            return list(env.conda_repodata_records_for_platform(p) or [])  # type: ignore[union-attr]
    return []


__all__ = ["LockInputs", "LockResult", "locked_records", "write_lockfiles"]
