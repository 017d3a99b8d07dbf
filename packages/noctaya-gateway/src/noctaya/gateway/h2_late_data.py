"""Tolerate request DATA that arrives after the response ended on an HTTP/2 stream.

HTTP/2 lets a server answer before the request body is complete (a 429, a 401, a backend that
replied early). Hypercorn 0.18 then forgets the stream, and the client's next DATA frame on it
raises KeyError inside the connection task, which drops the whole connection and every other
request multiplexed on it (pgjones/hypercorn#329; the fix, PRs #312/#334, is not released).
Behind an HTTP/2 load balancer that connection carries many users' requests, so the gateway
discards such frames, still crediting their bytes to the connection's flow-control window.
"""

from __future__ import annotations

from typing import Any

import h2.events
from hypercorn.protocol.h2 import H2Protocol

_original_handle_events = H2Protocol._handle_events


async def _handle_events(self: Any, events: list[h2.events.Event]) -> None:
    for event in events:
        if isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
            self.connection.acknowledge_received_data(
                event.flow_controlled_length, event.stream_id
            )
            await self._flush()  # the WINDOW_UPDATE must go out, or the client's upload stalls
            continue
        await _original_handle_events(self, [event])


def install() -> None:
    """Idempotent; call before serving."""
    H2Protocol._handle_events = _handle_events  # type: ignore[method-assign]
