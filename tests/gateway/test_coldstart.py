"""Cold starts: reject or keep the client waiting (heartbeats for streams), with a demand floor of
one that outlives the client and ends at readiness plus grace, or at the activation timeout."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest
from noctaya.gateway.backend.readiness import ReadinessProbe
from noctaya.gateway.process.config import ColdStartMode
from noctaya.gateway.requests.coldstart import ColdWaits, Outcome
from noctaya.gateway.upstream import UpstreamPool
from support.fake_clock import FakeClock

from .conftest import StartGateway
from .support import Engine, Gateway, eventually, metric, read_events, token_texts

REJECT = ColdStartMode.REJECT
TIMED_OUT = {"reason": "activation_timeout"}


async def test_reject_mode_answers_503_at_once_and_keeps_demand_at_one(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, coldstart_mode=REJECT, ready_grace=3.0)
    async with http.post(f"{gateway.url}/v1/chat/completions", json={}) as response:
        assert response.status == 503
        assert response.headers["Retry-After"] == "10"
        assert await response.json() == {
            "error": {"message": "backend not ready", "type": "server_error", "code": "cold_start"}
        }
    async with http.get(f"{gateway.url}/") as response:
        assert response.status == 503
        assert await response.read() == b"backend not ready\n"
    async with http.get(f"{gateway.url}/noctaya/queue") as response:
        assert await response.json() == {"pending": 1}, "the lease floor, not in-flight requests"
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_rejections_total", {"reason": "cold_start"}) == 2
    assert metric(text, "noctaya_gateway_requests_total", {"code": "503"}) == 2
    assert metric(text, "noctaya_gateway_demand") == 1
    assert metric(text, "noctaya_gateway_activation_events_total") == 1
    assert gateway.pending == 0

    engine.make_ready()
    lease = gateway.server.app.demand.lease
    await eventually(lambda: not lease.active, what="the lease to end at readiness")
    grace_end = lease.ready_grace_until
    # The grace's own timing is the lease's, tested on a FakeClock with the core; here it is
    # enough that the floor is seen inside the grace and gone only after it.
    assert time.monotonic() < grace_end
    assert gateway.demand == 1, "a freshly ready backend keeps the floor during the grace"
    await eventually(lambda: gateway.demand == 0, within=10, what="demand to drop after grace")
    assert time.monotonic() >= grace_end, "never before the grace has run out"
    # The lease reads 0 from the instant the grace ends; the feed hears of it from the grace
    # timer, which may run just after whoever saw that instant first.
    await eventually(lambda: gateway.server.feed.current() == 0, within=1, what="the feed's 0")
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_demand") == 0


async def test_lease_ends_at_the_activation_timeout_when_the_backend_never_comes(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, coldstart_mode=REJECT, activation_timeout=0.3)
    started = time.monotonic()
    async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
        assert response.status == 503
    assert gateway.demand == 1
    await eventually(lambda: gateway.server.feed.current() == 0, what="lease expiry published")
    assert time.monotonic() - started >= 0.3
    assert not gateway.server.app.demand.lease.active


async def test_keepalive_non_streaming_request_waits_then_gets_503_on_timeout(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, activation_timeout=0.3)
    started = time.monotonic()
    async with http.post(f"{gateway.url}/v1/chat/completions", json={}) as response:
        assert response.status == 503
        assert response.headers["Retry-After"] == "10"
        body = await response.json()
    assert time.monotonic() - started >= 0.3
    assert body["error"] == {
        "message": "backend not ready",
        "type": "server_error",
        "code": "activation_timeout",
    }
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_rejections_total", {"reason": "activation_timeout"}) == 1
    assert metric(text, "noctaya_gateway_requests_total", {"code": "503"}) == 1
    assert "noctaya_gateway_activation_wait_seconds_count 0" in text


async def test_keepalive_non_streaming_request_proceeds_when_the_backend_becomes_ready(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url)
    request = asyncio.ensure_future(http.post(f"{gateway.url}/v1/chat/completions", json={}))
    # Ready only once the request waits cold: on a loaded machine its first probe may come late.
    await eventually(lambda: gateway.server.app.demand.lease.active, what="a cold wait")
    asyncio.get_running_loop().call_later(0.2, engine.make_ready)
    async with await request as response:
        assert response.status == 200
        document = await response.json()
    assert document["choices"][0]["message"]["content"] == "tok0 tok1 tok2 "
    text = await gateway.metrics(http)
    assert "noctaya_gateway_activation_wait_seconds_count 1" in text
    assert metric(text, "noctaya_gateway_activation_wait_seconds_bucket", {"le": "0.1"}) == 0
    assert metric(text, "noctaya_gateway_activation_wait_seconds_bucket", {"le": "1.0"}) == 1
    assert metric(text, "noctaya_gateway_requests_total", {"code": "200"}) == 1


async def test_held_requests_learn_of_readiness_faster_than_the_readiness_cache_lasts(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """How late the gateway notices a ready backend adds to a cold request's first token: while
    requests are held, readiness is probed every held interval, not every readiness interval."""
    engine.make_unready()
    gateway = await start_gateway(engine.url, readiness_interval=5.0, held_readiness_interval=0.05)
    request = asyncio.ensure_future(http.post(f"{gateway.url}/v1/chat/completions", json={}))
    await eventually(lambda: gateway.pending == 1, what="the request to be held")
    await asyncio.sleep(0.3)
    engine.make_ready()
    ready_at = time.monotonic()
    async with await request as response:
        assert response.status == 200
        await response.read()
    assert time.monotonic() - ready_at < 1.0


async def test_cold_stream_gets_heartbeats_then_real_tokens_then_done(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, heartbeat_interval=0.1)
    asyncio.get_running_loop().call_later(0.35, engine.make_ready)
    started = time.monotonic()
    async with http.post(
        f"{gateway.url}/v1/chat/completions", json={"stream": True, "messages": []}
    ) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        assert response.headers["Cache-Control"] == "no-cache"
        assert response.headers["Connection"] == "keep-alive"
        first = await response.content.readuntil(b"\n\n")
        assert first == b": heartbeat\n\n"
        assert time.monotonic() - started >= 0.09, "the first beat comes after one interval"
        blocks = [": heartbeat", *await read_events(response)]
    heartbeats = [b for b in blocks if b == ": heartbeat"]
    assert len(heartbeats) >= 2
    assert blocks[: len(heartbeats)] == heartbeats, "heartbeats only before the backend stream"
    assert token_texts(blocks) == ["tok0 ", "tok1 ", "tok2 "]
    assert blocks[-1] == "data: [DONE]"
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_requests_total", {"code": "200"}) == 1
    assert "noctaya_gateway_activation_wait_seconds_count 1" in text


@pytest.mark.parametrize(
    ("path", "data"),
    [
        (
            "/v1/chat/completions",
            'data: {"error":{"message":"backend activation timeout","type":"server_error",'
            '"code":"activation_timeout"}}',
        ),
        ("/generate", "data: backend activation timeout"),
    ],
)
async def test_cold_stream_that_times_out_ends_with_an_error_event(
    engine: Engine,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    path: str,
    data: str,
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, activation_timeout=0.35, heartbeat_interval=0.1)
    async with http.post(f"{gateway.url}{path}", json={"stream": True}) as response:
        assert response.status == 200
        blocks = await read_events(response)
    assert blocks[-1] == f"event: error\n{data}"
    assert set(blocks[:-1]) == {": heartbeat"}
    assert 1 <= len(blocks) - 1 <= 4
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_requests_total", {"code": "200"}) == 1
    assert metric(text, "noctaya_gateway_requests_total", {"code": "503"}) is None
    assert metric(text, "noctaya_gateway_rejections_total", {"reason": "activation_timeout"}) == 1
    assert "noctaya_gateway_activation_wait_seconds_count 0" in text


@pytest.mark.parametrize(
    "body",
    [b'{"stream": true', b'{"stream": "yes"}', b"[1, 2]", b"[" * 100_000, b'"stream"'],
    ids=["truncated", "not-boolean", "array", "deeply-nested", "bare-string"],
)
async def test_malformed_json_on_the_cold_path_is_treated_as_non_streaming(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession, body: bytes
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url)
    asyncio.get_running_loop().call_later(0.15, engine.make_ready)
    async with http.post(
        f"{gateway.url}/v1/chat/completions",
        data=body,
        headers={"Content-Type": "application/json"},
    ) as response:
        assert response.status == 400, "the backend's verdict, after a plain wait"
        assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert await response.read() == b"invalid JSON request\n"
    async with http.get(f"{gateway.url}/healthz") as response:
        assert response.status == 200
    assert engine.requests[-1].body == body, "the peeked body is forwarded intact"


async def _outlive_the_deadline_of_a_request_before(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    """Return once the activation deadline of every earlier request has passed, without a clock
    to sleep on: a request made now, with the same activation timeout, has timed out. A deadline
    the gateway still held for a request that left would have fired, and counted, by then."""
    async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
        assert response.status == 503
        assert (await response.json())["error"]["code"] == "activation_timeout"


async def test_client_leaving_a_non_streaming_wait_is_not_a_timeout(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, activation_timeout=0.5)
    _, writer = await asyncio.open_connection("127.0.0.1", gateway.server.port)
    body = b"{}"
    writer.write(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    await writer.drain()
    await eventually(lambda: gateway.pending == 1, what="the request to be admitted")
    writer.close()
    await eventually(lambda: gateway.pending == 0, what="the slot to be freed")
    assert gateway.demand == 1, "the lease still holds demand for the backend"
    await _outlive_the_deadline_of_a_request_before(gateway, http)
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_rejections_total", TIMED_OUT) == 1, "the later one's"
    assert metric(text, "noctaya_gateway_requests_total", {"code": "503"}) == 1


async def test_client_leaving_a_heartbeat_stream_frees_the_slot_without_a_rejection(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, heartbeat_interval=0.05, activation_timeout=0.5)
    response = await http.post(f"{gateway.url}/v1/chat/completions", json={"stream": True})
    assert response.status == 200
    assert await response.content.readuntil(b"\n\n") == b": heartbeat\n\n"
    response.close()
    await eventually(lambda: gateway.pending == 0, what="the slot to be freed")
    await _outlive_the_deadline_of_a_request_before(gateway, http)
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_rejections_total", TIMED_OUT) == 1, "the later one's"
    assert metric(text, "noctaya_gateway_requests_total", {"code": "200"}) == 1


async def test_ten_concurrent_warm_requests_share_one_health_probe(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(engine.url, readiness_interval=60.0)
    url = f"{gateway.url}/v1/completions"

    async def one() -> int:
        async with http.post(url, json={}) as response:
            await response.read()
            return response.status

    assert await asyncio.gather(*(one() for _ in range(10))) == [200] * 10
    assert engine.health_probes == 1
    assert await one() == 200
    assert engine.health_probes == 1, "cached for the retry interval"


async def test_the_readiness_answer_lasts_one_interval_on_the_probe_s_clock(
    engine: Engine,
) -> None:
    clock = FakeClock()
    pool = UpstreamPool(engine.url)
    probe = ReadinessProbe(pool, interval=1.0, clock=clock)
    try:
        assert await asyncio.gather(*(probe.ready() for _ in range(10))) == [True] * 10
        assert engine.health_probes == 1, "concurrent askers share one probe"
        clock.advance(0.999)
        assert probe.cached_ready()
        assert await probe.ready()
        assert engine.health_probes == 1
        clock.advance(0.001)
        assert not probe.cached_ready()
        assert await probe.ready()
        assert engine.health_probes == 2
    finally:
        await probe.close()
        await pool.close()


async def test_readiness_is_asked_on_the_configured_path_and_nowhere_else(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """Local mode points the gateway at the runtime's own readiness path, for engines without
    `/health`: here the stub's `/metrics` answers 200 while its `/health` still says 503."""
    engine.make_unready()
    gateway = await start_gateway(engine.url, backend_readiness_path="/metrics")
    async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
        assert response.status == 200
        assert (await response.json())["object"] == "text_completion"
    assert engine.health_probes == 0
    assert [(r.method, r.path) for r in engine.requests] == [
        ("GET", "/metrics"),
        ("POST", "/v1/completions"),
    ]


async def test_warm_requests_never_touch_the_lease_or_the_wait_histogram(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(engine.url)
    async with http.post(f"{gateway.url}/v1/completions", json={"stream": True}) as response:
        blocks = await read_events(response)
    assert blocks[-1] == "data: [DONE]"
    assert not gateway.server.app.demand.lease.active
    text = await gateway.metrics(http)
    assert "noctaya_gateway_activation_wait_seconds_count 0" in text
    await eventually(lambda: gateway.demand == 0, what="demand back to zero")
    assert json.loads(engine.requests[-1].body) == {"stream": True}


async def test_a_long_silent_wait_is_not_cut_by_the_idle_connection_timeout(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """Hypercorn's one timer covers idle keep-alive connections and unfinished request heads;
    a request waiting without a byte on the wire for longer must survive it."""
    engine.make_unready()
    gateway = await start_gateway(engine.url, idle_timeout=0.2)
    asyncio.get_running_loop().call_later(0.6, engine.make_ready)
    async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
        assert response.status == 200
        assert (await response.json())["object"] == "text_completion"


async def test_waiting_streams_share_one_heartbeat_tick(engine: Engine) -> None:
    """One tick beats every waiting stream: a stream that joins between two beats gets its first
    with the others', so thousands of held streams need no timer each."""
    engine.make_unready()
    pool = UpstreamPool(engine.url)
    readiness = ReadinessProbe(pool, interval=0.05)
    waits = ColdWaits(readiness, poll_interval=0.05, heartbeat=0.4, timeout=60.0)
    try:
        first = waits.add(stream=True)
        await asyncio.sleep(0.2)
        joined = waits.add(stream=True)
        first_beat, joined_beat = waits.next(first), waits.next(joined)
        together: list[bool] = []
        first_beat.add_done_callback(lambda _: together.append(joined_beat.done()))
        assert list(await asyncio.gather(first_beat, joined_beat)) == [Outcome.BEAT] * 2
        assert together == [True]
        waits.remove(first)
        waits.remove(joined)
    finally:
        await waits.close()
        await readiness.close()
        await pool.close()
