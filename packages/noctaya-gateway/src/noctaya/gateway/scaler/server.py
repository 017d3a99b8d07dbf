"""Serving the ExternalScaler: gRPC on hypercorn's HTTP/2, on its own listener and TLS, and, for
the aggregator, its report endpoint on a second, plain listener of the same server.

The scaler shares the gateway's server (hardened HTTP/2, one event loop) instead of running
grpcio's C core beside it, which cost every gateway about 15 MiB of resident memory for four
small RPCs. What grpcio's server options gave is kept: a dead client is found by TCP keepalive
(probes after 60 s idle, given up after two unanswered 10 s apart, so a vanished KEDA pod releases
its stream and the gauge in ~80 s), streams per connection are capped, and a second process on a
busy port fails to start.

A KEDA stream never ends on its own, so a plain graceful stop would always wait out its whole
grace period. `ScalerServer.stop` first ends the streams cleanly (KEDA reconnects to a live
replica at once), then stops the server, so shutdown takes as long as the unary calls in flight.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from hypercorn.config import Config
from noctaya.gateway.metrics.exposition import Gauge
from noctaya.gateway.process.running import quiet_cancelled_callbacks
from noctaya.gateway.requests.lifespan import serve_lifespan
from noctaya.gateway.requests.responses import Receive, Send
from noctaya.gateway.scaler.grpc_app import ScalerApp
from noctaya.gateway.scaler.service import DemandSource, ExternalScalerService, ScaledMetric
from noctaya.gateway.scaler.tls import ScalerTLS
from noctaya.gateway.server.listen_socket import listen_socket, serve_on
from noctaya.gateway.server.patches import install_server_patches

ASGIApp = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]
MAX_STREAMS_PER_CONNECTION = 128
IDLE_CONNECTION_SECONDS = 600.0
"""KEDA keeps its channel between polls; an idle connection is closed only after this long."""
KEEPALIVE_IDLE_SECONDS = 60
KEEPALIVE_INTERVAL_SECONDS = 10
KEEPALIVE_PROBES = 2

_LOG = logging.getLogger("noctaya.gateway.scaler.http")
_LOG.setLevel(logging.WARNING)  # hypercorn's only info line is its "Running on" banner


class _ScalerConfig(Config):
    def __init__(self, tls: ScalerTLS | None) -> None:
        super().__init__()
        self._tls = tls

    @property
    def ssl_enabled(self) -> bool:
        return self._tls is not None

    def create_ssl_context(self) -> ssl.SSLContext | None:
        return self._tls.context if self._tls is not None else None


@dataclass(frozen=True)
class PlainListener:
    """Another listener the scaler's server serves, in plain HTTP whatever the scaler's TLS, and
    the app its requests go to (the aggregator's reports)."""

    listen_addr: str
    app: ASGIApp


class ScalerServer:
    """A started ExternalScaler server; `port` is the bound port (useful with port 0), and
    `plain_port` the plain listener's, if it has one."""

    def __init__(
        self,
        service: ExternalScalerService,
        config: Config,
        stopping: asyncio.Event,
        serving: asyncio.Task[None],
        port: int,
        plain_port: int | None = None,
    ) -> None:
        self._service = service
        self._config = config
        self._stopping = stopping
        self._serving = serving
        self.port = port
        self.plain_port = plain_port

    async def stop(self, grace: float) -> None:
        self._service.close()
        self._config.graceful_timeout = grace
        self._stopping.set()
        await self._serving


async def start_scaler(
    feed: DemandSource,
    listen_addr: str,
    tls: ScalerTLS | None,
    streams_gauge: Gauge,
    plain: PlainListener | None = None,
    metric: ScaledMetric | None = None,
) -> ScalerServer:
    """Serve the ExternalScaler for `feed` on `listen_addr` (e.g. `:9090`), and
    `plain`'s app on its listener; GetMetrics reports `metric` where given, else `feed`.

    Raises ValueError for a malformed address and OSError when a port cannot be bound (the plain
    listener's is bound first).
    """
    install_server_patches()
    quiet_cancelled_callbacks(asyncio.get_running_loop())
    plain_sock = listen_socket(plain.listen_addr) if plain is not None else None
    try:
        sock = listen_socket(listen_addr)
    except BaseException:
        if plain_sock is not None:
            plain_sock.close()
        raise
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)  # accepted sockets inherit these
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE_SECONDS)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL_SECONDS)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)
    service = ExternalScalerService(feed, streams_gauge, metric=metric)
    config = _ScalerConfig(tls)
    config.h2_max_concurrent_streams = MAX_STREAMS_PER_CONNECTION
    config.keep_alive_timeout = IDLE_CONNECTION_SECONDS
    # KEDA's channel and a gateway's report connection last: hypercorn would end each after
    # 1,000 requests (a reconnect every 40 minutes of KEDA's polls).
    config.keep_alive_max_requests = 2**31
    config.include_server_header = False
    config.accesslog = None
    config.errorlog = _LOG
    port: int = sock.getsockname()[1]
    app: ASGIApp = ScalerApp(service)
    plain_port = None
    if plain is not None and plain_sock is not None:
        plain_port = plain_sock.getsockname()[1]
        app = _ByListener(plain_port, plain.app, app)
    stopping = asyncio.Event()
    serving = serve_on(sock, app, config, stopping.wait, plain=plain_sock)
    return ScalerServer(service, config, stopping, serving, port, plain_port)


class _ByListener:
    """Requests to the plain listener's port go to its app, the rest to the scaler's."""

    def __init__(self, plain_port: int, plain: ASGIApp, scaler: ASGIApp) -> None:
        self._plain_port = plain_port
        self._plain = plain
        self._scaler = scaler

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
            return
        server = scope.get("server")
        on_plain = server is not None and server[1] == self._plain_port
        await (self._plain if on_plain else self._scaler)(scope, receive, send)
