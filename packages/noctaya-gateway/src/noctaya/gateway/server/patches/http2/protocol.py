"""Hypercorn's HTTP/2 connection, hardened against hostile and broken clients.

- Responses wait for the client's flow-control window (`flow`), and a response the app
  abandons, or a stream the client resets, is cleaned up at once; hypercorn left both in its
  priority tree, which caps at 1,000 streams and then crashed the connection.
- A malformed request (its head, or a body at odds with its length) resets its own stream
  only (`malformed`, `stream_scoped`), and so does a stream over the concurrency limit, refused
  (`stream_scoped`).
- Control-frame and reset floods (a refused stream counts as a reset) end the connection with
  ENHANCE_YOUR_CALM (`floods`); PRIORITY frames for streams that are not open are ignored
  (RFC 9113 deprecates the scheme).
- Request DATA arriving after the response ended is credited and dropped: HTTP/2 lets a server
  answer (a 429, a 401) before the body is complete, and hypercorn 0.18 raised on such frames,
  dropping the connection (pgjones/hypercorn#329, fixed after 0.18).
- When the send task ends (the connection closed, or the server's graceful stop ran out and
  cancelled it), the stream buffers are closed: a response still being ended, such as the 500
  hypercorn sends for a call cancelled before its request body was complete, would otherwise
  wait for ever to drain, and the server's stop with it.
- A response chunk is written at once when nothing of its stream is still buffered and the
  client's window takes it whole. Hypercorn hands every chunk to its send task, which writes it
  a turn of the event loop later: milliseconds under load, on every token of a stream and on
  every push of the ExternalScaler to KEDA.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import h2.events
import h2.exceptions
import priority.priority
from h2.errors import ErrorCodes
from hypercorn.events import Closed, Event, RawData
from hypercorn.protocol.events import Body
from hypercorn.protocol.events import Event as StreamEvent
from hypercorn.protocol.h2 import H2Protocol
from noctaya.gateway.server.patches.http2.floods import FloodGuard
from noctaya.gateway.server.patches.http2.malformed import is_malformed
from noctaya.gateway.server.patches.http2.stream_scoped import StreamScopedConnection

LINGER = 1.0
"""How long an abusive connection is drained after its GOAWAY before it is closed."""


class GatewayH2Protocol(H2Protocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        hypercorns = self.connection
        # Request heads are checked per stream (`is_malformed`), not connection-wide by h2.
        hypercorns.config.validate_inbound_headers = False
        self.connection = StreamScopedConnection(config=hypercorns.config)
        self.connection.DEFAULT_MAX_INBOUND_FRAME_SIZE = hypercorns.DEFAULT_MAX_INBOUND_FRAME_SIZE
        self.connection.local_settings = hypercorns.local_settings
        self._floods = FloodGuard()
        self._calmed = False

    async def handle(self, event: Event) -> None:
        if self._calmed and isinstance(event, RawData):
            return  # the GOAWAY is out; nothing more from this client is worth parsing
        await super().handle(event)

    async def _handle_events(self, events: list[h2.events.Event]) -> None:
        for event in events:
            if self._calmed:
                return
            if not self._floods.allows(event):
                await self._calm_down()
                return
            if isinstance(event, h2.events.PriorityUpdated) and event.stream_id not in self.streams:
                continue  # hypercorn would track it, up to the priority tree's 1,000, then crash
            if isinstance(event, h2.events.RequestReceived) and (
                is_malformed(event.headers) or not self._is_open(event.stream_id)
            ):
                with contextlib.suppress(h2.exceptions.StreamClosedError):
                    self.connection.reset_stream(event.stream_id, ErrorCodes.PROTOCOL_ERROR)
            elif isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
                self.connection.acknowledge_received_data(
                    event.flow_controlled_length, event.stream_id
                )
            else:
                await super()._handle_events([event])
                continue
            await self._flush()  # the reset or the WINDOW_UPDATE must go out now

    async def send_task(self) -> None:
        try:
            await super().send_task()
        finally:
            self.closed = True  # nothing is sent from here on
            for buffer in list(self.stream_buffers.values()):
                await buffer.close()

    async def stream_send(self, event: StreamEvent) -> None:
        if type(event) is Body and self._sent_at_once(event):
            await self._flush()
        else:
            await super().stream_send(event)

    def _sent_at_once(self, event: Body) -> bool:
        """Hand the chunk to h2 now if the send task would send it whole as its next frame of
        this stream; else it takes hypercorn's way (buffer, window, priority)."""
        buffer = self.stream_buffers.get(event.stream_id)
        if self.closed or buffer is None or buffer.buffer or buffer.complete:
            return False
        size = len(event.data)
        try:
            window = self.connection.local_flow_control_window(event.stream_id)
            if size > min(window, self.connection.max_outbound_frame_size):
                return False
            self.connection.send_data(event.stream_id, event.data)
        except h2.exceptions.ProtocolError:  # the stream closed: hypercorn's way cleans up
            return False
        return True

    def _is_open(self, stream_id: int) -> bool:
        """False when h2 already reset the stream, for a malformed body later in the same read."""
        stream = self.connection.streams.get(stream_id)
        return stream is not None and not stream.closed

    async def _calm_down(self) -> None:
        """GOAWAY, then discard what the client still sends for a moment before closing:
        closing on unread input makes the kernel reset the connection, and the client would
        lose the GOAWAY that tells it why (nginx's lingering close)."""
        self._calmed = True
        self.connection.close_connection(error_code=ErrorCodes.ENHANCE_YOUR_CALM)
        await self._flush()
        self.task_group.spawn(self._close_after, LINGER)

    async def _close_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        await self.send(Closed())

    async def _close_stream(self, stream_id: int) -> None:
        buffer = self.stream_buffers.get(stream_id)
        if buffer is not None and not buffer.complete:
            # The response will never end normally: the app gave up on it (a backend failing
            # mid-stream, a client too slow to read) or the client reset the stream.
            del self.stream_buffers[stream_id]
            await buffer.close()
            with contextlib.suppress(priority.priority.MissingStreamError):
                self.priority.remove_stream(stream_id)
            if not self.closed:
                with contextlib.suppress(h2.exceptions.ProtocolError):
                    self.connection.reset_stream(stream_id, ErrorCodes.INTERNAL_ERROR)
                await self._flush()
        await super()._close_stream(stream_id)
