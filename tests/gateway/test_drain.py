"""The drain on SIGTERM within its budget: in-flight work finishes, what outlives the budget is cut,
and the gateway always closes."""

from __future__ import annotations

import asyncio
import json
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


@pytest.mark.parametrize(("path", "openai"), [("/v1/completions", True), ("/generate", False)])
async def test_a_cold_wait_outliving_the_drain_budget_gets_503_backend_not_ready(
    engine: Engine,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
    path: str,
    openai: bool,
) -> None:
    """Answered just before the forced close, not cut off with a bare 500; and the forced close
    of what remains (here an endless stream) logs no traceback."""
    engine.make_unready()
    endless = await start_engine(token_count=1000, token_delay=0.05)
    try:
        gateway = await start_gateway(engine.url, shutdown_timeout=0.8)
        streaming = await start_gateway(endless.url, shutdown_timeout=0.8)
        stream = await http.post(f"{streaming.url}/v1/completions", json={"stream": True})
        assert (await stream.content.readuntil(b"\n\n")).startswith(b"data: {")
        waiting = asyncio.ensure_future(http.post(f"{gateway.url}{path}", json={}))
        await eventually(lambda: gateway.pending == 1, what="the request to be admitted")
        started = time.monotonic()
        stopping = asyncio.gather(gateway.server.stop(), streaming.server.stop())
        async with await waiting as response:
            assert response.status == 503
            assert response.headers["Retry-After"] == "10"
            body = await response.read()
        assert time.monotonic() - started < 0.8, "answered before the forced close"
        if openai:
            assert json.loads(body)["error"]["message"] == "backend not ready"
        else:
            assert body == b"backend not ready\n"
        await asyncio.wait_for(stopping, 10)
        stream.close()
    finally:
        endless.server.close()
    logged = "\n".join(record.getMessage() + str(record.exc_info) for record in caplog.records)
    assert "CancelledError" not in logged
    assert not [record for record in caplog.records if record.exc_info], logged


async def test_a_cold_stream_outliving_the_drain_budget_ends_with_an_error_frame(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, shutdown_timeout=0.8, heartbeat_interval=0.1)
    response = await http.post(f"{gateway.url}/v1/completions", json={"stream": True})
    assert response.status == 200
    assert await response.content.readuntil(b"\n\n") == b": heartbeat\n\n"
    started = time.monotonic()
    stopping = asyncio.ensure_future(gateway.server.stop())
    blocks = await read_events(response)
    assert time.monotonic() - started < 0.8, "ended before the forced close"
    assert blocks[-1].startswith("event: error\ndata: {")
    assert json.loads(blocks[-1].split("data: ", 1)[1])["error"]["message"] == "backend not ready"
    await asyncio.wait_for(stopping, 10)
