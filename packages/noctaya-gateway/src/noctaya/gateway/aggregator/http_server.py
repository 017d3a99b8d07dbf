"""A lean HTTP/1.1 server (h11 on asyncio streams) for the aggregator's four small routes.

Chosen over hypercorn by measurement (benchmarks/scaler/aggregator_http.py): the aggregator only
answers tiny reports and probes, and what matters is control over deadlines. Every request must
arrive whole within `read_timeout` of its first byte, idle keep-alive connections close after
`idle_timeout`, and a handler reads the body only when it wants it, so a client that trickles
bytes holds a connection for seconds, never a report slot for long or memory without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import h11
from noctaya.gateway.process import quiet_cancelled_callbacks

_log = logging.getLogger(__name__)

READ_CHUNK = 65536
MAX_HEADER_BYTES = 16 * 1024
WRITE_TIMEOUT = 10.0
MAX_DRAIN_BYTES = 256 * 1024  # an unread body up to this size is discarded to keep the connection


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    headers: Sequence[tuple[str, str]] = ()


def text_response(status: int, message: str, headers: Sequence[tuple[str, str]] = ()) -> Response:
    """A plain-text error as Go's http.Error writes it (clients may compare the exact text)."""
    return Response(
        status,
        f"{message}\n".encode(),
        (
            ("Content-Type", "text/plain; charset=utf-8"),
            ("X-Content-Type-Options", "nosniff"),
            *headers,
        ),
    )


class BodyTooLarge(Exception):
    """The request body exceeds what the handler accepts."""


class _Exchange:
    """One connection: its h11 state and the deadline of the request being read."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, read_timeout: float
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.read_timeout = read_timeout
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        self.deadline = 0.0
        self.busy = False  # a request has begun arriving: shutdown waits for it

    def start_request(self) -> None:
        """The first byte of a request: from now on the whole request must arrive in time."""
        if not self.busy:
            self.busy = True
            self.deadline = asyncio.get_running_loop().time() + self.read_timeout

    async def next_event(self) -> h11.Event | type[h11.PAUSED] | type[h11.NEED_DATA]:
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            async with asyncio.timeout_at(self.deadline):
                data = await self.reader.read(READ_CHUNK)
            if data:
                self.start_request()
            self.conn.receive_data(data)

    async def send(self, *events: h11.Event) -> None:
        self.writer.write(b"".join(self.conn.send(event) or b"" for event in events))
        async with asyncio.timeout(WRITE_TIMEOUT):
            await self.writer.drain()


@dataclass
class Request:
    method: str
    path: str
    headers: list[tuple[bytes, bytes]]
    _exchange: _Exchange = field(repr=False)

    def header(self, name: bytes) -> bytes | None:
        """The first value of header `name` (lower-case), as Go's Header.Get returns it."""
        for key, value in self.headers:
            if key == name:
                return value
        return None

    async def read_body(self, limit: int) -> bytes:
        """The whole body; BodyTooLarge past `limit` bytes, TimeoutError past the read deadline."""
        declared = self.header(b"content-length")
        if declared is not None and int(declared) > limit:
            raise BodyTooLarge
        exchange = self._exchange
        if exchange.conn.they_are_waiting_for_100_continue:
            await exchange.send(h11.InformationalResponse(status_code=100, headers=[]))
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await exchange.next_event()
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > limit:
                    raise BodyTooLarge
                chunks.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(chunks)
            else:
                raise ConnectionError("client closed the connection mid-body")


Handler = Callable[[Request], Awaitable[Response]]


class HTTPServer:
    def __init__(
        self,
        handler: Handler,
        *,
        read_timeout: float = 5.0,
        idle_timeout: float = 5.0,
    ) -> None:
        self._handler = handler
        self._read_timeout = read_timeout
        self._idle_timeout = idle_timeout
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], _Exchange] = {}
        self._closing = False

    async def start(self, host: str, port: int) -> int:
        """Listen on `host:port` (host "" = every interface); return the bound port."""
        quiet_cancelled_callbacks(asyncio.get_running_loop())  # shutdown() cancels connections
        self._server = await asyncio.start_server(
            self._serve, host or None, port, reuse_address=True
        )
        bound: int = self._server.sockets[0].getsockname()[1]
        return bound

    async def shutdown(self, grace: float) -> None:
        """Stop listening, close idle connections, give busy ones `grace` seconds to finish."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        for exchange in self._connections.values():
            if not exchange.busy:
                exchange.writer.close()  # its pending read sees EOF and the connection ends
        remaining = list(self._connections)
        if remaining:
            _, unfinished = await asyncio.wait(remaining, timeout=grace)
            for task in unfinished:
                task.cancel()
            await asyncio.wait(remaining)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        exchange = _Exchange(reader, writer, self._read_timeout)
        self._connections[task] = exchange
        try:
            while not self._closing and await self._serve_one(exchange):
                exchange.conn.start_next_cycle()
        except (TimeoutError, ConnectionError):
            pass
        except h11.RemoteProtocolError as exc:
            await self._reject_malformed(exchange, exc)
        except h11.LocalProtocolError:
            _log.exception("HTTP protocol misuse; closing the connection")
        finally:
            del self._connections[task]
            writer.close()  # the transport finishes closing on its own; nothing to wait for

    async def _serve_one(self, exchange: _Exchange) -> bool:
        """Serve one request; return whether the connection may carry another."""
        request = await self._read_request(exchange)
        if request is None:
            return False
        try:
            response = await self._handler(request)
        except (TimeoutError, ConnectionError, h11.RemoteProtocolError):
            raise  # the client's fault (a malformed body is answered like a malformed head)
        except Exception:
            _log.exception("handler failed for %s %s", request.method, request.path)
            response = text_response(500, "internal server error")
        keep_alive = await self._discard_unread_body(exchange, request)
        await self._respond(exchange, request, response, keep_alive)
        exchange.busy = False
        return exchange.conn.our_state is h11.DONE and not self._closing

    async def _read_request(self, exchange: _Exchange) -> Request | None:
        exchange.deadline = asyncio.get_running_loop().time() + self._idle_timeout
        event = await exchange.next_event()
        if not isinstance(event, h11.Request):
            return None  # ConnectionClosed
        exchange.start_request()  # a pipelined request may arrive without a new read
        if sum(len(name) + len(value) for name, value in event.headers) > MAX_HEADER_BYTES:
            # h11 bounds only headers that arrive in pieces; one large read must be bounded too.
            raise h11.RemoteProtocolError("request headers too large", error_status_hint=431)
        names = {name for name, _ in event.headers}
        if b"content-length" in names and b"transfer-encoding" in names:
            # Two framings disagree about where the body ends: the classic request smuggling.
            # h11 would pick chunked and keep the connection; refusing and closing is safer.
            raise h11.RemoteProtocolError("both Content-Length and Transfer-Encoding")
        target = event.target.decode("ascii", "replace")
        return Request(
            method=event.method.decode("ascii", "replace"),
            path=target.split("?", 1)[0],
            headers=list(event.headers),
            _exchange=exchange,
        )

    async def _discard_unread_body(self, exchange: _Exchange, request: Request) -> bool:
        """Read away a small unread body so the connection survives; False if it must close."""
        conn = exchange.conn
        if conn.their_state in (h11.DONE, h11.MUST_CLOSE):
            # Read whole. MUST_CLOSE (Connection: close, HTTP/1.0) means nothing more will come,
            # so reading on would only wait out the deadline; h11 closes after the response.
            return True
        declared = request.header(b"content-length")
        if conn.they_are_waiting_for_100_continue or int(declared or 0) > MAX_DRAIN_BYTES:
            return False
        drained = 0
        with contextlib.suppress(TimeoutError, ConnectionError):
            while drained <= MAX_DRAIN_BYTES:
                event = await exchange.next_event()
                if isinstance(event, h11.Data):
                    drained += len(event.data)
                else:
                    return isinstance(event, h11.EndOfMessage)
        return False

    async def _respond(
        self, exchange: _Exchange, request: Request, response: Response, keep_alive: bool
    ) -> None:
        headers = [(name.encode(), value.encode()) for name, value in response.headers]
        if response.status not in (204, 304):
            headers.append((b"content-length", str(len(response.body)).encode()))
        if not keep_alive or self._closing:
            headers.append((b"connection", b"close"))
        events: list[h11.Event] = [h11.Response(status_code=response.status, headers=headers)]
        if response.body and request.method != "HEAD" and response.status not in (204, 304):
            events.append(h11.Data(data=response.body))
        events.append(h11.EndOfMessage())
        await exchange.send(*events)

    async def _reject_malformed(self, exchange: _Exchange, exc: h11.RemoteProtocolError) -> None:
        """Answer a request h11 cannot parse with its suggested status, then close."""
        if exchange.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        response = text_response(exc.error_status_hint, "bad request")
        headers = [(name.encode(), value.encode()) for name, value in response.headers]
        headers += [
            (b"content-length", str(len(response.body)).encode()),
            (b"connection", b"close"),
        ]
        with contextlib.suppress(Exception):
            await exchange.send(
                h11.Response(status_code=response.status, headers=headers),
                h11.Data(data=response.body),
                h11.EndOfMessage(),
            )
