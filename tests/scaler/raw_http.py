"""Raw-socket HTTP/1.1 for the aggregator tests: every byte (and every silence) is the test's."""

from __future__ import annotations

import asyncio


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def response(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """(status line + headers, body) of one Content-Length response."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head, await asyncio.wait_for(reader.readexactly(length), 5)


async def closed_by_server(reader: asyncio.StreamReader, within: float = 5.0) -> bool:
    return await asyncio.wait_for(reader.read(), within) == b""
