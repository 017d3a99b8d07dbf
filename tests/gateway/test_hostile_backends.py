"""A backend that floods, stalls or lies must cost the client a clear answer, never a hang, an
empty 500 or a traceback: 502 for what cannot be relayed, 504 for what never ends, both as
OpenAI-shaped errors on `/v1/*`."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import httpx
import pytest
from noctaya.gateway.process.config import load_config
from noctaya.gateway.process.config_shared import ConfigError
from noctaya.gateway.upstream import UpstreamPool

from .conftest import StartGateway
from .raw_backend import StartBackend, answering, health_then, read_request
from .raw_backend import backend as backend  # the fixture
from .support import read_events

CLIENT_DEADLINE = aiohttp.ClientTimeout(total=15)
"""A hang fails the test instead of stalling the suite."""


async def _post(http: aiohttp.ClientSession, url: str) -> tuple[int, dict]:
    async with http.post(f"{url}/v1/completions", json={}, timeout=CLIENT_DEADLINE) as response:
        return response.status, await response.json()


def _no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.exc_info], "no exception was logged"


async def test_an_endless_flood_of_interim_responses_is_a_502(
    backend: StartBackend, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    async def flood(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while not writer.is_closing():
                writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n")
                await writer.drain()

    gateway = await start_gateway(await backend(health_then(flood)))
    status, document = await _post(http, gateway.url)
    assert status == 502
    assert document["error"]["code"] == "bad_gateway"


async def test_five_interim_responses_are_allowed_as_in_go(
    backend: StartBackend, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    interim = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" * 5
    final = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    gateway = await start_gateway(await backend(health_then(answering(interim + final))))
    assert await _post(http, gateway.url) == (200, {})


async def test_a_content_length_of_five_thousand_digits_is_a_502(
    backend: StartBackend,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %s\r\n\r\n" % (b"9" * 5000)
    gateway = await start_gateway(await backend(health_then(answering(head, then_close=False))))
    status, document = await _post(http, gateway.url)
    assert status == 502
    assert document["error"] == {
        "message": "backend unreachable",
        "type": "server_error",
        "code": "bad_gateway",
    }
    _no_traceback(caplog)


async def test_a_head_stalling_half_way_is_a_504_after_the_head_timeout(
    backend: StartBackend, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    half = answering(b"HTTP/1.1 200 OK\r\nContent-Ty", then_close=False)
    gateway = await start_gateway(await backend(health_then(half)), backend_head_timeout=0.3)
    status, document = await _post(http, gateway.url)
    assert status == 504
    assert document["error"] == {
        "message": "backend timeout",
        "type": "server_error",
        "code": "gateway_timeout",
    }


async def test_a_backend_silent_past_the_read_timeout_is_a_504(
    backend: StartBackend,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    silent = answering(then_close=False)
    gateway = await start_gateway(await backend(health_then(silent)), backend_read_timeout=0.3)
    status, document = await _post(http, gateway.url)
    assert status == 504
    assert document["error"]["code"] == "gateway_timeout"
    assert "proxy: backend failed before answering, answered 504 to the client" in caplog.text


async def test_a_body_stalling_past_the_read_timeout_aborts_the_client_stream(
    backend: StartBackend,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    partial = answering(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", then_close=False)
    gateway = await start_gateway(await backend(health_then(partial)), backend_read_timeout=0.3)
    async with http.post(f"{gateway.url}/v1/completions", timeout=CLIENT_DEADLINE) as response:
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
    assert "backend failed mid-response" in caplog.text
    assert "Traceback" not in caplog.text


async def test_bare_lf_line_ends_are_read_as_line_ends(
    backend: StartBackend, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """RFC 9112 lets a recipient accept a bare LF as a line terminator; Go's client and h11 do."""
    bare = b"HTTP/1.1 200 OK\nContent-Type: application/json\nX-Id: 7\nContent-Length: 2\n\n{}"
    gateway = await start_gateway(await backend(health_then(answering(bare))))
    async with http.post(f"{gateway.url}/v1/completions", timeout=CLIENT_DEADLINE) as response:
        assert response.status == 200
        assert response.headers["X-Id"] == "7"
        assert await response.json() == {}


CHUNKED_WITH_LENGTH = (
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
)


async def test_content_length_beside_transfer_encoding_is_dropped_and_chunks_frame_the_body(
    backend: StartBackend,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    gateway = await start_gateway(await backend(health_then(answering(CHUNKED_WITH_LENGTH))))
    async with http.get(f"{gateway.url}/v1/models", timeout=CLIENT_DEADLINE) as response:
        assert response.status == 200
        assert response.headers.get("Content-Length") != "100"
        assert await response.read() == b"hello world"
    _no_traceback(caplog)


async def test_a_connection_that_sent_both_framings_is_not_reused(backend: StartBackend) -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                await read_request(reader)
                writer.write(CHUNKED_WITH_LENGTH)
                await writer.drain()
        writer.close()

    pool = UpstreamPool(await backend(handler))
    try:
        for _ in range(2):
            async with pool.exchange("GET", b"/v1/models", []) as response:
                assert await response.read() == b"hello world"
    finally:
        await pool.close()
    assert connections == 2


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 000 Zero\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Bad: a\rb\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Bad: a\nb\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Bad: a\x00b\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Bad: a\x7fb\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX Bad: a\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\n" + b"X-Big: " + b"a" * 70_000 + b"\r\n\r\n",
    ],
    ids=[
        "status-000",
        "status-099",
        "cr-in-value",
        "lf-in-value",
        "nul-in-value",
        "del-in-value",
        "space-in-name",
        "unsupported-coding",
        "conflicting-length",
        "head-over-64k-in-one-piece",
    ],
)
async def test_a_response_that_cannot_be_relayed_is_a_502_in_the_openai_shape(
    backend: StartBackend,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
    answer: bytes,
) -> None:
    gateway = await start_gateway(await backend(health_then(answering(answer))))
    status, document = await _post(http, gateway.url)
    assert status == 502
    assert document["error"]["code"] == "bad_gateway"
    _no_traceback(caplog)


async def test_folded_and_repeated_headers_reach_the_client_in_a_form_it_accepts(
    backend: StartBackend, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    answer = (
        b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n \t b\r\nContent-Length: 2\r\n"
        b"Content-Length: 2\r\nX-Empty:\r\nX-Many: 1\r\nX-Many: 2\r\n\r\n{}"
    )
    gateway = await start_gateway(await backend(health_then(answering(answer))))
    async with http.post(f"{gateway.url}/v1/completions", timeout=CLIENT_DEADLINE) as response:
        assert response.status == 200
        assert response.headers["X-Folded"] == "a b"
        assert response.headers.getall("Content-Length") == ["2"]
        assert response.headers["X-Empty"] == ""
        assert response.headers.getall("X-Many") == ["1", "2"]
        assert await response.read() == b"{}"


def test_backend_timeouts_are_set_by_environment_and_bad_values_name_the_setting() -> None:
    base = {"NOCTAYA_BACKEND_URL": "http://backend:8000"}
    defaults = load_config(base)
    assert (defaults.backend_read_timeout, defaults.backend_head_timeout) == (600.0, 30.0)
    custom = load_config(
        {**base, "NOCTAYA_BACKEND_READ_TIMEOUT": "15m", "NOCTAYA_BACKEND_HEAD_TIMEOUT": "5s"}
    )
    assert (custom.backend_read_timeout, custom.backend_head_timeout) == (900.0, 5.0)
    for name in ("NOCTAYA_BACKEND_READ_TIMEOUT", "NOCTAYA_BACKEND_HEAD_TIMEOUT"):
        for bad in ("0s", "-1m", "ten"):
            with pytest.raises(ConfigError, match=f'^{name} must be a positive duration .*"{bad}"'):
                load_config({**base, name: bad})


async def test_a_204_with_a_content_length_reaches_http2_clients_as_a_204(
    backend: StartBackend, start_gateway: StartGateway
) -> None:
    answer = b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\nX-Id: 1\r\n\r\n"
    gateway = await start_gateway(await backend(health_then(answering(answer))))
    async with httpx.AsyncClient(http1=False, http2=True, timeout=15) as client:
        response = await client.delete(f"{gateway.url}/v1/files/1")
    assert response.http_version == "HTTP/2"
    assert (response.status_code, response.headers["x-id"], response.content) == (204, "1", b"")
    assert "content-length" not in response.headers


async def test_a_cold_stream_whose_backend_then_stalls_ends_with_a_timeout_error_event(
    backend: StartBackend,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The client already has its 200 and heartbeats: the stall becomes the closing frame."""
    ready = False

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await read_request(reader)
                if not head.startswith(b"GET /health "):
                    await reader.read()  # the completion: never answered
                    break
                status = b"200 OK" if ready else b"503 Service Unavailable"
                writer.write(b"HTTP/1.1 %s\r\nContent-Length: 0\r\n\r\n" % status)
        writer.close()

    def become_ready() -> None:
        nonlocal ready
        ready = True

    gateway = await start_gateway(
        await backend(handler), heartbeat_interval=0.1, backend_read_timeout=0.3
    )
    asyncio.get_running_loop().call_later(0.25, become_ready)
    async with http.post(
        f"{gateway.url}/v1/chat/completions", json={"stream": True}, timeout=CLIENT_DEADLINE
    ) as response:
        assert response.status == 200
        blocks = await read_events(response)
    assert ": heartbeat" in blocks
    assert blocks[-1] == (
        "event: error\ndata: "
        '{"error":{"message":"backend timeout","type":"server_error","code":"gateway_timeout"}}'
    )
    assert "proxy: backend failed before answering, error event 504 to the client" in caplog.text
