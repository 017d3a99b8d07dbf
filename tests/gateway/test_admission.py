"""The bounded admission queue: `maxQueue` requests in, the rest refused at once with 429."""

from __future__ import annotations

import asyncio

import aiohttp

from .conftest import StartGateway
from .support import Engine, eventually, metric


async def test_burst_of_105_against_max_queue_100_admits_exactly_100_and_refuses_5(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()  # admitted requests wait for activation, so all 100 stay in flight
    gateway = await start_gateway(engine.url, max_queue=100)

    async def one() -> tuple[int, dict[str, str], bytes]:
        async with http.post(f"{gateway.url}/v1/chat/completions", json={}) as response:
            return response.status, dict(response.headers), await response.read()

    burst = [asyncio.ensure_future(one()) for _ in range(105)]
    await eventually(lambda: sum(task.done() for task in burst) == 5, what="5 refusals")
    refused = [task.result() for task in burst if task.done()]
    assert gateway.pending == 100
    for status, headers, body in refused:
        assert status == 429
        assert headers["Retry-After"] == "5"
        assert body == (
            b'{"error":{"message":"gateway queue full","type":"rate_limit_error",'
            b'"code":"queue_full"}}\n'
        )
    assert engine.requests == [], "refusals happen before any backend work"
    engine.make_ready()
    results = await asyncio.gather(*burst)
    assert sorted(status for status, _, _ in results) == [200] * 100 + [429] * 5
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_rejections_total", {"reason": "queue_full"}) == 5
    assert metric(text, "noctaya_gateway_requests_total", {"code": "429"}) == 5
    assert metric(text, "noctaya_gateway_requests_total", {"code": "200"}) == 100


async def test_queue_full_outside_v1_is_plain_text(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, max_queue=1)
    holder = asyncio.ensure_future(http.get(f"{gateway.url}/ping"))
    await eventually(lambda: gateway.pending == 1, what="the only slot to be taken")
    async with http.get(f"{gateway.url}/ping") as response:
        assert response.status == 429
        assert response.headers["Retry-After"] == "5"
        assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert await response.read() == b"gateway queue full\n"
    engine.make_ready()
    async with await holder as response:
        assert response.status == 404, "the stub's own answer, proxied"


async def test_pending_counts_admitted_requests_while_they_wait_and_demand_follows(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url)
    waiting = [
        asyncio.ensure_future(http.post(f"{gateway.url}/v1/completions", json={})) for _ in range(3)
    ]
    await eventually(lambda: gateway.pending == 3, what="three admitted requests")
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_pending") == 3
    assert metric(text, "noctaya_gateway_demand") == 3
    assert metric(text, "noctaya_gateway_activation_events_total") == 1
    async with http.get(f"{gateway.url}/noctaya/queue") as response:
        assert await response.json() == {"pending": 3}
    engine.make_ready()
    for task in waiting:
        async with await task as response:
            assert response.status == 200
