"""The gateway's HTTP/2 server side: hypercorn's protocol with flow-control back-pressure,
per-stream errors and flood limits (see `protocol`)."""

from __future__ import annotations

import hypercorn.protocol
import hypercorn.protocol.h2
from noctaya.gateway.http2.flow import BoundedStreamBuffer
from noctaya.gateway.http2.protocol import GatewayH2Protocol
from noctaya.gateway.hypercorn_version import require_tested_hypercorn


def install() -> None:
    """Serve HTTP/2 (prior knowledge and h2c upgrades alike) with `GatewayH2Protocol`.
    Idempotent; raises UntestedHypercorn, changing nothing, on an untested hypercorn."""
    require_tested_hypercorn()
    hypercorn.protocol.H2Protocol = GatewayH2Protocol  # type: ignore[attr-defined]
    hypercorn.protocol.h2.StreamBuffer = BoundedStreamBuffer  # type: ignore[misc]
