"""A folder served over HTTP on loopback, in a process of its own, for tests of remote channels.

``python tests/support/channel_server.py FOLDER --log FILE --lifetime SECONDS`` prints its port, then serves
``FOLDER`` read-only (GET and HEAD) on 127.0.0.1 only, appending ``METHOD PATH STATUS`` per request to
``FILE``. It stops by itself after ``--lifetime`` seconds or when its parent process dies. Use
:class:`ChannelServer` from tests.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def serve(folder: str, log: str, lifetime: float) -> None:
    lock = threading.Lock()

    class Handler(SimpleHTTPRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            with lock, open(log, "a", encoding="utf-8") as fh:
                fh.write(f"{self.command} {self.path} {code}\n")

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            return None

    srv = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=folder))
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    parent = os.getppid()
    end = time.monotonic() + lifetime

    def watch() -> None:
        while time.monotonic() < end and os.getppid() == parent:
            time.sleep(0.5)
        srv.shutdown()

    threading.Thread(target=watch, daemon=True).start()
    srv.serve_forever(poll_interval=0.2)


class ChannelServer:
    """The server in a child process: ``url`` is its base URL, ``requests()`` what it was asked."""

    def __init__(self, folder: Path, log: Path, lifetime: float = 1800) -> None:
        self.log = log
        log.write_text("")
        self.proc = subprocess.Popen([sys.executable, __file__, str(folder), "--log", str(log),
                                      "--lifetime", str(lifetime)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[str]:
        return self.log.read_text().splitlines()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=60)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--log", required=True)
    ap.add_argument("--lifetime", type=float, default=600)
    a = ap.parse_args()
    serve(a.folder, a.log, a.lifetime)
