"""Back-pressure from a client's HTTP/2 flow-control window to the app writing the response.

Hypercorn 0.18's stream buffer lets a writer go on as soon as the send task pops from it, even
when the pop is empty because the client's window is shut. An h2c client that never opens its
window then makes the gateway buffer the whole backend stream (gigabytes within seconds), where
the same client over HTTP/1.1 stalls the TCP write and the backend read with it. Here a writer
waits until the buffer has really drained below the low-water mark, so at most
`BUFFER_HIGH_WATER` plus one message is held per stream and the backend is read no faster than
the client takes the bytes.
"""

from __future__ import annotations

from hypercorn.protocol.h2 import (
    BUFFER_HIGH_WATER,
    BUFFER_LOW_WATER,
    BufferCompleteError,
    StreamBuffer,
)


class BoundedStreamBuffer(StreamBuffer):
    async def push(self, data: bytes) -> None:
        if self._complete:
            raise BufferCompleteError()
        self.buffer.extend(data)
        await self._is_empty.clear()
        while len(self.buffer) >= BUFFER_HIGH_WATER and not self._complete:
            await self._paused.clear()
            await self._paused.wait()

    async def pop(self, max_length: int) -> bytes:
        length = min(len(self.buffer), max_length)
        data = bytes(self.buffer[:length])
        del self.buffer[:length]
        if len(self.buffer) < BUFFER_LOW_WATER:
            await self._paused.set()
        if not self.buffer:
            await self._is_empty.set()
        return data
