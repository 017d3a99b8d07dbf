"""Reference proxies for choosing the gateway's upstream client: a bare hypercorn + uvloop ASGI
app that forwards each request with one client library and streams the response back chunk by
chunk. No gateway logic, so the difference between them is the client alone.

`python -m benchmarks.gateway.client_choice aiohttp|httpx|raw|none <port> <backend-url>`
(`none`: hypercorn answering by itself; with BENCH_GATEWAY_SERVER=1 as the gateway runs it)
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import httpx
from hypercorn.asyncio import serve
from hypercorn.config import Config
from noctaya.gateway.process import running as process
from noctaya.gateway.server.patches import install_server_patches

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
POOL = 512
GATEWAY_SERVER = "BENCH_GATEWAY_SERVER"
"""Set: hypercorn runs with the gateway's changes to it (`install_server_patches`)."""


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _aiohttp_app(backend: str) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    session: aiohttp.ClientSession | None = None

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal session
        if scope["type"] != "http":
            return
        if session is None:
            session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=POOL))
        if scope["path"] == "/__ping":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        body = await _body(receive)
        headers = {"content-type": "application/json"}
        async with session.request(
            scope["method"], backend + scope["path"], data=body, headers=headers
        ) as response:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status,
                    "headers": [(b"content-type", response.content_type.encode())],
                }
            )
            async for chunk in response.content.iter_any():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    return app


def _httpx_app(backend: str) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    limits = httpx.Limits(max_connections=POOL, max_keepalive_connections=POOL)
    client: httpx.AsyncClient | None = None

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal client
        if scope["type"] != "http":
            return
        if client is None:
            client = httpx.AsyncClient(limits=limits, timeout=None)
        if scope["path"] == "/__ping":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        body = await _body(receive)
        headers = {"content-type": "application/json"}
        async with client.stream(
            scope["method"], backend + scope["path"], content=body, headers=headers
        ) as response:
            content_type = response.headers.get("content-type", "").encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [(b"content-type", content_type)],
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    return app


class _RawConnection(asyncio.Protocol):
    """Just enough HTTP/1.1 to measure a lean client: Content-Length responses, keep-alive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes, bytes]] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0 or self.waiter is None:
            return
        head = bytes(self.buffer[:end])
        length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
        if len(self.buffer) < end + 4 + length:
            return
        body = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        status = int(head[9:12])
        content_type = b"application/json"
        self.waiter.set_result((status, content_type, body))
        self.waiter = None


def _raw_app(backend: str) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    host, port = backend.removeprefix("http://").split(":")
    idle: list[_RawConnection] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/__ping":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        body = await _body(receive)
        if idle:
            connection = idle.pop()
        else:
            loop = asyncio.get_running_loop()
            _, connection = await loop.create_connection(_RawConnection, host, int(port))
        connection.waiter = asyncio.get_running_loop().create_future()
        assert connection.transport is not None
        connection.transport.write(
            b"%s %s HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s"
            % (scope["method"].encode(), scope["raw_path"], host.encode(), len(body), body)
        )
        status, content_type, answer = await connection.waiter
        idle.append(connection)
        headers = [(b"content-type", content_type)]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return app


def _self_app(backend: str) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """No upstream at all: hypercorn's own ceiling, for scale."""
    answer = b'{"id":"stub-cmpl","object":"chat.completion","choices":[]}'

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await _body(receive)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return app


APPS = {"aiohttp": _aiohttp_app, "httpx": _httpx_app, "raw": _raw_app, "none": _self_app}


async def _main(client: str, port: int, backend: str) -> None:
    config = Config()
    if os.environ.get(GATEWAY_SERVER):
        install_server_patches()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.keep_alive_max_requests = 2**31
    config.backlog = 4096
    await serve(APPS[client](backend), config)  # type: ignore[arg-type]


if __name__ == "__main__":
    process.run(_main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
