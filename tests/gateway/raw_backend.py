"""Backends written byte by byte: asyncio servers on 127.0.0.1 that answer with exactly the bytes
a test gives them, to put the gateway's upstream client in front of any response at all."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
StartBackend = Callable[[Handler], Awaitable[str]]


@pytest.fixture
async def backend() -> AsyncIterator[StartBackend]:
    """Start a raw backend with a connection handler; its URL is returned."""
    servers: list[asyncio.Server] = []

    async def start(handler: Handler) -> str:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    for server in servers:
        server.close()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request head (its Content-Length body read and discarded)."""
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))
    return head


def health_then(answer: Handler) -> Handler:
    """Answer /health with 200 (keep-alive), anything else with `answer`."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await read_request(reader)
                if head.startswith(b"GET /health "):
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                    continue
                await answer(reader, writer)
                return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    return handler


def answering(*parts: bytes, then_close: bool = True) -> Handler:
    """A backend answer: write `parts` one by one, then close (or stay silent, connected)."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for part in parts:
            writer.write(part)
            await writer.drain()
        if then_close:
            writer.close()
            return
        with contextlib.suppress(ConnectionError):
            await reader.read()  # silent until the gateway gives up and closes
        writer.close()

    return answer
