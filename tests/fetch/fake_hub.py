"""A model hub on 127.0.0.1 speaking the part of the Hugging Face and ModelScope HTTP APIs that
their clients use for a download, serving one small repository, with injectable faults."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from .faults import Fault, FaultPlan, send_body, send_status

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LFS_THRESHOLD = 1024
"""Files at least this large are served like LFS files: named by SHA-256, not git SHA-1."""


@dataclass
class Hub(FaultPlan):
    files: dict[str, bytes] = field(default_factory=dict)
    repo: str = "acme/tiny-model"
    token: str | None = None
    """When set, every request must carry `Authorization: Bearer <token>`."""
    gated: bool = False
    """Refuse as the Hugging Face Hub refuses a gated repository: 401 without a token, 403
    with one that does not grant access (`X-Error-Code: GatedRepo`)."""


def git_sha1(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content, usedforsecurity=False).hexdigest()


def etag(content: bytes) -> str:
    if len(content) >= LFS_THRESHOLD:
        return hashlib.sha256(content).hexdigest()
    return git_sha1(content)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_HEAD(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def _handle(self) -> None:
        hub = self.server.hub
        path = unquote(urlsplit(self.path).path)
        query = urlsplit(self.path).query
        fault = hub.receive(self)
        authorization = self.headers.get("Authorization")
        if hub.token is not None and authorization != f"Bearer {hub.token}":
            if hub.gated:
                status = 403 if authorization else 401
                refusal = {"error": f"Access to model {hub.repo} is restricted", "Code": status}
                return self._json(status, refusal, {"X-Error-Code": "GatedRepo"})
            return self._json(401, {"error": "Invalid credentials", "Code": 401})
        if fault is not None and fault.kind == "status":
            return send_status(self, fault)
        for pattern, route in _ROUTES:
            match = re.fullmatch(pattern, path)
            if match is not None:
                return route(self, hub, match, query, fault)
        return self._json(404, {"error": "Repository not found", "Code": 404})

    def _json(self, status: int, body: object, extra: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        if status == 404:
            self.send_header("X-Error-Code", "RepoNotFound")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _file(self, content: bytes, fault: Fault | None, headers: dict[str, str]) -> None:
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if match is not None:
            start = int(match.group(1))
        body = content[start:]
        self.send_response(206 if start else 200)
        for name, value in headers.items():
            self.send_header(name, value)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(content) - 1}/{len(content)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if self.command != "HEAD":
            send_body(self, body, fault)


def _repo(hub: Hub, match: re.Match[str]) -> bool:
    return match.group("repo") == hub.repo


def _hf_revision(h: _Handler, hub: Hub, m: re.Match[str], q: str, f: Fault | None) -> None:
    if not _repo(hub, m):
        return h._json(404, {"error": "Repository not found"})
    siblings = [{"rfilename": name} for name in hub.files]
    h._json(200, {"id": hub.repo, "sha": COMMIT, "siblings": siblings, "private": False})


def _hf_tree(h: _Handler, hub: Hub, m: re.Match[str], q: str, f: Fault | None) -> None:
    if not _repo(hub, m):
        return h._json(404, {"error": "Repository not found"})
    entries = []
    for name, content in hub.files.items():
        entry: dict[str, object] = {
            "type": "file",
            "path": name,
            "size": len(content),
            "oid": git_sha1(content),
        }
        if len(content) >= LFS_THRESHOLD:
            entry["lfs"] = {"oid": etag(content), "size": len(content), "pointerSize": 134}
        entries.append(entry)
    h._json(200, entries)


def _hf_resolve(h: _Handler, hub: Hub, m: re.Match[str], q: str, f: Fault | None) -> None:
    content = hub.files.get(m.group("file"))
    if not _repo(hub, m) or content is None:
        return h._json(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
    tag = etag(content)
    headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{tag}"'}
    if len(content) >= LFS_THRESHOLD:
        headers |= {"X-Linked-Etag": f'"{tag}"', "X-Linked-Size": str(len(content))}
    h._file(content, f, headers)


def _ms_files(h: _Handler, hub: Hub, m: re.Match[str], q: str, f: Fault | None) -> None:
    if not _repo(hub, m):
        return h._json(404, {"Code": 404, "Message": "model not found", "Success": False})
    files = [
        {
            "Name": name.rsplit("/", 1)[-1],
            "Path": name,
            "Type": "blob",
            "Size": len(content),
            "Sha256": hashlib.sha256(content).hexdigest(),
            "Revision": COMMIT,
        }
        for name, content in hub.files.items()
    ]
    h._json(200, {"Code": 200, "Data": {"Files": files}, "Success": True})


def _ms_model(h: _Handler, hub: Hub, m: re.Match[str], q: str, f: Fault | None) -> None:
    if not _repo(hub, m):
        return h._json(404, {"Code": 404, "Message": "model not found", "Success": False})
    h._json(200, {"Code": 200, "Data": {"Id": 1, "Path": hub.repo}, "Success": True})


def _ms_revisions(h: _Handler, hub: Hub, m: re.Match[str], q: str, f: Fault | None) -> None:
    if not _repo(hub, m):
        return h._json(404, {"Code": 404, "Message": "model not found", "Success": False})
    versions = {"Branches": [{"Revision": "master", "CommitId": COMMIT}], "Tags": []}
    h._json(200, {"Code": 200, "Data": {"RevisionMap": versions}, "Success": True})


def _ms_file(h: _Handler, hub: Hub, m: re.Match[str], q: str, f: Fault | None) -> None:
    name = dict(part.split("=", 1) for part in q.split("&") if "=" in part).get("FilePath", "")
    content = hub.files.get(unquote(name))
    if not _repo(hub, m) or content is None:
        return h._json(404, {"Code": 404, "Message": "file not found", "Success": False})
    h._file(content, f, {"Content-Type": "application/octet-stream"})


_REPO = r"(?P<repo>[^/]+/[^/]+)"
_ROUTES = [
    (rf"/api/models/{_REPO}/revision/[^/]+", _hf_revision),
    (rf"/api/models/{_REPO}/tree/[^/]+", _hf_tree),
    (rf"/{_REPO}/resolve/[^/]+/(?P<file>.+)", _hf_resolve),
    (rf"/api/v1/models/{_REPO}/repo/files", _ms_files),
    (rf"/api/v1/models/{_REPO}/revisions", _ms_revisions),
    (rf"/api/v1/models/{_REPO}/repo", _ms_file),
    (rf"/api/v1/models/{_REPO}", _ms_model),
]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    hub: Hub


@contextmanager
def serve(hub: Hub) -> Iterator[Hub]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.hub = hub
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
