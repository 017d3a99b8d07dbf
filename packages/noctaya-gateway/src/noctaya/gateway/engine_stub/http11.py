"""A deliberately small HTTP/1.1 server on `asyncio.Protocol`: keep-alive, Content-Length and
chunked request bodies, chunked streaming responses. The engine stub stands in for vLLM in
benchmarks, so it must cost far less per request than the gateway it is compared with."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import cast

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: str
    headers: dict[bytes, bytes]
    body: bytes


Handler = Callable[[Request, "Exchange"], Awaitable[None] | None]
"""Answer synchronously through the exchange, or return a coroutine for streamed answers."""


class _BadRequest(Exception):
    pass


class Exchange:
    """Write side of one request on a connection."""

    def __init__(self, connection: HttpConnection, head_only: bool = False) -> None:
        self._connection = connection
        self._head_only = head_only

    @property
    def closed(self) -> bool:
        return self._connection.closed

    def respond(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        head = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b""))]
        head.extend(b"%s: %s\r\n" % pair for pair in headers)
        head.append(b"content-length: %d\r\n\r\n" % len(body))
        self._connection.write(b"".join(head) + (b"" if self._head_only else body))

    def start_stream(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        head = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b""))]
        head.extend(b"%s: %s\r\n" % pair for pair in headers)
        head.append(b"transfer-encoding: chunked\r\n\r\n")
        self._connection.write(b"".join(head))

    def write_chunk(self, data: bytes) -> None:
        if data:
            self._connection.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self) -> None:
        self._connection.write(b"0\r\n\r\n")

    def abort(self) -> None:
        """Drop the connection mid-exchange, as a crashing engine would."""
        self._connection.close()


class HttpConnection(asyncio.Protocol):
    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._busy: asyncio.Task[None] | None = None
        self._keep_alive = True
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._busy is None:
            self._process()

    def write(self, data: bytes) -> None:
        if not self.closed and self._transport is not None:
            self._transport.write(data)

    def close(self) -> None:
        if self._transport is not None and not self.closed:
            self._transport.close()
        self.closed = True

    def _process(self) -> None:
        """Answer every complete request in the buffer, in order (pipelining-safe)."""
        while not self.closed:
            try:
                request = self._parse()
            except _BadRequest as error:
                Exchange(self).respond(
                    400, [(b"connection", b"close")], str(error).encode() + b"\n"
                )
                self.close()
                return
            if request is None:
                return
            result = self._handler(request, Exchange(self, request.method == "HEAD"))
            if result is not None:
                self._busy = asyncio.get_running_loop().create_task(self._finish(result))
                return
            if not self._keep_alive:
                self.close()

    async def _finish(self, answer: Awaitable[None]) -> None:
        with contextlib.suppress(ConnectionError):
            await answer
        self._busy = None
        if not self._keep_alive:
            self.close()
        elif self._buffer:
            self._process()

    def _parse(self) -> Request | None:
        buffer = self._buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(buffer) > MAX_HEAD:
                raise _BadRequest("request head too large")
            return None
        lines = bytes(buffer[:end]).split(b"\r\n")
        try:
            method, target, version = lines[0].split(b" ")
        except ValueError:
            raise _BadRequest("malformed request line") from None
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise _BadRequest("malformed header line")
            headers[name.strip().lower()] = value.strip()
        body_start = end + 4
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            decoded = _dechunk(buffer, body_start)
            if decoded is None:
                return None
            body, consumed = decoded
        else:
            try:
                length = int(headers.get(b"content-length", b"0"))
            except ValueError:
                raise _BadRequest("malformed content-length") from None
            if length < 0 or length > MAX_BODY:
                raise _BadRequest("bad content-length")
            if len(buffer) < body_start + length:
                return None
            body, consumed = bytes(buffer[body_start : body_start + length]), body_start + length
        del buffer[:consumed]
        connection = headers.get(b"connection", b"").lower()
        self._keep_alive = (
            b"close" not in connection if version == b"HTTP/1.1" else b"keep-alive" in connection
        )
        path, _, query = target.decode("latin-1").partition("?")
        return Request(method.decode("ascii", "replace"), path, query, headers, body)


def _dechunk(buffer: bytearray, start: int) -> tuple[bytes, int] | None:
    """Decode a chunked body starting at `start`: (body, end offset), or None if incomplete."""
    parts: list[bytes] = []
    position = start
    total = 0
    while True:
        line_end = buffer.find(b"\r\n", position)
        if line_end < 0:
            return None
        size_text = bytes(buffer[position:line_end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise _BadRequest("malformed chunk size") from None
        total += size
        if size < 0 or total > MAX_BODY:
            raise _BadRequest("bad chunk size")
        position = line_end + 2
        if size == 0:
            trailer_end = buffer.find(b"\r\n", position)
            while trailer_end > position:  # skip trailer fields
                position = trailer_end + 2
                trailer_end = buffer.find(b"\r\n", position)
            if trailer_end < 0:
                return None
            return b"".join(parts), trailer_end + 2
        if len(buffer) < position + size + 2:
            return None
        parts.append(bytes(buffer[position : position + size]))
        position += size + 2


async def serve(handler: Handler, host: str, port: int) -> asyncio.Server:
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: HttpConnection(handler), host or None, port, backlog=4096, reuse_address=True
    )
