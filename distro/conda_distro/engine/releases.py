"""Releases × variants, and release views: channels that force a test onto one pytorch build."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import shutil
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from conda_distro.channels.pytorch_record import TorchBuild
from conda_distro.errors import ChannelError, UsageError
from conda_distro.util.fsutil import atomic_write_text, link_or_copy
from conda_distro.util.jsonio import read_json
from conda_distro.util.rattler_env import index_channel
from conda_distro.vocab import Release, Target, Variant

if TYPE_CHECKING:  # annotations only: the build worker imports this module and stays small
    from rattler import RepoDataRecord

    from conda_distro.config import DistroRepo
    from conda_distro.distribution import Distribution

SOLVE_TIMEOUT = dt.timedelta(seconds=60)  # one rattler solve (`solve`, and a failed test's explanation)


@dataclass(frozen=True)
class ReleaseView:
    """A local channel holding only the upstream pytorch build of one target."""

    target: Target
    url: str | None  # file:// URL of the view channel; None when the build does not exist upstream
    filename: str | None
    sha256: str | None
    reason: str | None = None  # why there is no view

    @property
    def cuda_override(self) -> str:
        return self.target.variant.cuda_override


def all_targets(distro: DistroRepo) -> list[Target]:
    cfg = distro.config.pytorch
    return [Target(Release(r), Variant(v)) for r in cfg.releases for v in cfg.variants]


def select_releases(dist: Distribution, wanted: tuple[str, ...]) -> list[Release]:
    """The pytorch releases to work on (distro.yaml order): ``wanted`` (``--pytorch``), or all of them.
    A value that is not a supported release is bad input (exit 2)."""
    releases = dist.config.pytorch.releases
    for r in wanted:
        if r not in releases:
            raise UsageError(f"pytorch {r} is not a supported release", field="--pytorch",
                             hint=f"supported: {', '.join(releases)} (distro.yaml pytorch.releases)")
    return [Release(r) for r in releases if not wanted or r in wanted]


def is_cuda_record(depends: list[str]) -> bool:
    return any(d.split()[0] == "__cuda" for d in depends)


async def _query(distro: DistroRepo, names: list[str]) -> list[RepoDataRecord]:
    from rattler import Gateway, Subdir

    gw = Gateway()
    try:
        groups = await gw.query(distro.upstream_urls, [Subdir(s) for s in distro.subdirs], names, recursive=False)
    except Exception as exc:  # rattler raises several fetch errors
        raise ChannelError(f"cannot read the upstream channels: {exc}", field="channels.upstream",
                           hint="check channels.upstream in distro.yaml (local paths must exist)") from None
    return [r for group in groups for r in group if r.name.normalized in names]


def _target_record(records: list[RepoDataRecord], target: Target) -> RepoDataRecord | None:
    """The upstream pytorch build a test of ``target`` installs (the newest matching one), or None. Its
    variant is decided as verify-channel decides it (:class:`~conda_distro.channels.pytorch_record.TorchBuild`: a
    ``__cuda`` dependency or a ``cuda`` build string), so a release view, the test matrix and
    verify-channel never disagree on what a record is."""
    matching = [r for r in records if str(r.version) == target.release
                and TorchBuild.of(str(r.build), list(r.depends)).variant == target.variant]
    return max(matching, key=lambda r: (r.build_number, r.build)) if matching else None


@dataclass(frozen=True)
class Availability:
    """Which test targets upstream can serve: a pytorch build of that release and variant, and a build of
    each lockstep package (distro.yaml ``pytorch.lockstep``, e.g. torchvision) that goes with it. Nobody can
    install a package with a build that does not exist, so such a target is not tested (and not required
    by promote) for the packages that need it; it is reported, never counted as passed."""

    missing: Mapping[Target, str] = field(default_factory=dict)  # no pytorch build of the target
    lockstep_missing: Mapping[str, Mapping[Target, str]] = field(default_factory=dict)  # name -> target -> why
    #: the upstream pytorch build a test of each servable target installs (what its release view pins)
    pytorch: Mapping[Target, RepoDataRecord] = field(default_factory=dict)

    def why_not(self, target: Target, needs: Iterable[str] = ()) -> str | None:
        """Why ``target`` cannot be tested for a package needing the lockstep names ``needs``; None if it can."""
        if target in self.missing:
            return self.missing[target]
        for name in sorted(set(needs)):
            why = self.lockstep_missing.get(name, {}).get(target)
            if why:
                return why
        return None


def availability_if_readable(distro: DistroRepo) -> Availability | None:
    """:func:`upstream_availability`, or None when the upstream channels cannot be read now (build then tries
    every target and records one without a pytorch build as blocked; promote's installability check finds
    upstream unreadable and candidates wait)."""
    from conda_distro.channels.upstream_index import UpstreamIndex  # (here: the build worker imports this module)

    UpstreamIndex.load(distro)  # a local upstream index that is there but corrupt is bad input (exit 2)
    try:
        return upstream_availability(distro)
    except ChannelError:
        return None


def upstream_availability(distro: DistroRepo) -> Availability:
    """Read the upstream channels once: which targets have a pytorch build, and which have a build of each
    lockstep package whose pytorch requirement that build satisfies (and of the same variant)."""
    from rattler import MatchSpec

    cfg = distro.config.pytorch
    records = asyncio.run(_query(distro, [cfg.name, *cfg.lockstep]))
    torch = [r for r in records if r.name.normalized == cfg.name]
    missing: dict[Target, str] = {}
    lockstep_missing: dict[str, dict[Target, str]] = {name: {} for name in cfg.lockstep}
    chosen: dict[Target, RepoDataRecord] = {}
    for target in all_targets(distro):
        rec = _target_record(torch, target)
        if rec is None:
            missing[target] = f"no {target.variant} build of {cfg.name} {target.release} in the upstream channels"
            continue
        chosen[target] = rec
        for name in cfg.lockstep:
            ok = False
            for r in (x for x in records if x.name.normalized == name):
                if is_cuda_record(list(r.depends)) and not target.variant.cuda:
                    continue
                pins = [MatchSpec(d) for d in r.depends if d.split()[0] == cfg.name]
                if pins and all(p.matches(rec) for p in pins):
                    ok = True
                    break
            if not ok:
                lockstep_missing[name][target] = (f"no {target.variant} build of {name} for {cfg.name} {target.release} "
                                                  "in the upstream channels")
    return Availability(missing, lockstep_missing, chosen)


def _fetch(url: str, dest: Path) -> None:
    if url.startswith("file://"):
        link_or_copy(Path(urllib.request.url2pathname(url[len("file://"):])), dest)
        return
    with urllib.request.urlopen(url, timeout=300) as resp, dest.open("wb") as fh:  # noqa: S310 - channel URL
        shutil.copyfileobj(resp, fh)


def _stamped(stamp: Path) -> object:
    """What the view's stamp says it holds; None when there is none or it cannot be read (a damaged stamp
    of a cache: the view is made again, never an error a person must clear by hand)."""
    try:
        return read_json(stamp, "cache", error=ChannelError)
    except (OSError, ChannelError):
        return None


def build_release_views(distro: DistroRepo, folder: Path, available: Availability | None = None) -> dict[Target, ReleaseView]:
    """Create (or reuse) one pin channel per target under ``folder``, for the pytorch builds ``available``
    chose (None: read upstream now)."""
    if available is None:
        available = upstream_availability(distro)
    views: dict[Target, ReleaseView] = {}
    for target in all_targets(distro):
        rec = available.pytorch.get(target)
        if rec is None:
            views[target] = ReleaseView(target, None, None, None, reason=available.missing[target])
            continue
        view_dir = folder / f"{target.release}-{target.variant}"
        stamp = view_dir / ".source.json"
        sha = rec.sha256.hex() if rec.sha256 else None
        want = {"url": rec.url, "sha256": sha}
        if _stamped(stamp) != want:
            shutil.rmtree(view_dir, ignore_errors=True)
            (view_dir / rec.subdir).mkdir(parents=True, exist_ok=True)
            _fetch(rec.url, view_dir / rec.subdir / rec.file_name)
            index_channel(view_dir, subdirs=[rec.subdir])
            atomic_write_text(stamp, json.dumps(want))
        views[target] = ReleaseView(target, view_dir.as_uri(), rec.file_name, sha)
    return views
