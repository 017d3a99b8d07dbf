"""One HTTP/1.1 connection to the backend as an `asyncio.Protocol`: request bytes out, parsed
response in, body pieces handed over as they arrive with bounded buffering (reading pauses
while the client is slower than the backend).

Two deadlines keep a stalled backend from holding an exchange forever: the backend may stay
silent at most `read_timeout` while we wait for it (long enough for a non-streamed completion
generated before its first byte), and a response head, once begun, must be complete within
`head_timeout`. Either ends the exchange with UpstreamTimeout."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import cast

from noctaya.gateway.upstream.parser import END, NEED_DATA, Head, ProtocolError, ResponseParser

HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024


class UpstreamClosed(ConnectionError):
    """The backend closed the connection (or it broke) before the response was complete."""


class UpstreamTimeout(Exception):
    """The backend stalled: silent past the read timeout, or a response head left unfinished."""


class Http1Connection(asyncio.Protocol):
    __slots__ = (
        "_buffered",
        "_chunks",
        "_drained",
        "_error",
        "_head",
        "_head_timeout",
        "_head_timer",
        "_idle_timer",
        "_last_io",
        "_loop",
        "_parser",
        "_read_timeout",
        "_reading_paused",
        "_transport",
        "_waiter",
        "body_ended",
        "closed",
        "received_any",
        "sent_any",
    )

    def __init__(self, read_timeout: float, head_timeout: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._read_timeout = read_timeout
        self._head_timeout = head_timeout
        self._last_io = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._head_timer: asyncio.TimerHandle | None = None
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
        self._last_io = self._loop.time()
        self._parser.feed(data)
        self._pump()
        if self._parser.in_head and self._error is None:
            if self._head_timer is None:
                self._head_timer = self._loop.call_at(
                    self._last_io + self._head_timeout, self._head_expired
                )
        elif self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

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
        self._last_io = self._loop.time()
        self._idle_timer = self._loop.call_at(self._last_io + self._read_timeout, self._idle_check)

    def write(self, data: bytes) -> None:
        if self._transport is None or self.closed:
            raise UpstreamClosed("backend connection is closed")
        self._transport.write(data)
        self.sent_any = True
        self._last_io = self._loop.time()

    async def drain(self) -> None:
        if self._drained is not None:
            await self._drained

    async def read_head(self) -> Head:
        assert self._head is not None
        return await self._head

    async def read_chunk(self) -> bytes:
        """What has arrived of the body and was not handed out yet, b"" once it has ended;
        raises if it broke off. Pieces that arrived while the reader was busy come as one: a
        relay that fell behind catches up in one write to its client, not one per piece."""
        chunks = self._chunks
        while not chunks:
            if self.body_ended:
                return b""
            if self._error is not None:
                raise self._error
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if len(chunks) == 1:
            chunk = chunks.popleft()
        else:
            chunk = b"".join(chunks)
            chunks.clear()
        self._buffered -= len(chunk)
        if self._reading_paused and self._buffered < LOW_WATER and self._transport is not None:
            self._reading_paused = False
            self._last_io = self._loop.time()  # the silence so far was ours
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
        self._stop_timers()

    def abort(self, error: BaseException) -> None:
        """Fail the exchange with `error` (e.g. the request body could not be read)."""
        self._fail(error)

    def close(self) -> None:
        """Closed at once, even mid-response: a TLS peer still sending is not read on until it
        ends its side (asyncio's graceful close would discard its bytes for up to 30 s)."""
        self.closed = True
        self._stop_timers()
        if self._transport is not None:
            if self.body_ended or self._head is None:
                self._transport.close()
            else:
                self._transport.abort()

    def _idle_check(self) -> None:
        """Fires at most once per read timeout; re-arms itself while bytes keep moving."""
        self._idle_timer = None
        if self.closed or self.body_ended:
            return
        due = self._last_io + self._read_timeout
        if self._reading_paused or due > self._loop.time():
            when = self._loop.time() + self._read_timeout if self._reading_paused else due
            self._idle_timer = self._loop.call_at(when, self._idle_check)
            return
        self._fail(UpstreamTimeout(f"backend sent nothing for {self._read_timeout:g}s"))

    def _head_expired(self) -> None:
        self._head_timer = None
        self._fail(UpstreamTimeout(f"response head incomplete after {self._head_timeout:g}s"))

    def _stop_timers(self) -> None:
        for timer in (self._idle_timer, self._head_timer):
            if timer is not None:
                timer.cancel()
        self._idle_timer = self._head_timer = None

    def _pump(self) -> None:
        try:
            while True:
                event = self._parser.next_event()
                if event is NEED_DATA:
                    return
                if event is END:
                    self.body_ended = True
                    self._stop_timers()
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
