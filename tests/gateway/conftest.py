"""Fixtures: an in-process engine stub and gateways served by real hypercorn on 127.0.0.1.

Every gateway a test starts is checked on the way out: the `pending` gauge must be back to 0
(no slot left behind) and, once drained, no task it started may still be running.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from noctaya.gateway.process.config import GatewayConfig
from noctaya.gateway.process.gateway_server import GatewayServer

from .support import (
    Command,
    Engine,
    Gateway,
    eventually,
    metric,
    start_command,
    start_engine,
)

FAST = {
    "readiness_interval": 0.05,
    "activation_timeout": 5.0,
    "heartbeat_interval": 0.1,
    "ready_grace": 0.2,
    "shutdown_timeout": 5.0,
}
"""Test-scale timings: readiness polled every 50 ms, heartbeats every 100 ms."""

StartGateway = Callable[..., Awaitable[Gateway]]


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    started = await start_engine(token_count=3, token_delay=0.0)
    yield started
    started.server.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        yield session


@pytest.fixture
async def start_gateway(http: aiohttp.ClientSession) -> AsyncIterator[StartGateway]:
    started: list[Gateway] = []
    before = asyncio.all_tasks()

    async def start(backend_url: str, **overrides: Any) -> Gateway:
        settings = {**FAST, **overrides}
        config = GatewayConfig(backend_url=backend_url, listen_addr="127.0.0.1:0", **settings)
        server = GatewayServer(config, serve_scaler=False)
        await server.start()
        gateway = Gateway(server, f"http://127.0.0.1:{server.port}")
        started.append(gateway)
        return gateway

    yield start

    for gateway in started:
        if not gateway.server.stopped:

            async def drained(gateway: Gateway = gateway) -> bool:
                return metric(await gateway.metrics(http), "noctaya_gateway_pending") == 0

            await eventually(drained, within=10, what="pending gauge back to 0")
            await gateway.server.stop()
        assert gateway.pending == 0
    await http.close()
    current = asyncio.current_task()

    def no_leaked_tasks() -> bool:
        return not [t for t in asyncio.all_tasks() - before if t is not current and not t.done()]

    await eventually(no_leaked_tasks, within=5, what="tasks started by the gateway to end")


@pytest.fixture
def commands(tmp_path: Path) -> Iterator[Callable[..., Command]]:
    """Start `noctaya-*` commands as processes; every one is killed at the end if still alive."""
    started: list[Command] = []

    def start(name: str, env: dict[str, str], *args: str) -> Command:
        command = start_command(name, env, tmp_path / f"{name}-{len(started)}.log", *args)
        started.append(command)
        return command

    yield start
    for command in started:
        with contextlib.suppress(Exception):
            command.stop()
