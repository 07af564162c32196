"""`rollback --to SNAPSHOT`: main becomes exactly that snapshot; the ledger records who and why.

Plan first (printed; ``--dry-run`` stops there): the files main has that the snapshot lacks (to remove),
the files the snapshot has that main lacks (to restore). Every input is checked before anything is
written (a snapshot name, a snapshot the ledger records, its files on disk or on the label, a reason):
a bad one is exit 2 with nothing written.

Local main, in this order, under the repository's (shared) and main's locks:

1. files left by an interrupted run (parts, unindexed files that are not to be restored) are moved out;
2. the snapshot's files main lacks are hard-linked back from the snapshot (they are the same bytes);
3. each subdir's ``repodata.json`` of main is replaced, atomically, by the snapshot's (byte for byte:
   main's index then equals the snapshot's); a subdir the snapshot did not have gets an empty index;
4. the files no index names any more are moved to the retired folder;
5. the ledger: artifacts removed are recorded retired ("rolled back to SNAPSHOT: WHY", by whom; promote
   then never promotes them again: a new build is the way back), artifacts restored are in main again
   (their retirement is lifted), and ``channel_state/rollbacks/<YYYYMMDD>-<SNAPSHOT>.json`` says who,
   when, why and what changed.

So main's index never names a missing file, and a run killed at any moment is completed by running the
same command again (each step looks at what is there, not at what the killed run did). anaconda.org main:
files are copied back from the snapshot's label and the others lose the ``main`` label (``broken``
instead, as ``retire`` does).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conda_distro.channels import Channel, ChannelFile, Progress, crash_point, no_progress, open_channel
from conda_distro.channels.anaconda import AnacondaChannel
from conda_distro.channels.local import REPODATA, LocalChannel
from conda_distro.config import DistroRepo
from conda_distro.distribution import open_distro
from conda_distro.enduser.snapshots import LABEL_DIR, RollbackRecord, SnapshotRecord, SnapshotStore, check_name
from conda_distro.errors import ChannelError, ExitCode, UsageError
from conda_distro.state.ledger import ArtifactEntry, Ledger, Retirement, current_user
from conda_distro.state.locks import DEFAULT_LOCK_TIMEOUT, Deadline, repository_lock
from conda_distro.util.dates import utcnow
from conda_distro.util.fsutil import atomic_write_text, check_writable

MAX_WHY = 1000


@dataclass(frozen=True)
class RollbackOptions:
    to: str
    why: str | None = None
    root: Path | None = None
    dry_run: bool = False
    by: str | None = None
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    progress: Progress = no_progress


@dataclass
class RollbackPlan:
    snapshot: SnapshotRecord
    channel: str
    remove: list[ChannelFile] = field(default_factory=list)  # in main, not in the snapshot
    restore: list[ChannelFile] = field(default_factory=list)  # in the snapshot, not in main
    keep: int = 0

    def lines(self) -> list[str]:
        s = self.snapshot
        out = [f"rollback of {self.channel} to {s.name} (taken {s.created_at:%Y-%m-%d %H:%M}Z by {s.by}, "
               f"commit {(s.commit or 'unknown')[:12]}): remove {len(self.remove)}, restore {len(self.restore)}, "
               f"keep {self.keep}"]
        out += [f"  remove  {f.artifact}" for f in sorted(self.remove, key=lambda f: f.artifact)]
        out += [f"  restore {f.artifact}" for f in sorted(self.restore, key=lambda f: f.artifact)]
        return out


@dataclass
class RollbackResult:
    plan: RollbackPlan
    dry_run: bool
    by: str
    why: str | None
    ledger_written: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        p = self.plan
        return {"ok": True, "dry_run": self.dry_run, "to": p.snapshot.name, "channel": p.channel, "by": self.by,
                "why": self.why, "remove": sorted(f.artifact for f in p.remove),
                "restore": sorted(f.artifact for f in p.restore), "keep": p.keep, "ledger": self.ledger_written}

    def text_lines(self) -> list[str]:
        lines = self.plan.lines()
        if self.dry_run:
            lines.append("dry run: nothing was written to main or channel_state/")
        else:
            lines += [f"recorded {p}" for p in self.ledger_written]
            lines.append(f"main is now {self.plan.snapshot.name}")
        return lines


# ---------------------------------------------------------------------------------------------
# checks and plan


def _check_options(options: RollbackOptions) -> str | None:
    check_name(options.to)
    why = (options.why or "").strip()
    if not options.dry_run and not why:
        raise UsageError("a rollback needs a reason", field="--why",
                         hint="say why main goes back, e.g. --why 'torchplug 0.4 breaks imports on 2.6'")
    if len(why) > MAX_WHY:
        raise UsageError(f"the reason is {len(why)} characters long; at most {MAX_WHY}", field="--why",
                         hint="keep it short and link to an issue for the details")
    return why or None


def _snapshot_files(distro: DistroRepo, main: Channel, snap: SnapshotRecord) -> dict[str, ChannelFile]:
    """The snapshot's files, as its own index (local) or label (anaconda.org) lists them, checked against the
    ledger's record of it."""
    if isinstance(main, LocalChannel):
        folder = main.path / LABEL_DIR / snap.name
        if not folder.is_dir():
            raise ChannelError(f"the snapshot {snap.name} is recorded but its folder {folder} is missing",
                               path=folder, field="--to", hint="choose another snapshot (`conda-distro snapshots`)")
        listed = LocalChannel(folder, subdirs=distro.subdirs).list_files()
        missing = [a for a in listed if not (folder / a).is_file()]
        if missing:
            raise ChannelError(f"the snapshot {snap.name} lacks {len(missing)} file(s) its index names, e.g. "
                               f"{missing[0]}", path=folder, field="--to",
                               hint="choose another snapshot (`conda-distro snapshots`)")
    elif isinstance(main, AnacondaChannel):
        listed = main.with_label(snap.name).list_files()
    else:  # pragma: no cover
        raise TypeError(type(main).__name__)
    got = {a: f.sha256 for a, f in listed.items()}
    if got != snap.artifacts:
        diff = sorted(set(got.items()) ^ set(snap.artifacts.items()))
        raise ChannelError(f"the snapshot {snap.name} no longer holds what the ledger recorded "
                           f"({len(diff)} difference(s), e.g. {diff[0][0]})", field="--to",
                           hint="a snapshot is never changed: restore it from backup or choose another snapshot")
    return listed


def plan_rollback(distro: DistroRepo, main: Channel, name: str) -> tuple[RollbackPlan, dict[str, ChannelFile]]:
    snap = SnapshotStore(distro.state_dir).load(name)
    if snap is None:
        known = [r.name for r in SnapshotStore(distro.state_dir).all()]
        raise UsageError(f"there is no snapshot {name}", field="--to",
                         hint=f"known: {', '.join(known[-5:])}" if known else "no snapshot was taken yet: promote first")
    target = _snapshot_files(distro, main, snap)
    current = main.list_files()
    remove = [f for a, f in current.items() if a not in target]
    restore = [f for a, f in target.items() if a not in current]
    return RollbackPlan(snap, str(main.ref), remove, restore, keep=len(target) - len(restore)), target


# ---------------------------------------------------------------------------------------------
# execution


def _rollback_local(main: LocalChannel, snap: SnapshotRecord, plan: RollbackPlan, progress: Progress) -> None:
    folder = main.path / LABEL_DIR / snap.name
    main.recover(main, {f.artifact for f in plan.restore}, progress)
    main.ensure_layout()
    for i, f in enumerate(plan.restore):
        dest = main.file_path(f)
        if not dest.exists():
            os.link(folder / f.artifact, dest)
        if i == 0:
            crash_point("rollback-after-first-link")
    subdirs = sorted({*main.subdirs_on_disk(), *(p.parent.name for p in folder.glob(f"*/{REPODATA}"))})
    for subdir in subdirs:
        (main.path / subdir).mkdir(exist_ok=True)
        src = folder / subdir / REPODATA
        text = src.read_text(encoding="utf-8") if src.is_file() else json.dumps(
            {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}, "repodata_version": 1})
        atomic_write_text(main.path / subdir / REPODATA, text)
        crash_point("rollback-after-index")
    main.recover(main, set(), progress)  # what no index names any more leaves main
    progress(f"{main.describe()} now holds {snap.name}")


def _record(distro: DistroRepo, main: Channel, plan: RollbackPlan, target: dict[str, ChannelFile], by: str,
            why: str) -> list[str]:
    """The ledger after the rollback: every artifact of the snapshot in main, every other one retired."""
    ledger = Ledger(distro.state_dir)
    store = SnapshotStore(distro.state_dir)
    now = utcnow()
    name = plan.snapshot.name
    retirement = Retirement(at=now, reason=f"rolled back to {name}: {why}", by=by)
    written = []
    states = ledger.load_all()
    by_name: dict[str, list[ChannelFile]] = {}
    for f in target.values():
        by_name.setdefault(f.name, []).append(f)
    for pkg in sorted({*states, *by_name}):
        state = states.get(pkg) or ledger.empty(pkg)
        entries = {a.artifact: a for a in state.artifacts}
        for f in by_name.get(pkg, []):
            e = entries.get(f.artifact)
            entries[f.artifact] = e.model_copy(update={"retired": None}) if e is not None else ArtifactEntry(
                artifact=f.artifact, sha256=f.sha256, version=f.version, build=f.build, build_number=f.build_number,
                depends=list(f.depends), channel=str(main.ref), promoted_at=now, commit=plan.snapshot.commit)
        for art, e in list(entries.items()):
            if art not in target and e.retired is None:
                entries[art] = e.model_copy(update={"retired": retirement})
        path = ledger.save(state.model_copy(update={"artifacts": list(entries.values())}))
        if path is not None:
            written.append(path)
    old = store.rollback_path(now.date(), name)
    first = store.load_rollback(old)
    record = RollbackRecord(at=first.at if first else now, by=first.by if first else by,
                            why=first.why if first else why, to=name, channel=str(main.ref),
                            removed=sorted({*(first.removed if first else []), *(f.artifact for f in plan.remove)}),
                            restored=sorted({*(first.restored if first else []), *(f.artifact for f in plan.restore)}))
    record.write(old)
    written.append(old)
    return [p.relative_to(distro.root).as_posix() if p.is_relative_to(distro.root) else str(p) for p in written]


def rollback(options: RollbackOptions) -> RollbackResult:
    """Plan, and unless ``dry_run``, make main exactly the snapshot ``options.to`` and record it."""
    import time

    t0 = time.monotonic()
    why = _check_options(options)
    distro = open_distro(options.root)
    main = open_channel(distro, distro.config.channels.main)
    by = options.by or current_user(distro.root)
    plan, _ = plan_rollback(distro, main, options.to)
    if options.dry_run:
        return RollbackResult(plan, True, by, why)
    if isinstance(main, LocalChannel):
        for p in (main.path, *(main.path / s for s in main.subdirs), main.retired_dir):
            check_writable(p, folder=True, error=ChannelError, hint="fix the folder's permissions")
    check_writable(distro.state_dir, folder=True, error=UsageError, hint="fix the folder's permissions")
    budget = Deadline(options.lock_timeout)
    with repository_lock(distro.build_dir, distro.root, budget, shared=True), main.lock(budget):
        crash_point("rollback-locked")
        plan, target = plan_rollback(distro, main, options.to)  # again, under the lock
        options.progress("\n".join(plan.lines()))
        if isinstance(main, LocalChannel):
            _rollback_local(main, plan.snapshot, plan, options.progress)
        elif isinstance(main, AnacondaChannel):
            main.receive(main.with_label(plan.snapshot.name), plan.restore, options.progress)
            if plan.remove:
                main.withdraw(plan.remove, options.progress)
        crash_point("rollback-after-channel")
        written = _record(distro, main, plan, target, by, why or "")
    return RollbackResult(plan, False, by, why, written, time.monotonic() - t0)


__all__ = ["RollbackOptions", "RollbackPlan", "RollbackResult", "plan_rollback", "rollback"]
