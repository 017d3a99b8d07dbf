"""The engine stub behaves like the slice of vLLM the gateway, KEDA and the SDKs rely on."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest
from noctaya.gateway.engine_stub import load_settings
from noctaya.gateway.engine_stub.settings import SettingsError

from .support import Engine, eventually, read_events, start_engine


async def test_health_is_503_until_the_startup_delay_has_passed(
    http: aiohttp.ClientSession,
) -> None:
    loading = await start_engine(startup_delay=0.3)
    try:
        started = time.monotonic()
        async with http.get(f"{loading.url}/health") as response:
            assert response.status == 503

        async def healthy() -> bool:
            async with http.get(f"{loading.url}/health") as response:
                return response.status == 200

        await eventually(healthy, what="health to turn 200")
        assert time.monotonic() - started >= 0.25
    finally:
        loading.server.close()


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("POST", "/health", "GET"),
        ("GET", "/v1/chat/completions", "POST"),
        ("PUT", "/v1/completions", "POST"),
        ("POST", "/metrics", "GET"),
        ("GET", "/control", "POST"),
    ],
)
async def test_wrong_method_is_405_with_allow(
    engine: Engine, http: aiohttp.ClientSession, method: str, path: str, allow: str
) -> None:
    async with http.request(method, f"{engine.url}{path}") as response:
        assert response.status == 405
        assert response.headers["Allow"] == allow
        assert await response.read() == b"method not allowed\n"


async def test_non_streamed_chat_and_text_completions(
    engine: Engine, http: aiohttp.ClientSession
) -> None:
    async with http.post(f"{engine.url}/v1/chat/completions", json={"model": "m"}) as response:
        assert response.headers["Content-Type"] == "application/json"
        assert await response.json() == {
            "id": "stub-cmpl",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "tok0 tok1 tok2 "},
                    "finish_reason": "stop",
                }
            ],
        }
    async with http.post(f"{engine.url}/v1/completions?tokens=2", data=b"null") as response:
        assert await response.json() == {
            "id": "stub-cmpl",
            "object": "text_completion",
            "choices": [{"index": 0, "text": "tok0 tok1 ", "finish_reason": "stop"}],
        }


async def test_streamed_completion_sends_one_event_per_token_then_done(
    engine: Engine, http: aiohttp.ClientSession
) -> None:
    async with http.post(
        f"{engine.url}/v1/chat/completions?tokens=2", json={"stream": True}
    ) as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        assert response.headers["Cache-Control"] == "no-cache"
        blocks = await read_events(response)
    chunk = {"id": "stub-cmpl", "object": "chat.completion.chunk"}
    assert [json.loads(b.removeprefix("data: ")) for b in blocks[:-1]] == [
        {**chunk, "choices": [{"index": 0, "delta": {"content": "tok0 "}}]},
        {**chunk, "choices": [{"index": 0, "delta": {"content": "tok1 "}}]},
    ]
    assert blocks[-1] == "data: [DONE]"
    async with http.post(f"{engine.url}/v1/completions", json={"stream": True}) as response:
        blocks = await read_events(response)
    assert json.loads(blocks[0].removeprefix("data: ")) == {
        "id": "stub-cmpl",
        "object": "text_completion",
        "choices": [{"index": 0, "text": "tok0 "}],
    }
    assert len(blocks) == 4


async def test_tokens_are_paced_by_the_token_delay(http: aiohttp.ClientSession) -> None:
    paced = await start_engine(token_count=3, token_delay=0.1)
    try:
        started = time.monotonic()
        async with http.post(f"{paced.url}/v1/completions", json={"stream": True}) as response:
            await read_events(response)
        assert time.monotonic() - started >= 0.3
    finally:
        paced.server.close()


@pytest.mark.parametrize(
    ("query", "body", "message"),
    [
        ("", b"{", b"invalid JSON request\n"),
        ("", b"", b"invalid JSON request\n"),
        ("", b'{"stream": "yes"}', b"invalid JSON request\n"),
        ("", b"[1]", b"invalid JSON request\n"),
        ("?tokens=0", b"{}", b"tokens must be a positive integer\n"),
        ("?tokens=two", b"{}", b"tokens must be a positive integer\n"),
    ],
)
async def test_bad_completion_requests_are_400(
    engine: Engine, http: aiohttp.ClientSession, query: str, body: bytes, message: bytes
) -> None:
    async with http.post(f"{engine.url}/v1/chat/completions{query}", data=body) as response:
        assert response.status == 400
        assert await response.read() == message


async def test_metrics_show_the_three_vllm_gauges_and_control_sets_them(
    engine: Engine, http: aiohttp.ClientSession
) -> None:
    async with http.get(f"{engine.url}/metrics") as response:
        assert response.headers["Content-Type"] == "text/plain; version=0.0.4"
        assert await response.text() == (
            "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n"
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
            "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc 0\n"
            "# TYPE vllm:request_success_total counter\nvllm:request_success_total 0\n"
        )
    async with http.post(f"{engine.url}/control", json={"waiting": 5, "kv_cache": 0.25}) as r:
        assert r.status == 200
    async with http.get(f"{engine.url}/metrics") as response:
        text = await response.text()
    assert "vllm:num_requests_waiting 5\n" in text
    assert "vllm:num_requests_running 0\n" in text
    assert "vllm:kv_cache_usage_perc 0.25\n" in text


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"waiting": -1}', "metrics must be non-negative and kv_cache must be between 0 and 1"),
        (b'{"kv_cache": 1.5}', "metrics must be non-negative and kv_cache must be between 0 and 1"),
        (b"{", "Expecting"),
        (b'{"running": "many"}', "running must be a number"),
    ],
)
async def test_control_rejects_bad_gauges_and_keeps_the_old_ones(
    engine: Engine, http: aiohttp.ClientSession, body: bytes, message: str
) -> None:
    async with http.post(f"{engine.url}/control", data=body) as response:
        assert response.status == 400
        assert message in await response.text()
    assert engine.stub.gauges == {"waiting": 0.0, "running": 0.0, "kv_cache": 0.0}


async def test_chunked_and_pipelined_requests_are_answered_in_order(engine: Engine) -> None:
    port = engine.server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /v1/completions?tokens=1 HTTP/1.1\r\nHost: s\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"1;ext=1\r\n{\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n"
        b"GET /health HTTP/1.1\r\nHost: s\r\nConnection: close\r\n\r\n"
    )
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    health = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    assert data.endswith(health), "health answered last, then the connection closed"
    first = data.removesuffix(health)
    assert first.startswith(b"HTTP/1.1 200 OK\r\n")
    assert first.endswith(b'"text":"tok0 ","finish_reason":"stop"}]}')


async def _raw(engine: Engine, request: bytes) -> bytes:
    """Send `request` on a fresh connection and read until the stub closes it."""
    port = engine.server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


@pytest.mark.parametrize("size", [b"0x10", b"1_0", b" 10", b"+10"])
async def test_chunk_sizes_other_than_hex_digits_are_400(engine: Engine, size: bytes) -> None:
    """Each reads as 16 to Python's int(text, 16); RFC 9112 allows hex digits only."""
    answer = await _raw(
        engine,
        b"POST /v1/completions HTTP/1.1\r\nHost: s\r\nTransfer-Encoding: chunked\r\n\r\n"
        + size
        + b'\r\n{"a":"bcdefghi"}\r\n0\r\n\r\n',
    )
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert engine.requests == []


async def test_repeated_request_headers_all_reach_the_handler(engine: Engine) -> None:
    answer = await _raw(
        engine,
        b"POST /v1/completions HTTP/1.1\r\nHost: s\r\nX-Tag: a\r\nX-Tag: b\r\n"
        b"Content-Length: 2\r\nConnection: close\r\n\r\n{}",
    )
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    [request] = engine.requests
    assert [value for name, value in request.headers if name == b"x-tag"] == [b"a", b"b"]


async def test_a_body_of_many_small_chunks_arriving_in_many_pieces_is_read_in_linear_time(
    engine: Engine,
) -> None:
    """Each piece used to re-decode every chunk before it: 2,000 pieces of 50 chunks took
    minutes. Read once, they take well under a second; the deadline is generous for load."""
    port = engine.server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            b"POST /v1/completions HTTP/1.1\r\nHost: s\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n2\r\n{}\r\n"
        )
        piece = b"1\r\n \r\n" * 50
        async with asyncio.timeout(20):
            for _ in range(2000):
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0)
            writer.write(b"0\r\n\r\n")
            answer = await reader.read()
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert len(engine.requests[0].body) == 2 + 100_000


def test_settings_defaults_and_overrides() -> None:
    defaults = load_settings({})
    assert (defaults.listen_addr, defaults.startup_delay) == (":8000", 0.0)
    assert (defaults.token_count, defaults.token_delay) == (1, 0.05)
    assert (defaults.memory, defaults.exit_after, defaults.list_model) == (0, None, False)
    faults = load_settings({"STUB_MEMORY": "1Ki", "STUB_EXIT_AFTER": "0s", "STUB_LIST_MODEL": "1"})
    assert (faults.memory, faults.exit_after, faults.list_model) == (1024, 0.0, True)
    custom = load_settings(
        {"STUB_STARTUP_DELAY": "2s", "STUB_TOKEN_COUNT": "4", "STUB_TOKEN_DELAY": "0s"}
    )
    assert (custom.startup_delay, custom.token_count, custom.token_delay) == (2.0, 4, 0.0)
    with pytest.raises(SettingsError, match="STUB_TOKEN_COUNT must be a positive integer"):
        load_settings({"STUB_TOKEN_COUNT": "-2"})
    assert load_settings({"STUB_CONCURRENCY": "3"}).concurrency == 3
    with pytest.raises(SettingsError, match="STUB_CONCURRENCY must be a positive integer"):
        load_settings({"STUB_CONCURRENCY": "0"})


async def test_concurrency_bounds_the_streams_generated_at_once_and_the_rest_wait_in_order(
    http: aiohttp.ClientSession,
) -> None:
    """Two slots, three streams of 0.3 s each: the third starts only when one of the first two
    has ended, so it ends about 0.3 s after them; each finished one is counted."""
    slow = await start_engine(token_count=3, token_delay=0.1, concurrency=2)
    try:

        async def one() -> float:
            url = f"{slow.url}/v1/completions"
            async with http.post(url, json={"stream": True}) as response:
                await read_events(response)
            return time.monotonic()

        started = time.monotonic()
        ends = sorted(await asyncio.gather(one(), one(), one()))
        assert ends[1] - started < 0.5
        assert ends[2] - started >= 0.55
        async with http.get(f"{slow.url}/metrics") as response:
            assert "vllm:request_success_total 3\n" in await response.text()
    finally:
        slow.server.close()


async def test_a_client_expecting_100_continue_gets_it_before_sending_the_body(
    engine: Engine,
) -> None:
    port = engine.server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            b"POST /v1/completions HTTP/1.1\r\nHost: s\r\nExpect: 100-continue\r\n"
            b"Content-Length: 2\r\nConnection: close\r\n\r\n"
        )
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(b"{}")
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")


async def test_an_http10_client_gets_its_stream_unchunked_ended_by_the_close(
    engine: Engine,
) -> None:
    answer = await _raw(
        engine,
        b'POST /v1/completions?tokens=2 HTTP/1.0\r\nContent-Length: 16\r\n\r\n{"stream": true}',
    )
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head.lower()
    assert b"connection: close" in head
    assert body.startswith(b"data: {")
    assert body.endswith(b"data: [DONE]\n\n")
