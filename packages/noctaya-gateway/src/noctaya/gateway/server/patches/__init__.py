"""The gateway's changes to hypercorn, h2, h11 and asyncio, installed together by every server the
package runs (the gateway's HTTP, the ExternalScaler's gRPC, the aggregator). Each module says
what its change does and why; `ledger.md` beside them is the ledger: each change, the
defect or cost it addresses, its upstream status and its measured gain."""

from __future__ import annotations

from noctaya.gateway.server.patches import (
    connection_lifetime,
    head_timeout,
    http2,
    receive_queue,
    slim_connections,
    tcp_close,
)
from noctaya.gateway.server.tested_versions import require_tested_versions

SERVER_PATCHES = (
    http2.install,
    tcp_close.install,
    connection_lifetime.install,
    receive_queue.install,
    slim_connections.install,
    head_timeout.install,
)


def install_server_patches() -> None:
    """Idempotent; raises UntestedServerLibrary, changing nothing, unless hypercorn, h2 and h11
    are the releases the patches were tested with."""
    require_tested_versions()
    for install in SERVER_PATCHES:
        install()
