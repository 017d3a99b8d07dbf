"""How long the gateway keeps a connection whose client has gone: not a moment longer than it
takes to notice. A soak once left 4,000 short-lived connections' sockets open in the gateway for
the whole 120 s idle budget, because a client's EOF on an idle connection went unheeded."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable

import aiohttp
import pytest
from noctaya.gateway.server.patches import head_timeout

from .conftest import StartGateway
from .h2_client import RawH2, request_headers
from .support import (
    Command,
    Engine,
    eventually,
    metric,
    open_descriptors,
    start_gateway_command,
)

StartCommand = Callable[..., Command]
CLIENTS = 100
LET_GO = 10.0
"""Far below the 120 s idle budget, far above what noticing an EOF takes on a loaded machine."""
SLACK = 3
"""Descriptors the gateway may open and close on its own meanwhile (readiness probes)."""
NO_BACKEND = "http://127.0.0.1:9"
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


async def _answered(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that has had one request answered and is now idle."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(HEALTHZ)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), LET_GO)
    assert head.startswith(b"HTTP/1.1 200")
    return reader, writer


async def _closed_by_server(reader: asyncio.StreamReader) -> bool:
    """Whether the server closes the connection within LET_GO (whatever it sends before)."""
    try:
        await asyncio.wait_for(reader.read(), LET_GO)
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


async def _half_close(port: int) -> bool:
    reader, writer = await _answered(port)
    writer.write_eof()
    try:
        return await _closed_by_server(reader)
    finally:
        writer.close()


async def _close(port: int) -> bool:
    _, writer = await _answered(port)
    writer.close()
    return True


async def _reset(port: int) -> bool:
    _, writer = await _answered(port)
    writer.get_extra_info("socket").setsockopt(
        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
    )
    writer.close()
    return True


async def _gateway_at_rest(commands: StartCommand) -> tuple[int, int, int]:
    """A gateway process that has answered once: (pid, port, its descriptors at rest)."""
    gateway, port = await start_gateway_command(commands, NO_BACKEND)
    await _close(port)
    pid = gateway.process.pid
    return pid, port, open_descriptors(pid)


async def _back_to(pid: int, baseline: int) -> None:
    await eventually(
        lambda: open_descriptors(pid) <= baseline + SLACK,
        within=LET_GO,
        what=f"the gateway's descriptors back to {baseline} (+{SLACK})",
    )


@pytest.mark.parametrize(
    "leave", [_half_close, _close, _reset], ids=["half-close", "close", "reset"]
)
async def test_http1_clients_leaving_idle_connections_are_let_go_at_once(
    commands: StartCommand, leave: Callable[[int], Awaitable[bool]]
) -> None:
    pid, port, baseline = await _gateway_at_rest(commands)
    closed = await asyncio.gather(*(leave(port) for _ in range(CLIENTS)))
    assert all(closed), f"{closed.count(False)} of {CLIENTS} half-closed connections kept open"
    await _back_to(pid, baseline)


async def test_a_client_resetting_an_idle_connection_leaves_no_task_behind(
    engine: Engine, start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """The kernel frees a reset socket by itself; the connection's task and its buffers were
    still kept for the idle budget."""
    gateway = await start_gateway(engine.url)
    async with http.get(f"{gateway.url}/healthz") as response:  # the server's tasks are up
        assert response.status == 200
    at_rest = len(asyncio.all_tasks())
    await asyncio.gather(*(_reset(gateway.server.port) for _ in range(CLIENTS)))
    await eventually(
        lambda: len(asyncio.all_tasks()) <= at_rest,
        within=LET_GO,
        what=f"the gateway's tasks back to {at_rest}",
    )


@pytest.mark.parametrize("half", [True, False], ids=["half-close", "close"])
async def test_http2_clients_leaving_connections_without_streams_are_let_go_at_once(
    commands: StartCommand, half: bool
) -> None:
    pid, port, baseline = await _gateway_at_rest(commands)

    async def leave() -> bool:
        client = await RawH2.open(port)
        client.request(1, request_headers("/healthz", "GET"))
        assert (await client.response(1)).status == b"200"
        if not half:
            client.close()
            return True
        client.writer.write_eof()
        try:
            return await _closed_by_server(client.reader)
        finally:
            client.close()

    closed = await asyncio.gather(*(leave() for _ in range(CLIENTS)))
    assert all(closed), f"{closed.count(False)} of {CLIENTS} half-closed connections kept open"
    await _back_to(pid, baseline)


async def _cold_wait_then_half_close_http1(port: int) -> bool:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
    await writer.drain()
    writer.write_eof()
    try:
        return await _closed_by_server(reader)
    finally:
        writer.close()


async def _cold_wait_then_half_close_http2(port: int) -> bool:
    client = await RawH2.open(port)
    client.request(1, request_headers("/v1/completions"), b"{}")
    client.writer.write_eof()
    try:
        return await _closed_by_server(client.reader)
    finally:
        client.close()


@pytest.mark.parametrize(
    "half_close",
    [_cold_wait_then_half_close_http1, _cold_wait_then_half_close_http2],
    ids=["http1", "http2"],
)
async def test_a_client_half_closing_during_a_cold_wait_is_gone_and_its_connection_closed(
    commands: StartCommand, half_close: Callable[[int], Awaitable[bool]]
) -> None:
    """A half-close looks on the wire exactly like a client that closed and left: both end the
    exchange (as Go's server and nginx do), so the wait stops holding a slot for nobody."""
    pid, port, baseline = await _gateway_at_rest(commands)
    assert await half_close(port), "the connection outlived its client"
    await _back_to(pid, baseline)
    async with aiohttp.ClientSession() as http:

        async def no_slot_held() -> bool:
            async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
                return metric(await response.text(), "noctaya_gateway_pending") == 0

        await eventually(no_slot_held, within=LET_GO, what="the slot to be freed")


async def _trickled_head(port: int) -> float:
    """Seconds until the gateway closes a connection whose request head never ends (inf: never
    within LET_GO)."""
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    began = loop.time()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")

    async def trickle() -> None:
        while not writer.is_closing():
            await asyncio.sleep(0.1)
            writer.write(b"X-Slow: a\r\n")

    trickling = asyncio.ensure_future(trickle())
    try:
        return loop.time() - began if await _closed_by_server(reader) else float("inf")
    finally:
        trickling.cancel()
        writer.close()


async def test_a_request_head_still_arriving_at_the_head_timeout_is_closed(
    engine: Engine, start_gateway: StartGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trickled headers once held their connections for the whole 120 s idle budget."""
    monkeypatch.setattr(head_timeout, "HEAD_TIMEOUT", 0.5)
    gateway = await start_gateway(engine.url)
    held = await asyncio.gather(*(_trickled_head(gateway.server.port) for _ in range(20)))
    assert all(0.5 <= seconds < LET_GO for seconds in held), held
    assert engine.requests == []


async def test_heads_within_the_head_timeout_and_idle_connections_are_untouched(
    engine: Engine, start_gateway: StartGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head deadline starts at a head's first byte: a connection idle for longer between
    requests keeps the keep-alive budget."""
    monkeypatch.setattr(head_timeout, "HEAD_TIMEOUT", 0.5)
    gateway = await start_gateway(engine.url)
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.server.port)
    try:
        for _ in range(2):
            writer.write(HEALTHZ[:20])
            await asyncio.sleep(0.2)  # a head in two parts, well within its deadline
            writer.write(HEALTHZ[20:])
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), LET_GO)
            assert head.startswith(b"HTTP/1.1 200")
            await asyncio.sleep(1.0)  # idle for twice the head timeout
        assert not reader.at_eof()
    finally:
        writer.close()


async def test_idle_connections_close_after_the_keep_alive_budget(
    engine: Engine, start_gateway: StartGateway
) -> None:
    gateway = await start_gateway(engine.url, idle_timeout=0.3)
    connections = [await _answered(gateway.server.port) for _ in range(5)]
    started = asyncio.get_running_loop().time()
    closed = await asyncio.gather(*(_closed_by_server(reader) for reader, _ in connections))
    assert all(closed)
    assert asyncio.get_running_loop().time() - started >= 0.2  # not before the budget is spent
    for _, writer in connections:
        writer.close()


async def test_idle_connections_close_as_soon_as_the_drain_begins(
    engine: Engine, start_gateway: StartGateway
) -> None:
    """Else the drain would wait its whole budget for clients that may never send again."""
    gateway = await start_gateway(engine.url, shutdown_timeout=3 * LET_GO)
    connections = [await _answered(gateway.server.port) for _ in range(5)]
    await asyncio.wait_for(gateway.server.stop(), LET_GO)
    assert all(await asyncio.gather(*(_closed_by_server(reader) for reader, _ in connections)))
    for _, writer in connections:
        writer.close()
