"""What a request costs the gateway beyond hypercorn's own work, counted where it is exact: the
tasks the app starts per request."""

from __future__ import annotations

import asyncio
import gc
import json
import tracemalloc
from collections.abc import Coroutine
from typing import Any

import aiohttp
import pytest

from .conftest import StartGateway
from .support import Engine, eventually, start_engine

CHAT = {"model": "stub", "messages": [{"role": "user", "content": "hi"}]}


def _count_app_tasks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the coroutines started as tasks, from now on, by the tasks hypercorn runs the
    ASGI app in (not hypercorn's own per-connection tasks)."""
    loop = asyncio.get_running_loop()
    started: list[str] = []
    create_task = loop.create_task

    def counting(coro: Coroutine[Any, Any, Any], **kwargs: Any) -> asyncio.Task[Any]:
        creator = asyncio.current_task()
        name = coro.cr_code.co_qualname  # type: ignore[attr-defined]
        if creator is not None and _runs_the_app(creator):
            started.append(name)
        return create_task(coro, **kwargs)

    monkeypatch.setattr(loop, "create_task", counting)
    return started


def _runs_the_app(task: asyncio.Task[Any]) -> bool:
    code = task.get_coro().cr_code  # type: ignore[union-attr]
    return code.co_qualname == "_run_asgi" and code.co_filename.endswith("receive_queue.py")


async def test_a_quick_warm_request_starts_no_task(
    engine: Engine,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The exchange runs in hypercorn's task for the request, and neither the server (its
    keep-alive timer) nor the app (a disconnect watcher) starts another."""
    gateway = await start_gateway(engine.url, readiness_interval=60.0)
    async with http.post(f"{gateway.url}/v1/chat/completions", json=CHAT) as response:
        assert response.status == 200  # readiness probed and cached, connection pooled
    started = _count_app_tasks(monkeypatch)
    for _ in range(10):
        async with http.post(f"{gateway.url}/v1/chat/completions", json=CHAT) as response:
            assert response.status == 200
            await response.read()
    assert started == []


async def test_a_streamed_exchange_starts_no_task_either(
    start_gateway: StartGateway, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its client is still watched for a disconnect (`test_proxy`): the server's receive queue
    reports it, no task waits in `receive()` for it."""
    slow = await start_engine(token_count=3, token_delay=0.1)
    try:
        gateway = await start_gateway(slow.url, readiness_interval=60.0)
        async with http.post(f"{gateway.url}/v1/chat/completions", json=CHAT) as response:
            assert response.status == 200  # readiness probed and cached
        started = _count_app_tasks(monkeypatch)
        async with http.post(
            f"{gateway.url}/v1/chat/completions", json={**CHAT, "stream": True}
        ) as response:
            assert response.status == 200
            assert any(_runs_the_app(task) for task in asyncio.all_tasks()), "counted in"
            assert (await response.read()).count(b"data: ") == 4
        assert started == []
    finally:
        slow.server.close()


async def test_waiting_cold_streams_share_one_readiness_poll(
    engine: Engine,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    """Held streams wake for their heartbeats, not every readiness interval each: 20 of them
    over 20 intervals are probed for about as often as one would be (they once asked 400
    times)."""
    engine.make_unready()
    interval, streams = 0.05, 20
    gateway = await start_gateway(
        engine.url,
        readiness_interval=interval,
        held_readiness_interval=interval,
        heartbeat_interval=30.0,
    )
    body = {"model": "stub", "messages": [], "stream": True}
    held = [
        await http.post(f"{gateway.url}/v1/chat/completions", json=body) for _ in range(streams)
    ]
    await eventually(lambda: gateway.pending == streams, what="every stream to be waiting")
    before = engine.health_probes
    await asyncio.sleep(20 * interval)  # the window the probes are counted over
    assert engine.health_probes - before <= 2 * 20
    engine.make_ready()
    for response in held:
        assert response.status == 200
        assert (await response.read()).endswith(b"data: [DONE]\n\n")
        response.release()


async def test_a_warm_request_leaves_no_reference_cycles(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """Whatever a request allocates is freed when it ends, not left for the cyclic collector,
    whose runs under load are pauses in every request's latency."""
    gateway = await start_gateway(engine.url, readiness_interval=60.0)
    url = f"{gateway.url}/v1/chat/completions"
    async with http.post(url, json=CHAT) as response:
        await response.read()
    gc.collect()
    gc.disable()
    try:
        for _ in range(20):
            async with http.post(url, json=CHAT) as response:
                await response.read()
        left = gc.collect()
    finally:
        gc.enable()
    assert left < 20, f"{left} objects in cycles after 20 requests"


Held = list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]


async def _hold(gateway_port: int, prompt: int, streams: int, held: Held) -> float:
    """Traced memory per cold stream held (added to `held`) whose request carries a
    `prompt`-byte message."""
    body = json.dumps({"stream": True, "messages": [{"role": "user", "content": "x" * prompt}]})
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    ) + body.encode()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    started = len(held)
    for _ in range(streams):
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway_port)
        writer.write(request)  # one write: the gateway reads it in one piece
        held.append((reader, writer))
    for reader, _ in held[started:]:
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        await reader.readuntil(b": heartbeat\n\n")  # held cold, its body long parsed
    gc.collect()
    return (tracemalloc.get_traced_memory()[0] - before) / streams


async def test_a_held_request_keeps_its_bytes_once(
    engine: Engine, start_gateway: StartGateway
) -> None:
    """The app keeps the body it will forward; the read that carried it must not be kept too
    (the connection's read loop waits for the next read for as long as the request is held)."""
    engine.make_unready()
    gateway = await start_gateway(engine.url, heartbeat_interval=0.05)
    held: Held = []
    tracemalloc.start()
    try:
        await _hold(gateway.server.port, 100, 10, held)  # first-use allocations, not per stream
        small = await _hold(gateway.server.port, 100, 10, held)
        large = await _hold(gateway.server.port, 30_100, 10, held)
    finally:
        tracemalloc.stop()
        for _, writer in held:
            writer.close()
    kept_per_prompt_byte = (large - small) / 30_000
    assert 0.9 < kept_per_prompt_byte < 1.4, (small, large)
