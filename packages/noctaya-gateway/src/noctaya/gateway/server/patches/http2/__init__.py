"""The gateway's HTTP/2 server side: hypercorn's protocol with flow-control back-pressure,
per-stream errors and flood limits (see `protocol`)."""

from __future__ import annotations

import hypercorn.protocol
import hypercorn.protocol.h2
from noctaya.gateway.server.patches.http2.flow import BoundedStreamBuffer
from noctaya.gateway.server.patches.http2.protocol import GatewayH2Protocol


def install() -> None:
    """Serve HTTP/2 (prior knowledge and h2c upgrades alike) with `GatewayH2Protocol`."""
    hypercorn.protocol.H2Protocol = GatewayH2Protocol  # type: ignore[attr-defined]
    hypercorn.protocol.h2.StreamBuffer = BoundedStreamBuffer  # type: ignore[misc]
