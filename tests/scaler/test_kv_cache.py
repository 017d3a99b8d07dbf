"""kvCacheUtil scaling: the scaler reads each ready pod's KV-cache gauge itself and KEDA gets the
sum in percent, whatever the engines answer.

Every pod is a real HTTP server on its own loopback address (127.0.0.N, one port for all, as pod
IPs share the runtime's metrics port): the engine stub, or a hostile handler on asyncio's
streams. KEDA is played by a real gRPC client.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from gateway.support import eventually, sample
from noctaya.gateway.aggregator.config import load_config
from noctaya.gateway.aggregator.server import AggregatorServer
from noctaya.gateway.backend.endpoints import Endpoint
from noctaya.gateway.demand.feed import DemandFeed
from noctaya.gateway.engine_stub import EngineStub, StubSettings, load_settings
from noctaya.gateway.engine_stub.http11 import serve
from noctaya.gateway.engine_stub.settings import SettingsError
from noctaya.gateway.metrics.exposition import Registry
from noctaya.gateway.metrics.gateway_metrics import kv_cache_discarded
from noctaya.gateway.scaler.kv_cache import KvCacheReader, gauge_value, ready_addresses
from noctaya.gateway.scaler.kv_cache_settings import KvCacheSettings, load_kv_cache_settings
from noctaya.gateway.scaler.server import start_scaler

from .conftest import AggregatorFactory, streams_gauge
from .keda import Keda
from .reports import Reporter, report

GAUGE = "vllm:kv_cache_usage_perc"
DISCARDED = "noctaya_gateway_kv_cache_discarded"
KV = {"NOCTAYA_SCALING_METRIC": "kvCacheUtil", "NOCTAYA_BACKEND_KV_CACHE_METRIC": GAUGE}
BACKEND = {"NOCTAYA_BACKEND_ENDPOINTS": "ai/backend"}
"""Without KUBERNETES_SERVICE_HOST: the tests give the aggregator its pods themselves."""
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Pods:
    """Servers on 127.0.0.2, .3, … sharing one port; `ready` is what the reader is given."""

    def __init__(self) -> None:
        self.port = 0
        self.ready: list[str] = []
        self.servers: list[asyncio.Server] = []
        self.stubs: dict[str, EngineStub] = {}

    def _next_address(self) -> str:
        return f"127.0.0.{len(self.servers) + 2}"

    def _started(self, address: str, server: asyncio.Server) -> str:
        self.port = self.port or server.sockets[0].getsockname()[1]
        self.servers.append(server)
        self.ready.append(address)
        return address

    async def stub(self, kv_cache: float = 0.0, **settings: object) -> str:
        address = self._next_address()
        stub = EngineStub(StubSettings(**settings))  # type: ignore[arg-type]
        stub.gauges["kv_cache"] = kv_cache
        self.stubs[address] = stub
        return self._started(address, await serve(stub, address, self.port))

    async def hostile(self, handler: Handler) -> str:
        address = self._next_address()
        return self._started(address, await asyncio.start_server(handler, address, self.port))

    def endpoints(self) -> list[Endpoint]:
        """As the EndpointSlice watch shows them: the ready pods and one terminating."""
        ready = [Endpoint(address, self.port, True, True, False) for address in self.ready]
        return [*ready, Endpoint("127.0.0.254", self.port, False, False, True)]

    def close(self) -> None:
        for server in self.servers:
            server.close()


@pytest.fixture
async def pods() -> AsyncIterator[Pods]:
    started = Pods()
    yield started
    started.close()


@pytest.fixture
def registry() -> Registry:
    return Registry()


def reader(pods: Pods, registry: Registry, **options: float) -> KvCacheReader:
    discarded = kv_cache_discarded(registry)
    options = {"timeout": 0.5, "period": 0.0, **options}
    return KvCacheReader(lambda: pods.ready, pods.port, "/metrics", GAUGE, discarded, **options)


def answer(status: bytes, body: bytes) -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        head = b"HTTP/1.1 %s\r\ncontent-length: %d\r\n\r\n" % (status, len(body))
        writer.write(head + body)
        await writer.drain()
        writer.close()

    return handler


def exposition(value: bytes) -> bytes:
    return b"# TYPE %s gauge\n%s %s\n" % (GAUGE.encode(), GAUGE.encode(), value)


async def never_ending(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A chunked body that drips forever, each chunk well inside the read timeout."""
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    try:
        while True:
            writer.write(b"2\r\n# \r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
    except (ConnectionError, asyncio.CancelledError):
        writer.close()


async def huge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A body larger than the bound, the gauge at its very end."""
    await reader.readuntil(b"\r\n\r\n")
    body = b"# " + b"x" * (2 << 20) + b"\n" + exposition(b"0.5")
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body))
    try:
        writer.write(body)
        await writer.drain()
    except ConnectionError:
        pass
    writer.close()


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(3600)


async def test_the_sum_of_every_ready_pods_gauge_is_reported_in_percent(
    pods: Pods, registry: Registry
) -> None:
    for fraction in (0.25, 0.5, 0.125):
        await pods.stub(kv_cache=fraction)
    kv = reader(pods, registry)
    try:
        assert await kv.current() == pytest.approx(87.5)
        pods.ready.pop()  # a pod no longer ready is no longer read
        assert await kv.current() == pytest.approx(75.0)
    finally:
        await kv.close()


async def test_a_reading_lasts_its_period_and_concurrent_callers_share_one_scrape(
    pods: Pods, registry: Registry
) -> None:
    address = await pods.stub(kv_cache=0.5)
    scrapes = 0
    stub = pods.stubs[address]
    metrics = stub._metrics

    def counted() -> bytes:
        nonlocal scrapes
        scrapes += 1
        return metrics()

    stub._metrics = counted  # type: ignore[method-assign]
    kv = reader(pods, registry, period=60.0)
    try:
        readings = await asyncio.gather(*(kv.current() for _ in range(5)))
        stub.gauges["kv_cache"] = 1.0
        assert [*readings, await kv.current()] == [50.0] * 6
        assert scrapes == 1
    finally:
        await kv.close()


@pytest.mark.parametrize(
    ("handler", "reason"),
    [
        (answer(b"200 OK", exposition(b"NaN")), "out_of_range"),
        (answer(b"200 OK", exposition(b"+Inf")), "out_of_range"),
        (answer(b"200 OK", exposition(b"-0.1")), "out_of_range"),
        (answer(b"200 OK", exposition(b"1.5")), "out_of_range"),
        (answer(b"200 OK", exposition(b"lots")), "malformed"),
        (answer(b"200 OK", exposition(b"")), "out_of_range"),
        (answer(b"200 OK", b'%s{engine="0 1 } 2 ' % GAUGE.encode()), "malformed"),
        (answer(b"200 OK", b"vllm:num_requests_waiting 3\n"), "missing"),
        (answer(b"200 OK", b"\xff\xfe\x00" * 1000), "missing"),
        (answer(b"500 Internal Server Error", exposition(b"0.5")), "status"),
        (answer(b"200 OK", b"\x00"), "missing"),
        (answer(b"200 OK\r\ncontent-length: 7", b"0.5"), "protocol"),
        (huge, "oversized"),
        (never_ending, "timeout"),
        (silent, "timeout"),
    ],
    ids=[
        "NaN",
        "Inf",
        "negative",
        "above 1",
        "not a number",
        "no value",
        "unclosed labels",
        "no gauge",
        "binary",
        "HTTP 500",
        "one NUL",
        "two lengths",
        "huge",
        "never-ending",
        "silent",
    ],
)
async def test_a_hostile_pods_reading_is_discarded_counted_and_the_others_kept(
    pods: Pods,
    registry: Registry,
    caplog: pytest.LogCaptureFixture,
    handler: Handler,
    reason: str,
) -> None:
    await pods.stub(kv_cache=0.5)
    hostile = await pods.hostile(handler)
    kv = reader(pods, registry)
    caplog.set_level(logging.WARNING, "noctaya.gateway.scaler.kv_cache")
    try:
        for _ in range(2):
            started = time.monotonic()
            assert await kv.current() == 50.0
            assert time.monotonic() - started < 1.5
        assert sample(registry, f"{DISCARDED}_total", {"reason": reason}) == 2
        complaints = [r.getMessage() for r in caplog.records if hostile in r.getMessage()]
        assert len(complaints) == 1, complaints  # logged once, however often it is read
        assert reason in complaints[0]
    finally:
        await kv.close()


async def test_a_pod_that_refuses_connections_adds_nothing(pods: Pods, registry: Registry) -> None:
    await pods.stub(kv_cache=0.25)
    pods.ready.append("127.0.0.250")  # nothing listens there
    kv = reader(pods, registry)
    try:
        assert await kv.current() == 25.0
        assert sample(registry, f"{DISCARDED}_total", {"reason": "unreachable"}) == 1
    finally:
        await kv.close()


async def test_a_pod_that_answers_well_again_is_counted_again_and_logged_once_more(
    pods: Pods, registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    address = await pods.stub(kv_cache=0.5)
    stub = pods.stubs[address]
    kv = reader(pods, registry)
    caplog.set_level(logging.INFO, "noctaya.gateway.scaler.kv_cache")
    try:
        stub.gauges["kv_cache"] = math.inf  # what /control refuses, set behind its back
        assert await kv.current() == 0.0
        stub.gauges["kv_cache"] = 0.75
        assert await kv.current() == 75.0
        logged = [
            r.levelname for r in caplog.records if r.name == "noctaya.gateway.scaler.kv_cache"
        ]
        assert logged == ["WARNING", "INFO"]
    finally:
        await kv.close()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (b"vllm:kv_cache_usage_perc 0.5\n", 0.5),
        (b"vllm:kv_cache_usage_perc 0.5 1700000000000\n", 0.5),
        (b'vllm:kv_cache_usage_perc{model_name="a } b",engine="0"} 0.25\n', 0.25),
        (b'vllm:kv_cache_usage_perc{m="x\\"}"} 1\n', 1.0),
        (
            b'vllm:kv_cache_usage_perc{engine="0"} 0.2\nvllm:kv_cache_usage_perc{engine="1"} 0.6\n',
            0.4,
        ),
        (b"vllm:kv_cache_usage_perc_max 0.9\nvllm:kv_cache_usage_perc 0.1\n", 0.1),
        (b"# HELP vllm:kv_cache_usage_perc 0.9\r\nvllm:kv_cache_usage_perc 1e-1\r\n", 0.1),
    ],
    ids=["plain", "timestamp", "labels", "escaped quote", "two engines", "longer name", "CRLF"],
)
def test_the_gauge_is_read_from_prometheus_text(text: bytes, value: float) -> None:
    assert gauge_value(text, GAUGE.encode()) == pytest.approx(value)


async def test_the_engine_stubs_gauge_follows_its_streams_in_flight(
    pods: Pods, registry: Registry
) -> None:
    address = await pods.stub(kv_cache_capacity=4, token_count=1000, token_delay=0.01)
    kv = reader(pods, registry)
    url = f"http://{address}:{pods.port}/v1/completions"
    async with aiohttp.ClientSession() as http:
        streams = [await http.post(url, json={"stream": True}) for _ in range(2)]
        try:
            assert await kv.current() == 50.0
            streams += [await http.post(url, json={"stream": True}) for _ in range(3)]
            assert await kv.current() == 100.0  # capped at a full cache
        finally:
            for stream in streams:
                stream.close()
        await eventually(lambda: pods.stubs[address].streaming == 0, what="streams to end")
    assert await kv.current() == 0.0
    await kv.close()


async def test_keda_gets_the_sum_while_activation_stays_with_demand(
    pods: Pods, registry: Registry
) -> None:
    """HPA AverageValue: desired = ceil(sum / target), so 3 pods at 60 % with a target of 50
    ask for 4 replicas; with no request held, IsActive is false whatever the caches hold."""
    for _ in range(3):
        await pods.stub(kv_cache=0.6)
    kv = reader(pods, registry)
    feed = DemandFeed()
    server = await start_scaler(feed, "127.0.0.1:0", None, streams_gauge()[0], metric=kv)
    keda = Keda.insecure(server.port)
    try:
        metadata = {"targetValue": "50"}
        value = await keda.metric(metadata)
        assert value == pytest.approx(180.0)
        assert math.ceil(value / 50) == 4
        assert await keda.is_active(metadata) is False
        feed.publish(1)
        assert await keda.is_active(metadata) is True
        assert await keda.metric(metadata) == pytest.approx(180.0)
    finally:
        await keda.close()
        await server.stop(1)
        await kv.close()


def kv_cache_env(pods: Pods) -> dict[str, str]:
    return {**KV, "NOCTAYA_BACKEND_METRICS_PORT": str(pods.port), **BACKEND}


async def test_behind_several_gateways_the_aggregator_counts_each_pod_once(
    pods: Pods, start_aggregator: AggregatorFactory
) -> None:
    """Both gateways send to both pods, yet KEDA gets 2 × 40 %, not twice that: the aggregator
    reads the pods itself, and the gateways report only demand, which activation follows."""
    for _ in range(2):
        await pods.stub(kv_cache=0.4)
    await pods.hostile(answer(b"200 OK", exposition(b"NaN")))
    aggregator = await start_aggregator(pods=pods, **kv_cache_env(pods))
    keda = Keda.insecure(aggregator.scaler_port)
    try:
        async with aiohttp.ClientSession() as session:
            reporter = Reporter(session, aggregator)
            for gateway in ("gw/a", "gw/b"):
                assert (await reporter.post(report(gateway, 1, 0))).status == 204
            assert await keda.metric() == pytest.approx(80.0)
            assert await keda.is_active() is False
            assert (await reporter.post(report("gw/a", 2, 3))).status == 204
            assert await keda.is_active() is True
            assert await keda.metric() == pytest.approx(80.0)
    finally:
        await keda.close()
    registry = aggregator.metrics.registry
    assert sample(registry, f"{DISCARDED}_total", {"reason": "out_of_range"}) >= 1


async def test_an_aggregator_told_to_read_kv_cache_without_the_pods_refuses_to_start(
    token_file: Path,
) -> None:
    environ = {
        "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": str(token_file),
        "NOCTAYA_AGGREGATOR_LISTEN_ADDR": "127.0.0.1:0",
        "NOCTAYA_SCALER_LISTEN_ADDR": "127.0.0.1:0",
        **KV,
        **BACKEND,
        "NOCTAYA_BACKEND_METRICS_PORT": "8000",
    }
    server = AggregatorServer(load_config(environ))
    with pytest.raises(ValueError, match="kvCacheUtil needs the backend's pods"):
        await server.start()


class Watch:
    def __init__(self, *endpoints: Endpoint) -> None:
        self.now = endpoints

    def endpoints(self) -> tuple[Endpoint, ...]:
        return self.now


def test_only_ready_pods_are_read_each_once_as_the_watch_sees_them_now() -> None:
    watch = Watch(
        Endpoint("10.0.0.1", 8000, True, True, False),
        Endpoint("10.0.0.1", 8000, True, True, False),  # named by two slices
        Endpoint("10.0.0.2", 8000, False, True, True),  # terminating
        Endpoint("fd00::3", 8000, True, True, False),
    )
    addresses = ready_addresses(watch)
    assert addresses() == {"10.0.0.1", "fd00::3"}
    watch.now = ()
    assert addresses() == set()


@pytest.mark.parametrize(("text", "capacity"), [("", None), ("8", 8)])
def test_the_stub_learns_its_capacity_from_the_environment(text: str, capacity: int | None) -> None:
    assert load_settings({"STUB_KV_CACHE_CAPACITY": text}).kv_cache_capacity == capacity


@pytest.mark.parametrize("text", ["0", "-1", "1.5", "many"])
def test_the_stub_refuses_a_capacity_that_is_no_positive_integer(text: str) -> None:
    with pytest.raises(SettingsError, match="STUB_KV_CACHE_CAPACITY must be a positive integer"):
        load_settings({"STUB_KV_CACHE_CAPACITY": text})


@pytest.mark.parametrize(
    ("environ", "settings"),
    [
        ({}, None),
        ({"NOCTAYA_SCALING_METRIC": "queueDepth"}, None),
        (
            {**KV, "NOCTAYA_BACKEND_METRICS_PORT": "8000"},
            KvCacheSettings(GAUGE, 8000, "/metrics"),
        ),
        (
            {
                "NOCTAYA_SCALING_METRIC": "kvCacheUtil",
                "NOCTAYA_BACKEND_KV_CACHE_METRIC": "kv",
                "NOCTAYA_BACKEND_METRICS_PORT": "9100",
                "NOCTAYA_BACKEND_METRICS_PATH": "/engine/metrics",
            },
            KvCacheSettings("kv", 9100, "/engine/metrics"),
        ),
    ],
    ids=["unset", "queueDepth", "kvCacheUtil", "own path"],
)
def test_the_scalers_metric_is_read_from_its_environment(
    environ: dict[str, str], settings: KvCacheSettings | None
) -> None:
    assert load_kv_cache_settings(environ) == settings


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"NOCTAYA_SCALING_METRIC": "latency"}, 'must be queueDepth or kvCacheUtil, got "latency"'),
        ({**KV, "NOCTAYA_BACKEND_KV_CACHE_METRIC": ""}, "KV_CACHE_METRIC must be a Prometheus"),
        ({**KV, "NOCTAYA_BACKEND_KV_CACHE_METRIC": "a b"}, "KV_CACHE_METRIC must be a Prometheus"),
        (KV, 'METRICS_PORT must be a port number with NOCTAYA_SCALING_METRIC kvCacheUtil, got ""'),
        ({**KV, "NOCTAYA_BACKEND_METRICS_PORT": "65536"}, "port number with"),
        (
            {**KV, "NOCTAYA_BACKEND_METRICS_PORT": "80", "NOCTAYA_BACKEND_METRICS_PATH": "/a b"},
            "is not an absolute path of printable ASCII without spaces",
        ),
    ],
    ids=["unknown metric", "no gauge", "gauge with a space", "no port", "port too high", "path"],
)
def test_a_kv_cache_setting_that_cannot_work_stops_the_start(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        load_kv_cache_settings(environ)
