"""Forwarding: same path and query, end-to-end headers only, bodies streamed both ways, and a
backend failure reported as 502 (before the response) or an aborted stream (after it)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from noctaya.gateway.process.config import ColdStartMode

from .conftest import StartGateway
from .support import (
    Echo,
    Engine,
    eventually,
    metric,
    raw_exchange,
    read_events,
    start_echo,
    start_engine,
    token_texts,
)


@pytest.fixture
async def echo() -> AsyncIterator[Echo]:
    started = await start_echo()
    yield started
    started.server.close()


def _headers(description: dict) -> dict[str, str]:
    return {name: value for name, value in description["headers"]}


async def test_path_query_and_method_reach_the_backend_unchanged(
    echo: Echo, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(echo.url + "/prefix/")
    url = f"{gateway.url}/v1/models%2Fa?x=a%20b&y=%C3%A9&empty="
    async with http.request("PATCH", aiohttp.client.URL(url, encoded=True)) as response:
        assert response.status == 200
        description = await response.json()
    assert description["method"] == "PATCH"
    assert description["path"] == "/prefix/v1/models%2Fa"
    assert description["query"] == "x=a%20b&y=%C3%A9&empty="


async def test_hop_by_hop_request_headers_are_dropped_and_forwarded_for_is_appended(
    echo: Echo, start_gateway: StartGateway
) -> None:
    gateway = await start_gateway(echo.url)
    status, _, body = await raw_exchange(
        gateway.server.port,
        b"POST /v1/completions HTTP/1.1\r\n"
        b"Host: gateway.example\r\n"
        b"Connection: keep-alive, X-Client-Private\r\n"
        b"X-Client-Private: secret\r\n"
        b"Keep-Alive: timeout=5\r\n"
        b"TE: trailers\r\n"
        b"Trailer: X-Checksum\r\n"
        b"Proxy-Authorization: Basic Zm9v\r\n"
        b"Proxy-Connection: keep-alive\r\n"
        b"X-Forwarded-For: 203.0.113.7\r\n"
        b"X-Request-Id: abc-123\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: 2\r\n\r\n{}",
    )
    assert status.startswith(b"HTTP/1.1 200")
    headers = _headers(json.loads(body))
    for dropped in (
        "connection",
        "x-client-private",
        "keep-alive",
        "te",
        "trailer",
        "proxy-authorization",
        "proxy-connection",
    ):
        assert dropped not in headers, dropped
    assert headers["x-request-id"] == "abc-123"
    assert headers["content-type"] == "application/json"
    assert headers["content-length"] == "2"
    assert headers["x-forwarded-for"] == "203.0.113.7, 127.0.0.1"
    assert headers["host"] == echo.url.removeprefix("http://")
    assert "user-agent" not in headers, "the proxy adds no headers of its own"


async def test_hop_by_hop_response_headers_are_dropped_and_backend_status_kept(
    echo: Echo, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(echo.url)
    async with http.get(f"{gateway.url}/hop-by-hop") as response:
        assert response.status == 200
        assert await response.read() == b"ok"
        assert response.headers["X-End-To-End"] == "kept"
        for dropped in ("X-Backend-Private", "Keep-Alive", "Proxy-Authenticate"):
            assert dropped not in response.headers
    async with http.get(f"{gateway.url}/status/418") as response:
        assert response.status == 418
        assert response.headers["X-Backend"] == "yes"
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_requests_total", {"code": "418"}) == 1
    assert metric(text, "noctaya_gateway_requests_total", {"code": "200"}) == 1


async def test_unreachable_backend_answers_502_in_the_shape_of_the_route(
    echo: Echo, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(echo.url)
    async with http.post(f"{gateway.url}/drop", json={}) as response:
        assert response.status == 502
        assert await response.read() == b"backend unreachable\n"
    gateway_v1 = await start_gateway(echo.url + "/drop")
    async with http.post(f"{gateway_v1.url}/v1/chat/completions", json={}) as response:
        assert response.status == 502
        assert (await response.json())["error"] == {
            "message": "backend unreachable",
            "type": "server_error",
            "code": "bad_gateway",
        }
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_requests_total", {"code": "502"}) == 1


async def test_request_body_is_streamed_to_the_backend_whole(
    echo: Echo, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(echo.url)
    piece = b"x" * 65536

    async def upload() -> AsyncIterator[bytes]:
        for _ in range(32):
            yield piece

    async with http.post(f"{gateway.url}/v1/upload", data=upload()) as response:
        assert response.status == 200
        description = await response.json()
    assert description["body_length"] == 32 * 65536


@pytest.mark.parametrize("path", ["/v1/completions", "/upload"])
async def test_body_over_the_limit_is_refused_with_413_declared_or_streamed(
    echo: Echo, start_gateway: StartGateway, http: aiohttp.ClientSession, path: str
) -> None:
    gateway = await start_gateway(echo.url, max_request_body=1024)
    async with http.post(f"{gateway.url}{path}", data=b"y" * 1025) as response:
        assert response.status == 413
        body = await response.read()

    async def upload() -> AsyncIterator[bytes]:
        for _ in range(4):
            yield b"z" * 512

    async with http.post(f"{gateway.url}{path}", data=upload()) as response:
        assert response.status == 413
        assert await response.read() == body
    if path.startswith("/v1/"):
        assert json.loads(body)["error"]["code"] == "request_too_large"
    else:
        assert body == b"request body too large\n"
    async with http.post(f"{gateway.url}{path}", data=b"y" * 1024) as response:
        assert response.status == 200, "exactly the limit is fine"
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_requests_total", {"code": "413"}) == 2


async def test_body_over_the_limit_on_the_cold_path_is_refused_with_413(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, max_request_body=1024)

    async def upload() -> AsyncIterator[bytes]:
        for _ in range(4):
            yield b'{"a": "' + b"z" * 500 + b'"}'

    async with http.post(f"{gateway.url}/v1/completions", data=upload()) as response:
        assert response.status == 413
    assert engine.requests == []


async def test_stream_chunks_reach_the_client_as_the_backend_sends_them(
    start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    slow = await start_engine(token_count=3, token_delay=0.4)
    try:
        gateway = await start_gateway(slow.url)
        arrivals = []
        async with http.post(
            f"{gateway.url}/v1/chat/completions", json={"stream": True}
        ) as response:
            start = time.monotonic()
            async for line in response.content:
                if line.startswith(b"data: {"):
                    arrivals.append(time.monotonic() - start)
        assert len(arrivals) == 3
        assert arrivals[0] < 0.3, "the first token is not held back"
        assert arrivals[1] - arrivals[0] > 0.25
        assert arrivals[2] - arrivals[1] > 0.25
    finally:
        slow.server.close()


async def test_client_leaving_a_warm_stream_stops_the_backend_stream(
    start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    slow = await start_engine(token_count=100, token_delay=0.05)
    try:
        gateway = await start_gateway(slow.url)
        response = await http.post(f"{gateway.url}/v1/chat/completions", json={"stream": True})
        assert (await response.content.readuntil(b"\n\n")).startswith(b"data: {")
        assert slow.active_streams == 1
        response.close()
        await eventually(lambda: slow.active_streams == 0, within=2, what="backend stream end")
        await eventually(lambda: gateway.pending == 0, what="the slot to be freed")
    finally:
        slow.server.close()


async def test_backend_dying_mid_stream_aborts_the_client_stream_and_frees_the_slot(
    echo: Echo, start_gateway: StartGateway, http: aiohttp.ClientSession, caplog
) -> None:
    gateway = await start_gateway(echo.url)
    received: list[bytes] = []

    async def read_all() -> None:
        async with http.post(f"{gateway.url}/die-mid-stream", json={}) as response:
            assert response.status == 200
            async for chunk in response.content.iter_any():
                received.append(chunk)

    with pytest.raises(aiohttp.ClientPayloadError):
        await read_all()
    assert b"".join(received) == b'data: {"partial": true}\n\n'
    await eventually(lambda: gateway.pending == 0, what="the slot to be freed")
    async with http.get(f"{gateway.url}/healthz") as response:
        assert response.status == 200
    assert "backend failed mid-response" in caplog.text
    assert "Traceback" not in caplog.text


async def test_head_requests_and_empty_bodies_pass_through(
    echo: Echo, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(echo.url)
    async with http.head(f"{gateway.url}/anything") as response:
        assert response.status == 200
        assert await response.read() == b""
    async with http.delete(f"{gateway.url}/v1/files/1") as response:
        description = await response.json()
    assert description["method"] == "DELETE"
    assert description["body_length"] == 0


async def test_many_concurrent_requests_all_complete_and_free_their_slots(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(engine.url, max_queue=1000)

    async def one(i: int) -> list[str]:
        async with http.post(
            f"{gateway.url}/v1/chat/completions?tokens=2", json={"stream": i % 2 == 0}
        ) as response:
            assert response.status == 200
            if i % 2:
                return [(await response.json())["choices"][0]["message"]["content"]]
            return token_texts(await read_events(response))

    results = await asyncio.gather(*(one(i) for i in range(200)))
    assert all(r in (["tok0 tok1 "], ["tok0 ", "tok1 "]) for r in results)


async def test_absolute_form_targets_forward_only_their_path_and_query(
    echo: Echo, start_gateway: StartGateway
) -> None:
    gateway = await start_gateway(echo.url + "/prefix")
    status, _, body = await raw_exchange(
        gateway.server.port,
        b"GET http://gateway.example:8080/v1/models%2Fa?x=a%20b HTTP/1.1\r\n"
        b"Host: gateway.example\r\n\r\n",
    )
    assert status == b"HTTP/1.1 200 "
    description = json.loads(body)
    assert description["path"] == "/prefix/v1/models%2Fa"
    assert description["query"] == "x=a%20b"
    status, _, body = await raw_exchange(
        gateway.server.port, b"GET https://gateway.example?x=1 HTTP/1.1\r\nHost: g\r\n\r\n"
    )
    assert status == b"HTTP/1.1 200 "
    assert (json.loads(body)["path"], json.loads(body)["query"]) == ("/prefix/", "x=1")


async def test_absolute_form_targets_are_routed_by_their_path(
    engine: Engine, start_gateway: StartGateway
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, coldstart_mode=ColdStartMode.REJECT)
    status, _, body = await raw_exchange(
        gateway.server.port, b"GET http://gateway.example/healthz HTTP/1.1\r\nHost: g\r\n\r\n"
    )
    assert (status, body) == (b"HTTP/1.1 200 ", b"")
    status, headers, body = await raw_exchange(
        gateway.server.port,
        b"GET http://gateway.example/v1/completions HTTP/1.1\r\nHost: g\r\n\r\n",
    )
    assert status == b"HTTP/1.1 503 "
    assert headers["content-type"] == "application/json", "the /v1 shape, chosen by the path"
    assert json.loads(body)["error"]["code"] == "cold_start"
    status, _, body = await raw_exchange(
        gateway.server.port,
        b"GET http://gateway.example/v1/models HTTP/1.1\r\nHost: g\r\n\r\n",
    )
    assert (status, json.loads(body)) == (b"HTTP/1.1 200 ", {"object": "list", "data": []})


@pytest.mark.parametrize(
    "target", [b"*", b"v1/models", b"ftp://gateway.example/v1/models", b"http:/v1/models"]
)
async def test_targets_neither_origin_nor_absolute_form_get_400(
    echo: Echo, start_gateway: StartGateway, target: bytes
) -> None:
    gateway = await start_gateway(echo.url)
    status, headers, body = await raw_exchange(
        gateway.server.port, b"OPTIONS %s HTTP/1.1\r\nHost: g\r\n\r\n" % target
    )
    assert status == b"HTTP/1.1 400 "
    assert body == b"400 Bad Request"
    assert headers["connection"] == "close"
