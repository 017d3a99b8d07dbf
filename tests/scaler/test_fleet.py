"""KEDA's view of real gateways: a single gateway's own scaler, and a fleet behind the aggregator.

The single gateway runs in-process (real hypercorn, test-scale grace); the fleet is three
`noctaya-gateway` processes reporting to an aggregator whose member lifetime is shortened to 3 s
(still longer than the 2 s heartbeat, as in production where it is 10 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from gateway.support import Command, Engine, eventually, start_command, start_engine
from noctaya.gateway.process.config import GatewayConfig
from noctaya.gateway.process.gateway_server import GatewayServer
from support.ports import free_port

from .conftest import AggregatorFactory
from .keda import Keda

MEMBER_TTL = 3.0


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    started = await start_engine()
    started.make_unready()
    yield started
    started.server.close()


async def test_single_gateway_stream_turns_active_on_the_first_cold_request_and_back_after_grace(
    engine: Engine,
) -> None:
    config = GatewayConfig(
        backend_url=engine.url,
        listen_addr="127.0.0.1:0",
        scaler_listen_addr="127.0.0.1:0",
        readiness_interval=0.05,
        ready_grace=0.3,
        shutdown_timeout=5.0,
    )
    gateway = GatewayServer(config)
    await gateway.start()
    keda = Keda.insecure(gateway.scaler.port)
    stream = keda.stream()
    assert await stream.next() is False
    cold = await held_request(gateway.port)
    assert await stream.next() is True, "the very next event after a cold request is `true`"
    # Demand shows the moment the request is admitted, before the gateway has heard back from
    # its readiness probe: the request is held cold (the lease running) only once it has.
    app = gateway.app
    assert app is not None
    await eventually(lambda: app.demand.lease.active, what="the request held cold")
    loop = asyncio.get_running_loop()
    engine.make_ready()
    ready_at = loop.time()
    await asyncio.wait_for(cold[0].readuntil(b"\r\n\r\n"), 10)  # proxied once ready
    cold[1].close()
    assert await stream.next() is False
    assert loop.time() - ready_at >= 0.3, "the grace after readiness keeps KEDA active"
    stream.cancel()
    await keda.close()
    await gateway.stop()


COLD_REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
    b"Content-Length: 71\r\n\r\n"
    b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'
)
"""A streamed chat completion: what counts as demand (a model list never does)."""


async def held_request(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A cold request the gateway holds (keepalive mode) until the backend is ready."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(COLD_REQUEST)
    await writer.drain()
    return reader, writer


@pytest.fixture
def gateway_processes(tmp_path: Path, token_file: Path) -> Iterator[Callable[[int, str], Command]]:
    started: list[Command] = []

    def start(port: int, aggregator_url: str) -> Command:
        env = {
            "NOCTAYA_BACKEND_URL": f"http://127.0.0.1:{free_port()}",  # never ready
            "NOCTAYA_LISTEN_ADDR": f"127.0.0.1:{port}",
            "NOCTAYA_DEMAND_AGGREGATOR_URL": aggregator_url,
            "NOCTAYA_GATEWAY_ID": f"gateway-{len(started)}",
            "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": str(token_file),
        }
        log = tmp_path / f"gateway-{len(started)}.log"
        command = start_command("noctaya-gateway", env, log)
        started.append(command)
        return command

    yield start
    for command in started:
        command.stop()


async def test_metrics_follow_three_gateways_through_kill_graceful_stop_and_aggregator_restart(
    start_aggregator: AggregatorFactory, gateway_processes: Callable[[int, str], Command]
) -> None:
    http_port, grpc_port = free_port(), free_port()
    ports = {
        "NOCTAYA_AGGREGATOR_LISTEN_ADDR": f"127.0.0.1:{http_port}",
        "NOCTAYA_SCALER_LISTEN_ADDR": f"127.0.0.1:{grpc_port}",
    }
    aggregator = await start_aggregator(member_ttl=MEMBER_TTL, sweep_period=0.2, **ports)
    url = f"http://127.0.0.1:{http_port}/v1/demand"
    gateway_ports = [free_port() for _ in range(3)]
    gateways = [gateway_processes(port, url) for port in gateway_ports]
    for gateway in gateways:
        await gateway.wait_for_line("Noctaya gateway publishing demand to")
    await eventually(lambda: aggregator.aggregate.members() == 3, within=20, what="3 members")
    keda = Keda.insecure(grpc_port)
    assert await keda.metric() == 0

    held = {i: [await held_request(gateway_ports[i]) for _ in range(i + 1)] for i in range(3)}
    await until_metric(keda, 1 + 2 + 3)

    loop = asyncio.get_running_loop()
    gateways[0].signal(signal.SIGKILL)
    killed_at = loop.time()
    await until_metric(keda, 2 + 3, within=MEMBER_TTL + 5)
    assert loop.time() - killed_at >= MEMBER_TTL - 2.5, "expired only after its lifetime"

    for _, writer in held[1]:
        writer.close()
    await until_metric(keda, 1 + 3)  # its clients left; the activation lease still counts 1
    gateways[1].signal(signal.SIGTERM)
    stopped_at = loop.time()
    await until_metric(keda, 3)
    assert loop.time() - stopped_at < MEMBER_TTL, "a graceful stop withdraws at once"
    assert await gateways[1].wait_exit(within=20) == 0

    await aggregator.stop(1)
    restarted = await start_aggregator(member_ttl=MEMBER_TTL, sweep_period=0.2, **ports)
    await keda.close()
    keda = Keda.insecure(grpc_port)
    assert restarted.aggregate.current() == 0
    await until_metric(keda, 3, within=10)  # rebuilt from the survivor's heartbeats
    assert restarted.aggregate.members() == 1

    for _, writer in held[2]:
        writer.close()
    await keda.close()


async def until_metric(keda: Keda, expected: float, within: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    value = None
    while loop.time() < deadline:
        with contextlib.suppress(Exception):
            value = await keda.metric()
            if value == expected:
                return
        await asyncio.sleep(0.05)
    raise AssertionError(f"GetMetrics stayed at {value}, expected {expected}")
