"""Fixtures for the scaler suite: a scaler over a feed the test drives, and in-process aggregators.

Everything listens on 127.0.0.1 with port 0 and is driven by real HTTP and gRPC clients.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from gateway.support import sample
from noctaya.gateway.aggregator.config import load_config
from noctaya.gateway.aggregator.server import AggregatorServer
from noctaya.gateway.demand.feed import DemandFeed
from noctaya.gateway.metrics.exposition import Gauge, Registry
from noctaya.gateway.scaler.kv_cache import PodEndpoints
from noctaya.gateway.scaler.server import ScalerServer, start_scaler

from .keda import Keda

TOKEN = "t" * 43


class Scaler:
    """A started scaler over a DemandFeed that the test publishes to."""

    def __init__(self, server: ScalerServer, feed: DemandFeed, registry: Registry) -> None:
        self.server = server
        self.feed = feed
        self.registry = registry

    def streams(self) -> float | None:
        return sample(self.registry, "noctaya_gateway_scaler_streams")


def streams_gauge() -> tuple[Gauge, Registry]:
    registry = Registry()
    gauge = Gauge("noctaya_gateway_scaler_streams", "KEDA streams", registry=registry)
    return gauge, registry


@pytest.fixture
async def scaler() -> AsyncIterator[Scaler]:
    feed = DemandFeed()
    gauge, registry = streams_gauge()
    server = await start_scaler(feed, "127.0.0.1:0", None, gauge)
    yield Scaler(server, feed, registry)
    await server.stop(1)


@pytest.fixture
async def keda(scaler: Scaler) -> AsyncIterator[Keda]:
    client = Keda.insecure(scaler.server.port)
    yield client
    await client.close()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


AggregatorFactory = Callable[..., Awaitable[AggregatorServer]]


@pytest.fixture
async def start_aggregator(token_file: Path) -> AsyncIterator[AggregatorFactory]:
    """Start in-process aggregators: `await start_aggregator(member_ttl=..., **env)`."""
    started: list[AggregatorServer] = []

    async def start(
        member_ttl: float = 10.0,
        sweep_period: float = 1.0,
        pods: PodEndpoints | None = None,
        **env: str,
    ) -> AggregatorServer:
        environ = {
            "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": str(token_file),
            "NOCTAYA_AGGREGATOR_LISTEN_ADDR": "127.0.0.1:0",
            "NOCTAYA_SCALER_LISTEN_ADDR": "127.0.0.1:0",
            **env,
        }
        server = AggregatorServer(
            load_config(environ), member_ttl=member_ttl, sweep_period=sweep_period, pods=pods
        )
        await server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        await server.stop(1)
