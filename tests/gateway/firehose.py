"""A backend that streams as fast as the gateway reads, counting what it wrote: how much of a
response the gateway buffered shows in `sent` while its client takes nothing."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

CHUNK = b"data: " + b"x" * 65_000 + b"\n\n"


@dataclass
class Firehose:
    server: asyncio.Server
    url: str
    sent: int = 0
    streams: int = 0
    """Responses being streamed right now."""


async def start_firehose() -> Firehose:
    firehose: Firehose

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if head.split(b" ", 2)[1].endswith(b"/health"):
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                    continue
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                firehose.streams += 1
                try:
                    while True:
                        writer.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
                        await writer.drain()
                        firehose.sent += len(CHUNK)
                finally:
                    firehose.streams -= 1
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    firehose = Firehose(server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
    return firehose
