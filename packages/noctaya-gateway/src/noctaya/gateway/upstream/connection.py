"""One HTTP/1.1 connection to the backend as an `asyncio.Protocol`: request bytes out, parsed
response in, body pieces handed over as they arrive with bounded buffering (reading pauses
while the client is slower than the backend)."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import cast

from noctaya.gateway.upstream.parser import END, NEED_DATA, Head, ProtocolError, ResponseParser

HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024


class UpstreamClosed(ConnectionError):
    """The backend closed the connection (or it broke) before the response was complete."""


class Http1Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._parser = ResponseParser()
        self._head: asyncio.Future[Head] | None = None
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._error: BaseException | None = None
        self.closed = False
        self.received_any = False  # for the current exchange
        self.sent_any = False  # for the current exchange
        self.body_ended = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._head is None or self.body_ended:  # bytes nobody asked for: unusable now
            self.close()
            return
        self.received_any = True
        self._parser.feed(data)
        self._pump()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._head is not None and not self.received_any:
            self._fail(UpstreamClosed("backend closed the connection before answering"))
        elif self._head is not None and not self.body_ended and self._error is None:
            self._parser.eof()
            self._pump()
            if not self.body_ended and self._error is None:
                self._fail(UpstreamClosed("backend closed the connection"))
        if self._drained is not None and not self._drained.done():
            self._drained.set_exception(UpstreamClosed("backend closed the connection"))

    def pause_writing(self) -> None:
        self._drained = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    # exchange

    def begin(self, head_request: bool) -> None:
        """Get ready for the response to a request about to be written."""
        self._parser.start(head_request)
        self._head = self._loop.create_future()
        self.body_ended = False
        self.received_any = False
        self.sent_any = False

    def write(self, data: bytes) -> None:
        if self._transport is None or self.closed:
            raise UpstreamClosed("backend connection is closed")
        self._transport.write(data)
        self.sent_any = True

    async def drain(self) -> None:
        if self._drained is not None:
            await self._drained

    async def read_head(self) -> Head:
        assert self._head is not None
        return await self._head

    async def read_chunk(self) -> bytes:
        """The next piece of the body, b"" once it has ended; raises if it broke off."""
        while not self._chunks:
            if self.body_ended:
                return b""
            if self._error is not None:
                raise self._error
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        chunk = self._chunks.popleft()
        self._buffered -= len(chunk)
        if self._reading_paused and self._buffered < LOW_WATER and self._transport is not None:
            self._reading_paused = False
            self._transport.resume_reading()
        return chunk

    @property
    def ended(self) -> bool:
        """Every piece of the body has been handed out."""
        return self.body_ended and not self._chunks

    @property
    def reusable(self) -> bool:
        return not self.closed and self._error is None and self.ended and self._parser.reusable

    def release(self) -> None:
        """The exchange is over and the connection goes back to the pool."""
        self._head = None

    def abort(self, error: BaseException) -> None:
        """Fail the exchange with `error` (e.g. the request body could not be read)."""
        self._fail(error)

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    def _pump(self) -> None:
        try:
            while True:
                event = self._parser.next_event()
                if event is NEED_DATA:
                    return
                if event is END:
                    self.body_ended = True
                    self._wake()
                    return
                if isinstance(event, Head):
                    assert self._head is not None
                    if not self._head.done():
                        self._head.set_result(event)
                    continue
                chunk = cast(bytes, event)
                if chunk:
                    self._chunks.append(chunk)
                    self._buffered += len(chunk)
                    self._wake()
                    if self._buffered > HIGH_WATER and not self._reading_paused:
                        self._reading_paused = True
                        assert self._transport is not None
                        self._transport.pause_reading()
        except ProtocolError as error:
            self._fail(error)

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        if self._head is not None and not self._head.done():
            self._head.set_exception(error)
            self._head.exception()  # retrieved by whoever awaits; never "unretrieved"
        self._wake()
        self.close()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
