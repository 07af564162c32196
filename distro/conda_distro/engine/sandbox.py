"""Where recipe code runs: a worker process with a fixed environment, inside bubblewrap (spec §11).

Build and test scripts are recipe code. They run in the worker process (``python -m
conda_distro.engine.worker``) that calls rattler-build, and that process runs inside ``bwrap`` with:

* the whole filesystem read-only (``--ro-bind / /``), a fresh ``/dev``, a fresh ``/tmp``;
* its own pid namespace and a fresh ``/proc`` (``--unshare-pid``): the orchestrator's ``/proc/*/cwd``
  and every other process are invisible; ``--die-with-parent``; ``--new-session``; no capabilities;
* the repository, the build folder (results, logs, other packages' views) and the ledger hidden under
  empty tmpfs mounts; only what the unit reads is put back read-only: its recipe folder, the staging
  channel, its release views and dependency view, local upstream channels and the Python runtime;
* one writable folder of its own (private output dir, HOME, package cache, logs), made fresh per run.

Network is left as it is (builds are offline on the machines this is developed on; a recipe's
``source: url`` still downloads).

The worker's environment is fixed (no ``CI``, no tokens, nothing of the caller's); recipes are
rendered in one fixed environment (:func:`conda_distro.rattler_env.fixed_environment`) both when planning
and in the worker, so ``env.*`` in a recipe
cannot name its artifacts after the caller's environment.

When bubblewrap is missing or cannot run, building fails closed (:func:`require_bwrap`, exit 2) unless
the caller passed ``--no-sandbox``; the worker then still runs as a separate process with the fixed
environment, but unsandboxed.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import conda_distro
from conda_distro.errors import EngineUnavailableError
from conda_distro.rattler_env import SAFE_PATH

BWRAP = "bwrap"
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: `apt-get install -y bubblewrap`; `.ci/install-sandbox` "
                "does it when missing), or pass --no-sandbox to run recipe code unsandboxed (not for CI)")
NO_SANDBOX_WARNING = ("warning: --no-sandbox: build and test scripts run unsandboxed, as you, and can read and "
                      "write the repository, build/results and channel_state/")



def worker_env(work: Path, tmpdir: str) -> dict[str, str]:
    """The worker process's entire environment."""
    return {
        "PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": str(work / "home"), "TMPDIR": tmpdir,
        "RATTLER_CACHE_DIR": str(work / "cache"), "XDG_CACHE_HOME": str(work / "cache"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def bwrap_path() -> str | None:
    return shutil.which(BWRAP, path=os.environ.get("PATH") or os.defpath)


@functools.lru_cache(maxsize=4)
def _probe(bwrap: str) -> str | None:
    """Why ``bwrap`` cannot make the sandbox on this machine, or None when it can."""
    try:
        proc = subprocess.run([bwrap, *_base_args(), "--", "/bin/true"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if proc.returncode == 0 else (proc.stderr.strip() or f"exit status {proc.returncode}")


def require_bwrap() -> str:
    """The path of a working ``bwrap``; :class:`EngineUnavailableError` (exit 2) otherwise."""
    exe = bwrap_path()
    if exe is None:
        raise EngineUnavailableError("bubblewrap (bwrap) is not installed: build and test scripts cannot be sandboxed",
                                     field="--no-sandbox", hint=INSTALL_HINT)
    why = _probe(exe)
    if why:
        raise EngineUnavailableError(f"bubblewrap cannot create the build sandbox here: {why}", field="--no-sandbox",
                                     hint="enable unprivileged user namespaces (kernel.unprivileged_userns_clone=1) "
                                          "or run as root; " + INSTALL_HINT)
    return exe


def check_sandbox(sandbox: bool) -> None:
    """Fail closed before anything is written: the sandbox is wanted (the default) but cannot run."""
    if sandbox:
        require_bwrap()


def runtime_paths() -> list[Path]:
    """What the worker's Python needs to read: the interpreter, the venv and this package's source
    (an editable install keeps it inside the repository)."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path(conda_distro.__file__).parent}
    exe = Path(sys.executable)
    paths.add(exe.resolve().parent.parent)
    return sorted(p for p in paths if p.exists())


@dataclass(frozen=True)
class SandboxSpec:
    """The mounts of one worker's sandbox; every path absolute."""

    work: Path  # the only writable folder
    hidden: tuple[Path, ...]  # covered by an empty tmpfs: the repository, the build folder, the ledger
    read_only: tuple[Path, ...]  # put back (read-only) inside hidden areas
    writable: tuple[Path, ...] = ()  # more private writable folders (a chosen place for test environments)
    devices: tuple[Path, ...] = ()  # device nodes put back into the fresh /dev (a GPU's /dev/nvidia*)


def _base_args() -> list[str]:
    return ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--unshare-pid", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]


def _outermost(paths: Sequence[Path]) -> list[Path]:
    out: list[Path] = []
    for p in sorted({Path(os.path.abspath(p)) for p in paths}, key=lambda p: len(p.parts)):
        if not any(p == o or o in p.parents for o in out):
            out.append(p)
    return out


def bwrap_args(spec: SandboxSpec) -> list[str]:
    """The bwrap options for ``spec`` (later mounts cover earlier ones)."""
    args = _base_args()
    hidden = [h for h in _outermost(spec.hidden) if h != Path("/")]
    for h in hidden:
        args += ["--tmpfs", str(h)]
    for p in sorted({Path(os.path.abspath(p)) for p in spec.read_only}, key=lambda p: len(p.parts)):
        if p.exists():
            args += ["--ro-bind", str(p.resolve()), str(p)]
    for w in (spec.work, *spec.writable):
        args += ["--bind", str(w.resolve()), str(w)]
    for d in spec.devices:
        args += ["--dev-bind", str(d), str(d)]
    for h in hidden:  # the empty mounts themselves are read-only too (the binds inside keep their mode)
        args += ["--remount-ro", str(h)]
    args += ["--chdir", str(spec.work)]
    return args


def wrap(argv: Sequence[str], spec: SandboxSpec | None, bwrap: str | None) -> list[str]:
    """``argv`` as run inside the sandbox (``spec``/``bwrap`` None: unsandboxed, ``--no-sandbox``)."""
    if spec is None or bwrap is None:
        return list(argv)
    return [bwrap, *bwrap_args(spec), "--", *argv]
