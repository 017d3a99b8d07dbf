"""The engine stub's HTTP/1.1 server on `asyncio.Protocol`: keep-alive, pipelining,
Content-Length and chunked request bodies, chunked streaming responses.

Requests are read by h11, so the stub is as strict as a real server about what it accepts.
Responses are written directly: the stub knows its own headers are valid, and skipping h11's
send side halves its cost per request. The stub stands in for vLLM in benchmarks, so it must
cost far less than the gateway it is compared with. Each request gets a fresh h11 reader, fed
what the previous one left over (pipelined requests), since h11 would otherwise wait for the
response to pass through it too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import cast

import h11

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}
_CLOSE = b"connection: close\r\n"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: str
    headers: list[tuple[bytes, bytes]]
    """Names lowercased, in order, repeats kept."""
    body: bytes


Handler = Callable[[Request, "Exchange"], Awaitable[None] | None]
"""Answer synchronously through the exchange, or return a coroutine for streamed answers."""


class Exchange:
    """Write side of one request on a connection."""

    def __init__(
        self, connection: HttpConnection, *, head_only: bool, keep_alive: bool, chunked: bool
    ) -> None:
        self._connection = connection
        self._head_only = head_only
        self._close = b"" if keep_alive else _CLOSE
        self._chunked = chunked  # else (HTTP/1.0) a stream ends with the connection
        self.finished = False

    @property
    def closed(self) -> bool:
        return self._connection.closed

    def respond(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        head = [_status_line(status)]
        head.extend(b"%s: %s\r\n" % pair for pair in headers)
        head.append(b"content-length: %d\r\n%s\r\n" % (len(body), self._close))
        self._connection.write(b"".join(head) + (b"" if self._head_only else body))
        self.finished = True

    def start_stream(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        head = [_status_line(status)]
        head.extend(b"%s: %s\r\n" % pair for pair in headers)
        framing = b"transfer-encoding: chunked\r\n" if self._chunked else _CLOSE
        head.append(framing + (self._close if self._chunked else b"") + b"\r\n")
        self._connection.write(b"".join(head))

    def write_chunk(self, data: bytes) -> None:
        if data:
            self._connection.write(b"%x\r\n%s\r\n" % (len(data), data) if self._chunked else data)

    def end_stream(self) -> None:
        if self._chunked:
            self._connection.write(b"0\r\n\r\n")
            self.finished = True
        else:
            self._connection.close()

    def abort(self) -> None:
        """Drop the connection mid-exchange, as a crashing engine would."""
        self._connection.close()


def _status_line(status: int) -> bytes:
    return b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b""))


def _reader() -> h11.Connection:
    return h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)


class HttpConnection(asyncio.Protocol):
    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._reader = _reader()
        self._transport: asyncio.Transport | None = None
        self._busy: asyncio.Task[None] | None = None
        self._request: h11.Request | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._received = 0
        self._pipelined = False  # bytes past the request being answered, or the end of input
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        self._reader.receive_data(data)
        if self._busy is None:
            self._process()

    def eof_received(self) -> bool:
        self._reader.receive_data(b"")
        if self._busy is None:
            self._process()
        return True  # answers still owed are written before we close

    def write(self, data: bytes) -> None:
        if not self.closed and self._transport is not None:
            self._transport.write(data)

    def close(self) -> None:
        if self._transport is not None and not self.closed:
            self._transport.close()
        self.closed = True

    def _process(self) -> None:
        """Answer every complete request received, in order (pipelining-safe)."""
        while not self.closed:
            try:
                event = self._reader.next_event()
            except h11.RemoteProtocolError as error:
                self._refuse(str(error))
                return
            if event is h11.NEED_DATA:
                return
            if isinstance(event, h11.Request):
                self._begin(event)
            elif isinstance(event, h11.Data):
                self._received += len(event.data)
                if self._received > MAX_BODY:
                    self._refuse("request body too large")
                    return
                self._body.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                if self._dispatch() or not self._pipelined:
                    return
            else:  # ConnectionClosed
                self.close()
                return

    def _begin(self, request: h11.Request) -> None:
        self._request, self._body, self._received = request, [], 0
        # raw_items: h11's own iteration goes item by item through Sequence.__getitem__
        self._headers = [(name.lower(), value) for name, value in request.headers.raw_items()]
        declared = next((v for n, v in self._headers if n == b"content-length"), b"0")
        if int(declared) > MAX_BODY:
            self._refuse("request body too large")
        elif self._reader.they_are_waiting_for_100_continue:
            self.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _dispatch(self) -> bool:
        """Run the handler; True when it answers asynchronously (reading waits for it)."""
        request = self._request
        assert request is not None
        reader = self._reader
        keep_alive = reader.their_state is h11.DONE  # else MUST_CLOSE: `close` or HTTP/1.0
        leftover, eof = reader.trailing_data
        self._pipelined = bool(leftover) or eof
        self._reader = _reader()
        if leftover:
            self._reader.receive_data(leftover)
        if eof:
            self._reader.receive_data(b"")  # h11's end-of-stream signal
        path, _, query = request.target.decode("latin-1").partition("?")
        method = request.method.decode("ascii", "replace")
        exchange = Exchange(
            self,
            head_only=method == "HEAD",
            keep_alive=keep_alive,
            chunked=request.http_version != b"1.0",
        )
        answer = self._handler(
            Request(method, path, query, self._headers, b"".join(self._body)), exchange
        )
        self._request, self._body = None, []
        if answer is None:
            self._answered(exchange, keep_alive)
            return False
        self._busy = asyncio.get_running_loop().create_task(
            self._finish(answer, exchange, keep_alive)
        )
        return True

    async def _finish(self, answer: Awaitable[None], exchange: Exchange, keep_alive: bool) -> None:
        with contextlib.suppress(ConnectionError):
            await answer
        self._busy = None
        self._answered(exchange, keep_alive)
        self._process()

    def _answered(self, exchange: Exchange, keep_alive: bool) -> None:
        """Close unless the answer is whole and the client keeps the connection."""
        if not (exchange.finished and keep_alive):
            self.close()

    def _refuse(self, reason: str) -> None:
        """A request h11 cannot read: 400 with the reason, then close, since nothing after an
        unreadable head can be framed."""
        body = reason.encode() + b"\n"
        head = b"HTTP/1.1 400 Bad Request\r\n%scontent-length: %d\r\n\r\n" % (_CLOSE, len(body))
        self.write(head + body)
        self.close()


async def serve(handler: Handler, host: str, port: int) -> asyncio.Server:
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: HttpConnection(handler), host or None, port, backlog=4096, reuse_address=True
    )
