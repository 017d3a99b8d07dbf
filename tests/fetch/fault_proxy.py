"""A pass-through HTTP proxy on 127.0.0.1 in front of the real registry, injecting faults
(5xx, 429 with Retry-After, a connection cut mid-blob) that a healthy registry never sends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

from .faults import FaultPlan, send_body, send_status

_FORWARDED_REQUEST = ("Authorization", "Accept", "Range")
_FORWARDED_RESPONSE = (
    "Content-Type",
    "Content-Range",
    "Docker-Content-Digest",
    "WWW-Authenticate",
    "Accept-Ranges",
)


@dataclass
class Proxy(FaultPlan):
    upstream: str = ""

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_HEAD(self) -> None:
        self._forward()

    def do_GET(self) -> None:
        self._forward()

    def _forward(self) -> None:
        proxy = self.server.proxy
        fault = proxy.receive(self)
        if fault is not None and fault.kind == "status":
            return send_status(self, fault)
        headers = {name: self.headers[name] for name in _FORWARDED_REQUEST if name in self.headers}
        upstream = requests.request(
            self.command, proxy.upstream + self.path, headers=headers, timeout=30
        )
        self.send_response(upstream.status_code)
        for name in _FORWARDED_RESPONSE:
            if name in upstream.headers:
                self.send_header(name, upstream.headers[name])
        self.send_header("Content-Length", upstream.headers.get("Content-Length", "0"))
        self.end_headers()
        if self.command != "HEAD":
            send_body(self, upstream.content, fault)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    proxy: Proxy


@contextmanager
def proxy_to(upstream_host: str) -> Iterator[Proxy]:
    proxy = Proxy(upstream=f"http://{upstream_host}")
    server = _Server(("127.0.0.1", 0), _Handler)
    server.proxy = proxy
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
