"""Nothing the tool reads or waits for can stall a command without bound.

Each test here would hang (until the suite's per-test timeout) without its fix, and finishes in
seconds with it: a FIFO in a file's place is refused without being read (it is opened non-blocking),
a lock held by a stuck process is waited for at most the store's limit, then named in the error, and a
tool probe that never answers is given up after its timeout.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from pathlib import Path

import pytest

QUICK = 20.0  # seconds: every call below must return well within this, even on a loaded machine


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def test_a_file_url_source_that_is_a_fifo_is_refused_not_read(tmp_path):
    from conda_distro.engine.sources import SourceFetchError, UrlSource, fetch_source

    fifo = _fifo(tmp_path / "src.tar.gz")
    start = time.monotonic()
    with pytest.raises(SourceFetchError, match="FIFO"):
        fetch_source(UrlSource(url=fifo.as_uri(), sha256="0" * 64, line=1), tmp_path / "cache")
    assert time.monotonic() - start < QUICK
    assert not list((tmp_path / "cache").glob(".part-*"))  # nothing left behind


def test_a_mirror_file_url_that_is_a_fifo_fails_as_a_mirror_error(tmp_path):
    from conda_distro.engine.mirror import MirrorError, MirrorStore
    from conda_distro.engine.needs import NeededRecord

    fifo = _fifo(tmp_path / "ch" / "noarch" / "a-1-0.conda")
    rec = NeededRecord(url=fifo.as_uri(), file_name=fifo.name, subdir="noarch", sha256="1" * 64)
    start = time.monotonic()
    with pytest.raises(MirrorError, match="FIFO"):
        MirrorStore(tmp_path / "mirror").fetch(rec)
    assert time.monotonic() - start < QUICK


def test_a_fifo_in_place_of_the_wanted_list_is_ignored_not_read(tmp_path):
    from conda_distro.engine.mirror import MirrorStore

    store = MirrorStore(tmp_path / "mirror")
    store.want("metrickit", ["pip"])
    path = tmp_path / "mirror" / "wanted" / "metrickit.json"
    path.unlink()
    _fifo(path)
    start = time.monotonic()
    assert store.wanted("metrickit") == []
    store.want("metrickit", ["pip"])  # replaces the FIFO with the list (atomic rename)
    assert time.monotonic() - start < QUICK
    assert store.wanted("metrickit") == ["pip"]


def test_a_stuck_download_lock_is_waited_for_a_bounded_time_then_named(tmp_path):
    from conda_distro.config import Limits
    from conda_distro.engine.mirror import LOCK, LOCK_TIMEOUT, MirrorError, MirrorStore
    from conda_distro.engine.needs import NeededRecord

    assert Limits().build_timeout == LOCK_TIMEOUT  # generous by default: the build limit
    src = tmp_path / "ch" / "noarch" / "a-1-0.conda"
    src.parent.mkdir(parents=True)
    src.write_bytes(b"package bytes")
    key = hashlib.sha256(b"package bytes").hexdigest()
    rec = NeededRecord(url=src.as_uri(), file_name=src.name, subdir="noarch", sha256=key)
    store = MirrorStore(tmp_path / "mirror", lock_timeout=0.5)
    lock = store.pkgs / key / LOCK
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a stuck holder (another open file: conflicts within this process too)
        start = time.monotonic()
        with pytest.raises(MirrorError, match=f"still holds {lock}"):
            store.fetch(rec)
        assert time.monotonic() - start < QUICK
    finally:
        os.close(fd)
    assert store.fetch(rec).read_bytes() == b"package bytes"  # released: fetched as usual


def test_a_tool_probe_that_never_answers_is_given_up(tmp_path):
    from conda_distro.sandbox.upstream import probe_output

    script = tmp_path / "hangs"
    script.write_text("#!/bin/sh\nexec sleep 600\n")
    script.chmod(0o755)
    start = time.monotonic()
    assert probe_output([str(script)], timeout=0.5) == ""
    assert time.monotonic() - start < QUICK
    echo = tmp_path / "answers"
    echo.write_text("#!/bin/sh\necho 12.1.0\n")
    echo.chmod(0o755)
    assert probe_output([str(echo)], timeout=30) == "12.1.0\n"


def test_hashing_a_package_file_that_is_a_fifo_is_refused_not_read(tmp_path):
    from conda_distro.channels.local import sha256_of
    from conda_distro.errors import ChannelError

    fifo = _fifo(tmp_path / "noarch" / "a-1-0.conda")
    start = time.monotonic()
    with pytest.raises(ChannelError, match="FIFO"):
        sha256_of(fifo)
    assert time.monotonic() - start < QUICK


def test_copying_a_package_file_that_is_a_fifo_is_refused_not_read(tmp_path):
    from conda_distro.channels.local import _copy_hashed
    from conda_distro.errors import ChannelError

    fifo = _fifo(tmp_path / "staging" / "noarch" / "a-1-0.conda")
    start = time.monotonic()
    with pytest.raises(ChannelError, match="FIFO"):
        _copy_hashed(fifo, tmp_path / "a-1-0.conda.part")
    assert time.monotonic() - start < QUICK
    assert not (tmp_path / "a-1-0.conda.part").exists()


def test_a_fifo_in_place_of_a_snapshot_index_gives_no_license_instead_of_hanging(tmp_path):
    from conda_distro.channels.base import ChannelFile
    from conda_distro.enduser.take import _license_of

    _fifo(tmp_path / "noarch" / "repodata.json")
    f = ChannelFile(subdir="noarch", filename="a-1-0.conda", name="a", version="1", build="0", build_number=0,
                    sha256="0" * 64)
    start = time.monotonic()
    assert _license_of(tmp_path, f) is None
    assert time.monotonic() - start < QUICK
