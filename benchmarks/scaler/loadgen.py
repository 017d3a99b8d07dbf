"""A small keep-alive HTTP/1.1 load generator (raw asyncio streams) shared by the scaler benchmarks.

It writes pre-built requests and parses only the status line and Content-Length, so the client
costs far less per request than the servers it measures.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    errors: int = 0

    def merge(self, other: Tally) -> None:
        self.latencies += other.latencies
        self.errors += other.errors
        for status, n in other.statuses.items():
            self.statuses[status] = self.statuses.get(status, 0) + n


def print_table(headers: tuple[str, ...], rows: list[tuple[object, ...]]) -> None:
    """A plain aligned text table (the benchmarks' output format)."""
    cells = [[str(h) for h in headers], *[[_cell(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        print("  ".join(value.rjust(width) for value, width in zip(row, widths, strict=True)))


def _cell(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    if length:
        await reader.readexactly(length)
    return status


async def keep_alive_client(
    port: int, make_request: Callable[[int], bytes], deadline: float, tally: Tally
) -> None:
    """Send requests back to back on one connection until `deadline` (reconnect if closed)."""
    n = 0
    while time.perf_counter() < deadline:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            tally.errors += 1
            await asyncio.sleep(0.01)
            continue
        try:
            while time.perf_counter() < deadline:
                n += 1
                started = time.perf_counter()
                writer.write(make_request(n))
                status = await read_response(reader)
                tally.latencies.append(time.perf_counter() - started)
                tally.statuses[status] = tally.statuses.get(status, 0) + 1
        except (OSError, asyncio.IncompleteReadError, ValueError):
            tally.errors += 1
        finally:
            writer.close()


async def run_load(
    port: int, connections: int, seconds: float, make_request: Callable[[int, int], bytes]
) -> Tally:
    deadline = time.perf_counter() + seconds
    tallies = [Tally() for _ in range(connections)]
    await asyncio.gather(
        *(
            keep_alive_client(port, lambda n, c=c: make_request(c, n), deadline, tallies[c])
            for c in range(connections)
        )
    )
    total = Tally()
    for tally in tallies:
        total.merge(tally)
    return total
