"""Serving the ExternalScaler: listen address, transport limits, TLS, and a stop that ends streams.

A KEDA stream never ends on its own, so a plain graceful stop would always wait out its whole
grace period. `ScalerServer.stop` first ends the streams cleanly (KEDA reconnects to a live
replica at once), then stops gRPC, so shutdown takes as long as the unary calls in flight.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from noctaya.core.values.listen_address import parse_listen_address
from noctaya.gateway.addresses import format_bind
from noctaya.gateway.scaler._proto import externalscaler_pb2_grpc as pb_grpc
from noctaya.gateway.scaler.request_decoding import LenientDecoding
from noctaya.gateway.scaler.service import DemandSource, ExternalScalerService
from noctaya.gateway.scaler.tls import ScalerTLS
from prometheus_client import Gauge

# KEDA's requests are a few hundred bytes and it holds a stream or two per ScaledObject, so these
# bounds only ever bite a misbehaving client; they cap what a flood of RPCs can make us hold.
# Open streams count as RPCs too; the service keeps them to MAX_ACTIVE_STREAMS, well below the
# RPC limit, so unary calls always find room.
MAX_MESSAGE_BYTES = 64 * 1024
MAX_CONCURRENT_RPCS = 1024
MAX_STREAMS_PER_CONNECTION = 128
SERVER_OPTIONS: Sequence[tuple[str, int]] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
    # Ping idle connections so a vanished KEDA pod releases its stream (and the gauge) in ~80 s.
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    # A second process on a busy port must fail to start, not silently share the traffic.
    ("grpc.so_reuseport", 0),
)


class ScalerServer(grpc.aio.Server):  # type: ignore[misc]
    """A started ExternalScaler server; `port` is the bound port (useful with port 0)."""

    def __init__(self, server: Any, service: ExternalScalerService, port: int) -> None:
        self._server = server
        self._service = service
        self.port = port

    async def stop(self, grace: float | None) -> None:
        self._service.close()
        await self._server.stop(grace)

    async def start(self) -> None:
        await self._server.start()

    async def wait_for_termination(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        result: bool = await self._server.wait_for_termination(timeout)
        return result

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Any) -> None:
        self._server.add_generic_rpc_handlers(generic_rpc_handlers)

    def add_registered_method_handlers(self, service_name: str, method_handlers: Any) -> None:
        self._server.add_registered_method_handlers(service_name, method_handlers)

    def add_insecure_port(self, address: str) -> int:
        port: int = self._server.add_insecure_port(address)
        return port

    def add_secure_port(self, address: str, server_credentials: Any) -> int:
        port: int = self._server.add_secure_port(address, server_credentials)
        return port


async def start_scaler(
    feed: DemandSource, listen_addr: str, tls: ScalerTLS | None, streams_gauge: Gauge
) -> ScalerServer:
    """Serve the ExternalScaler for `feed` on `listen_addr` (Go form, e.g. `:9090`).

    Raises ValueError for a malformed address and OSError when the port cannot be bound.
    """
    host, port = parse_listen_address(listen_addr)
    service = ExternalScalerService(feed, streams_gauge)
    server = grpc.aio.server(
        interceptors=(LenientDecoding(),),
        options=SERVER_OPTIONS,
        maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
    )
    pb_grpc.add_ExternalScalerServicer_to_server(service, server)  # type: ignore[no-untyped-call]
    bind = format_bind(host, port)
    try:
        if tls is None:
            bound = server.add_insecure_port(bind)
        else:
            bound = server.add_secure_port(bind, tls.server_credentials())
    except RuntimeError as exc:
        raise OSError(f"external scaler: listen on {listen_addr}: {exc}") from None
    if not bound:
        raise OSError(f"external scaler: listen on {listen_addr}: address unavailable")
    await server.start()
    return ScalerServer(server, service, bound)
