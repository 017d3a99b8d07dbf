"""The gateway's upstream client: keep-alive HTTP/1.1 connections to one origin (the backend
Service, one of its pods, or the Kubernetes API server).

Chosen by measurement over aiohttp and httpx (benchmarks/gateway): through a bare hypercorn
proxy, aiohttp costs about 450 µs of CPU per request and httpx several times that, this client
about 70 µs, so the gateway's cost is hypercorn's plus its own logic. It does only what a
single-origin reverse proxy needs: one request at a time per connection, bodies streamed both
ways, and one retry, under the rule below, for a pooled connection the backend closed as the
request went out.

That rule: retry once on a fresh connection only if nothing of the request was written, or if
the request is replayable (GET/HEAD/OPTIONS/TRACE, or carrying an idempotency key) and its body
is held in memory. A POST the backend received and then crashed on is never sent twice. Idle
connections are retired before common backend keep-alive timeouts (uvicorn's is 5 s), so a
request rarely races a backend closing its connection in the first place.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from noctaya.gateway.upstream.connection import Http1Connection, UpstreamClosed, UpstreamTimeout
from noctaya.gateway.upstream.parser import Head, ProtocolError

Headers = list[tuple[bytes, bytes]]
MAX_IDLE = 256
MAX_IDLE_SECONDS = 4.0
READ_TIMEOUT = 600.0
"""The longest the backend may stay silent mid-exchange: a non-streamed completion sends its
first byte only once generated."""
HEAD_TIMEOUT = 30.0
"""How long a begun response head may take to be complete."""
_BODYLESS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS", "TRACE"})
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_IDEMPOTENCY_KEYS = frozenset({b"idempotency-key", b"x-idempotency-key"})
Writer = asyncio.Task[None] | None
"""The task writing a streamed request body, if any."""


SYN_ANSWER_SECONDS = 0.5
"""How long a connection attempt waits for its SYN to be answered. The kernel would resend it
only after a second, and on the same route: one sent while kube-proxy rewrites a Service's
rules can be lost to a route gone a moment later, and each resend with it. A new socket, on a
new source port, takes the new route."""
RESOLVED_FOR = 30.0
"""Seconds the backend's looked-up addresses are used: a Service's cluster IP lasts as long as
the Service; a connection failing otherwise than refused forgets them at once."""


async def _sock_connect(
    loop: asyncio.AbstractEventLoop, sock: socket.socket, address: tuple[Any, ...]
) -> None:
    """Connect the non-blocking `sock` to `address`, an address `getaddrinfo` gave. Unlike
    `loop.sock_connect`, which under uvloop looks the address up again and so encodes it
    through the IDNA codec (0.4 MiB of every gateway's memory from its first connection), the
    socket module takes an ASCII address as it is."""
    try:
        sock.connect(address)
        return
    except (BlockingIOError, InterruptedError):
        pass  # in progress (a signal may interrupt it, too): writable once it is answered
    writable = loop.create_future()
    loop.add_writer(sock.fileno(), lambda: writable.done() or writable.set_result(None))
    try:
        await writable
    finally:
        loop.remove_writer(sock.fileno())
    error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if error:
        raise OSError(error, os.strerror(error))  # ConnectionRefusedError for ECONNREFUSED


def _host_header(netloc: str) -> bytes:
    """The Host header of the backend URL; IDNA only for a name that needs it (the codec costs
    0.4 MiB of every gateway's memory)."""
    return netloc.encode("ascii") if netloc.isascii() else netloc.encode("idna")


def _packed_address(host: str) -> bytes | None:
    """`host` as a packed IPv4 or IPv6 address; None for a name."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            return socket.inet_pton(family, host)
        except OSError:
            continue
    return None


def _check_peer_address(transport: asyncio.Transport, host: str, packed: bytes) -> None:
    """The verified certificate must name `host` among its IP addresses (RFC 6125 §6.2.1: an
    address matches only an iPAddress entry, never a name); the connection is closed and
    SSLCertVerificationError raised otherwise."""
    certificate = transport.get_extra_info("peercert") or {}
    for kind, value in certificate.get("subjectAltName", ()):
        if kind == "IP Address" and _packed_address(value.strip()) == packed:
            return
    transport.abort()
    raise ssl.SSLCertVerificationError(f"the server's certificate is not valid for {host}")


class NotConnected(ConnectionError):
    """No connection to the backend could be made (refused, unreachable, unresolvable, timed
    out): nothing of the request reached it."""


UpstreamError = (UpstreamClosed, UpstreamTimeout, ProtocolError, OSError, TimeoutError)
"""What a failed exchange raises (besides whatever the request body's source raised)."""


class UpstreamResponse:
    __slots__ = (
        "_connection",
        "headers",
        "read_chunk",
        "status",
    )

    def __init__(self, head: Head, connection: Http1Connection) -> None:
        self.status = head.status
        self.headers = head.headers
        self._connection = connection
        self.read_chunk: Callable[[], Awaitable[bytes]] = connection.read_chunk
        """What has arrived of the body, b"" at its end (`Http1Connection.read_chunk`): the
        connection's own, so a relay waiting for each token of a stream waits one frame less."""

    @property
    def ended(self) -> bool:
        return self._connection.ended

    async def read(self) -> bytes:
        parts = []
        while chunk := await self.read_chunk():
            parts.append(chunk)
        return b"".join(parts)


class UpstreamPool:
    def __init__(
        self,
        backend_url: str,
        connect_timeout: float = 30.0,
        max_idle_seconds: float = MAX_IDLE_SECONDS,
        read_timeout: float = READ_TIMEOUT,
        head_timeout: float = HEAD_TIMEOUT,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """`ssl_context` verifies an `https` backend (the system's CAs when None); for a host
        given as an IP address its hostname check is turned off, and the pool matches the
        certificate's IP addresses itself."""
        parts = urlsplit(backend_url)
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl: ssl.SSLContext | None = None
        self._lookup_name: Any = self._host.encode("ascii") if self._host.isascii() else self._host
        """bytes for an ASCII name: the address lookup then skips the IDNA codec, as
        `_host_header` does."""
        self._server_hostname: str | None = None
        self._peer_address: bytes | None = None
        """The packed IP of an `https` host given as an address, whose certificate this pool
        checks itself (`_check_peer_address`): the ssl module would encode the address through
        the IDNA codec (0.4 MiB of every watching gateway) to check it, and uvloop takes only
        `str` names."""
        if parts.scheme == "https":
            self._ssl = ssl_context or ssl.create_default_context()
            self._peer_address = _packed_address(self._host)
            if self._peer_address is None:
                self._server_hostname = self._host
            else:  # checked against the address instead ("" asks for no name check)
                self._ssl.check_hostname = False
                self._server_hostname = ""
        self.host_header = _host_header(parts.netloc.rsplit("@", 1)[-1])
        self.path_prefix = parts.path.rstrip("/").encode()
        self._connect_timeout = connect_timeout
        self._max_idle_seconds = max_idle_seconds
        self._read_timeout = read_timeout
        self._head_timeout = head_timeout
        self._idle: list[tuple[Http1Connection, float]] = []  # with when it went idle
        self._addresses: list[tuple[socket.AddressFamily, tuple[Any, ...]]] = []
        self._resolved_until = float("-inf")
        self._closed = False

    def exchange(
        self,
        method: str,
        target: bytes,
        headers: Headers,
        body: bytes | AsyncIterable[bytes] = b"",
        declared_length: int | None = None,
    ) -> Exchange:
        """`async with` it: sends one request and yields its response once the head has arrived.

        `headers` must not contain Host, Content-Length or Transfer-Encoding: framing is this
        client's job. A streamed body is sent with `declared_length` if known, else chunked.
        """
        return Exchange(self, method, target, headers, body, declared_length)

    async def close(self) -> None:
        self.retire()

    def retire(self) -> None:
        """Close the idle connections; those of exchanges still in progress close as they end
        (a pod gone from the backend's endpoints keeps no connection)."""
        self._closed = True
        self.close_idle()

    def close_idle(self) -> None:
        """Close every idle connection (exchanges in progress keep theirs)."""
        while self._idle:
            self._idle.pop()[0].close()

    def _done_with(self, connection: Http1Connection) -> None:
        if connection.reusable and len(self._idle) < MAX_IDLE and not self._closed:
            connection.release()
            self._idle.append((connection, asyncio.get_running_loop().time()))
        else:
            connection.close()

    def _take_idle(self) -> Http1Connection | None:
        """The most recently used open connection; the rest, if it is too old, are older still."""
        oldest_usable = asyncio.get_running_loop().time() - self._max_idle_seconds
        while self._idle:
            connection, idle_since = self._idle.pop()
            if idle_since < oldest_usable:
                connection.close()
                self.close_idle()
                return None
            if not connection.closed:
                return connection
        return None

    async def _connect(self) -> Http1Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                sock = await self._connected_socket()
                transport, connection = await loop.create_connection(
                    lambda: Http1Connection(self._read_timeout, self._head_timeout),
                    sock=sock,
                    ssl=self._ssl,
                    server_hostname=self._server_hostname,
                )
            if self._peer_address is not None:
                _check_peer_address(transport, self._host, self._peer_address)
        except ConnectionRefusedError as error:
            # The address is right: nothing listens there yet (or kube-proxy rejects for a
            # Service without a ready endpoint).
            raise NotConnected(str(error)) from error
        except (OSError, TimeoutError) as error:
            self._resolved_until = float("-inf")  # the address may be stale: look it up again
            raise NotConnected(str(error) or type(error).__name__) from error
        return connection

    async def _connected_socket(self) -> socket.socket:
        """A TCP connection to one of the backend's addresses, in their order; an attempt not
        answered within `SYN_ANSWER_SECONDS` is dropped and tried again on a new socket, until
        the caller's deadline. Raises ConnectionRefusedError if every address refused."""
        loop = asyncio.get_running_loop()
        while True:
            refused: ConnectionRefusedError | None = None
            for family, address in await self._resolved():
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.setblocking(False)
                try:
                    async with asyncio.timeout(SYN_ANSWER_SECONDS):
                        await _sock_connect(loop, sock, address)
                except ConnectionRefusedError as error:
                    refused = error
                except TimeoutError:
                    pass  # its SYN was lost: the next attempt takes a new port and route
                except BaseException:
                    sock.close()
                    raise
                else:
                    return sock
                sock.close()
            if refused is not None:
                raise refused

    async def _resolved(self) -> list[tuple[socket.AddressFamily, tuple[Any, ...]]]:
        """The backend's addresses, looked up at most once per `RESOLVED_FOR`: a held request's
        readiness is probed 20 times a second, and each lookup of a Service's name is several
        queries to the cluster's DNS (one per search domain)."""
        loop = asyncio.get_running_loop()
        if loop.time() >= self._resolved_until:
            found = await loop.getaddrinfo(self._lookup_name, self._port, type=socket.SOCK_STREAM)
            self._addresses = list(dict.fromkeys((info[0], info[4]) for info in found))
            self._resolved_until = loop.time() + RESOLVED_FOR
        return self._addresses

    async def _send(
        self,
        connection: Http1Connection,
        method: str,
        target: bytes,
        headers: Headers,
        body: bytes | AsyncIterable[bytes],
        declared_length: int | None,
    ) -> tuple[Head, asyncio.Task[None] | None]:
        lines = [b"%s %s HTTP/1.1\r\nhost: %s\r\n" % (method.encode(), target, self.host_header)]
        lines.extend(b"%s: %s\r\n" % pair for pair in headers)
        connection.begin(head_request=method == "HEAD")
        if isinstance(body, bytes):
            if body or method not in _BODYLESS:
                lines.append(b"content-length: %d\r\n" % len(body))
            connection.write(b"".join(lines) + b"\r\n" + body)
            return await connection.read_head(), None
        chunked = declared_length is None
        if declared_length is None:
            lines.append(b"transfer-encoding: chunked\r\n")
        else:
            lines.append(b"content-length: %d\r\n" % declared_length)
        connection.write(b"".join(lines) + b"\r\n")
        writer = asyncio.get_running_loop().create_task(
            _write_body(connection, body, chunked=chunked)
        )
        writer.add_done_callback(lambda task: _abort_on_failure(task, connection))
        try:
            return await connection.read_head(), writer
        except BaseException:  # the caller never sees the writer: it must not outlive this
            await _stop(writer)
            raise


class Exchange:
    """One request and its response on a pooled connection (a class, not a generator-based
    context manager: it is entered once per proxied request)."""

    __slots__ = (
        "_body",
        "_connection",
        "_declared",
        "_headers",
        "_method",
        "_pool",
        "_target",
        "_writer",
    )

    def __init__(
        self,
        pool: UpstreamPool,
        method: str,
        target: bytes,
        headers: Headers,
        body: bytes | AsyncIterable[bytes],
        declared_length: int | None,
    ) -> None:
        self._pool = pool
        self._method = method
        self._target = target
        self._headers = headers
        self._body = body
        self._declared = declared_length
        self._connection: Http1Connection | None = None
        self._writer: asyncio.Task[None] | None = None

    async def __aenter__(self) -> UpstreamResponse:
        pool = self._pool
        connection = pool._take_idle()
        reused = connection is not None
        if connection is None:
            connection = await pool._connect()
        self._connection = connection
        try:
            try:
                head, self._writer = await self._send(connection)
            except UpstreamClosed:
                # A kept-alive connection the backend closed as the request went out.
                if not (reused and _may_retry(connection, self._method, self._headers, self._body)):
                    raise
                connection.close()
                self._connection = connection = await pool._connect()
                head, self._writer = await self._send(connection)
        except BaseException:
            await self._end()
            raise
        return UpstreamResponse(head, connection)

    async def __aexit__(self, *exc_info: object) -> None:
        await self._end()

    def _send(
        self, connection: Http1Connection
    ) -> Awaitable[tuple[Head, asyncio.Task[None] | None]]:
        return self._pool._send(
            connection, self._method, self._target, self._headers, self._body, self._declared
        )

    async def _end(self) -> None:
        connection, writer = self._connection, self._writer
        assert connection is not None
        if writer is not None and not writer.done():
            connection.close()
            await _stop(writer)
        self._pool._done_with(connection)


def _may_retry(
    connection: Http1Connection,
    method: str,
    headers: Headers,
    body: bytes | AsyncIterable[bytes],
) -> bool:
    """The retry rule: nothing reached the backend, or the request is safe to repeat and we
    still hold its body. A response byte means the backend processed it: never retried."""
    if connection.received_any:
        return False
    if not connection.sent_any:
        return True
    replayable = method in _IDEMPOTENT or any(name in _IDEMPOTENCY_KEYS for name, _ in headers)
    return replayable and isinstance(body, bytes)


async def _write_body(
    connection: Http1Connection, body: AsyncIterable[bytes], *, chunked: bool
) -> None:
    async for chunk in body:
        if chunk:
            connection.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            await connection.drain()
    if chunked:
        connection.write(b"0\r\n\r\n")


async def _stop(writer: asyncio.Task[None]) -> None:
    """Cancel the body writer and wait until it has ended (its own outcome is moot)."""
    writer.cancel()
    await asyncio.wait([writer])


def _abort_on_failure(task: asyncio.Task[None], connection: Http1Connection) -> None:
    if not task.cancelled() and task.exception() is not None:
        connection.abort(task.exception())  # type: ignore[arg-type]
