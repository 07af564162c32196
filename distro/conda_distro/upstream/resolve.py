"""Resolve and download a closure of wheels with pip (the PyPI bridge's first step).

Resolution is pip's own: ``pip install --dry-run --ignore-installed --only-binary :all: --report``
gives, as JSON, every distribution of the closure with its metadata (``Requires-Dist``,
``Requires-Python``) and where pip would take it from (URL and sha256). Downloading is pip's too:
``pip download --no-deps --require-hashes`` of exactly those ``name==version`` pins into a wheel cache
folder, where files already present (checked against the hash) are not fetched again.

The target is the interpreter pip runs in (the host python the sandbox repackages): wheels are chosen
for its version and platform tags.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.errors import BridgeError
from conda_distro.upstream.names import normalize

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


def run_pip(args: Sequence[str], options: PipOptions, what: str) -> subprocess.CompletedProcess:
    cmd = [options.python, "-m", "pip", *args, *options.extra_args]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **options.env}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=PIP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise BridgeError(f"pip took over {PIP_TIMEOUT_S}s to {what}", hint="check the network and retry") from None
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or "").splitlines() if "is ignored: it is neither a file" not in ln]
        raise BridgeError(f"pip could not {what}:\n" + "\n".join(lines[-25:]),
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
    with tempfile.TemporaryDirectory(prefix="conda-distro-pip-") as td:
        report = Path(td) / "report.json"
        run_pip(["install", "--dry-run", "--ignore-installed", "--only-binary", ":all:", "--quiet",
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


def download(wheels: Sequence[Wheel], dest: Path, options: PipOptions = PipOptions()) -> Download:
    """Make sure every wheel is in ``dest`` (pip download, hash-checked); present files are kept."""
    t0 = time.monotonic()
    dest.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in dest.glob("*.whl")}
    missing = [w for w in wheels if w.filename not in before]
    if missing:
        with tempfile.TemporaryDirectory(prefix="conda-distro-pip-") as td:
            reqs = Path(td) / "requirements.txt"
            reqs.write_text("".join(f"{w.pin}" + (f" --hash=sha256:{w.sha256}" if w.sha256 else "") + "\n"
                                    for w in missing))
            args = ["download", "--no-deps", "--only-binary", ":all:", "--quiet", "-d", str(dest), "-r", str(reqs)]
            if all(w.sha256 for w in missing):
                args.append("--require-hashes")
            run_pip(args, options, f"download {len(missing)} wheels")
    files = {w.filename: dest / w.filename for w in wheels}
    absent = [n for n, p in files.items() if not p.is_file()]
    if absent:
        raise BridgeError(f"pip download did not produce {', '.join(absent)}", path=dest,
                          hint="pip chose another file than its resolution report named; clear the wheel cache and retry")
    fetched = tuple(sorted(n for n in files if n not in before))
    return Download(files, fetched, sum(files[n].stat().st_size for n in fetched), time.monotonic() - t0)


__all__ = ["Closure", "Download", "PipOptions", "Wheel", "download", "resolve"]
