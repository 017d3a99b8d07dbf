"""Hostile HTTP/2 clients, driven frame by frame over real sockets: windows never opened,
malformed request heads, control-frame and reset floods. Each may cost its own stream or its own
connection, never the gateway's memory, its CPU or anyone else's requests."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
import h2.errors
import h2.settings
import pytest
from hypercorn.protocol.h2 import BUFFER_HIGH_WATER
from noctaya.gateway.server.patches.http2.floods import RESET_BURST, RESET_RATE
from noctaya.gateway.upstream.connection import HIGH_WATER as UPSTREAM_HIGH_WATER

from .conftest import StartGateway
from .firehose import CHUNK, start_firehose
from .h2_client import RawH2, request_headers
from .support import Command, Engine, eventually, start_echo, start_gateway_command

StartCommand = Callable[..., Command]
KIB = 1024
MIB = 1024 * KIB
RECV_SIZE = 256 * KIB
"""The most an asyncio socket transport reads at once."""
STALLED_STREAM = UPSTREAM_HIGH_WATER + RECV_SIZE + BUFFER_HIGH_WATER + len(CHUNK)
"""What the design lets one stalled stream hold: the backend connection's buffer, read up to its
high-water mark and so past it by at most one read, and the HTTP/2 stream buffer, filled up to
its high-water mark and so past it by at most one message: ~600 KiB."""
CONNECTION_OVERHEAD = 256 * KIB
"""Allowed per stalled stream besides its buffers (two TCP transports, h2's and hypercorn's state,
tasks, allocator slack). Measured: each stalled stream adds ~590 KiB, buffers included."""
WARM_UP = 2 * MIB
"""Once per process: what the first streamed request leaves behind besides its buffers (measured
~0.4 MiB)."""


def _rss(pid: int) -> int:
    """Resident memory of a process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


async def test_clients_that_never_open_their_window_hold_bounded_buffers_then_get_reset(
    commands: StartCommand, http: aiohttp.ClientSession
) -> None:
    """Five streams whose client reads the socket but never opens its flow-control window, in
    front of a backend streaming as fast as it is read. The gateway once buffered the backend
    stream whole (59 MiB to 1 GiB in 4 s for one stream); now each stalled stream holds its
    bounded buffers (`STALLED_STREAM`) and no more, the backend is read no faster than the
    client takes, others are answered promptly, and the stalled streams reset at the send
    timeout."""
    firehose = await start_firehose()
    gateway, port = await start_gateway_command(
        commands, firehose.url, NOCTAYA_CLIENT_SEND_TIMEOUT="4s"
    )
    url = f"http://127.0.0.1:{port}"
    async with http.get(f"{url}/healthz") as response:
        assert response.status == 200
    baseline = _rss(gateway.process.pid)
    clients = [await RawH2.open(port, window=1024) for _ in range(5)]
    try:
        clients[0].request(1, request_headers("/v1/completions?stream=true", "GET"))
        await eventually(lambda: firehose.streams == 1, what="the first backend stream")
        await clients[0].read_for(1.0)
        first = _rss(gateway.process.pid)
        for client in clients[1:]:
            client.request(1, request_headers("/v1/completions?stream=true", "GET"))
        await eventually(lambda: firehose.streams == 5, what="five backend streams")
        await asyncio.gather(*(client.read_for(2.0) for client in clients))
        assert firehose.sent < 100 * MIB, f"backend read {firehose.sent / MIB:.0f} MiB"
        now = _rss(gateway.process.pid)
        each = (now - first) / 4
        allowed = STALLED_STREAM + CONNECTION_OVERHEAD
        assert each < allowed, (
            f"{each / KIB:.0f} KiB per stalled stream, {allowed / KIB:.0f} allowed"
        )
        grown = now - baseline
        allowed = 5 * (STALLED_STREAM + CONNECTION_OVERHEAD) + WARM_UP
        assert grown < allowed, f"gateway grew {grown / KIB:.0f} KiB, {allowed / KIB:.0f} allowed"
        started = time.monotonic()
        async with http.post(f"{url}/healthz") as response:
            assert response.status == 200
        assert time.monotonic() - started < 2.0, "another client waited on the stalled ones"
        for client in clients:
            reply = await client.response(1, within=10)
            assert reply.reset == h2.errors.ErrorCodes.INTERNAL_ERROR
        await eventually(lambda: firehose.streams == 0, what="the backend reads to be ended")
    finally:
        for client in clients:
            client.close()
        firehose.server.close()


def _head(*fields: tuple[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    """Pseudo-header fields first, :authority among them, then the rest, in order."""
    pseudo = [field for field in fields if field[0].startswith(b":")]
    return [*pseudo, (b":authority", b"127.0.0.1"), *(f for f in fields if f not in pseudo)]


GET = ((b":method", b"GET"), (b":path", b"/v1/models"), (b":scheme", b"http"))
MALFORMED = {
    "non-ASCII :path": _head((b":method", b"GET"), (b":path", b"/v1/\xff"), (b":scheme", b"http")),
    "CONNECT without :path": _head((b":method", b"CONNECT")),
    "uppercase header name": _head(*GET, (b"X-Up", b"1")),
    "te: gzip": _head(*GET, (b"te", b"gzip")),
    "no :method": _head((b":path", b"/v1/models"), (b":scheme", b"http")),
    "pseudo-header after a header": [*_head(*GET), (b"x-a", b"1"), (b":protocol", b"x")],
    "body longer than content-length": _head(
        (b":method", b"POST"),
        (b":path", b"/v1/completions"),
        (b":scheme", b"http"),
        (b"content-length", b"1"),
    ),
}


@pytest.mark.parametrize("head", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_malformed_request_resets_its_own_stream_and_the_streaming_one_beside_it_ends(
    start_gateway: StartGateway, head: list[tuple[bytes, bytes]]
) -> None:
    body = b"{}" if (b"content-length", b"1") in head else None
    from .support import start_engine

    engine = await start_engine(token_count=20, token_delay=0.02)
    try:
        gateway = await start_gateway(engine.url)
        client = await RawH2.open(gateway.server.port, validate=False)
        try:
            client.request(1, request_headers("/v1/completions"), b'{"stream": true}')
            await client.until(lambda: 1 in client.replies and client.replies[1].status != b"")
            client.request(3, head, body)
            bad = await client.response(3)
            assert bad.reset == h2.errors.ErrorCodes.PROTOCOL_ERROR
            streamed = await client.response(1)
            assert streamed.ended
            assert streamed.body.endswith(b"data: [DONE]\n\n")
            client.request(5, request_headers("/healthz", "GET"))
            assert (await client.response(5)).status == b"200"
            assert client.goaway is None
        finally:
            client.close()
    finally:
        engine.server.close()


def _settings(client: RawH2, _: int) -> None:
    client.connection.update_settings({h2.settings.SettingCodes.ENABLE_PUSH: 0})


def _ping(client: RawH2, i: int) -> None:
    client.connection.ping(i.to_bytes(8, "big"))


def _priority(client: RawH2, i: int) -> None:
    client.connection.prioritize(2 * i + 1, weight=16)


def _tiny_window_update(client: RawH2, _: int) -> None:
    client.connection.increment_flow_control_window(1)


def _empty_data(client: RawH2, i: int) -> None:
    if i == 0:
        client.connection.send_headers(1, request_headers("/v1/completions"))
    client.connection.send_data(1, b"")


def _rapid_reset(client: RawH2, i: int) -> None:
    client.connection.send_headers(2 * i + 1, request_headers("/v1/completions"))
    client.connection.reset_stream(2 * i + 1)


FLOODS = {
    "SETTINGS": _settings,
    "PING": _ping,
    "PRIORITY": _priority,
    "WINDOW_UPDATE": _tiny_window_update,
    "empty DATA": _empty_data,
    "rapid reset": _rapid_reset,
}


@pytest.mark.parametrize("frame", FLOODS.values(), ids=FLOODS.keys())
async def test_a_frame_flood_ends_its_connection_with_enhance_your_calm_and_no_one_else_waits(
    engine: Engine,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
    frame: Callable[[RawH2, int], None],
) -> None:
    gateway = await start_gateway(engine.url)
    client = await RawH2.open(gateway.server.port)
    try:
        for i in range(30_000):
            frame(client, i)
            if i % 500 == 0:
                client.flush()
                await client.read_for(0.001)  # let the gateway run between bursts, and listen
                if client.goaway is not None or client.closed:
                    break
        client.flush()
        started = time.monotonic()
        async with http.get(f"{gateway.url}/healthz") as response:
            assert response.status == 200
        assert time.monotonic() - started < 2.0, "another client waited on the flood"
        await client.until_closed()
    finally:
        client.close()
    assert client.goaway == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], "no traceback for an abusive client"


async def test_a_backend_failing_mid_stream_resets_the_h2_stream_instead_of_leaving_it_open(
    start_gateway: StartGateway,
) -> None:
    echo = await start_echo()
    try:
        gateway = await start_gateway(echo.url)
        client = await RawH2.open(gateway.server.port)
        try:
            client.request(1, request_headers("/die-mid-stream", "GET"))
            reply = await client.response(1)
            assert reply.reset == h2.errors.ErrorCodes.INTERNAL_ERROR
            assert reply.body == b'data: {"partial": true}\n\n'
            client.request(3, request_headers("/healthz", "GET"))
            assert (await client.response(3)).status == b"200"
        finally:
            client.close()
    finally:
        echo.server.close()


async def test_a_body_stalled_on_one_stream_gets_408_and_takes_no_slot(
    engine: Engine, start_gateway: StartGateway
) -> None:
    gateway = await start_gateway(engine.url, max_queue=1, request_body_timeout=0.5)
    client = await RawH2.open(gateway.server.port)
    try:
        client.connection.send_headers(
            1, [*request_headers("/v1/completions"), ("content-length", "100")]
        )
        client.connection.send_data(1, b"{")  # and nothing more
        client.request(3, request_headers("/v1/completions"), b"{}")
        assert (await client.response(3)).status == b"200", "the one slot was free"
        stalled = await client.response(1)
        assert stalled.status == b"408"
        assert b'"code":"request_timeout"' in stalled.body
        assert gateway.pending == 0
    finally:
        client.close()


MAX_STREAMS = 250
"""What the gateway announces as SETTINGS_MAX_CONCURRENT_STREAMS."""


async def _hold_every_stream(client: RawH2, gateway_pending: Callable[[], int]) -> list[int]:
    """Open the gateway's whole stream allowance with cold waits, once it announced the limit
    (this client acknowledges the SETTINGS before anything it sends after)."""
    await client.until(
        lambda: client.connection.remote_settings.max_concurrent_streams == MAX_STREAMS
    )
    held = [2 * i + 1 for i in range(MAX_STREAMS)]
    for stream_id in held:
        client.request(stream_id, request_headers("/v1/completions"), b"{}")
    await eventually(lambda: gateway_pending() == MAX_STREAMS, within=30, what="held streams")
    # From here on this client ignores the limit, as a hostile or broken one would.
    client.connection.remote_settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = 2**31
    client.connection.remote_settings.acknowledge()
    return held


async def test_a_stream_over_the_concurrency_limit_is_refused_alone(
    engine: Engine, start_gateway: StartGateway, caplog: pytest.LogCaptureFixture
) -> None:
    """RFC 9113: a stream past SETTINGS_MAX_CONCURRENT_STREAMS is refused with RST_STREAM
    REFUSED_STREAM, and the connection and its other streams carry on (hypercorn let h2 end the
    connection with GOAWAY PROTOCOL_ERROR, leaving every accepted stream unanswered). Its header
    block is still decoded: the next stream's head refers to what it added to the HPACK table."""
    engine.make_unready()
    gateway = await start_gateway(engine.url, max_queue=MAX_STREAMS, activation_timeout=60.0)
    client = await RawH2.open(gateway.server.port)
    try:
        held = await _hold_every_stream(client, lambda: gateway.pending)
        over = held[-1] + 2
        refused_head = [*request_headers("/healthz"), ("x-refused", "indexed")]
        client.request(over, refused_head, b"{}")  # its DATA arrives after the reset
        assert (await client.response(over)).reset == h2.errors.ErrorCodes.REFUSED_STREAM
        assert client.goaway is None

        client.connection.reset_stream(held[0], h2.errors.ErrorCodes.CANCEL)
        client.flush()
        await eventually(lambda: gateway.pending == MAX_STREAMS - 1, what="one stream to end")
        client.request(over + 2, refused_head, b"{}")
        assert (await client.response(over + 2)).status == b"200"

        engine.make_ready()
        for stream_id in held[1:]:
            reply = await client.response(stream_id, within=30)
            assert reply.status == b"200", f"stream {stream_id}: {reply}"
        assert client.goaway is None
    finally:
        client.close()
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == [], "no traceback"


async def test_streams_opened_over_the_limit_again_and_again_count_as_a_reset_flood(
    engine: Engine, start_gateway: StartGateway, caplog: pytest.LogCaptureFixture
) -> None:
    """A refused stream costs the gateway a header block to decode and a reset to send, like a
    rapid reset: a client that keeps opening them spends the same budget and is calmed down."""
    engine.make_unready()
    gateway = await start_gateway(engine.url, max_queue=MAX_STREAMS, activation_timeout=60.0)
    client = await RawH2.open(gateway.server.port)
    try:
        held = await _hold_every_stream(client, lambda: gateway.pending)
        flooding = time.monotonic()
        for stream_id in range(held[-1] + 2, held[-1] + 2 * 5_000, 2):
            client.connection.send_headers(stream_id, request_headers("/v1/models", "GET"), True)
            if stream_id % 200 == 1:
                client.flush()
                await client.read_for(0.001)
                if client.goaway is not None or client.closed:
                    break
        client.flush()
        await client.until_closed()
        took = time.monotonic() - flooding
    finally:
        client.close()
    assert client.goaway == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
    refused = [r for r in client.replies.values() if r.reset == h2.errors.ErrorCodes.REFUSED_STREAM]
    # The budget, plus what it refilled while a busy machine took its time over the flood.
    most = RESET_BURST + RESET_RATE * took + 100
    assert 0.9 * RESET_BURST <= len(refused) <= most, f"{len(refused)} refusals in {took:.2f}s"
    engine.make_ready()  # the held streams' requests end with the connection
    await eventually(lambda: gateway.pending == 0, what="the held requests to be let go")
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], "no traceback for an abusive client"
