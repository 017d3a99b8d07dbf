"""Streaming load generator, run as its own process.

`measure <url> <streams> <concurrency>`: chat completion streams; prints JSON with the
time to first token and the gaps between tokens, as the client sees them.
`hold <url> <streams>`: opens that many streams (against a cold backend they stay open on
heartbeats), prints `held <n> errors <e>` once every head has arrived, and holds them until its
standard input closes. It opens at most `OPENING` at once, so tens of thousands of connects
neither overflow the gateway's listen backlog nor time out behind each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator

import aiohttp
from noctaya.gateway.process import running as process

PATH = "/v1/chat/completions"
BODY = {"model": "stub", "messages": [{"role": "user", "content": "hi"}], "stream": True}
OPENING = 500


def raise_open_files_limit() -> None:
    """Every held stream is a descriptor in the gateway and in the holder: the soft limit is
    raised as far as the hard one allows (processes started after this inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@contextlib.contextmanager
def holding(url: str, count: int, prompt: int = 0) -> Iterator[tuple[int, int]]:
    """`count` cold streams held open on the gateway at `url` by a `hold` process while the
    context lasts: yields (streams held, errors)."""
    holder = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.gateway.streams", "hold", url, str(count), str(prompt)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdin is not None
    try:
        _, held, _, errors = holder.stdout.readline().split()  # "held <n> errors <e>"
        yield int(held), int(errors)
    finally:
        holder.stdin.close()
        holder.wait(120)


async def _one(session: aiohttp.ClientSession, url: str) -> tuple[float, list[float]]:
    started = time.perf_counter()
    arrivals: list[float] = []
    async with session.post(url + PATH, json=BODY) as response:
        response.raise_for_status()
        async for line in response.content:
            if line.startswith(b"data: {"):
                arrivals.append(time.perf_counter())
    if not arrivals:
        raise RuntimeError("stream without tokens")
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    return arrivals[0] - started, gaps


async def measure(url: str, streams: int, concurrency: int) -> dict[str, float]:
    limit = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def bounded() -> tuple[float, list[float]] | None:
            async with limit:
                try:
                    return await _one(session, url)
                except (aiohttp.ClientError, RuntimeError):
                    return None

        results = await asyncio.gather(*(bounded() for _ in range(streams)))
    good = [r for r in results if r is not None]
    ttfts = sorted(r[0] * 1000 for r in good)
    gaps = sorted(g * 1000 for r in good for g in r[1])
    return {
        "ttft_p50_ms": statistics.median(ttfts),
        "ttft_p99_ms": ttfts[int(len(ttfts) * 0.99) - 1],
        "gap_mean_ms": statistics.fmean(gaps),
        "gap_p99_ms": gaps[int(len(gaps) * 0.99) - 1],
        "errors": streams - len(good),
    }


async def hold(url: str, streams: int, prompt: int = 0) -> None:
    raise_open_files_limit()
    body = BODY if not prompt else {**BODY, "messages": [{"role": "user", "content": "x" * prompt}]}
    opening = asyncio.Semaphore(OPENING)
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def open_one() -> aiohttp.ClientResponse | None:
            try:
                async with opening:
                    response = await session.post(url + PATH, json=body)
            except aiohttp.ClientError:
                return None
            if response.status != 200 or response.content_type != "text/event-stream":
                response.close()
                return None
            return response

        opened = await asyncio.gather(*(open_one() for _ in range(streams)))
        held = [r for r in opened if r is not None]
        print(f"held {len(held)} errors {streams - len(held)}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        for response in held:
            response.close()


if __name__ == "__main__":
    mode, target = sys.argv[1], sys.argv[2]
    if mode == "measure":
        report = process.run(measure(target, int(sys.argv[3]), int(sys.argv[4])))
        print(json.dumps(report))
    else:
        process.run(hold(target, int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 0))
