"""Taking a snapshot of main: after every promotion that changed main, under main's lock.

The rule that keeps this safe after a kill at any moment: **main is always captured.** When no snapshot
holds exactly main's files (artifact and sha256), a new one is taken; otherwise nothing is done. So a
promotion killed after main changed but before its snapshot was recorded gets its snapshot from the
next promote (or rollback), and a run that only re-checks main writes nothing.

Local main ``DIR``: the snapshot is built in a hidden ``DIR/label/.<name>.tmp-<pid>/`` (package files
hard-linked to main's, main's ``repodata.json`` of each subdir copied byte for byte, the lockfiles and
the SBOM), then renamed to ``DIR/label/<name>/`` in one step, then recorded in the ledger
(``channel_state/snapshots/<name>.json``). A hidden folder left by a kill is removed, and a snapshot
folder the ledger never recorded (killed between the rename and the record) is removed and taken again:
nobody was ever told about it.

anaconda.org main: the server copies every file of the main label to the label ``<name>`` (the endpoint
``anaconda label --copy`` uses: ``POST /channels/OWNER/main/copy/<name>``) and locks it
(``POST /channels/OWNER/<name>/lock``); the lockfiles and the SBOM go to ``build/snapshots/<name>/``, from
where ``status --out`` publishes them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.channels.anaconda import AnacondaChannel
from conda_distro.channels.base import Channel, ChannelFile, Progress, no_progress
from conda_distro.channels.hooks import crash_point
from conda_distro.channels.local import REPODATA, LocalChannel
from conda_distro.config import DistroRepo
from conda_distro.enduser.conda_solve import CondaSettings
from conda_distro.enduser.lockfiles import LockInputs, LockResult, write_lockfiles
from conda_distro.enduser.sbom import SbomPackage, packages_of, write_sbom
from conda_distro.enduser.snapshots import LABEL_DIR, LOCKFILES_DIR, SBOM_FILE, SNAPSHOTS_DIR, SnapshotRecord, SnapshotStore
from conda_distro.errors import ChannelError, DistroError
from conda_distro.state.ledger import current_user
from conda_distro.util.dates import utcnow
from conda_distro.util.gitutil import current_commit, find_repo, origin_url
from conda_distro.util.jsonio import read_json
from conda_distro.util.scratch import ScratchDir
from conda_distro.vocab import Target


@dataclass
class SnapshotOutcome:
    record: SnapshotRecord | None  # the snapshot taken (None: main was already captured, or is empty)
    folder: Path | None = None  # where its files (lockfiles, SBOM) are
    notes: list[str] = field(default_factory=list)
    recorded: str | None = None  # the ledger file written (relative to the repository)


def artifacts_of(files: dict[str, ChannelFile]) -> dict[str, str]:
    return {a: f.sha256 for a, f in sorted(files.items())}


def files_folder(distro: DistroRepo, main: Channel, name: str) -> Path:
    """Where a snapshot's lockfiles and SBOM are: inside the snapshot (local main), else under build/
    (as :func:`~conda_distro.enduser.snapshots.files_of` finds them again)."""
    if isinstance(main, LocalChannel):
        return main.path / LABEL_DIR / name
    return distro.build_dir / SNAPSHOTS_DIR / name


def ensure_snapshot(distro: DistroRepo, main: Channel, *, today: dt.date | None = None,
                    settings: CondaSettings | None = None, progress: Progress = no_progress) -> SnapshotOutcome:
    """Take a snapshot of main unless one already holds exactly main's files. The caller holds main's lock.
    A file system error is a ChannelError naming the path (the next promote takes the snapshot)."""
    try:
        return _ensure_snapshot(distro, main, today=today, settings=settings, progress=progress)
    except OSError as exc:
        raise ChannelError(f"taking the snapshot of {main.describe()} failed: {exc.strerror or exc}",
                           path=Path(exc.filename) if exc.filename else None,
                           hint="main itself is promoted and recorded; fix the folder and run promote again: "
                                "it takes the snapshot then") from None


@dataclass
class _Place:
    """Where one snapshot is made: its name, the URL users read it from, the URL its index is read from
    while it is made, and the folder its lockfiles and SBOM are written to while it is made."""

    name: str
    url: str
    index_url: str = ""
    build: Path = Path()


def _anaconda_name(distro: DistroRepo, main: AnacondaChannel, store: SnapshotStore, today: dt.date,
                   current: dict[str, str]) -> tuple[str, bool]:
    """The next free label name, and whether the label already holds exactly main (a run killed after
    copying the label and before recording it: the label is locked, so it is adopted, not copied again)."""
    taken: set[str] = set()
    while True:
        name = store.next_name(today, taken)
        there = artifacts_of(main.with_label(name).list_files())
        if not there or there == current:
            return name, bool(there)
        taken.add(name)


def _ensure_snapshot(distro: DistroRepo, main: Channel, *, today: dt.date | None, settings: CondaSettings | None,
                     progress: Progress) -> SnapshotOutcome:
    store = SnapshotStore(distro.state_dir)
    if isinstance(main, LocalChannel):
        _clear_leftovers(main, store)
    files = main.list_files()
    if not files:
        return SnapshotOutcome(None)
    current = artifacts_of(files)
    if any(r.artifacts == current for r in store.all()):
        return SnapshotOutcome(None)
    day = today or utcnow().date()
    with ScratchDir("conda-distro-snapshot-") as tmp:
        if isinstance(main, LocalChannel):
            name, copied = store.next_name(day), False
            place = _Place(name, (main.path / LABEL_DIR / name).as_uri(), build=main.path / LABEL_DIR / f".{name}.tmp-{os.getpid()}")
            _link_index(main, files, place.build)
            place.index_url = place.build.as_uri()
        elif isinstance(main, AnacondaChannel):
            name, copied = _anaconda_name(distro, main, store, day, current)
            place = _Place(name, distro.channel_url(f"anaconda://{main.owner}/{name}"), build=Path(tmp) / "files")
            place.index_url = _write_index(files.values(), Path(tmp) / "index").as_uri()
        else:  # pragma: no cover - every backend is one of the two
            raise TypeError(type(main).__name__)
        crash_point("snapshot-after-link")
        lockfiles, notes = _lockfiles_and_sbom(distro, files, place, settings or CondaSettings())
        folder = files_folder(distro, main, name)
        if isinstance(main, LocalChannel):
            os.rename(place.build, folder)
        else:
            assert isinstance(main, AnacondaChannel)
            if not copied:
                main.copy_label(name)
            shutil.rmtree(folder, ignore_errors=True)
            folder.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(place.build, folder)
        crash_point("snapshot-after-publish")
    record = SnapshotRecord(name=name, created_at=utcnow(), by=current_user(distro.root),
                            commit=current_commit(distro.root), channel=str(main.ref), url=place.url, artifacts=current,
                            lockfiles=lockfiles, sbom=SBOM_FILE)
    path = store.save(record)
    progress(f"snapshot {name} of {main.describe()}: {place.url}")
    for note in notes:
        progress(note)
    return SnapshotOutcome(record, folder, notes, path.relative_to(distro.root).as_posix()
                           if path.is_relative_to(distro.root) else str(path))


def _write_index(files: Iterable[ChannelFile], folder: Path) -> Path:
    """A channel whose repodata lists ``files`` (records only, no package files: enough to solve)."""
    subdirs: dict[str, dict[str, dict]] = {"noarch": {}}
    for f in files:
        subdirs.setdefault(f.subdir, {})[f.filename] = {
            "name": f.name, "version": f.version, "build": f.build, "build_number": f.build_number,
            "depends": list(f.depends), "subdir": f.subdir, "sha256": f.sha256,
            **({"timestamp": f.timestamp} if f.timestamp is not None else {}),
            **({"track_features": " ".join(f.track_features)} if f.track_features else {})}
    for subdir, records in subdirs.items():
        (folder / subdir).mkdir(parents=True, exist_ok=True)
        conda = {k: v for k, v in records.items() if k.endswith(".conda")}
        bz2 = {k: v for k, v in records.items() if not k.endswith(".conda")}
        (folder / subdir / REPODATA).write_text(json.dumps({"info": {"subdir": subdir}, "packages": bz2,
                                                            "packages.conda": conda, "repodata_version": 1}))
    return folder


def _clear_leftovers(main: LocalChannel, store: SnapshotStore) -> None:
    """Hidden build folders of killed runs, and snapshot folders the ledger never recorded."""
    labels = main.path / LABEL_DIR
    if not labels.is_dir():
        return
    recorded = {r.name for r in store.all()}
    for p in labels.iterdir():
        killed = p.name.startswith(".snapshot-") and ".tmp-" in p.name
        unrecorded = p.name.startswith("snapshot-") and p.name not in recorded and p.is_dir()
        if killed or unrecorded:
            shutil.rmtree(p, ignore_errors=True)


def _link_index(main: LocalChannel, files: dict[str, ChannelFile], dest: Path) -> None:
    """``dest`` becomes a channel: main's package files hard-linked, main's index copied byte for byte."""
    shutil.rmtree(dest, ignore_errors=True)
    for subdir in sorted({*main.indexed_subdirs(), "noarch"}):
        (dest / subdir).mkdir(parents=True, exist_ok=True)
        src = main.path / subdir / REPODATA
        if src.is_file():
            shutil.copyfile(src, dest / subdir / REPODATA)
        else:
            (dest / subdir / REPODATA).write_text(json.dumps({"info": {"subdir": subdir}, "packages": {},
                                                             "packages.conda": {}, "repodata_version": 1}))
    for f in files.values():
        os.link(main.file_path(f), dest / f.subdir / f.filename)


def _source_urls(distro: DistroRepo, names: set[str]) -> dict[str, str | None]:
    """Each of our package names -> where its source comes from (recipe source URL, or the recipe folder
    in this repository at HEAD for a source kept here)."""
    from conda_distro.distribution import load_distribution

    dist = load_distribution(distro.root, strict=False, distro=distro)
    repo = find_repo(distro.root, with_commit=True)
    base = (origin_url(repo) if repo is not None else None) or distro.root.as_uri()
    commit = current_commit(distro.root) or "HEAD"
    out: dict[str, str | None] = dict.fromkeys(names)
    for folder, recipe in dist.recipes.items():
        src = next(iter(recipe.sources), None)
        if src is None:
            url = None
        elif src.url:
            url = src.url
        elif src.git:
            url = f"git+{src.git}"
        else:
            url = f"git+{base}@{commit}#recipes/{Path(str(folder)).name}/{src.path or ''}".rstrip("/")
        for name in (recipe.name, *recipe.output_names):
            if name in out:
                out[name] = url
    return out


def _lockfiles_and_sbom(distro: DistroRepo, files: dict[str, ChannelFile], place: _Place,
                        settings: CondaSettings) -> tuple[dict[str, str], list[str]]:
    """Write the lockfiles and the SBOM into ``place.build``; returns the lockfiles (key -> relative path)
    and notes for the log (packages left out, lockfiles that could not be solved)."""
    url, folder, name = place.url, place.build, place.name
    config = distro.config
    targets = tuple(Target(r, v) for r in config.pytorch.releases for v in config.pytorch.variants)
    inputs = LockInputs(channel=place.index_url, served=url, upstream=tuple(distro.upstream_urls),
                        platform=config.platforms[0], pytorch=config.pytorch.name, targets=targets,
                        files=tuple(files.values()), settings=settings)
    try:
        locks = write_lockfiles(inputs, folder / LOCKFILES_DIR)
    except ChannelError as exc:  # upstream unreadable from here: the snapshot is taken without lockfiles
        locks = LockResult(failed={"all": exc.message})
    notes = [f"lockfile {k}: left out {', '.join(v)} (they do not install together with the rest)"
             for k, v in sorted(locks.left_out.items())]
    notes += [f"no lockfile for {k}: {why}" for k, why in sorted(locks.failed.items())]
    from conda_distro.enduser.lockfiles import locked_records

    records: dict[str, dict] = {}
    ours = {f.name for f in files.values()}
    for path in locks.written.values():
        for r in locked_records(path, config.platforms[0]):
            rec = json.loads(r.to_json())
            rec["url"] = str(r.url)
            records[rec["url"]] = rec
    for f in files.values():  # every package of the snapshot, installable with a release or not
        rec_url = f"{url}/{f.subdir}/{f.filename}"
        if not any(r["name"] == f.name and r.get("sha256") == f.sha256 for r in records.values()):
            records[rec_url] = {"name": f.name, "version": f.version, "build": f.build, "subdir": f.subdir,
                                "sha256": f.sha256, "license": _license_of(folder, f), "url": rec_url}
    packages: list[SbomPackage] = packages_of(records.values(), _source_urls(distro, ours))
    write_sbom(folder / SBOM_FILE, packages, name=name, version=name.removeprefix("snapshot-"))
    return {k: f"{LOCKFILES_DIR}/{p.name}" for k, p in sorted(locks.written.items())}, notes


def _license_of(folder: Path, f: ChannelFile) -> str | None:
    """The license the snapshot's index records for ``f`` (None when unknown)."""
    path = folder / f.subdir / REPODATA
    try:  # (bounded, regular files only: a FIFO in its place cannot hang the snapshot)
        data = read_json(path, "repodata")
    except (OSError, ValueError, DistroError):
        return None
    for key in ("packages.conda", "packages"):
        rec = (data.get(key) or {}).get(f.filename)
        if isinstance(rec, dict):
            return rec.get("license") or None
    return None


__all__ = ["SnapshotOutcome", "ensure_snapshot", "files_folder"]
