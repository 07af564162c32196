"""Resolve and download a closure of wheels with pip (the PyPI bridge's first step).

Resolution is pip's own: ``pip install --dry-run --ignore-installed --only-binary :all: --report``
gives, as JSON, every distribution of the closure with its metadata (``Requires-Dist``,
``Requires-Python``) and where pip would take it from (URL and sha256). Downloading is pip's too:
``pip download --no-deps --require-hashes`` of exactly those ``name===version`` pins into a wheel cache
folder, where files already present (checked against the hash) are not fetched again.

* **Downloads go in passes** that each hold at most one version of each project: pip refuses two versions
  of one project in one call ("Cannot install nvidia-cudnn-cu13===9.20.0.48 and
  nvidia-cudnn-cu13===9.24.0.43"), and two torch builds routinely need different ones.
* **Only the bridge's own constraints count:** a pip configuration may name a constraints file (this
  kind of machine caps ``torch<=2.14.1`` in ``/etc/xdg/pip``); every pip call of the bridge runs with
  ``PIP_CONSTRAINT`` set to an empty file, so what it resolves depends on the request alone, whether such a
  cap is configured or not. Indexes and find-links configured for pip are kept.

The target is the interpreter pip runs in (the host python the sandbox repackages): wheels are chosen
for its version and platform tags.
"""

from __future__ import annotations

import email.parser
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.errors import BridgeError
from conda_distro.upstream.names import normalize
from conda_distro.util.scratch import ScratchDir

PIP_TIMEOUT_S = 3600


@dataclass(frozen=True)
class Wheel:
    """One distribution of a resolved closure (from pip's installation report)."""

    name: str  # PyPI name, normalised
    version: str  # as PyPI has it, local label included (2.13.0+cpu)
    filename: str
    url: str
    sha256: str | None
    requires_dist: tuple[str, ...] = ()
    requires_python: str | None = None
    requested: bool = False  # named in the request (not only pulled in as a dependency)

    @property
    def pin(self) -> str:
        return f"{self.name}==={self.version}"  # exactly: ==2.13.0 would also admit 2.13.0+cpu

    @property
    def pure(self) -> bool:
        return self.filename.endswith("-none-any.whl")

    @property
    def requirement_line(self) -> str:
        """Its line in a ``--require-hashes`` requirements file."""
        return self.pin + (f" --hash=sha256:{self.sha256}" if self.sha256 else "")


@dataclass(frozen=True)
class Closure:
    """What pip resolved for one request."""

    request: tuple[str, ...]
    wheels: tuple[Wheel, ...]
    seconds: float

    def by_name(self) -> dict[str, Wheel]:
        return {w.name: w for w in self.wheels}


@dataclass(frozen=True)
class PipOptions:
    """How pip is run."""

    python: str = sys.executable  # the interpreter whose pip resolves (its tags are the target's)
    extra_args: tuple[str, ...] = ()  # e.g. ("--index-url", URL) in tests
    env: dict[str, str] = field(default_factory=dict)  # added to the environment of pip


class PipFailed(BridgeError):
    """A pip call that failed; ``problem`` holds the lines of its output that say why."""

    def __init__(self, message: str, *, problem: tuple[str, ...], hint: str) -> None:
        super().__init__(message, hint=hint)
        self.problem = problem


_NOISE = ("is ignored: it is neither a file", "[notice]")


def pip_problem(stdout: str, stderr: str) -> tuple[str, ...]:
    """The lines of a failed pip call that say why: its errors, and the explanation of a resolution
    conflict ("The conflict is caused by: ..."), which pip prints on stdout."""
    err = [ln.rstrip() for ln in stderr.splitlines() if ln.strip() and not any(n in ln for n in _NOISE)]
    out = stdout.splitlines()
    start = next((i for i, ln in enumerate(out) if ln.strip().startswith("The conflict is caused by")), None)
    cause: list[str] = []
    if start is not None:
        for ln in out[start:]:
            if ln.strip().startswith("To fix this"):
                break
            if ln.strip():
                cause.append(ln.rstrip())
    return tuple(err[-25:] + cause[:25])


def run_pip(args: Sequence[str], options: PipOptions, what: str) -> subprocess.CompletedProcess:
    """Run pip (module docstring: configured constraints are lifted); a failure is :class:`PipFailed`."""
    cmd = [options.python, "-m", "pip", *args, *options.extra_args]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_CONSTRAINT": os.devnull, **options.env}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=PIP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise BridgeError(f"pip took over {PIP_TIMEOUT_S}s to {what}", hint="check the network and retry") from None
    if proc.returncode != 0:
        problem = pip_problem(proc.stdout or "", proc.stderr or "")
        raise PipFailed(f"pip could not {what}:\n" + "\n".join(problem), problem=problem,
                        hint="the lines above are pip's; a package with no wheel for this python and platform "
                             "cannot be bridged (the bridge takes wheels only)")
    return proc


def _wheel_from_report(item: dict) -> Wheel:
    md = item.get("metadata") or {}
    info = item.get("download_info") or {}
    url = info.get("url") or ""
    hashes = (info.get("archive_info") or {}).get("hashes") or {}
    sha = hashes.get("sha256")
    if not sha and (info.get("archive_info") or {}).get("hash", "").startswith("sha256="):
        sha = info["archive_info"]["hash"].split("=", 1)[1]
    filename = url.rsplit("/", 1)[-1].split("#", 1)[0]
    from urllib.parse import unquote

    return Wheel(name=normalize(md.get("name", "")), version=str(md.get("version", "")), filename=unquote(filename),
                 url=url, sha256=sha, requires_dist=tuple(md.get("requires_dist") or ()),
                 requires_python=md.get("requires_python"), requested=bool(item.get("requested")))


def resolve(requirements: Sequence[str], options: PipOptions = PipOptions()) -> Closure:
    """The closure pip would install for ``requirements`` (wheels only) on the target interpreter."""
    t0 = time.monotonic()
    if not requirements:
        return Closure((), (), 0.0)
    with ScratchDir("conda-distro-pip-") as td:
        report = Path(td) / "report.json"
        # not --quiet: pip explains a conflict ("The conflict is caused by: ...") at its normal verbosity
        run_pip(["install", "--dry-run", "--ignore-installed", "--only-binary", ":all:", "--progress-bar", "off",
                 "--report", str(report), *requirements], options, f"resolve {' '.join(requirements)}")
        doc = json.loads(report.read_text())
    wheels = tuple(sorted((_wheel_from_report(i) for i in doc.get("install", [])), key=lambda w: w.name))
    bad = [w.filename for w in wheels if not w.filename.endswith(".whl")]
    if bad:
        raise BridgeError(f"pip resolved non-wheel distributions: {', '.join(bad)}",
                          hint="the bridge converts wheels only")
    return Closure(tuple(requirements), wheels, time.monotonic() - t0)


@dataclass(frozen=True)
class Download:
    """Wheel files in the cache, by filename."""

    files: dict[str, Path]
    fetched: tuple[str, ...]  # filenames that were not in the cache before
    bytes_fetched: int
    seconds: float
    passes: int = 0  # pip calls it took (each holds at most one version of a project)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download_passes(wheels: Sequence[Wheel]) -> list[list[Wheel]]:
    """``wheels`` split into passes that each hold at most one file of each project (module docstring):
    the k-th file of a project (by version) goes into pass k."""
    by_project: dict[str, list[Wheel]] = {}
    for w in sorted({w.filename: w for w in wheels}.values(), key=lambda w: (w.name, w.version, w.filename)):
        by_project.setdefault(w.name, []).append(w)
    passes: list[list[Wheel]] = []
    for files in by_project.values():
        for k, w in enumerate(files):
            if k == len(passes):
                passes.append([])
            passes[k].append(w)
    return passes


def _in_cache(dest: Path, w: Wheel) -> bool:
    """The file is in the cache with the expected bytes (a file whose sha256 differs counts as absent and is
    replaced only once pip has fetched the right one)."""
    path = dest / w.filename
    if not path.is_file():
        return False
    return w.sha256 is None or sha256_of(path) == w.sha256


def _clear_stale_downloads(dest: Path) -> None:
    """Remove the temporary folders of downloads whose process is gone (killed mid-download)."""
    for d in dest.glob(".download-*"):
        m = re.match(r"^\.download-(\d+)-", d.name)
        if m and not Path(f"/proc/{m.group(1)}").exists():
            shutil.rmtree(d, ignore_errors=True)


def _refused(problem: Sequence[str]) -> list[str]:
    """The pins pip refused because their file's hash differs (``torch===2.13.0 from https://...:``)."""
    return [m.group(1) for ln in problem if (m := re.match(r"^\s+(\S+===\S+) from ", ln))]


def download(wheels: Sequence[Wheel], dest: Path, options: PipOptions = PipOptions()) -> Download:
    """Make sure every wheel is in ``dest`` with its sha256: pip download (``--require-hashes`` when every
    wheel has one) in passes (:func:`download_passes`) into a temporary folder beside the cache, then moved
    in. Files already there with the right sha256 are kept."""
    t0 = time.monotonic()
    dest.mkdir(parents=True, exist_ok=True)
    _clear_stale_downloads(dest)
    missing = [w for w in {w.filename: w for w in wheels}.values() if not _in_cache(dest, w)]
    passes = download_passes(missing)
    fetched: list[str] = []
    for k, batch in enumerate(passes, 1):
        with tempfile.TemporaryDirectory(prefix=f".download-{os.getpid()}-", dir=dest) as td:
            reqs = Path(td) / "requirements.txt"
            reqs.write_text("".join(w.requirement_line + "\n" for w in batch))
            out = Path(td) / "files"
            args = ["download", "--no-deps", "--only-binary", ":all:", "--quiet", "--progress-bar", "off",
                    "-d", str(out), "-r", str(reqs)]
            if all(w.sha256 for w in batch):
                args.append("--require-hashes")
            what = f"download {len(batch)} wheels" + (f" (pass {k} of {len(passes)})" if len(passes) > 1 else "")
            try:
                run_pip(args, options, what)
            except PipFailed as exc:
                refused = _refused(exc.problem)
                if refused:
                    raise BridgeError(f"pip refused {', '.join(refused)}: the file it found does not have the "
                                      f"sha256 asked for:\n" + "\n".join(exc.problem),
                                      hint="the lock (or the file on the index) was altered: restore the lock from "
                                           "git, or re-resolve with `sandbox --real --refresh`") from None
                raise BridgeError(exc.message, hint="pip looks for each pinned file on the indexes and find-links it "
                                  "is configured with; the lock's `url` says where a file was found when it was "
                                  "resolved: make that reachable to pip (e.g. PIP_FIND_LINKS), or re-resolve with "
                                  "`sandbox --real --refresh`") from None
            for w in batch:
                got = out / w.filename
                if not got.is_file():
                    raise BridgeError(f"pip download did not produce {w.filename}", path=dest,
                                      hint="pip chose another file than the one asked for; clear the wheel cache "
                                           "and retry")
                os.replace(got, dest / w.filename)
                fetched.append(w.filename)
    files = {w.filename: dest / w.filename for w in wheels}
    return Download(files, tuple(sorted(fetched)), sum(files[n].stat().st_size for n in fetched),
                    time.monotonic() - t0, len(passes))


def wheel_from_file(path: Path, *, name: str, version: str, sha256: str | None, url: str | None) -> Wheel:
    """A :class:`Wheel` read from its file (``Requires-Dist``, ``Requires-Python`` of its METADATA): how a
    locked wheel is known without asking pip."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            meta = next((n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)), None)
            if meta is None:
                raise BridgeError(f"{path.name} has no .dist-info/METADATA", path=path,
                                  hint="remove it from the wheel cache and run again")
            text = zf.read(meta).decode("utf-8", errors="replace")
    except (zipfile.BadZipFile, OSError) as exc:
        raise BridgeError(f"{path.name} cannot be read as a wheel: {exc}", path=path,
                          hint="remove it from the wheel cache and run again") from None
    msg = email.parser.HeaderParser().parsestr(text)
    return Wheel(name=name, version=version, filename=path.name, url=url or "", sha256=sha256,
                 requires_dist=tuple(" ".join(str(v).split()) for v in msg.get_all("Requires-Dist") or ()),
                 requires_python=msg.get("Requires-Python"))


__all__ = ["Closure", "Download", "PipFailed", "PipOptions", "Wheel", "download", "download_passes", "pip_problem",
           "resolve", "sha256_of", "wheel_from_file"]
