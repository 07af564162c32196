"""Where recipe code runs: a runner process with a fixed environment, inside bubblewrap (spec §11).

Build and test scripts are recipe code. They run under the runner (``python -m
conda_distro.engine.worker``) that calls rattler-build, and that process runs inside ``bwrap``. A
sandbox starts from an empty, read-only root and shows only what is listed here:

* the system toolchain and libraries, read-only: ``/usr`` (with the ``/bin``, ``/sbin``, ``/lib*``
  links), ``/usr/local`` (the CUDA toolkit and ``nvcc``), and a short list of ``/etc`` entries
  (:data:`ETC`: the loader cache, CA certificates, alternatives, passwd/group, nsswitch; never
  ``/etc/ssl/private``, ``pip.conf``, ``npmrc``, ``gitconfig``…);
* the Python runtime of the runner, read-only, each folder at its own path (the interpreter's
  prefix, e.g. ``/root/.pyenv/versions/3.11.7``, the virtualenv and this package's source; never the
  home folder around them);
* under ``/job`` (:data:`INSIDE`), read-only: the recipe folder, the url sources fetched beforehand,
  the staging channel, release views, the dependency view, local upstream channels and the mirror
  views standing in for remote ones (:mod:`.mirror`); read-write:
  ``/job/work``, the run's own fresh folder (output folder, ``HOME``, package cache);
* a fresh ``/dev``, a fresh ``/proc``, a fresh ``/tmp`` (memory); no ``/run``, ``/var``, ``/home``,
  ``/root``, ``/opt``, host ``/tmp`` or host ``/dev/shm``; ``/sys`` only for a GPU test;
* its own PID namespace (every process left behind dies with the sandbox), network namespace (no
  network; loopback and abstract unix sockets are its own), IPC and UTS namespaces; no capabilities;
  a new session; it dies with its parent.

Host folders are shown at plain fixed paths under ``/job`` (:class:`Layout`), whatever their host path
is: a repository, cache or work folder under ``/tmp``, or with spaces, ``+``, ``#`` or non-ASCII
letters in its path, looks the same to rattler-build inside.

The runner's environment is fixed (no ``CI``, no tokens, nothing of the caller's); recipes are
rendered in one fixed environment (:func:`conda_distro.util.rattler_env.fixed_environment`) both when planning
and in the runner, so ``env.*`` in a recipe cannot name its artifacts after the caller's environment.

When bubblewrap is missing or cannot run, building fails closed (:func:`require_bwrap`, exit 2) unless
the caller passed ``--no-sandbox``; the runner then still runs as a separate process with the fixed
environment, but unsandboxed (host paths, host network).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

import conda_distro
from conda_distro.errors import EngineUnavailableError
from conda_distro.util.rattler_env import SAFE_PATH, SCRATCH_VAR

if TYPE_CHECKING:
    from conda_distro.config import DistroRepo

BWRAP = "bwrap"
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: `apt-get install -y bubblewrap`; `.ci/install-sandbox` "
                "does it when missing), or pass --no-sandbox to run recipe code unsandboxed (not for CI)")
NO_SANDBOX_WARNING = ("warning: --no-sandbox: build and test scripts run unsandboxed, as you, and can read and "
                      "write the repository, build/results and channel_state/, your home folder and the network")

#: where a sandbox shows the host folders it is given
INSIDE = Path("/job")
#: the sandbox's only writable folder (besides its own /tmp)
WORK_INSIDE = INSIDE / "work"
#: the system folders shown read-only (those that exist; a link such as /bin -> usr/bin stays a link)
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: the /etc entries shown read-only: what the loader, TLS, compilers and user lookups read
ETC = ("alternatives", "ca-certificates", "ca-certificates.conf", "debian_version", "gai.conf", "group",
       "host.conf", "hosts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "locale.alias", "localtime", "magic",
       "magic.mime", "mime.types", "nsswitch.conf", "os-release", "passwd", "protocols", "services",
       "ssl/certs", "ssl/openssl.cnf", "timezone")


def worker_env(home: str, tmpdir: str) -> dict[str, str]:
    """The runner process's entire environment (``home``: its private writable folder; ``tmpdir``: where
    its temporary files and test environments go, as the orchestrator chose)."""
    return {
        "PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": f"{home}/home", "TMPDIR": tmpdir, SCRATCH_VAR: tmpdir,
        "RATTLER_CACHE_DIR": f"{home}/cache", "XDG_CACHE_HOME": f"{home}/cache",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def bwrap_path() -> str | None:
    return shutil.which(BWRAP, path=os.environ.get("PATH") or os.defpath)


@functools.lru_cache(maxsize=4)
def _probe(bwrap: str) -> str | None:
    """Why ``bwrap`` cannot make the sandbox on this machine, or None when it can."""
    try:
        proc = subprocess.run([bwrap, *bwrap_args(SandboxSpec()), "--", "/bin/true"], capture_output=True,
                              text=True, timeout=30, check=False)
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


def check_sandbox(sandbox: bool, distro: DistroRepo | None = None) -> None:
    """Fail closed before anything is written: the sandbox is wanted (the default) but cannot run, or
    (``distro`` given) a remote upstream channel, mirrored for the sandboxes, cannot be reached."""
    if sandbox:
        require_bwrap()
        if distro is not None:
            from conda_distro.engine.mirror import check_reachable, remote_upstreams

            check_reachable(distro, remote_upstreams(distro))


def runtime_paths() -> list[Path]:
    """What the runner's Python needs to read: the interpreter, the venv and this package's source
    (an editable install keeps it inside the repository). Shown at their own paths (a virtualenv names
    its interpreter by path)."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path(conda_distro.__file__).parent}
    exe = Path(sys.executable)
    paths.add(exe.resolve().parent.parent)
    return sorted(p for p in paths if p.exists())


@dataclass(frozen=True)
class Mount:
    """A host folder (or file) shown inside the sandbox at ``inside``."""

    host: Path
    inside: Path
    writable: bool = False


@dataclass(frozen=True)
class SandboxSpec:
    """What one sandbox shows besides the system and the Python runtime; every path absolute."""

    mounts: tuple[Mount, ...] = ()
    devices: tuple[Path, ...] = ()  # device nodes put back into the fresh /dev (a GPU's /dev/nvidia*)
    runtime: tuple[Path, ...] = ()  # shown read-only at their own paths (the runner's Python)
    chdir: Path = Path("/")


def _system_args(gpu: bool) -> list[str]:
    args: list[str] = []
    for top in SYSTEM:
        p = Path(top)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), top]
        elif p.is_dir():
            args += ["--ro-bind", top, top]
    for name in ETC:
        p = Path("/etc") / name
        if p.exists():
            args += ["--ro-bind", str(p), str(p)]
    if gpu and Path("/sys").is_dir():
        args += ["--ro-bind", "/sys", "/sys"]
    return args


def _outermost(paths: Sequence[Path]) -> list[Path]:
    out: list[Path] = []
    for p in sorted({Path(os.path.abspath(p)) for p in paths}, key=lambda p: len(p.parts)):
        if not any(p == o or o in p.parents for o in out):
            out.append(p)
    return out


def bwrap_args(spec: SandboxSpec) -> list[str]:
    """The bwrap options for ``spec`` (later mounts cover earlier ones; the root stays read-only)."""
    args = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox",
            *_system_args(bool(spec.devices)),
            "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for p in _outermost(spec.runtime):
        args += ["--ro-bind", str(p), str(p)]
    for m in sorted(spec.mounts, key=lambda m: len(m.inside.parts)):
        args += ["--bind" if m.writable else "--ro-bind", str(m.host), str(m.inside)]
    for d in spec.devices:
        args += ["--dev-bind", str(d), str(d)]
    args += ["--remount-ro", "/", "--chdir", str(spec.chdir)]
    return args


def wrap(argv: Sequence[str], spec: SandboxSpec | None, bwrap: str | None) -> list[str]:
    """``argv`` as run inside the sandbox (``spec``/``bwrap`` None: unsandboxed, ``--no-sandbox``)."""
    if spec is None or bwrap is None:
        return list(argv)
    return [bwrap, *bwrap_args(spec), "--", *argv]


def file_url_path(url: str) -> Path | None:
    """The local folder of a ``file://`` URL (percent-encoding undone), None for any other URL."""
    if not url.startswith("file://"):
        return None
    return Path(unquote(urlparse(url).path))


@dataclass
class Layout:
    """Where one sandbox shows each host path it is given (:data:`INSIDE`). Unsandboxed
    (``sandboxed=False``, ``--no-sandbox``) every path is its host path."""

    sandboxed: bool
    mounts: list[Mount] = field(default_factory=list)
    _seen: dict[tuple[Path, bool], Path] = field(default_factory=dict)

    def show(self, host: Path, inside: str, *, writable: bool = False) -> Path:
        """``host`` as the sandbox sees it, at ``/job/<inside>`` (shown once, however often asked)."""
        if not self.sandboxed:
            return host
        key = (Path(os.path.abspath(host)), writable)
        if key not in self._seen:
            where = INSIDE / inside
            self.mounts.append(Mount(key[0], where, writable))
            self._seen[key] = where
        return self._seen[key]

    def channel(self, url: str) -> str:
        """A channel URL as the sandbox sees it: a local channel shown read-only at
        ``/job/channels/<its folder's name>`` (made plain and unique: nothing to percent-encode; the name
        is what rattler-build prints as the channel); any other URL unchanged."""
        host = file_url_path(url)
        if host is None:
            return url
        if not self.sandboxed:
            return host.as_uri()
        key = (Path(os.path.abspath(host)), False)
        if key in self._seen:
            return self._seen[key].as_uri()
        base = re.sub(r"[^A-Za-z0-9._+-]", "_", host.name).lstrip(".") or "channel"
        taken = set(self._seen.values())
        name, n = base, 1
        while INSIDE / "channels" / name in taken:
            n += 1
            name = f"{base}-{n}"
        return self.show(host, f"channels/{name}").as_uri()

    def spec(self, devices: tuple[Path, ...] = ()) -> SandboxSpec:
        return SandboxSpec(mounts=tuple(self.mounts), devices=devices, runtime=tuple(runtime_paths()),
                           chdir=WORK_INSIDE)
