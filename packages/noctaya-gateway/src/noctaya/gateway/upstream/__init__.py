"""A lean HTTP/1.1 client for the gateway's backend, each of its pods and the Kubernetes API
(see `pool`)."""

from noctaya.gateway.upstream.connection import UpstreamClosed, UpstreamTimeout
from noctaya.gateway.upstream.parser import ProtocolError
from noctaya.gateway.upstream.pool import (
    NotConnected,
    UpstreamError,
    UpstreamPool,
    UpstreamResponse,
)

__all__ = [
    "NotConnected",
    "ProtocolError",
    "UpstreamClosed",
    "UpstreamError",
    "UpstreamPool",
    "UpstreamResponse",
    "UpstreamTimeout",
]
