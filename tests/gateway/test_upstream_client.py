"""The gateway's upstream client against backends that speak HTTP/1.1 in every permitted way
(and some forbidden ones), through a real gateway."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from noctaya.gateway.upstream import UpstreamPool

from .conftest import StartGateway

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def backend() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    servers: list[asyncio.Server] = []

    async def start(handler: Handler) -> str:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    for server in servers:
        server.close()


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))
    return head


def _health_then(answer: Handler) -> Handler:
    """Answer /health with 200 (keep-alive), anything else with `answer`."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await _read_request(reader)
                if head.startswith(b"GET /health "):
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                    continue
                await answer(reader, writer)
                return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    return handler


async def test_body_delimited_by_connection_close_is_relayed_whole(
    backend: Callable[[Handler], Awaitable[str]],
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil ")
        await writer.drain()
        writer.write(b"the end")
        writer.close()

    gateway = await start_gateway(await backend(_health_then(answer)))
    async with http.get(f"{gateway.url}/v1/models") as response:
        assert response.status == 200
        assert await response.read() == b"until the end"


async def test_interim_100_continue_is_not_relayed(
    backend: Callable[[Handler], Awaitable[str]],
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"
        )
        await writer.drain()
        writer.close()

    gateway = await start_gateway(await backend(_health_then(answer)))
    async with http.post(f"{gateway.url}/v1/files", data=b"x") as response:
        assert response.status == 201
        assert await response.read() == b"ok"


async def test_backend_speaking_nonsense_is_a_502(
    backend: Callable[[Handler], Awaitable[str]],
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        await writer.drain()
        writer.close()

    gateway = await start_gateway(await backend(_health_then(answer)))
    async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
        assert response.status == 502
        assert (await response.json())["error"]["code"] == "bad_gateway"


async def test_large_response_bodies_stream_through_intact(
    backend: Callable[[Handler], Awaitable[str]],
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    payload = bytes(range(256)) * (16 * 1024)  # 4 MiB

    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload))
        for offset in range(0, len(payload), 100_000):
            writer.write(payload[offset : offset + 100_000])
            await writer.drain()
        writer.close()

    gateway = await start_gateway(await backend(_health_then(answer)))
    async with http.get(f"{gateway.url}/v1/files/big") as response:
        digest = hashlib.sha256()
        async for chunk in response.content.iter_chunked(65536):
            digest.update(chunk)
            await asyncio.sleep(0)  # a slower reader than the backend: flow control engages
    assert digest.digest() == hashlib.sha256(payload).digest()


async def test_a_pooled_connection_closed_by_the_backend_is_retried_once_on_a_fresh_one(
    backend: Callable[[Handler], Awaitable[str]],
) -> None:
    """The backend answers the first request on a connection, then drops the connection when
    the next one arrives, as a keep-alive timeout racing a new request does."""
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        with contextlib.suppress(asyncio.IncompleteReadError):
            await _read_request(reader)
        writer.close()

    pool = UpstreamPool(await backend(handler))
    try:
        for _ in range(3):
            async with pool.exchange("POST", b"/v1/completions", [], b"{}") as response:
                assert response.status == 200
                assert await response.read() == b"ok"
    finally:
        await pool.close()
    assert connections >= 3


async def test_keep_alive_connections_are_reused(
    backend: Callable[[Handler], Awaitable[str]],
) -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            while True:
                await _read_request(reader)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    pool = UpstreamPool(await backend(handler))
    try:
        for _ in range(5):
            async with pool.exchange("GET", b"/x", []) as response:
                assert await response.read() == b"ok"
    finally:
        await pool.close()
    assert connections == 1
