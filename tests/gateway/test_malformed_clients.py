"""Slow, broken and hostile clients: none of them may crash the gateway or leave a slot behind."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import socket

import aiohttp
import pytest
from noctaya.gateway.process.config import GatewayConfig
from noctaya.gateway.server.hypercorn_config import hypercorn_config
from noctaya.gateway.server.patches import tcp_close

from .conftest import StartGateway
from .firehose import start_firehose
from .support import Engine, eventually, raw_exchange, start_echo


async def _send_raw(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()


async def test_garbage_instead_of_http_gets_400_and_the_gateway_carries_on(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(engine.url)
    reply = await _send_raw(gateway.server.port, b"\x16\x03\x01\x02\x00garbage\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 400")
    reply = await _send_raw(gateway.server.port, b"GET / HTTP/1.1\r\nBad Header\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 400")
    async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
        assert response.status == 200


async def test_oversized_request_head_is_refused(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    gateway = await start_gateway(engine.url)
    head = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 300_000 + b"\r\n\r\n"
    reply = await _send_raw(gateway.server.port, head)
    assert reply.startswith(b"HTTP/1.1 431")
    assert engine.requests == []
    async with http.get(f"{gateway.url}/healthz") as response:
        assert response.status == 200


async def test_clients_trickling_their_bodies_hold_no_slot_and_get_408_at_the_deadline(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """Five clients declare 100 bytes and send 2: with a queue of five they once locked every
    other client out with 429 and kept the backend up. Bodies are now read before admission,
    within a deadline."""
    gateway = await start_gateway(engine.url, max_queue=5, request_body_timeout=1.0)
    slow = []
    try:
        for _ in range(5):
            reader, writer = await asyncio.open_connection("127.0.0.1", gateway.server.port)
            writer.write(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{}"
            )
            slow.append((reader, writer))
        async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
            assert response.status == 200
        assert (gateway.pending, gateway.demand) == (0, 0), "a trickling body is no demand"
        for reader, _ in slow:
            async with asyncio.timeout(5):
                reply = await reader.read()  # all of it: the connection closes after the 408
            head, _, body = reply.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408")
            assert b"connection: close" in head.lower()
            assert json.loads(body)["error"]["code"] == "request_timeout"
    finally:
        for _, writer in slow:
            writer.close()
    assert len(engine.requests) == 1


@pytest.mark.parametrize("cold", [False, True], ids=["warm", "cold"])
async def test_client_vanishing_mid_upload_never_takes_a_slot_nor_wakes_the_backend(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession, cold: bool
) -> None:
    if cold:
        engine.make_unready()
    gateway = await start_gateway(engine.url)
    _, writer = await asyncio.open_connection("127.0.0.1", gateway.server.port)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"10\r\n" + b'{"stream": true,' + b"\r\n"
    )
    await writer.drain()
    async with http.get(f"{gateway.url}/noctaya/queue") as response:
        assert await response.json() == {"pending": 0}, "half a body is no demand"
    writer.close()
    async with http.get(f"{gateway.url}/noctaya/queue") as response:
        assert await response.json() == {"pending": 0}
    assert gateway.pending == 0
    assert engine.requests == []


@pytest.mark.parametrize("pause", [0.0, 0.2], ids=["eof-with-the-bytes", "eof-after-them"])
async def test_lying_content_length_is_cut_off_by_the_client_closing(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession, pause: float
) -> None:
    """The EOF of a body still arriving is the client leaving, never a request to answer,
    whether it comes in the same read as the body's last bytes or in one of its own."""
    gateway = await start_gateway(engine.url)
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.server.port)
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{}")
    await writer.drain()
    await asyncio.sleep(pause)  # nothing to poll: the gateway's read of the body is not seen
    writer.write_eof()
    assert await asyncio.wait_for(reader.read(), 5) == b"", "no answer to half a request"
    writer.close()
    await eventually(lambda: gateway.pending == 0, what="the slot to be freed")
    async with http.get(f"{gateway.url}/healthz") as response:
        assert response.status == 200


def test_idle_keep_alive_connections_are_kept_two_minutes_not_the_header_budget() -> None:
    """Go's server has no idle timeout; a proxy pooling connections to the gateway must not race
    a 10 s close. Hypercorn's idle timer is therefore 120 s; a begun head has its own 10 s."""
    served = hypercorn_config(GatewayConfig(backend_url="http://backend:8000"))
    assert served.keep_alive_timeout == 120


async def test_slow_request_heads_hold_their_own_connections_and_nothing_else(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """Clients trickling endless headers (allowed up to the head timeout) take no queue slot and
    no demand: with a queue of one, a real request is served beside them."""
    gateway = await start_gateway(engine.url, max_queue=1)
    writers = []
    try:
        for _ in range(20):
            _, writer = await asyncio.open_connection("127.0.0.1", gateway.server.port)
            writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: a\r\nX-Slow: a\r\n")
            writers.append(writer)
        for writer in writers:
            writer.write(b"X-Slower: b\r\n")
            await writer.drain()
        async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
            assert response.status == 200
        assert gateway.pending == 0
        assert gateway.demand == 0
    finally:
        for writer in writers:
            writer.close()


async def _read_until_closed(reader: asyncio.StreamReader) -> bytes:
    async with asyncio.timeout(5):
        return await reader.read()


async def test_content_length_beside_chunked_is_answered_then_the_connection_is_closed(
    start_gateway: StartGateway,
) -> None:
    """Framed by its chunks, as RFC 9112 says; but a proxy in front may have framed it by its
    Content-Length, so nothing after it on this connection is served (request smuggling)."""
    echo = await start_echo()
    try:
        gateway = await start_gateway(echo.url)
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.server.port)
        writer.write(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
            b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        reply = await _read_until_closed(reader)
        writer.close()
    finally:
        echo.server.close()
    assert reply.startswith(b"HTTP/1.1 200")
    assert reply.count(b"HTTP/1.1") == 1, "the bytes after the request were not served"
    assert b"connection: close" in reply.lower()
    assert b'"body_length": 2' in reply
    assert b"/smuggled" not in reply


@pytest.mark.parametrize(("target", "openai"), [(b"/v1/models", True), (b"example.com:443", False)])
async def test_connect_is_refused_with_405_and_no_traceback(
    engine: Engine,
    start_gateway: StartGateway,
    caplog: pytest.LogCaptureFixture,
    target: bytes,
    openai: bool,
) -> None:
    gateway = await start_gateway(engine.url)
    status, headers, body = await raw_exchange(
        gateway.server.port, b"CONNECT %s HTTP/1.1\r\nHost: example.com:443\r\n\r\n" % target
    )
    assert status.startswith(b"HTTP/1.1 405")
    assert headers["connection"] == "close", "tunnel bytes behind it are never read as a request"
    assert "GET" in headers["allow"]
    if openai:
        assert json.loads(body)["error"] == {
            "message": "method not allowed",
            "type": "invalid_request_error",
            "code": "method_not_allowed",
        }
    else:
        assert body == b"method not allowed\n"
    assert engine.requests == []
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_websocket_upgrade_is_refused_in_the_openai_shape(
    engine: Engine, start_gateway: StartGateway
) -> None:
    gateway = await start_gateway(engine.url)
    status, headers, body = await raw_exchange(
        gateway.server.port,
        b"GET /v1/realtime HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    assert status.startswith(b"HTTP/1.1 400")
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "websocket_unsupported"
    assert engine.requests == []


async def test_a_client_that_stops_reading_a_stream_is_cut_off_at_the_send_timeout(
    start_gateway: StartGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over HTTP/1.1 its TCP window closes; the write waits, then gives up: the slot is freed
    and the backend stream ended, where it once waited for ever; and the connection, whose
    graceful close would wait as long for the client to take the rest, is reset."""
    monkeypatch.setattr(tcp_close, "FLUSH_BUDGET", 0.5)
    firehose = await start_firehose()
    try:
        gateway = await start_gateway(firehose.url, client_send_timeout=1.0)
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", gateway.server.port))
            sock.sendall(b"GET /v1/stream HTTP/1.1\r\nHost: x\r\n\r\n")  # and never reads
            await eventually(lambda: firehose.streams == 1, what="the backend stream")
            await eventually(lambda: gateway.pending == 0, within=15, what="the slot to be freed")
            await eventually(lambda: firehose.streams == 0, what="the backend stream to end")

            def reset() -> bool:
                error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                return error == errno.ECONNRESET

            await eventually(reset, within=10, what="the connection to be reset")
    finally:
        firehose.server.close()
