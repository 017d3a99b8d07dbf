"""A pass-through HTTP proxy on 127.0.0.1 in front of the real registry (or the fake hub),
injecting faults (5xx, 429 with Retry-After, a connection cut mid-blob) that a healthy registry
never sends. It also answers as a forward proxy (`HTTP_PROXY`): a request for an absolute URL
goes to the same upstream, whatever host it names."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import requests

from .faults import FaultPlan, send_body, send_status

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "host",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-encoding",
    }
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
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        target = urlsplit(self.path)
        path = target.path + (f"?{target.query}" if target.query else "")
        upstream = requests.request(
            self.command,
            proxy.upstream + path,
            headers=headers,
            timeout=30,
            allow_redirects=False,
            stream=True,
        )
        with upstream:
            # An error's body is dropped: the registry announces a 416's length wrongly.
            failed = upstream.status_code >= 400 or self.command == "HEAD"
            body = b"" if failed else upstream.content  # decoded: no Content-Encoding here
        self.send_response(upstream.status_code)
        for name, value in upstream.headers.items():
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        length = upstream.headers.get("Content-Length", "0")
        self.send_header("Content-Length", length if self.command == "HEAD" else str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            send_body(self, body, fault)


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
