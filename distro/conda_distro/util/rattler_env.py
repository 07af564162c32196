"""The process environment every rattler-build call runs in, and the few rules around it.

rattler-build is used in-process (``py-rattler-build``). Four of the engine's gotchas (docs:
engine-notes.md section 5) are handled here, once, instead of at every call site:

* gotcha 6: the caller's ``PATH`` leaks into build and test scripts (a test ``python -c`` without
  python in the env ran the caller's venv python). :func:`rattler_env` sets ``PATH=/usr/bin:/bin``
  for the duration of a call and restores it.
* gotcha 7: a ``:`` in an output-dir or channel path breaks PATH splitting. :func:`assert_no_colon`
  refuses such paths with a hint.
* gotchas 1 and 2: :func:`native_tool_config` turns tests on (the default strategy is ``skip``);
  :func:`run_build` and :func:`run_tests` require explicit channels (the default is conda-forge,
  which offline fails only at test time).
* rattler-build draws its own progress bars ("installing packages", "Compressing"; indicatif, from
  Rust) on file descriptor 2 whenever that is a terminal, straight through our rich display.
  :func:`run_build` and :func:`run_tests` point fd 2 at a log file for the duration of the call
  (:func:`stderr_to`); on a file indicatif draws nothing, and anything else rattler-build writes there
  is kept in that log. (The build workers run with stderr on a file already.)
* gotcha 8: rattler-build holds the GIL; parallelise with ``multiprocessing.get_context("spawn")``,
  never with a fork-started pool. Nothing here starts processes.

Test environments see a ``__cuda`` virtual package when ``CONDA_OVERRIDE_CUDA`` is set (verified:
a package that depends on ``__cuda`` passes its tests with ``CONDA_OVERRIDE_CUDA=12.4`` on a machine
without a GPU, and fails to set up its test environment without it). ``rattler_env(cuda=...)`` sets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conda_distro.errors import ChannelError

if TYPE_CHECKING:
    from rattler_build import BuildResult, ToolConfiguration

SAFE_PATH = "/usr/bin:/bin"
SCRATCH_VAR = "CONDA_DISTRO_TEST_TMPDIR"
SHM = "/dev/shm"
SHM_MIN_FREE = 2 << 30  # 2 GiB
RAM_MIN_AVAILABLE = 8 << 30  # memory that must be available before a test environment goes to RAM
CUDA_OVERRIDE_VAR = "CONDA_OVERRIDE_CUDA"
RATTLER_CACHE_VAR = "RATTLER_CACHE_DIR"  # package cache: $RATTLER_CACHE_DIR/pkgs (default ~/.cache/rattler/cache)

# os.environ is process-wide: two threads entering rattler_env at once must not interleave their
# save/restore. rattler-build holds the GIL anyway, so threads never gain anything here.
_ENV_LOCK = threading.RLock()


def scratch_dir() -> str | None:
    """Where throwaway test environments go: ``$CONDA_DISTRO_TEST_TMPDIR`` if set, else /dev/shm when it
    is a RAM disk with room to spare (test environments are written and deleted once per test: on a
    RAM disk they cost a third less, and parallel test runs stop competing for the disk), else None
    (the system default)."""
    chosen = os.environ.get(SCRATCH_VAR)
    if chosen:
        return chosen
    try:
        st = os.statvfs(SHM)
    except OSError:
        return None
    return SHM if st.f_bavail * st.f_frsize >= SHM_MIN_FREE and os.access(SHM, os.W_OK) and ram_has_room() else None


def memory_available() -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def ram_has_room() -> bool:
    """Whether a RAM disk (/dev/shm, or the build sandbox's tmpfs /tmp) may take one more test environment:
    files there are memory, and a real PyTorch environment is 3-5 GB (two parallel builds with two jobs
    each filled 11 GB of it here, and the kernel killed a test). Unknown memory: yes."""
    avail = memory_available()
    return avail is None or avail >= RAM_MIN_AVAILABLE


@contextmanager
def rattler_env(*, cuda: str | None = None, path: str = SAFE_PATH,
                rattler_cache: str | os.PathLike[str] | None = None, tmpdir: str | None = None) -> Iterator[None]:
    """Run the body with ``PATH`` set to ``path`` (default ``/usr/bin:/bin``), then restore it.

    ``cuda``: ``None`` leaves ``CONDA_OVERRIDE_CUDA`` as it is; a version such as ``"12.4"`` makes
    test environments see ``__cuda`` of that version; ``""`` asks for no ``__cuda`` (conda's meaning
    of an empty override; not verified on a machine with a GPU).
    ``rattler_cache``: a private package cache (``RATTLER_CACHE_DIR``) for the body, e.g. while building
    packages whose filename may exist elsewhere with other content (the cache re-extracts a package
    whenever the sha256 differs, so two builders sharing one cache would thrash).
    ``tmpdir``: ``TMPDIR`` for the body (where rattler-build makes its throwaway test environments).
    Re-entrant; the previous values are restored on exit, also on error.
    """
    with _ENV_LOCK:
        saved = {k: os.environ.get(k) for k in ("PATH", CUDA_OVERRIDE_VAR, RATTLER_CACHE_VAR, "TMPDIR")}
        os.environ["PATH"] = path
        if tmpdir is not None:
            os.environ["TMPDIR"] = tmpdir
        if cuda is not None:
            os.environ[CUDA_OVERRIDE_VAR] = cuda
        if rattler_cache is not None:
            os.environ[RATTLER_CACHE_VAR] = str(assert_no_colon(rattler_cache, what="rattler cache"))
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


#: The whole environment recipes are rendered in (planning, lint and the build workers alike).
RENDER_ENV = {"PATH": SAFE_PATH, "LANG": "C.UTF-8"}


@contextmanager
def fixed_environment() -> Iterator[None]:
    """Run the body with ``os.environ`` replaced by exactly :data:`RENDER_ENV` (rattler-build reads the
    process environment, e.g. ``env.exists("CI")`` in a recipe), then restore the caller's. Python's temp
    folder is settled first, from the caller's ``TMPDIR``: a temp folder made in the body goes where the
    caller's would (not to ``/tmp`` because the body sees no ``TMPDIR``)."""
    import tempfile

    tempfile.gettempdir()  # (cached by the tempfile module for the process)
    with _ENV_LOCK:
        saved = dict(os.environ)
        try:
            if saved != RENDER_ENV:  # (a render worker's environment is it already: nothing to swap)
                os.environ.clear()
                os.environ.update(RENDER_ENV)
            yield
        finally:
            if dict(os.environ) != saved:
                os.environ.clear()
                os.environ.update(saved)


def assert_no_colon(path: str | os.PathLike[str], *, what: str = "output folder") -> Path:
    """The absolute ``path``, or :class:`ChannelError` if it contains ``:`` (engine-notes gotcha 7)."""
    p = Path(path).expanduser().absolute()
    if ":" in str(p):
        raise ChannelError(
            f"the {what} path contains ':', which rattler-build cannot use (it splits PATH on ':')",
            path=p,
            hint="choose a folder whose absolute path has no ':' in it",
        )
    return p


def channel_url(path: str | os.PathLike[str]) -> str:
    """``file://`` URL of a local channel folder (checked for ``:``)."""
    return assert_no_colon(path, what="channel").as_uri()


def native_tool_config(**kwargs: Any) -> ToolConfiguration:
    """``ToolConfiguration`` with tests run natively (the default strategy ``skip`` never runs them)."""
    from rattler_build import ToolConfiguration

    kwargs.setdefault("test_strategy", "native")
    return ToolConfiguration(**kwargs)


def _check_channels(channels: Sequence[str | os.PathLike[str]]) -> list[str]:
    if not channels:
        raise ChannelError("no channels given to rattler-build",
                           hint="pass the channels explicitly; the default (conda-forge) is unreachable offline")
    out = []
    for ch in channels:
        ch = str(ch)
        if "://" not in ch and ("/" in ch or ch.startswith(".")):
            ch = channel_url(ch)
        elif ch.startswith("file://"):
            assert_no_colon(ch[len("file://"):], what="channel")
        out.append(ch)
    return out


STDERR_LOG = "rattler-build-stderr.log"  # in a build's output folder


@contextmanager
def stderr_to(log: str | os.PathLike[str]) -> Iterator[None]:
    """File descriptor 2 appends to ``log`` for the duration (process-wide, so under the lock)."""
    path = Path(log)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _ENV_LOCK, open(path, "ab") as fh:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(fh.fileno(), 2)
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def run_build(variant: Any, *, output_dir: str | os.PathLike[str], channels: Sequence[str | os.PathLike[str]],
              tool_config: Any = None, cuda: str | None = None, rattler_cache: str | os.PathLike[str] | None = None,
              log: str | os.PathLike[str] | None = None, **kwargs: Any) -> BuildResult:
    """``RenderedVariant.run_build`` inside :func:`rattler_env`, with tests on and explicit channels.

    ``channels`` are URLs or local folders (turned into ``file://`` URLs). ``cuda`` and
    ``rattler_cache`` as in :func:`rattler_env`. rattler-build's own terminal output goes to ``log``
    (default: ``rattler-build-stderr.log`` in the output folder), never to the terminal. Returns
    rattler-build's ``BuildResult``; a failing build or test raises its ``BuildError`` as usual.
    """
    out = assert_no_colon(output_dir)
    chans = _check_channels(channels)
    with stderr_to(log or Path(out) / STDERR_LOG), rattler_env(cuda=cuda, rattler_cache=rattler_cache):
        return variant.run_build(tool_config=tool_config or native_tool_config(), output_dir=str(out),
                                 channels=chans, **kwargs)


def run_tests(package_file: str | os.PathLike[str], *, channels: Sequence[str], cuda: str | None = None,
              rattler_cache: str | os.PathLike[str] | None = None, log: str | os.PathLike[str] | None = None,
              **kwargs: Any) -> list:
    """``Package.from_file(f).run_tests(channel=...)`` inside :func:`rattler_env` (the
    ``conda-build --test`` equivalent). Put a channel holding only the wanted ``pytorch`` first to
    force a release (strict channel priority). rattler-build's terminal output goes to ``log`` (default:
    ``rattler-build-stderr.log`` beside the package file). Returns ``TestResult``s; does not raise on
    failure."""
    from rattler_build import Package

    chans = _check_channels(channels)
    pkg = Package.from_file(str(package_file))
    with stderr_to(log or Path(package_file).parent / STDERR_LOG), rattler_env(cuda=cuda, rattler_cache=rattler_cache):
        return pkg.run_tests(channel=chans, **kwargs)


def _run_coro(coro: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    result: dict[str, Any] = {}

    def target() -> None:  # called from inside a running loop (e.g. an async test): use a thread
        try:
            result["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            result["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in result:
        raise result["error"]
    return result.get("value")


INDEXER_TEMP = ".tmp"  # where rattler's indexer writes a repodata.json before renaming it into place


def index_channel(channel_dir: str | os.PathLike[str], *, subdirs: Sequence[str] = ("linux-64",),
                  force: bool = True) -> None:
    """(Re)index a local channel with rattler's indexer: plain ``repodata.json`` only (no ``.zst``,
    no shards; stale ones from an earlier index are removed, engine-notes gotcha 4). ``noarch/`` and
    the given ``subdirs`` are created if missing."""
    from rattler.index import index_fs

    root = assert_no_colon(channel_dir, what="channel")
    for sub in ("noarch", *subdirs):
        d = root / sub
        d.mkdir(parents=True, exist_ok=True)
        for stale in ("repodata.json.zst", "repodata_shards.msgpack.zst"):
            (d / stale).unlink(missing_ok=True)
        shutil.rmtree(d / "shards", ignore_errors=True)
    try:
        _run_coro(index_fs(root, force=force, write_zst=False, write_shards=False))
    except Exception as exc:  # noqa: BLE001 - rattler raises several types (a panic in a task among them)
        _quiesce()
        bad = _unreadable_package(root, ("noarch", *subdirs))
        raise ChannelError(f"indexing {root} failed: {str(exc).splitlines()[0][:200]}"
                           + (f"; {bad.relative_to(root)} is not a readable package" if bad else ""),
                           path=bad or root, hint="move the unreadable package file away (it was left by an "
                           "interrupted copy, or damaged) and run the command again") from None
    _quiesce()
    with contextlib.suppress(OSError):
        (root / INDEXER_TEMP).rmdir()  # (the indexer leaves it behind, empty)


def _unreadable_package(root: Path, subdirs: Sequence[str]) -> Path | None:
    """The first package file under ``root``'s ``subdirs`` that rattler-build cannot open (what an index
    that failed choked on), or None."""
    from rattler_build import Package

    for sub in subdirs:
        for p in sorted((root / sub).glob("*.conda")) + sorted((root / sub).glob("*.tar.bz2")):
            try:
                Package.from_file(str(p))
            except Exception:  # noqa: BLE001 - any refusal is the answer
                return p
    return None


def _quiesce(limit: float = 2.0) -> None:
    """Wait (at most ``limit`` seconds) until every other thread of this process is asleep. rattler's
    ``index_fs`` returns while its runtime's threads still finish their callbacks into Python; an
    interpreter that exits then (a command whose last act is an index: the fan-in's merge) aborted
    (``PyGILState_Release``) or crashed in most runs on this machine. Two quiet looks 10 ms apart
    ended it. Linux only (``/proc``); elsewhere nothing is waited for."""
    me = str(os.getpid())
    deadline, quiet = time.monotonic() + limit, 0
    while quiet < 2 and time.monotonic() < deadline:
        try:
            tasks = [t for t in os.listdir("/proc/self/task") if t != me]
        except OSError:
            return
        busy = False
        for t in tasks:
            try:
                state = Path(f"/proc/self/task/{t}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            busy = busy or state not in ("S", "I")
        quiet = 0 if busy else quiet + 1
        time.sleep(0.01)
