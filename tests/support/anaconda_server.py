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

Upload (the ``Binstar.upload`` sequence of ``anaconda upload``):

* ``GET  /user/{owner}``                                 -> {login, user_type}
* ``GET  /dist/{owner}/{pkg}/{ver}/{basename}``          the file dict, 404 when new
* ``GET``/``POST /package/{owner}/{pkg}``                 package / add_package (200)
* ``GET``/``POST /release/{owner}/{pkg}/{ver}``           release / add_release (200)
* ``POST /stage/{owner}/{pkg}/{ver}/{basename}``  {distribution_type, channels, sha256, attrs, dependencies}
  -> {post_url, form_data, dist_id}; 404 without package/release, 409 when the owner has the file already
* ``POST {post_url}`` (``/_fake/s3/{dist_id}``, no token, like S3): multipart form_data + Content-Length +
  Content-MD5 + ``file``; 201, or 400 with an S3-like XML ``InvalidDigest`` when the MD5 is wrong
* ``POST /commit/{owner}/{pkg}/{ver}/{basename}`` {dist_id} -> the new file dict (in the staged labels,
  sha256 and size computed from the bytes received); 400 if nothing was received or the sha256 differs

Each file dict has ``basename`` (``<subdir>/<filename>``), ``full_name``, ``version``, ``labels``,
``sha256``, ``size`` and ``attrs`` (``name``, ``subdir``, ``build``, ``build_number``, ``depends``).

Download (``Binstar.download``, read by ``verify-channel``):

* ``GET  /download/{owner}/{pkg}/{ver}/{basename}``     302 to ``/_fake/blob/{owner}/{basename}`` (no token,
  like S3), which serves the bytes; 404 when the file, or its bytes, are unknown. Bytes come from an
  upload, or from ``content_b64`` in a seeded file dict (they are served as given, whatever the sha256 says).

Auth: ``Authorization: token <TOKEN>``. A wrong token gets 401 on every API path (the error body echoes
it, like a careless server might, so tests can prove the client side masks it); no token gets 401 on
writes. Test-control paths under ``/_fake/`` need no token: ``POST /_fake/seed`` {owner, files},
``GET /_fake/requests`` (every request seen: method, path, auth = "none"|"valid"|"invalid", body —
never the token), ``GET /_fake/state``, ``POST /_fake/shutdown``, and ``POST /_fake/fail`` {status}: from
then on every API path answers ``status`` (e.g. 404, 500; 0 turns it off) with a body that echoes the
Authorization header it got, as a careless server might.

Bounded lifetime: the server stops after ``--lifetime`` seconds, when its parent process dies, or on
``/_fake/shutdown``. Loopback only. Use :class:`FakeAnaconda` from tests; it prints its port on stdout.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import email.policy
import hashlib
import json
import os
import select
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from email.parser import BytesParser
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
        self.base_url = ""
        self.packages: set[tuple[str, str]] = set()  # (owner, name) created by add_package
        self.releases: set[tuple[str, str, str]] = set()  # (owner, name, version) created by add_release
        self.staged: dict[str, dict[str, Any]] = {}  # dist_id -> stage request (+ "sha256"/"size" once sent)
        self.blobs: dict[tuple[str, str], bytes] = {}  # (owner, basename) -> the file's bytes
        self.fail_status = 0  # answer every API path with this status (0: behave)
        self.locked: set[tuple[str, str]] = set()  # (owner, label) locked by POST /channels/OWNER/LABEL/lock

    def has_package(self, owner: str, name: str) -> bool:
        return (owner, name) in self.packages or bool(self.of(owner, package=name))

    def has_release(self, owner: str, name: str, version: str) -> bool:
        return (owner, name, version) in self.releases or any(
            f["version"] == version for f in self.of(owner, package=name))

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
        if doc.get("content_b64") is not None:
            self.blobs[(owner, doc["basename"])] = base64.b64decode(doc["content_b64"])
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

    def _raw(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _body(self, raw: bytes) -> Any:
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return {"_raw": raw.decode("latin-1")}

    def _send(self, status: int, doc: Any = None) -> None:
        data = b"" if doc is None else json.dumps(doc).encode()
        self.send_response(status)
        if status == 302:
            self.send_header("Location", doc["location"])
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
        raw = self._raw()
        if path.startswith("/_fake/s3/"):
            return self._s3_upload(path.removeprefix("/_fake/s3/"), raw)
        body = self._body(raw)
        if path.startswith("/_fake/blob/"):
            return self._blob(path.removeprefix("/_fake/blob/"))
        if path.startswith("/_fake/"):
            return self._control(path, body)
        auth = self._auth()
        with self.state.lock:
            self.state.requests.append({"method": self.command, "path": path, "auth": auth, "body": body})
        if self.state.fail_status:
            return self._send(self.state.fail_status, {
                "error": f"failing on purpose; you sent {self.headers.get('Authorization')!r}"})
        if auth == "invalid":
            supplied = (self.headers.get("Authorization") or "").removeprefix("token ")
            return self._send(401, {"error": f"invalid token '{supplied}'"})
        if auth == "none" and self.command not in ("GET", "HEAD"):
            return self._send(401, {"error": "authentication required"})
        with self.state.lock:
            status, doc = route(self.state, self.command, path.strip("/").split("/"), body or {})
        self._send(status, doc)

    def _s3_upload(self, dist_id: str, raw: bytes) -> None:
        """The storage side of an upload: a multipart form, no token (the form data authorises it)."""
        st = self.state
        parsed = BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + (self.headers.get("Content-Type") or "").encode() + b"\r\n\r\n" + raw)
        fields = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                  for part in (parsed.iter_parts() if parsed.is_multipart() else ())}
        with st.lock:
            st.requests.append({"method": self.command, "path": f"/_fake/s3/{dist_id}", "auth": self._auth(),
                                "body": {"fields": sorted(k for k in fields if k)}})
            staged = st.staged.get(dist_id)
            data = fields.get("file")
            if self.command != "POST" or staged is None or data is None:
                return self._send(400, {"error": "unknown upload or no file part"})
            if any((fields.get(k) or b"").decode() != v for k, v in staged["form_data"].items()):
                return self._send(403, {"error": "form data does not match the staged upload"})
            md5 = base64.b64encode(hashlib.md5(data).digest()).decode()  # noqa: S324 - what S3 checks
            if (fields.get("Content-MD5") or b"").decode() != md5:
                xml = b"<Error><Code>InvalidDigest</Code><Message>bad Content-MD5</Message></Error>"
                self.send_response(400)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(xml)))
                self.end_headers()
                self.wfile.write(xml)
                return None
            staged["sha256"], staged["size"], staged["data"] = hashlib.sha256(data).hexdigest(), len(data), data
        return self._send(201, None)

    def _blob(self, key: str) -> None:
        owner, _, basename = key.partition("/")
        with self.state.lock:
            data = self.state.blobs.get((owner, basename))
            self.state.requests.append({"method": self.command, "path": f"/_fake/blob/{key}", "auth": self._auth(),
                                        "body": None})
        if data is None:
            return self._send(404, {"error": "no such blob"})
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return None

    def _control(self, path: str, body: Any) -> None:
        st = self.state
        if path == "/_fake/fail":
            with st.lock:
                st.fail_status = int(body.get("status") or 0)
            return self._send(200, {"ok": True})
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
        return 200, {k: {"is_locked": (parts[1], k) in st.locked, "num_files": n} for k, n in sorted(labels.items())}
    if parts[0] == "channels" and len(parts) == 3:
        if method != "GET" and (parts[1], parts[2]) in st.locked:
            return 403, {"error": f"label {parts[2]} of {parts[1]} is locked"}
        return _label(st, method, parts[1], parts[2], body)
    if parts[0] == "channels" and len(parts) == 5 and parts[3] == "copy" and method == "POST":
        # anaconda-client's copy_channel (`anaconda label --copy FROM TO`): every file of FROM also gets TO
        owner, src, dest = parts[1], parts[2], parts[4]
        if (owner, dest) in st.locked:
            return 403, {"error": f"label {dest} of {owner} is locked"}
        files = st.of(owner, src)
        if not files:
            return 404, {"error": f"label {src} of {owner} not found"}
        for f in files:
            f["labels"] = sorted(set(f["labels"]) | {dest})
        return 201, None
    if parts[0] == "channels" and len(parts) == 4 and parts[3] in ("lock", "unlock") and method == "POST":
        key = (parts[1], parts[2])
        if parts[3] == "lock":
            st.locked.add(key)
        else:
            st.locked.discard(key)
        return 201, None
    if parts[0] == "package" and len(parts) == 3 and method == "GET":
        files = st.of(parts[1], package=parts[2])
        if not st.has_package(parts[1], parts[2]):
            return 404, {"error": f"package {parts[1]}/{parts[2]} not found"}
        return 200, {"name": parts[2], "owner": parts[1], "files": files,
                     "versions": sorted({f["version"] for f in files})}
    if parts[0] in ("user", "package", "release", "dist", "stage", "commit"):
        return _upload_route(st, method, parts, body)
    if parts[0] == "download" and len(parts) >= 5 and method == "GET":
        owner, basename = parts[1], "/".join(parts[4:])
        f = st.files.get((owner, basename))
        if f is None or f["attrs"]["name"] != parts[2] or f["version"] != parts[3] or (owner, basename) not in st.blobs:
            return 404, {"error": f"file {'/'.join(parts[1:])} not found"}
        return 302, {"location": f"{st.base_url}/_fake/blob/{owner}/{basename}"}
    if parts[0] == "copy" and parts[1:2] == ["package"] and len(parts) >= 6 and method == "POST":
        return _copy(st, parts[2], parts[3], parts[4], "/".join(parts[5:]), body)
    return 404, {"error": f"no route for {method} /{'/'.join(parts)}"}


def _upload_route(st: State, method: str, parts: list[str], body: dict[str, Any]) -> tuple[int, Any]:
    kind, owner, rest = parts[0], parts[1] if len(parts) > 1 else "", parts[2:]
    if kind == "user" and len(parts) == 2 and method == "GET":
        return 200, {"login": owner, "user_type": "user"}
    if kind == "package" and len(rest) == 1 and method == "POST":
        if st.has_package(owner, rest[0]):
            return 409, {"error": f"package {owner}/{rest[0]} already exists"}
        st.packages.add((owner, rest[0]))
        return 200, {"name": rest[0], "owner": owner, "public_attrs": body.get("public_attrs")}
    if kind == "release" and len(rest) == 2:
        name, version = rest
        if not st.has_package(owner, name):
            return 404, {"error": f"package {owner}/{name} not found"}
        if method == "GET":
            if not st.has_release(owner, name, version):
                return 404, {"error": f"release {owner}/{name}/{version} not found"}
            return 200, {"version": version, "distributions": [
                f for f in st.of(owner, package=name) if f["version"] == version]}
        if method == "POST":
            if st.has_release(owner, name, version):
                return 409, {"error": f"release {owner}/{name}/{version} already exists"}
            st.releases.add((owner, name, version))
            return 200, {"version": version}
    if kind in ("dist", "stage", "commit") and len(rest) >= 3:
        name, version, basename = rest[0], rest[1], "/".join(rest[2:])
        existing = st.files.get((owner, basename))
        if kind == "dist" and method == "GET":
            if existing is None or existing["attrs"]["name"] != name or existing["version"] != version:
                return 404, {"error": f"file {owner}/{name}/{version}/{basename} not found"}
            return 200, existing
        if kind == "stage" and method == "POST":
            if not st.has_release(owner, name, version):
                return 404, {"error": f"release {owner}/{name}/{version} not found"}
            if existing is not None:
                return 409, {"error": f"Distribution already exists: {basename}"}
            dist_id = uuid.uuid4().hex
            form = {"key": f"{owner}/{dist_id}/{basename}", "policy": f"fake-policy-{dist_id}"}
            st.staged[dist_id] = {"owner": owner, "name": name, "version": version, "basename": basename,
                                  "request": body, "form_data": form}
            return 200, {"post_url": f"{st.base_url}/_fake/s3/{dist_id}", "form_data": dict(form),
                         "dist_id": dist_id}
        if kind == "commit" and method == "POST":
            staged = st.staged.get(str(body.get("dist_id")))
            if staged is None or (staged["owner"], staged["name"], staged["version"], staged["basename"]) != (
                    owner, name, version, basename):
                return 400, {"error": "no such staged upload"}
            if "sha256" not in staged:
                return 400, {"error": "the file was never uploaded"}
            request = staged["request"]
            if request.get("sha256") and request["sha256"] != staged["sha256"]:
                return 400, {"error": "the uploaded file does not match the staged sha256"}
            if existing is not None:
                return 409, {"error": f"Distribution already exists: {basename}"}
            del st.staged[body["dist_id"]]
            attrs = {**(request.get("attrs") or {}), "name": name}
            st.blobs[(owner, basename)] = staged["data"]
            return 200, st.add(owner, {"name": name, "version": version, "basename": basename,
                                       "sha256": staged["sha256"], "size": staged["size"], "attrs": attrs},
                               list(request.get("channels") or ["main"]))
    return 404, {"error": f"no route for {method} /{'/'.join(parts)}"}


def _label(st: State, method: str, owner: str, label: str, body: dict[str, Any]) -> tuple[int, Any]:
    if method == "GET":
        files = st.of(owner, label)
        if not files:
            return 404, {"error": f"label {label} of {owner} not found"}
        return 200, {"is_locked": (owner, label) in st.locked, "files": files}
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
    if (to_owner, to_label) in st.locked:
        return 403, {"error": f"label {to_label} of {to_owner} is locked"}
    dest = st.files.get((to_owner, basename))
    if dest is not None and (to_label in dest["labels"] or dest["sha256"] != src["sha256"] or to_owner != owner):
        return 409, {"error": f"file {basename} already exists for {to_owner}"}
    if to_owner == owner:
        src["labels"] = sorted(set(src["labels"]) | {to_label})
        return 200, [src]
    if (owner, basename) in st.blobs:
        st.blobs[(to_owner, basename)] = st.blobs[(owner, basename)]
    return 200, [st.add(to_owner, {**src, "name": pkg}, [to_label])]


def serve(token: str, lifetime: float) -> None:
    parent = os.getppid()
    Handler.state = State(token)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Handler.state.base_url = f"http://127.0.0.1:{server.server_address[1]}"
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

    def fail(self, status: int) -> None:
        """Answer every API path with HTTP ``status`` from now on (0: behave again)."""
        self._call("POST", "/_fake/fail", {"status": status})

    def requests(self) -> list[dict[str, Any]]:
        return self._call("GET", "/_fake/requests")

    def files(self) -> list[dict[str, Any]]:
        return self._call("GET", "/_fake/state")

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):  # fall through to terminate
                self._call("POST", "/_fake/shutdown")
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=60)
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self) -> FakeAnaconda:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--token", required=True)
    ap.add_argument("--lifetime", type=float, default=120.0)
    args = ap.parse_args()
    serve(args.token, args.lifetime)
