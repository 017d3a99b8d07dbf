"""The engine's readiness check as local mode runs it, against real sockets: what passes, what
fails, within the check's timeout, and readiness won and lost by the thresholds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from noctaya.core.plan.container import HealthCheck, HttpGet, TcpSocket
from noctaya.local.readiness import PortNames, passes, watch_readiness
from support.ports import free_port

DEADLINE = 10.0


class Backend:
    """An HTTP/1.1 server on loopback answering every request with `status`; it records the
    request heads it read."""

    def __init__(self) -> None:
        self.status = 200
        self.silent = False
        self.heads: list[bytes] = []
        self.answered: asyncio.Queue[int] = asyncio.Queue()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.heads.append(await reader.readuntil(b"\r\n\r\n"))
        if self.silent:
            await asyncio.sleep(30)
        writer.write(f"HTTP/1.1 {self.status} X\r\nContent-Length: 0\r\n\r\n".encode())
        self.answered.put_nowait(self.status)
        await writer.drain()
        writer.close()


@pytest.fixture
async def backend() -> AsyncIterator[tuple[Backend, int]]:
    served = Backend()
    server = await asyncio.start_server(served.handle, "127.0.0.1", 0)
    async with server:
        yield served, server.sockets[0].getsockname()[1]


def http(port: int | str, **timing: int) -> HealthCheck:
    return HealthCheck(http_get=HttpGet(port=port, path="/health"), **timing)


@pytest.mark.parametrize(
    ("status", "ready"), [(200, True), (302, True), (404, False), (503, False)]
)
async def test_an_http_check_passes_on_a_status_from_200_to_399(
    backend: tuple[Backend, int], status: int, ready: bool
) -> None:
    served, port = backend
    served.status = status
    assert await passes(http(port), PortNames("http", 1)) is ready
    assert served.heads[0].startswith(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")


async def test_an_http_check_may_name_the_serving_port_and_send_headers(
    backend: tuple[Backend, int],
) -> None:
    served, port = backend
    check = HealthCheck(http_get=HttpGet(port="api", path="/ready", headers=(("X-Probe", "1"),)))
    assert await passes(check, PortNames("api", port))
    assert b"GET /ready HTTP/1.1\r\n" in served.heads[0]
    assert b"\r\nX-Probe: 1\r\n" in served.heads[0]
    assert not await passes(check, PortNames("http", port)), "a name no port has never passes"


async def test_a_check_that_gets_no_answer_fails_at_its_timeout(
    backend: tuple[Backend, int],
) -> None:
    served, port = backend
    served.silent = True
    started = time.monotonic()
    assert not await passes(http(port, timeout_seconds=1), PortNames("http", 1))
    assert 0.9 < time.monotonic() - started < 5


async def test_a_tcp_check_passes_when_the_port_accepts_a_connection(
    backend: tuple[Backend, int],
) -> None:
    _, port = backend
    assert await passes(HealthCheck(tcp_socket=TcpSocket(port)), PortNames("http", 1))
    closed = free_port()
    assert not await passes(HealthCheck(tcp_socket=TcpSocket(closed)), PortNames("http", 1))
    assert not await passes(http(closed), PortNames("http", 1))


async def test_readiness_is_won_after_the_success_threshold_and_lost_after_the_failures(
    backend: tuple[Backend, int],
) -> None:
    served, port = backend
    served.status = 503
    changes: asyncio.Queue[tuple[bool, int]] = asyncio.Queue()
    check = http(port, period_seconds=1, success_threshold=2, failure_threshold=2)

    def report(ready: bool) -> None:
        changes.put_nowait((ready, len(served.heads)))

    watching = asyncio.ensure_future(watch_readiness(check, PortNames("http", 1), report))
    try:
        assert await asyncio.wait_for(served.answered.get(), DEADLINE) == 503
        served.status = 200
        won = await asyncio.wait_for(changes.get(), DEADLINE)
        served.status = 503
        lost = await asyncio.wait_for(changes.get(), DEADLINE)
    finally:
        watching.cancel()
    # ready on the 2nd passing check (the 3rd in all), not ready again on the 2nd failing one
    assert (won, lost) == ((True, 3), (False, 5))
