"""`/metrics` on `--metrics-bind-address`: plain HTTP, or HTTPS behind the API server's verdict.

A fixed pool of worker threads serves the connections, so a flood of them (or of TLS
handshakes that never finish) costs no more threads than the pool holds. A connection that
finds every worker busy waits in a short queue; one that finds the queue full, or waited there
too long, is closed unanswered at once. The TLS context is asked for on every connection, so a
rotated certificate is served without a restart. Errors are answered as the reference's
metrics server answers them (the status text and a newline, plain text, `nosniff`).
"""

from __future__ import annotations

import logging
import queue
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, cast

from noctaya.k8s.operator.access_review import AccessReview
from noctaya.k8s.runtime.health import (
    PLAIN_TEXT,
    BackgroundServer,
    bind_server,
    parse_probe_address,
    send_whole,
)
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"

TlsContexts = Callable[[], ssl.SSLContext]
"""The server context for the next connection (the current certificate)."""


@dataclass(frozen=True)
class ServingLimits:
    """How much of the process the metrics endpoint may take. Prometheus scrapes one at a time."""

    workers: int = 4
    queue_size: int = 16
    queue_wait: float = 5.0  # seconds a queued connection may wait for a worker
    request_timeout: float = 10.0  # a client that stalls (or never finishes TLS) loses its worker

    def __post_init__(self) -> None:
        if self.workers < 1 or self.queue_size < 1:
            raise ValueError(
                f"metrics serving needs at least 1 worker and 1 queue slot, "
                f"got workers={self.workers}, queue_size={self.queue_size}"
            )


_Pending = tuple[socket.socket, Any, float]  # connection, client address, when queued


class _PooledHTTPServer(HTTPServer):
    request_queue_size = socket.SOMAXCONN  # the largest listen backlog: a burst waits, not refused
    registry: CollectorRegistry
    reviewer: AccessReview | None
    tls: TlsContexts | None
    limits: ServingLimits

    _pending: queue.Queue[_Pending | None] | None = None  # made by start_workers

    def start_workers(self) -> None:
        self._pending = queue.Queue(self.limits.queue_size)
        for number in range(self.limits.workers):
            threading.Thread(target=self._work, name=f"metrics {number}", daemon=True).start()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Runs on the accepting thread: hand over, or close at once when the queue is full."""
        assert self._pending is not None, "start_workers before serving"
        try:
            self._pending.put_nowait((request, client_address, time.monotonic()))
        except queue.Full:
            log.debug("metrics: all workers busy; closed a connection from %s", client_address[0])
            self.shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        if self._pending is None:
            return
        while True:  # connections still queued are closed unanswered
            try:
                pending = self._pending.get_nowait()
            except queue.Empty:
                break
            if pending is not None:
                self.shutdown_request(pending[0])
        for _ in range(self.limits.workers):
            self._pending.put(None)

    def _work(self) -> None:
        assert self._pending is not None
        while (pending := self._pending.get()) is not None:
            request, address, queued_at = pending
            connection = request
            try:
                if time.monotonic() - queued_at <= self.limits.queue_wait:
                    connection = self._secure(request)
                    self.finish_request(connection, address)
            except Exception as error:  # a failed handshake, a reset: the client's problem
                log.debug("metrics: connection from %s ended: %s", address[0], error)
            finally:
                self.shutdown_request(connection)

    def _secure(self, request: socket.socket) -> socket.socket:
        if self.tls is None:
            return request
        request.settimeout(self.limits.request_timeout)
        return self.tls().wrap_socket(request, server_side=True)


class _Handler(BaseHTTPRequestHandler):
    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(cast(_PooledHTTPServer, self.server).limits.request_timeout)

    def do_GET(self) -> None:
        server = cast(_PooledHTTPServer, self.server)
        path = self.path.split("?", 1)[0]
        if path != METRICS_PATH:
            self._error(HTTPStatus.NOT_FOUND)
            return
        if server.reviewer is not None:
            verdict = server.reviewer.status(self.headers.get("Authorization"), path)
            if verdict != HTTPStatus.OK:
                self._error(verdict)
                return
        send_whole(self, HTTPStatus.OK, CONTENT_TYPE_LATEST, generate_latest(server.registry))

    def _error(self, status: HTTPStatus) -> None:
        """The status text and a newline, plain text, `nosniff` (see the module docstring)."""
        body = f"{status.phrase}\n".encode()
        send_whole(self, status, PLAIN_TEXT, body, ("X-Content-Type-Options", "nosniff"))

    def log_message(self, format: str, *args: object) -> None:
        """Scrapes every few seconds would flood the operator log."""


class MetricsServer(BackgroundServer):
    """Serves `registry` in the background until `stop`."""

    def __init__(
        self,
        address: str,
        registry: CollectorRegistry,
        *,
        tls: TlsContexts | None = None,
        reviewer: AccessReview | None = None,
        limits: ServingLimits | None = None,
    ) -> None:
        super().__init__("metrics")
        parsed = parse_probe_address(address, "metrics bind")
        if parsed is None:
            raise ValueError('the metrics address is disabled ("0"); do not start a server')
        self._host, self._port = parsed
        self._registry = registry
        self._tls = tls
        self._reviewer = reviewer
        self._limits = limits or ServingLimits()

    def start(self) -> None:
        server = bind_server(self._host, self._port, _Handler, _PooledHTTPServer)
        server.registry = self._registry
        server.reviewer = self._reviewer
        server.tls = self._tls
        server.limits = self._limits
        server.start_workers()
        self._serve(server, "metrics")
        scheme = "https" if self._tls else "http"
        log.info(
            "serving metrics",
            extra={"address": f"{scheme}://{self._host or '*'}:{self.port}{METRICS_PATH}"},
        )
