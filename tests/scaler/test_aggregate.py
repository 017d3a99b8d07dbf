"""The aggregate as KEDA sees it through the aggregator: reports in over HTTP, gRPC out.

Member lifetime and sweep period are shortened here; the defaults (10 s, 1 s) are the same code.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from gateway.support import eventually, sample
from noctaya.gateway.aggregator.aggregate import MEMBER_TTL_SECONDS, SWEEP_PERIOD_SECONDS
from noctaya.gateway.aggregator.server import AggregatorServer

from .conftest import AggregatorFactory
from .keda import Keda
from .reports import Reporter, report

TTL = 0.6


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


async def connect(
    aggregator: AggregatorServer, session: aiohttp.ClientSession
) -> tuple[Reporter, Keda]:
    return Reporter(session, aggregator), Keda.insecure(aggregator.scaler_port)


def test_defaults_are_the_references() -> None:
    assert (MEMBER_TTL_SECONDS, SWEEP_PERIOD_SECONDS) == (10.0, 1.0)


async def test_stream_turns_active_on_the_first_report_and_metrics_follow_the_sum(
    start_aggregator: AggregatorFactory, session: aiohttp.ClientSession
) -> None:
    reporter, keda = await connect(await start_aggregator(), session)
    stream = keda.stream()
    assert await stream.next() is False
    assert (await reporter.post(report("gw/a", 1, 2))).status == 204
    assert await stream.next() is True
    assert (await reporter.post(report("gw/b", 1, 3))).status == 204
    assert await keda.metric() == 5
    assert await keda.is_active() is True
    stream.cancel()
    await keda.close()


async def test_heartbeats_with_unchanged_demand_publish_nothing_new(
    start_aggregator: AggregatorFactory, session: aiohttp.ClientSession
) -> None:
    reporter, keda = await connect(await start_aggregator(), session)
    stream = keda.stream()
    assert await stream.next() is False
    for sequence in range(1, 6):
        assert (await reporter.post(report("gw/a", sequence, 1))).status == 204
        assert await keda.metric() == 1
    assert (await reporter.post(report("gw/a", 6, 0))).status == 204
    assert await stream.next() is True
    assert await stream.next() is False, "a repeated True would have arrived first"
    stream.cancel()
    await keda.close()


async def test_a_gateway_that_stops_reporting_disappears_after_the_member_lifetime(
    start_aggregator: AggregatorFactory, session: aiohttp.ClientSession
) -> None:
    aggregator = await start_aggregator(member_ttl=TTL, sweep_period=0.05)
    reporter, keda = await connect(aggregator, session)
    stream = keda.stream()
    assert await stream.next() is False
    loop = asyncio.get_running_loop()
    posted = loop.time()  # the member is stamped on arrival, after this and before the answer
    assert (await reporter.post(report("gw/a", 1, 2))).status == 204
    assert await stream.next() is True
    assert await stream.next() is False  # pushed by the sweep: nobody polled
    assert loop.time() - posted >= TTL
    registry = aggregator.metrics.registry
    assert sample(registry, "noctaya_scaler_expired_members_total") == 1
    assert sample(registry, "noctaya_scaler_gateway_members") == 0
    assert sample(registry, "noctaya_scaler_demand") == 0
    stream.cancel()
    await keda.close()


async def test_expiry_is_also_applied_lazily_when_keda_polls_between_sweeps(
    start_aggregator: AggregatorFactory, session: aiohttp.ClientSession
) -> None:
    aggregator = await start_aggregator(member_ttl=TTL, sweep_period=3600)
    reporter, keda = await connect(aggregator, session)
    assert (await reporter.post(report("gw/a", 1, 2))).status == 204
    assert await keda.metric() == 2
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TTL + 5
    while await keda.is_active():
        assert loop.time() < deadline, "the expired member was still counted"
        await asyncio.sleep(0.05)
    assert await keda.metric() == 0
    await keda.close()


async def test_replacement_overlap_double_counts_until_the_old_member_expires(
    start_aggregator: AggregatorFactory, session: aiohttp.ClientSession
) -> None:
    aggregator = await start_aggregator(member_ttl=TTL, sweep_period=0.05)
    reporter, keda = await connect(aggregator, session)
    assert (await reporter.post(report("gw/old", 9, 2))).status == 204
    assert (await reporter.post(report("gw/new", 1, 1))).status == 204
    assert await keda.metric() == 3
    # Keep the new member alive with heartbeats while the old one goes silent.
    for sequence in range(2, 100):
        await asyncio.sleep(TTL / 4)
        assert (await reporter.post(report("gw/new", sequence, 1))).status == 204
        if await keda.metric() == 1:
            break
    assert await keda.metric() == 1
    assert aggregator.aggregate.members() == 1
    await keda.close()


async def test_a_gateway_that_withdraws_stops_counting_at_once(
    start_aggregator: AggregatorFactory, session: aiohttp.ClientSession
) -> None:
    reporter, keda = await connect(await start_aggregator(), session)
    stream = keda.stream()
    assert await stream.next() is False
    assert (await reporter.post(report("gw/a", 1, 3))).status == 204
    assert await stream.next() is True
    assert (await reporter.post(report("gw/a", 2, 0))).status == 204
    assert await stream.next() is False
    assert await keda.metric() == 0
    stream.cancel()
    await keda.close()


async def test_total_saturates_at_int64_max(
    start_aggregator: AggregatorFactory, session: aiohttp.ClientSession
) -> None:
    top = 2**63 - 1
    aggregator = await start_aggregator(NOCTAYA_MAX_GATEWAY_DEMAND=str(top))
    reporter, keda = await connect(aggregator, session)
    for member in ("gw/a", "gw/b"):
        assert (await reporter.post(report(member, 1, top))).status == 204
    assert aggregator.aggregate.current() == top
    assert await keda.metric() == float(top)
    await keda.close()


async def test_streams_on_the_aggregator_are_counted_on_its_registry(
    start_aggregator: AggregatorFactory, session: aiohttp.ClientSession
) -> None:
    aggregator = await start_aggregator()
    reporter, keda = await connect(aggregator, session)
    streams = [keda.stream() for _ in range(2)]
    for stream in streams:
        await stream.next()
    await eventually(lambda: "noctaya_gateway_scaler_streams 2.0" in _metrics_text(aggregator))
    metrics = await reporter.get("/metrics")
    assert "noctaya_gateway_scaler_streams 2.0" in metrics.body
    await keda.close()
    await eventually(lambda: "noctaya_gateway_scaler_streams 0.0" in _metrics_text(aggregator))


def _metrics_text(aggregator: AggregatorServer) -> str:
    return aggregator.metrics.exposition().decode()
