"""`/healthz` and `/readyz` on the probe address: simple pings.

They answer as long as the process serves HTTP; a stuck informer or a lost Lease ends the
process instead (see manager.py), which is what the kubelet's liveness probe would do anyway.
The address takes the values the reference operator's does (`:8081`, `"0"` for none), so its
manifests carry over.
"""

from __future__ import annotations

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import TypeVar

from noctaya.core.values.listen_address import (
    AddressProblem,
    ListenAddressError,
    parse_listen_address,
)

log = logging.getLogger(__name__)
_Server = TypeVar("_Server", bound=HTTPServer)

PATHS = frozenset({"/healthz", "/readyz"})
DISABLED = "0"
_PORT_PROBLEMS = frozenset(
    {
        AddressProblem.MISSING_PORT,
        AddressProblem.PORT_NOT_A_NUMBER,
        AddressProblem.PORT_OUT_OF_RANGE,
    }
)


def parse_probe_address(text: str, what: str = "health probe") -> tuple[str, int] | None:
    """A listen address (`:8081`, `127.0.0.1:8081`, `[::1]:8081`) as `(host, port)`.

    `"0"` disables the endpoint (None). An empty host means every interface. `what` names the
    address in errors (the metrics one parses alike).
    """
    if text == DISABLED:
        return None
    try:
        return parse_listen_address(text, any_bracketed_host=True)
    except ListenAddressError as error:
        if error.problem in _PORT_PROBLEMS:
            reason = 'want host:port, like ":8081"'
        else:
            reason = "IPv6 hosts need brackets"
        raise ValueError(f'invalid {what} address "{text}": {reason}') from None


PLAIN_TEXT = "text/plain; charset=utf-8"


def send_whole(
    handler: BaseHTTPRequestHandler,
    status: int,
    content_type: str,
    body: bytes,
    *headers: tuple[str, str],
) -> None:
    """One complete response with its length, so keep-alive clients know where it ends."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    for name, value in headers:
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        status, body = (200, b"ok") if path in PATHS else (404, b"not found")
        send_whole(self, status, PLAIN_TEXT, body)

    def log_message(self, format: str, *args: object) -> None:
        """Probes every few seconds would flood the operator log."""


class BackgroundServer:
    """Serves HTTP on a daemon thread between `_serve` and `stop` (probes and metrics)."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._server: HTTPServer | None = None

    @property
    def port(self) -> int:
        """The bound port (differs from the configured one when that was 0)."""
        if self._server is None:
            raise RuntimeError(f"{self._what} server not started")
        return int(self._server.server_address[1])

    def _serve(self, server: HTTPServer, thread_name: str) -> None:
        if isinstance(server, ThreadingHTTPServer):
            server.daemon_threads = True
        self._server = server
        threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name=thread_name,
            daemon=True,
        ).start()

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server = None


class HealthServer(BackgroundServer):
    """The probe endpoints in a background thread."""

    def __init__(self, address: str) -> None:
        super().__init__("health")
        parsed = parse_probe_address(address)
        if parsed is None:
            raise ValueError('the health probe address is disabled ("0"); do not start a server')
        self._address = address
        self._host, self._port = parsed

    def start(self) -> None:
        try:
            server = bind_server(self._host, self._port, _Handler, ThreadingHTTPServer)
        except OSError as error:
            raise OSError(
                error.errno, f'cannot serve health probes on "{self._address}": {error.strerror}'
            ) from error
        self._serve(server, "health probes")
        log.info("health probes on %s:%d (/healthz, /readyz)", self._host or "*", self.port)


def bind_server(
    host: str,
    port: int,
    handler: type[BaseHTTPRequestHandler],
    server_class: type[_Server],
) -> _Server:
    """A bound, listening server on a parsed address (empty host: every interface, both stacks)."""
    if host:
        return _bind(server_class, (host, port), handler, dual_stack=":" in host)
    try:
        return _bind(server_class, ("::", port), handler, dual_stack=True)
    except OSError:  # no IPv6 in this network namespace
        return _bind(server_class, ("0.0.0.0", port), handler, dual_stack=False)


def _bind(
    server_class: type[_Server],
    address: tuple[str, int],
    handler: type[BaseHTTPRequestHandler],
    *,
    dual_stack: bool,
) -> _Server:
    """`server_class` listening on `address`. With `dual_stack` its socket is IPv6 and also
    takes IPv4 connections, so an empty host (`:port`) serves every address of both families."""
    server = server_class(address, handler, bind_and_activate=False)
    try:
        if dual_stack:
            server.socket.close()
            server.address_family = socket.AF_INET6
            server.socket = socket.socket(socket.AF_INET6, server.socket_type)
            server.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        server.server_bind()
        server.server_activate()
    except BaseException:
        server.server_close()
        raise
    return server
