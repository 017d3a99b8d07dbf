"""A TCP proxy whose answers flow at a fixed rate: a registry that serves a blob slowly enough
for a test to act while a download is under way (cut the downloader's node off mid-blob).

Only the upstream → client direction is throttled, so pushing through the proxy stays fast.
Run as a program (`python throttled_proxy.py LISTEN UPSTREAM BYTES_PER_SECOND`) so that it can be
started inside a network namespace; it prints `listening` once it accepts connections and runs
until it is killed.
"""

from __future__ import annotations

import asyncio
import sys

CHUNK = 16 * 1024


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, rate: float | None
) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
            if rate is not None:
                await asyncio.sleep(len(data) / rate)
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def _serve(listen: str, upstream: str, rate: float) -> None:
    up_host, up_port = upstream.rsplit(":", 1)

    async def relay(client_reader: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        try:
            server_reader, server = await asyncio.open_connection(up_host, int(up_port))
        except OSError:
            client.close()
            return
        await asyncio.gather(_pipe(client_reader, server, None), _pipe(server_reader, client, rate))

    host, port = listen.rsplit(":", 1)
    server = await asyncio.start_server(relay, host, int(port))
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    listen_at, upstream_at, bytes_per_second = sys.argv[1:]
    asyncio.run(_serve(listen_at, upstream_at, float(bytes_per_second)))
