"""The drain (§2.9) within its budget: in-flight work finishes, what outlives the budget is cut,
and the gateway always closes."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from .conftest import StartGateway
from .support import Engine, eventually, read_events, start_engine, token_texts


async def test_in_flight_requests_finish_during_the_drain(
    start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    slow = await start_engine(token_count=4, token_delay=0.1)
    try:
        gateway = await start_gateway(slow.url)
        streams = [
            await http.post(f"{gateway.url}/v1/chat/completions", json={"stream": True})
            for _ in range(3)
        ]
        stopping = asyncio.ensure_future(gateway.server.stop())
        for response in streams:
            blocks = await read_events(response)
            assert token_texts(blocks) == ["tok0 ", "tok1 ", "tok2 ", "tok3 "]
            assert blocks[-1] == "data: [DONE]"
        await asyncio.wait_for(stopping, 10)
    finally:
        slow.server.close()


async def test_streams_outliving_the_drain_budget_are_cut_and_the_gateway_closes(
    start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    endless = await start_engine(token_count=1000, token_delay=0.05)
    try:
        gateway = await start_gateway(endless.url, shutdown_timeout=0.4)
        response = await http.post(f"{gateway.url}/v1/chat/completions", json={"stream": True})
        assert (await response.content.readuntil(b"\n\n")).startswith(b"data: {")
        started = time.monotonic()
        await asyncio.wait_for(gateway.server.stop(), 10)
        assert 0.3 <= time.monotonic() - started < 5
        with pytest.raises(aiohttp.ClientPayloadError):
            await read_events(response)
        assert gateway.pending == 0
    finally:
        endless.server.close()


async def test_cold_waits_are_part_of_the_drain(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url)
    waiting = asyncio.ensure_future(http.post(f"{gateway.url}/v1/completions", json={}))
    await eventually(lambda: gateway.pending == 1, what="the request to be admitted")
    stopping = asyncio.ensure_future(gateway.server.stop())
    await asyncio.sleep(0.1)  # a drain that did not wait would be over by now
    assert not stopping.done(), "the drain waits for the admitted request"
    engine.make_ready()
    async with await waiting as response:
        assert response.status == 200
    await asyncio.wait_for(stopping, 10)
