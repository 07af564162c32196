"""From a worker's private output folder into staging: only artifacts named as their recipe declares.

Runs in the orchestrator after the build sandbox (and so every process in it) has exited. First every
package file the build left is hashed (:func:`seal`), at once. Then each is looked at: it must be a
regular file, be one of the variants the plan asked for, and carry (inside the package, read with
rattler-build) the name, version and build string its filename says, the name being one the recipe
declares. Anything else fails the whole build of the recipe and nothing of it reaches staging.
Accepted files are copied into staging (temp file, then rename); the copy is hashed again and refused
unless it has the sealed bytes. Staging is read-only in every sandbox, so the bytes tested and
promoted are the bytes built.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.channels.local import PACKAGE_SUFFIXES, is_subdir_name, sha256_of
from conda_distro.util.fsutil import COPY_SUFFIX


@dataclass(frozen=True)
class Produced:
    artifact: str  # "<subdir>/<filename>"
    path: Path


@dataclass
class IntakeResult:
    accepted: dict[str, Path] = field(default_factory=dict)  # artifact -> the file, now in staging
    sha256: dict[str, str] = field(default_factory=dict)
    rejected: str | None = None  # why nothing of the build was accepted


def produced_files(out_dir: Path) -> list[Produced]:
    """Every package file in a channel subfolder (``noarch/``, ``linux-64/``…) of the output folder."""
    if not out_dir.is_dir():
        return []
    found = []
    for sub in sorted(p for p in out_dir.iterdir() if p.is_dir() and not p.is_symlink() and is_subdir_name(p.name)):
        for f in sorted(sub.iterdir()):
            if f.name.endswith(PACKAGE_SUFFIXES):
                found.append(Produced(f"{sub.name}/{f.name}", f))
    return found


def _problem(p: Produced, expected: set[str], declared: frozenset[str], recipe: str) -> str | None:
    from rattler_build import Package

    st = os.lstat(p.path)
    if not stat.S_ISREG(st.st_mode):
        return f"the build left {p.artifact}, which is not a regular file"
    try:
        pkg = Package.from_file(str(p.path))
    except Exception as exc:  # noqa: BLE001 - rattler-build raises several types for unreadable archives
        return f"the build left {p.artifact}, which is not a readable package ({str(exc).splitlines()[0][:120]})"
    names = ", ".join(sorted(declared))
    if pkg.name not in declared:
        return (f"the build produced {p.artifact} (package '{pkg.name}'), but {recipe} declares only: {names}; "
                "a recipe may only publish its own package names")
    inner = f"{pkg.subdir}/{pkg.name}-{pkg.version}-{pkg.build_string}"
    if not p.artifact.startswith(inner + ".") or p.artifact[len(inner):] not in PACKAGE_SUFFIXES:
        return f"the build left {p.artifact}, whose contents say {inner}: the file name does not match the package"
    if p.artifact not in expected:
        return f"the build produced {p.artifact}, which is not one of the planned variants of {recipe}"
    return None


def check(out_dir: Path, expected: set[str], declared: frozenset[str], recipe: str) -> tuple[list[Produced], str | None]:
    """The produced files, and the first reason to reject the build (None: all of them are fine and
    every expected artifact is there)."""
    files = produced_files(out_dir)
    for p in files:
        why = _problem(p, expected, declared, recipe)
        if why:
            return files, why
    missing = sorted(expected - {p.artifact for p in files})
    if missing:
        return files, f"the build reported success but did not produce {', '.join(missing)}"
    return files, None


def seal(out_dir: Path) -> dict[str, str]:
    """The sha256 of every package file (regular, not a link) in the output folder, by artifact."""
    return {p.artifact: sha256_of(p.path) for p in produced_files(out_dir)
            if stat.S_ISREG(os.lstat(p.path).st_mode)}


#: the temp files an intake writes beside its staging file: ``.<file>.<pid>.intake`` (the copy, renamed
#: into place once every file of the build is checked) and ``.<file>.<pid>.intake.<pid>.part`` (that
#: copy while it is written); and a copy of main's file a build re-tests (``.<file>.<random>.copy``,
#: :func:`~conda_distro.util.fsutil.link_or_copy` across devices)
_TEMP = re.compile(r"\..+\.(?:\d+\.intake(?:\.\d+\.part)?|(?:conda|tar\.bz2)\.\w+" + re.escape(COPY_SUFFIX) + ")")


def clear_temps(staging: Path) -> list[Path]:
    """Remove the temp files of intakes killed with -9 (a copy of a package each, never indexed, never
    removed otherwise) from staging's channel subfolders. Only for a caller that holds staging's
    exclusive lock before its own intakes start: no intake runs then."""
    removed: list[Path] = []
    for sub in sorted(staging.iterdir()) if staging.is_dir() else []:
        if not is_subdir_name(sub.name) or not sub.is_dir() or sub.is_symlink():
            continue
        for f in sorted(sub.iterdir()):
            if _TEMP.fullmatch(f.name) and not f.is_dir():
                f.unlink(missing_ok=True)
                removed.append(f)
    return removed


def _copy_into(src: Path, dest: Path) -> str:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    try:
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
            os.fchmod(fout.fileno(), 0o644)
            fout.flush()
            os.fsync(fout.fileno())
        sha = sha256_of(tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return sha


def accept(out_dir: Path, expected: set[str], declared: frozenset[str], staging: Path, recipe: str,
           sealed: dict[str, str] | None = None) -> IntakeResult:
    """Check the build's output folder; when it is clean, copy the expected artifacts into staging.
    ``sealed`` (artifact -> sha256, hashed when the build ended): a file whose bytes are not those is
    refused, and nothing of the build is accepted."""
    files, why = check(out_dir, expected, declared, recipe)
    res = IntakeResult(rejected=why)
    if why:
        return res
    copied: dict[str, tuple[Path, str]] = {}
    for p in files:
        if sealed is not None and p.artifact not in sealed:
            why = f"{p.artifact} appeared after the build ended"
            break
        dest = staging / p.artifact
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.intake")
        sha = _copy_into(p.path, tmp)
        if sealed is not None and sha != sealed[p.artifact]:
            tmp.unlink(missing_ok=True)
            why = (f"the bytes of {p.artifact} changed between the end of its build (sha256 {sealed[p.artifact]}) "
                   f"and staging (sha256 {sha}): refused")
            break
        copied[p.artifact] = (tmp, sha)
    if why:
        for tmp, _ in copied.values():
            tmp.unlink(missing_ok=True)
        return IntakeResult(rejected=why)
    for artifact, (tmp, sha) in copied.items():
        dest = staging / artifact
        os.replace(tmp, dest)
        res.sha256[artifact] = sha
        res.accepted[artifact] = dest
    return res
