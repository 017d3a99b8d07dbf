"""The activation watcher: the lease's floor ends on time, whatever the readiness interval."""

from __future__ import annotations

import time

import aiohttp
from noctaya.gateway.process.config import ColdStartMode

from .conftest import StartGateway
from .support import Engine, eventually


async def test_the_floor_ends_at_the_deadline_not_at_the_next_readiness_poll(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(
        engine.url,
        coldstart_mode=ColdStartMode.REJECT,
        activation_timeout=0.2,
        readiness_interval=3.0,
    )
    started = time.monotonic()
    async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
        assert response.status == 503
    assert gateway.demand == 1
    await eventually(lambda: gateway.server.feed.current() == 0, what="lease expiry published")
    assert 0.2 <= time.monotonic() - started < 1.5, "published at the deadline, not a poll later"
