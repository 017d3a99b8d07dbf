"""HTTP/2 in cleartext, both ways clients start it: prior knowledge and the `Upgrade: h2c` dance."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import httpx
import pytest

from .conftest import StartGateway
from .h2_client import RawH2, request_headers
from .support import Engine, eventually


@pytest.fixture
async def h2_client() -> httpx.AsyncClient:
    async with httpx.AsyncClient(http1=False, http2=True, timeout=10) as client:
        yield client


async def test_prior_knowledge_h2c_serves_plain_and_streamed_completions(
    engine: Engine, start_gateway: StartGateway, h2_client: httpx.AsyncClient
) -> None:
    gateway = await start_gateway(engine.url)
    response = await h2_client.post(f"{gateway.url}/v1/chat/completions", json={})
    assert response.http_version == "HTTP/2"
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "tok0 tok1 tok2 "
    async with h2_client.stream(
        "POST", f"{gateway.url}/v1/chat/completions", json={"stream": True}
    ) as streamed:
        assert streamed.http_version == "HTTP/2"
        lines = [line async for line in streamed.aiter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    assert len(lines) == 4


async def test_cold_stream_over_h2_sends_heartbeats_without_connection_headers(
    engine: Engine, start_gateway: StartGateway, h2_client: httpx.AsyncClient
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url, heartbeat_interval=0.05)
    asyncio.get_running_loop().call_later(0.2, engine.make_ready)
    async with h2_client.stream(
        "POST", f"{gateway.url}/v1/completions", json={"stream": True}
    ) as streamed:
        assert streamed.status_code == 200
        assert streamed.headers["content-type"] == "text/event-stream"
        assert "connection" not in streamed.headers, "connection-specific headers are h1 only"
        lines = [line async for line in streamed.aiter_lines() if line]
    assert lines[0] == ": heartbeat"
    assert lines[-1] == "data: [DONE]"


async def test_many_concurrent_streams_on_one_h2_connection(
    engine: Engine, start_gateway: StartGateway, h2_client: httpx.AsyncClient
) -> None:
    gateway = await start_gateway(engine.url)

    async def one(i: int) -> str:
        response = await h2_client.post(f"{gateway.url}/v1/completions?tokens={i + 1}", json={})
        return response.json()["choices"][0]["text"]

    texts = await asyncio.gather(*(one(i) for i in range(50)))
    assert texts == ["".join(f"tok{j} " for j in range(i + 1)) for i in range(50)]


async def test_late_body_data_after_a_refusal_leaves_the_other_streams_alone(
    engine: Engine, start_gateway: StartGateway, tmp_path: Path
) -> None:
    """A 401 sent before the request body has arrived; the client keeps uploading. The late
    DATA must not take down the connection and the request multiplexed beside it."""
    engine.make_unready()
    (tmp_path / "key").write_text("secret")
    gateway = await start_gateway(engine.url, client_api_key_file=str(tmp_path / "key"))
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.server.port)
    try:
        authorized = [*_request_headers("/v1/completions"), ("authorization", "Bearer secret")]
        connection.send_headers(1, authorized)
        connection.send_data(1, b"{}", end_stream=True)
        writer.write(connection.data_to_send())
        await eventually(lambda: gateway.pending == 1, what="the request to wait for the backend")
        connection.send_headers(3, _request_headers("/v1/completions"))
        writer.write(connection.data_to_send())
        status, body = await _read_response(connection, reader, writer, stream_id=3)
        assert status == b"401"
        assert json.loads(body)["error"]["code"] == "unauthorized"
        connection.send_data(3, b'{"prompt": "' + b"x" * 16_000 + b'"}', end_stream=True)
        writer.write(connection.data_to_send())
        engine.make_ready()
        status, body = await _read_response(connection, reader, writer, stream_id=1)
    finally:
        writer.close()
    assert status == b"200"
    assert json.loads(body)["object"] == "text_completion"


LATE_UPLOAD = 256 * 1024
"""Four times the default 64 KiB window: the upload completes only if late DATA is credited."""


@pytest.mark.parametrize("refusal", ["unauthorized", "too_large"])
async def test_a_large_upload_after_an_early_answer_completes_and_the_connection_serves_on(
    engine: Engine, start_gateway: StartGateway, tmp_path: Path, refusal: str
) -> None:
    """The client uploads its whole body after the gateway already answered; the window
    updates for those bytes must reach it, or the connection stalls for every stream on it."""
    headers = _request_headers("/v1/completions")
    if refusal == "unauthorized":
        (tmp_path / "key").write_text("secret")
        gateway = await start_gateway(engine.url, client_api_key_file=str(tmp_path / "key"))
        expected = b"401"
    else:
        gateway = await start_gateway(engine.url, max_request_body=1000)
        headers.append(("content-length", str(LATE_UPLOAD)))
        expected = b"413"
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.server.port)
    try:
        connection.send_headers(1, headers)
        writer.write(connection.data_to_send())
        answered, _ = await _read_response(connection, reader, writer, stream_id=1)
        assert answered == expected
        sent = 0
        while sent < LATE_UPLOAD:
            room = min(
                connection.local_flow_control_window(1),
                connection.max_outbound_frame_size,
                LATE_UPLOAD - sent,
            )
            if room == 0:
                async with asyncio.timeout(5):  # stalled: no window update ever comes
                    data = await reader.read(65536)
                assert data, "connection closed during the late upload"
                connection.receive_data(data)
                continue
            connection.send_data(1, b"x" * room, end_stream=sent + room == LATE_UPLOAD)
            writer.write(connection.data_to_send())
            sent += room
        connection.send_headers(3, _request_headers("/healthz", "GET"), end_stream=True)
        writer.write(connection.data_to_send())
        answered, _ = await _read_response(connection, reader, writer, stream_id=3)
    finally:
        writer.close()
    assert answered == b"200"


def _request_headers(path: str, method: str = "POST") -> list[tuple[str, str]]:
    return [
        (":method", method),
        (":path", path),
        (":scheme", "http"),
        (":authority", "127.0.0.1"),
        ("content-type", "application/json"),
    ]


async def test_h2c_upgrade_from_http1_is_answered_over_http2(
    engine: Engine, start_gateway: StartGateway
) -> None:
    gateway = await start_gateway(engine.url)
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    settings = connection.initiate_upgrade_connection()
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.server.port)
    try:
        writer.write(
            b"GET /noctaya/queue HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
            b"HTTP2-Settings: " + settings + b"\r\n\r\n"
        )
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101")
        assert b"upgrade: h2c" in head.lower()
        writer.write(connection.data_to_send())
        status, body = await _read_response(connection, reader, writer, stream_id=1)
    finally:
        writer.close()
    assert status == b"200"
    assert json.loads(body) == {"pending": 0}


async def test_reset_h2_stream_during_a_cold_wait_frees_the_slot(
    engine: Engine, start_gateway: StartGateway
) -> None:
    engine.make_unready()
    gateway = await start_gateway(engine.url)
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    _, writer = await asyncio.open_connection("127.0.0.1", gateway.server.port)
    try:
        connection.send_headers(1, _request_headers("/v1/completions"))
        connection.send_data(1, b"{}", end_stream=True)
        writer.write(connection.data_to_send())
        await eventually(lambda: gateway.pending == 1, what="the request to be admitted")
        connection.reset_stream(1)
        writer.write(connection.data_to_send())
        await eventually(lambda: gateway.pending == 0, what="the slot to be freed")
    finally:
        writer.close()


async def _read_response(
    connection: h2.connection.H2Connection,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    stream_id: int,
) -> tuple[bytes, bytes]:
    status = b""
    body = b""
    async with asyncio.timeout(5):
        while True:
            data = await reader.read(65536)
            assert data, "connection closed before the response ended"
            for event in connection.receive_data(data):
                if getattr(event, "stream_id", stream_id) != stream_id:
                    continue
                if isinstance(event, h2.events.ResponseReceived):
                    status = dict(event.headers)[b":status"]
                elif isinstance(event, h2.events.DataReceived):
                    body += event.data
                    connection.acknowledge_received_data(event.flow_controlled_length, stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    writer.write(connection.data_to_send())
                    return status, body
            writer.write(connection.data_to_send())


async def test_the_drain_ends_an_h2_request_whose_body_never_ends_within_its_budget(
    engine: Engine, start_gateway: StartGateway
) -> None:
    """Hypercorn ended the request it cancelled at the end of the drain with a 500 that waited
    for ever on the HTTP/2 send task cancelled with it, and the stop with it."""
    gateway = await start_gateway(engine.url, shutdown_timeout=1.0)
    client = await RawH2.open(gateway.server.port)
    client.connection.send_headers(1, request_headers("/v1/chat/completions"), end_stream=False)
    client.connection.send_data(1, b'{"stream"', end_stream=False)
    client.flush()
    await client.barrier()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(gateway.server.stop(), 10)
    assert loop.time() - started < 5
    client.close()
