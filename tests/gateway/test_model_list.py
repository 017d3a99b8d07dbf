"""`GET /v1/models` never wakes the backend: a cold gateway answers it from the served names,
with KEDA's stream (real gRPC, as KEDA holds it) never turning active; a ready backend answers
it through the gateway; and it never takes a queue slot."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from noctaya.gateway.process.config import ColdStartMode, GatewayConfig
from noctaya.gateway.process.gateway_server import GatewayServer
from scaler.keda import Keda
from support.ports import free_port

from .conftest import FAST, StartGateway
from .support import Engine, Gateway, eventually, metric

SERVED = ("qwen3-8b", "Qwen/Qwen3-8B")
QUIET = 1.0
"""Longer than many readiness polls and activation checks (FAST polls every 50 ms)."""


@pytest.fixture
async def cold_gateway() -> AsyncIterator[tuple[Gateway, Keda]]:
    """A gateway serving its own scaler, in front of a port where nothing listens, and KEDA's
    client connected to the scaler."""
    config = GatewayConfig(
        backend_url=f"http://127.0.0.1:{free_port()}",
        listen_addr="127.0.0.1:0",
        scaler_listen_addr="127.0.0.1:0",
        served_models=SERVED,
        coldstart_mode=ColdStartMode.REJECT,
        **FAST,  # type: ignore[arg-type]
    )
    server = GatewayServer(config)
    await server.start()
    keda = Keda.insecure(server.scaler.port)
    try:
        yield Gateway(server, f"http://127.0.0.1:{server.port}"), keda
    finally:
        await keda.close()
        await server.stop()


async def test_a_cold_gateway_lists_the_models_without_the_stream_ever_turning_active(
    cold_gateway: tuple[Gateway, Keda], http: aiohttp.ClientSession
) -> None:
    gateway, keda = cold_gateway
    stream = keda.stream()
    assert await stream.next() is False
    for _ in range(20):
        async with http.get(f"{gateway.url}/v1/models") as response:
            assert response.status == 200
            listed = await response.json()
        async with http.get(f"{gateway.url}/v1/models/Qwen/Qwen3-8B") as response:
            assert response.status == 200
            one = await response.json()
        async with http.get(f"{gateway.url}/v1/models/other") as response:
            assert response.status == 404
            missing = await response.json()
    assert [model["id"] for model in listed["data"]] == list(SERVED)
    assert listed["object"] == "list"
    assert {model["object"] for model in listed["data"]} == {"model"}
    assert one == listed["data"][1]
    assert missing["error"]["code"] == "model_not_found"
    with pytest.raises(TimeoutError):
        await stream.next(within=QUIET)  # a message here would be `active`
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_activation_events_total") == 0
    assert metric(text, "noctaya_gateway_demand") == 0
    assert metric(text, "noctaya_gateway_requests_total", {"code": "200"}) == 40
    assert not await keda.is_active()

    # The check can fail: one inference request does turn the stream active.
    async with http.post(f"{gateway.url}/v1/chat/completions", json={}) as response:
        assert response.status == 503
    assert await stream.next() is True


async def test_head_and_a_trailing_slash_are_the_model_list_too_never_demand(
    cold_gateway: tuple[Gateway, Keda], http: aiohttp.ClientSession
) -> None:
    """A UI polling `HEAD /v1/models` or `GET /v1/models/` gets what `GET /v1/models` gets (HEAD
    without the body), and the stream never turns active."""
    gateway, keda = cold_gateway
    stream = keda.stream()
    assert await stream.next() is False
    async with http.get(f"{gateway.url}/v1/models") as response:
        listed = await response.read()
    async with http.get(f"{gateway.url}/v1/models/Qwen/Qwen3-8B") as response:
        one = await response.read()
    for path, expected in (
        ("/v1/models/", listed),
        ("/v1/models", listed),
        ("/v1/models/Qwen/Qwen3-8B/", one),
        ("/v1/models/Qwen/Qwen3-8B", one),
    ):
        for method in ("GET", "HEAD"):
            async with http.request(method, f"{gateway.url}{path}") as response:
                assert response.status == 200, (method, path)
                assert response.headers["Content-Length"] == str(len(expected)), (method, path)
                assert await response.read() == (expected if method == "GET" else b"")
    async with http.head(f"{gateway.url}/v1/models/other") as response:
        assert response.status == 404
    with pytest.raises(TimeoutError):
        await stream.next(within=QUIET)  # a message here would be `active`
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_activation_events_total") == 0
    assert metric(text, "noctaya_gateway_demand") == 0


async def test_a_ready_backend_answers_the_model_list_through_the_gateway(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(engine.url, served_models=SERVED)
    async with http.get(f"{gateway.url}/v1/models") as response:
        await response.read()
    assert [request.path for request in engine.requests] == ["/v1/models"]
    assert gateway.demand == 0


async def test_the_model_list_is_answered_while_the_queue_is_full(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, served_models=SERVED, max_queue=1)
    body = {"stream": True, "messages": []}
    held = asyncio.ensure_future(http.post(f"{gateway.url}/v1/chat/completions", json=body))
    await eventually(lambda: gateway.pending == 1, what="the queue's one slot taken")
    async with http.post(f"{gateway.url}/v1/chat/completions", json=body) as refused:
        assert refused.status == 429
    async with http.get(f"{gateway.url}/v1/models") as response:
        assert response.status == 200
        assert [m["id"] for m in (await response.json())["data"]] == list(SERVED)
    engine.make_ready()
    async with await held as response:
        await response.read()


async def test_without_served_names_the_cold_list_is_empty_and_other_gets_pass_by(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, coldstart_mode=ColdStartMode.REJECT)
    async with http.get(f"{gateway.url}/v1/models") as response:
        assert await response.json() == {"object": "list", "data": []}
    for method, path in (
        ("POST", "/v1/models"),
        ("GET", "/v1/modelsx"),
        ("DELETE", "/v1/models/x"),  # OpenAI's route to delete a fine-tuned model
    ):
        async with http.request(method, f"{gateway.url}{path}") as response:
            assert response.status == 503, (method, path)  # an inference route: cold start
    assert gateway.demand == 1


DEMAND_TABLE = Path(__file__).resolve().parents[2] / "docs" / "snippets" / "demand-routes.md"
_EXAMPLES = {  # the requests each row of the manual's table stands for
    "POST /v1/chat/completions": ("POST", "/v1/chat/completions"),
    "POST /v1/completions": ("POST", "/v1/completions"),
    "GET /v1/models": ("GET", "/v1/models"),
    "GET /v1/models/{id}": ("GET", "/v1/models/qwen3-8b"),
    "HEAD /v1/models": ("HEAD", "/v1/models"),
    "GET /v1/models/": ("GET", "/v1/models/"),
    "GET /healthz": ("GET", "/healthz"),
    "GET /metrics": ("GET", "/metrics"),
    "GET /noctaya/queue": ("GET", "/noctaya/queue"),
}


def documented_demand() -> dict[str, bool]:
    """Each request the manual's demand table names, and whether it says it is demand."""
    rows = [line.split(" | ") for line in DEMAND_TABLE.read_text().splitlines()[2:]]
    return {
        route: cells[1].startswith("yes")
        for cells in rows
        for route in re.findall(r"`([A-Z]+ [^`]+)`", cells[0])
    }


async def test_the_manuals_demand_table_is_what_a_cold_gateway_does(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """A fresh cold gateway (reject mode) per route: demand 1 after it, or 0."""
    engine.make_unready()
    documented = documented_demand()
    assert set(documented) == set(_EXAMPLES)
    for route, demand in documented.items():
        gateway = await start_gateway(engine.url, coldstart_mode=ColdStartMode.REJECT)
        method, path = _EXAMPLES[route]
        async with http.request(method, f"{gateway.url}{path}", json={}) as response:
            await response.read()
        assert gateway.demand == int(demand), route
        await gateway.server.stop()
