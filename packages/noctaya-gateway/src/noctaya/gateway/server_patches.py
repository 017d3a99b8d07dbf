"""The gateway's changes to hypercorn, installed together by every server the package runs (the
gateway's HTTP, the ExternalScaler's gRPC)."""

from __future__ import annotations

from noctaya.gateway import (
    connection_lifetime,
    head_timeout,
    http2,
    receive_queue,
    response_writes,
    slim_connections,
    tcp_close,
)

SERVER_PATCHES = (
    http2.install,
    tcp_close.install,
    connection_lifetime.install,
    response_writes.install,
    receive_queue.install,
    slim_connections.install,
    head_timeout.install,
)
"""The gateway's changes to hypercorn (each module says what and why)."""


def install_server_patches() -> None:
    """Idempotent; raises UntestedHypercorn, changing nothing, on an untested hypercorn (each
    patch checks before it changes anything)."""
    for install in SERVER_PATCHES:
        install()
