"""HTTP/1.1 response body chunks framed without a pass through h11's state machine.

A streamed response (SSE tokens) is one small body write per token. For each, hypercorn 0.18
builds an `h11.Data` event and h11 0.16 runs it through `Connection.send`: the check of its own
state, the state machine's event and state transitions (none happen: a body chunk leaves the
sender in SEND_BODY), and its chunked writer's three pieces joined. About 3 µs of the gateway's
work per relayed token went there, a tenth of all of it. While h11 is sending a body framed by
chunks, a chunk is framed here in one step (`<size hex>\\r\\n<data>\\r\\n`, the bytes h11 would
write) and handed to the connection's send as h11's would be; anything else (a body framed by
Content-Length, which h11 counts, an HTTP/1.0 body, a head, the end of a body, any state but
SEND_BODY) goes through h11 as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator

import h11
import h11._writers
from hypercorn.events import RawData
from hypercorn.protocol.events import Body
from hypercorn.protocol.events import Event as StreamEvent
from hypercorn.protocol.h11 import H11Protocol

_CHUNKED: type | None = getattr(h11._writers, "ChunkedWriter", None)
"""h11's writer of a chunked body; on a release without it (which the version check refuses
anyway) every chunk goes through h11."""


class BodyFramesH11Protocol(H11Protocol):
    def stream_send(self, event: StreamEvent) -> Awaitable[None]:  # type: ignore[override]
        """hypercorn's, or the connection's send of the framed chunk: the awaitable handed back
        rather than awaited here, so that neither path costs a coroutine of its own."""
        connection = self.connection
        if (
            type(event) is Body
            and type(connection) is h11.Connection
            and connection.our_state is h11.SEND_BODY
            and type(connection._writer) is _CHUNKED
        ):
            data = event.data
            if not data:  # h11 writes nothing for an empty chunk, which would end the body
                return _NOTHING
            return self.send(RawData(data=b"%x\r\n%s\r\n" % (len(data), data)))
        return super().stream_send(event)


class _Done:
    """An awaitable that is done at once, reusable."""

    def __await__(self) -> Generator[None, None, None]:
        return
        yield


_NOTHING = _Done()
