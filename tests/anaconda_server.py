"""A fake anaconda.org REST API for tests, run in its own process (engine-notes gotcha 8).

Implements what anaconda-client's ``Binstar`` requests for promotion and retirement:

* ``HEAD /``                                             check_server
* ``GET  /channels/{owner}``                             list_channels  -> {label: {is_locked, num_files}}
* ``GET  /channels/{owner}/{label}``                     show_channel   -> {is_locked, files: [...]}, 404 if empty
* ``POST /channels/{owner}/{label}``  {package, version, basename}   add_channel (201)
* ``DELETE /channels/{owner}/{label}`` same body                     remove_channel (201)
* ``GET  /package/{owner}/{pkg}``                        package        -> {name, owner, versions, files: [...]}
* ``POST /copy/package/{owner}/{pkg}/{ver}/{basename}``  copy, body {to_owner, from_channel, to_channel}
  -> 200 with the list of copied file dicts; 409 when the destination already has the file in that label
  (or another file under that name); 404 when the source is not in ``from_channel``.

Each file dict has ``basename`` (``<subdir>/<filename>``), ``full_name``, ``version``, ``labels``,
``sha256``, ``size`` and ``attrs`` (``name``, ``subdir``, ``build``, ``build_number``, ``depends``).

Auth: ``Authorization: token <TOKEN>``. A wrong token gets 401 on every API path (the error body echoes
it, like a careless server might, so tests can prove the client side masks it); no token gets 401 on
writes. Test-control paths under ``/_fake/`` need no token: ``POST /_fake/seed`` {owner, files},
``GET /_fake/requests`` (every request seen: method, path, auth = "none"|"valid"|"invalid", body —
never the token), ``GET /_fake/state``, ``POST /_fake/shutdown``.

Bounded lifetime: the server stops after ``--lifetime`` seconds, when its parent process dies, or on
``/_fake/shutdown``. Loopback only. Use :class:`FakeAnaconda` from tests; it prints its port on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

# ---------------------------------------------------------------------------------------------
# the server (runs in the child process)


class State:
    def __init__(self, token: str) -> None:
        self.token = token
        self.lock = threading.Lock()
        self.files: dict[tuple[str, str], dict[str, Any]] = {}  # (owner, basename) -> file dict
        self.requests: list[dict[str, Any]] = []

    def add(self, owner: str, doc: dict[str, Any], labels: list[str]) -> dict[str, Any]:
        attrs = dict(doc.get("attrs") or {})
        name = doc.get("name") or attrs.get("name")
        f = {
            "basename": doc["basename"], "version": doc["version"], "sha256": doc["sha256"],
            "size": doc.get("size", 0), "labels": sorted(set(labels)), "owner": owner,
            "full_name": f"{owner}/{name}/{doc['version']}/{doc['basename']}",
            "attrs": {**attrs, "name": name}, "distribution_type": "conda",
        }
        self.files[(owner, doc["basename"])] = f
        return f

    def of(self, owner: str, label: str | None = None, package: str | None = None) -> list[dict[str, Any]]:
        return [f for (o, _), f in sorted(self.files.items()) if o == owner
                and (label is None or label in f["labels"]) and (package is None or f["attrs"]["name"] == package)]


class Handler(BaseHTTPRequestHandler):
    state: State  # set on the class by serve()
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    # -- plumbing -------------------------------------------------------------------------------

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return {"_raw": raw.decode("latin-1")}

    def _send(self, status: int, doc: Any = None) -> None:
        data = b"" if doc is None else json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _auth(self) -> str:
        header = self.headers.get("Authorization")
        if not header:
            return "none"
        return "valid" if header == f"token {self.state.token}" else "invalid"

    def _handle(self) -> None:
        path = unquote(urlsplit(self.path).path)
        body = self._body()
        if path.startswith("/_fake/"):
            return self._control(path, body)
        auth = self._auth()
        with self.state.lock:
            self.state.requests.append({"method": self.command, "path": path, "auth": auth, "body": body})
        if auth == "invalid":
            supplied = (self.headers.get("Authorization") or "").removeprefix("token ")
            return self._send(401, {"error": f"invalid token '{supplied}'"})
        if auth == "none" and self.command not in ("GET", "HEAD"):
            return self._send(401, {"error": "authentication required"})
        with self.state.lock:
            status, doc = route(self.state, self.command, path.strip("/").split("/"), body or {})
        self._send(status, doc)

    def _control(self, path: str, body: Any) -> None:
        st = self.state
        if path == "/_fake/seed":
            with st.lock:
                for doc in body["files"]:
                    st.add(body["owner"], doc, doc.get("labels") or [body.get("label", "main")])
            return self._send(201, {"ok": True})
        if path == "/_fake/requests":
            with st.lock:
                return self._send(200, list(st.requests))
        if path == "/_fake/state":
            with st.lock:
                return self._send(200, [f for _, f in sorted(st.files.items())])
        if path == "/_fake/shutdown":
            self._send(200, {"ok": True})
            threading.Thread(target=self.server.shutdown, daemon=True).start()
            return None
        return self._send(404, {"error": "no such control path"})

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = do_HEAD = _handle


def route(st: State, method: str, parts: list[str], body: dict[str, Any]) -> tuple[int, Any]:
    """The API proper. ``parts`` is the path split on '/' (basename may hold one more '/')."""
    if parts == [""] and method == "HEAD":
        return 200, None
    if parts[0] == "channels" and len(parts) == 2 and method == "GET":
        labels: dict[str, int] = {}
        for f in st.of(parts[1]):
            for label in f["labels"]:
                labels[label] = labels.get(label, 0) + 1
        return 200, {k: {"is_locked": False, "num_files": n} for k, n in sorted(labels.items())}
    if parts[0] == "channels" and len(parts) == 3:
        return _label(st, method, parts[1], parts[2], body)
    if parts[0] == "package" and len(parts) == 3 and method == "GET":
        files = st.of(parts[1], package=parts[2])
        if not files:
            return 404, {"error": f"package {parts[1]}/{parts[2]} not found"}
        return 200, {"name": parts[2], "owner": parts[1], "files": files,
                     "versions": sorted({f["version"] for f in files})}
    if parts[0] == "copy" and parts[1:2] == ["package"] and len(parts) >= 6 and method == "POST":
        return _copy(st, parts[2], parts[3], parts[4], "/".join(parts[5:]), body)
    return 404, {"error": f"no route for {method} /{'/'.join(parts)}"}


def _label(st: State, method: str, owner: str, label: str, body: dict[str, Any]) -> tuple[int, Any]:
    if method == "GET":
        files = st.of(owner, label)
        if not files:
            return 404, {"error": f"label {label} of {owner} not found"}
        return 200, {"is_locked": False, "files": files}
    targets = [f for f in st.of(owner) if (not body.get("package") or f["attrs"]["name"] == body["package"])
               and (not body.get("version") or f["version"] == body["version"])
               and (not body.get("basename") or f["basename"] == body["basename"])]
    if not targets:
        return 404, {"error": "no matching files"}
    for f in targets:
        labels = set(f["labels"])
        labels = labels | {label} if method == "POST" else labels - {label}
        f["labels"] = sorted(labels)
    return 201, None


def _copy(st: State, owner: str, pkg: str, ver: str, basename: str, body: dict[str, Any]) -> tuple[int, Any]:
    src = st.files.get((owner, basename))
    if (src is None or src["attrs"]["name"] != pkg or src["version"] != ver
            or body.get("from_channel", "main") not in src["labels"]):
        return 404, {"error": f"{owner}/{pkg}/{ver}/{basename} not found in label {body.get('from_channel')}"}
    to_owner, to_label = body.get("to_owner") or owner, body.get("to_channel", "main")
    dest = st.files.get((to_owner, basename))
    if dest is not None and (to_label in dest["labels"] or dest["sha256"] != src["sha256"] or to_owner != owner):
        return 409, {"error": f"file {basename} already exists for {to_owner}"}
    if to_owner == owner:
        src["labels"] = sorted(set(src["labels"]) | {to_label})
        return 200, [src]
    return 200, [st.add(to_owner, {**src, "name": pkg}, [to_label])]


def serve(token: str, lifetime: float) -> None:
    parent = os.getppid()
    Handler.state = State(token)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    deadline = time.monotonic() + lifetime

    def watchdog() -> None:
        while time.monotonic() < deadline and os.getppid() == parent:
            time.sleep(0.2)
        server.shutdown()

    threading.Thread(target=watchdog, daemon=True).start()
    sys.stdout.write(f"PORT {server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever(poll_interval=0.1)
    server.server_close()


# ---------------------------------------------------------------------------------------------
# the test-side handle (runs in the test process)


class FakeAnaconda:
    """Start the fake server in a child process; ``url`` is its API base URL."""

    def __init__(self, token: str, lifetime: float = 120.0) -> None:
        self.token = token
        self.proc = subprocess.Popen([sys.executable, __file__, "--token", token, "--lifetime", str(lifetime)],
                                     stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 20)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"fake anaconda server did not start (got {line!r})")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def _call(self, method: str, path: str, doc: Any = None) -> Any:
        data = None if doc is None else json.dumps(doc).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 - loopback test server
            return json.loads(resp.read() or b"null")

    def seed(self, owner: str, files: list[dict[str, Any]], label: str = "main") -> None:
        self._call("POST", "/_fake/seed", {"owner": owner, "label": label, "files": files})

    def requests(self) -> list[dict[str, Any]]:
        return self._call("GET", "/_fake/requests")

    def files(self) -> list[dict[str, Any]]:
        return self._call("GET", "/_fake/state")

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self._call("POST", "/_fake/shutdown")
            except Exception:  # noqa: BLE001 - fall through to terminate
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self) -> "FakeAnaconda":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--token", required=True)
    ap.add_argument("--lifetime", type=float, default=120.0)
    args = ap.parse_args()
    serve(args.token, args.lifetime)
