"""A response goes to the client in as few writes as its exchange allows: a proxied answer the
backend sent in one piece leaves in one write, head and body together; a head whose body is
still to come leaves at once, alone (a stream's client must not wait for the first token to see
its status)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp
import pytest
from hypercorn.asyncio.tcp_server import TCPServer
from hypercorn.events import Event, RawData

from .conftest import StartGateway
from .raw_backend import StartBackend, answering, health_then
from .raw_backend import backend as backend  # the fixture
from .support import Engine

CHAT = {"model": "stub", "messages": [{"role": "user", "content": "hi"}]}
HEAD_WITHIN = 2.0
"""Far above a held head's one turn of the event loop, on a loaded machine too."""


def _count_writes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """What the server hands its connections to write from now on, one item per write."""
    writes: list[bytes] = []
    send: Callable[[TCPServer, Event], Awaitable[None]] = TCPServer.protocol_send

    async def counting(self: TCPServer, event: Event) -> None:
        if isinstance(event, RawData) and event.data:
            writes.append(event.data)
        await send(self, event)

    monkeypatch.setattr(TCPServer, "protocol_send", counting)
    return writes


async def test_a_proxied_answer_leaves_in_one_write(
    engine: Engine,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gateway = await start_gateway(engine.url)
    writes = _count_writes(monkeypatch)
    for _ in range(5):
        async with http.post(f"{gateway.url}/v1/chat/completions", json=CHAT) as response:
            assert response.status == 200
            assert (await response.json())["object"] == "chat.completion"
    assert len(writes) == 5, [write[:40] for write in writes]
    assert all(write.startswith(b"HTTP/1.1 200 ") and write.endswith(b"}") for write in writes)


async def test_a_gateway_answer_leaves_in_one_write(
    engine: Engine,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gateway = await start_gateway(engine.url, max_request_body=8)
    writes = _count_writes(monkeypatch)
    async with http.post(f"{gateway.url}/v1/chat/completions", json=CHAT) as response:
        assert response.status == 413
        assert (await response.json())["error"]["code"] == "request_too_large"
    assert len(writes) == 1
    assert writes[0].startswith(b"HTTP/1.1 413 ")


async def test_a_head_whose_body_is_still_to_come_is_not_held_back(
    start_gateway: StartGateway, http: aiohttp.ClientSession, backend: StartBackend
) -> None:
    url = await backend(
        health_then(
            answering(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n",
                then_close=False,  # the first token never comes
            )
        )
    )
    gateway = await start_gateway(url)
    async with asyncio.timeout(HEAD_WITHIN):
        response = await http.post(f"{gateway.url}/v1/chat/completions", json=CHAT)
    async with response:
        assert response.status == 200
        assert response.headers["content-type"] == "text/event-stream"
