"""The gateway's demand reporter against a recording HTTP endpoint and a real aggregator."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from gateway.support import eventually, sample
from noctaya.gateway.demand.feed import DemandFeed
from noctaya.gateway.demand.reporter import DemandReporter
from noctaya.gateway.metrics.exposition import Counter, Registry

from .conftest import TOKEN, AggregatorFactory
from .keda import Keda
from .reports import set_token


class Recorder:
    """An aggregator stand-in that records every report and answers with `status`."""

    def __init__(self) -> None:
        self.reports: list[dict[str, object]] = []
        self.headers: list[dict[bytes, bytes]] = []
        self.status = 204
        self.stall = asyncio.Event()
        self.stall.set()
        self.arrived = 0  # reports read whole, whether or not a stall holds their answer

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.arrived += 1
        await self.stall.wait()
        self.reports.append(json.loads(body))
        self.headers.append(
            {name.lower().encode(): value.encode() for name, value in request.headers.items()}
        )
        return web.Response(status=self.status)


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[Recorder, str]]:
    recording = Recorder()
    app = web.Application()
    app.router.add_post("/v1/demand", recording.handle)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield recording, f"http://127.0.0.1:{port}/v1/demand"
    recording.stall.set()
    await runner.cleanup()


def counter() -> tuple[Counter, Registry]:
    registry = Registry()
    reports = Counter("noctaya_gateway_demand_reports", "reports", ["result"], registry=registry)
    return reports, registry


def count(registry: Registry, result: str) -> float:
    value = sample(registry, "noctaya_gateway_demand_reports_total", {"result": result})
    return value or 0.0


@contextlib.asynccontextmanager
async def running(reporter: DemandReporter, feed: DemandFeed) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(reporter.run(feed))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.parametrize("url", ["", "backend:9091", "ftp://aggregator/v1/demand", "http://"])
def test_endpoint_must_be_an_absolute_http_url(token_file: Path, url: str) -> None:
    with pytest.raises(
        ValueError, match=r"^demand aggregator endpoint must be an absolute HTTP URL$"
    ):
        DemandReporter(url, "gw", str(token_file), counter()[0])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "demand authentication token file is required"),
        ("short-token\n", "demand authentication token must contain at least 32 characters"),
    ],
)
def test_token_file_is_validated_at_startup(
    token_file: Path, content: str | None, message: str
) -> None:
    path = "" if content is None else str(token_file)
    if content is not None:
        set_token(token_file, content)
    with pytest.raises(ValueError, match=f"^{message}$"):
        DemandReporter("http://aggregator:9091/v1/demand", "gw", path, counter()[0])


def test_unreadable_token_file_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    expected = f"read demand authentication token: open {missing}: no such file or directory"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        DemandReporter("http://aggregator:9091/v1/demand", "gw", str(missing), counter()[0])


def test_a_token_file_that_is_a_fifo_or_a_device_is_refused_without_blocking(
    tmp_path: Path,
) -> None:
    """The token is a mounted Secret's file: read bounded and only if regular, never waiting on a
    FIFO for a writer nor reading a device without end."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    for path, kind in ((fifo, "a FIFO"), (zero, "a character device")):
        expected = f"read demand authentication token: open {path}: {kind}, not a regular file"
        with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
            DemandReporter("http://aggregator:9091/v1/demand", "gw", str(path), counter()[0])


def test_member_id_is_the_gateway_id_and_a_fresh_random_suffix(token_file: Path) -> None:
    environ = {
        "NOCTAYA_DEMAND_AGGREGATOR_URL": "http://aggregator:9091/v1/demand//",
        "NOCTAYA_GATEWAY_ID": "0f2c-uid",
        "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": str(token_file),
    }
    first = DemandReporter.from_environ(environ, counter()[0])
    second = DemandReporter.from_environ(environ, counter()[0])
    assert re.fullmatch(r"0f2c-uid/[0-9a-f]{24}", first.member_id)
    assert first.member_id != second.member_id
    assert first.endpoint == "http://aggregator:9091/v1/demand"


def test_gateway_id_falls_back_to_hostname_and_pid(token_file: Path) -> None:
    environ = {
        "NOCTAYA_DEMAND_AGGREGATOR_URL": "http://aggregator:9091/v1/demand",
        "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": str(token_file),
    }
    reporter = DemandReporter.from_environ(environ, counter()[0])
    prefix = f"{socket.gethostname()}-{os.getpid()}/"
    assert reporter.member_id.startswith(prefix)


async def test_reports_carry_the_wire_format_and_an_increasing_sequence(
    recorder: tuple[Recorder, str], token_file: Path
) -> None:
    recording, url = recorder
    reports, registry = counter()
    reporter = DemandReporter(url, "gw", str(token_file), reports, heartbeat=0.05)
    feed = DemandFeed(3)
    async with running(reporter, feed):
        await eventually(lambda: len(recording.reports) >= 3)
    first = recording.reports[0]
    assert first == {"memberID": reporter.member_id, "sequence": 1, "demand": 3}
    headers = recording.headers[0]
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"authorization"] == f"Bearer {TOKEN}".encode()
    sequences = [r["sequence"] for r in recording.reports]
    assert sequences == list(range(1, len(sequences) + 1))
    assert count(registry, "success") >= 3


async def test_every_demand_change_is_reported_at_once(
    recorder: tuple[Recorder, str], token_file: Path
) -> None:
    recording, url = recorder
    reporter = DemandReporter(url, "gw", str(token_file), counter()[0], heartbeat=3600)
    feed = DemandFeed(0)
    async with running(reporter, feed):
        await eventually(lambda: len(recording.reports) == 1)
        for demand in (1, 4, 0):
            feed.publish(demand)
            await eventually(lambda d=demand: recording.reports[-1]["demand"] == d)
    assert [r["demand"] for r in recording.reports] == [0, 1, 4, 0, 0]  # last: the withdrawal


async def test_cancellation_withdraws_with_a_final_report_of_zero(
    recorder: tuple[Recorder, str], token_file: Path
) -> None:
    recording, url = recorder
    reporter = DemandReporter(url, "gw", str(token_file), counter()[0], heartbeat=3600)
    feed = DemandFeed(5)
    async with running(reporter, feed):
        await eventually(lambda: len(recording.reports) == 1)
    assert recording.reports[-1] == {"memberID": reporter.member_id, "sequence": 2, "demand": 0}


async def test_failed_sends_are_counted_and_still_consume_sequence_numbers(
    recorder: tuple[Recorder, str], token_file: Path
) -> None:
    recording, url = recorder
    recording.status = 503
    reports, registry = counter()
    reporter = DemandReporter(url, "gw", str(token_file), reports, heartbeat=0.05)
    async with running(reporter, DemandFeed(1)):
        await eventually(lambda: len(recording.reports) >= 2)
        recording.status = 204
        await eventually(lambda: count(registry, "success") >= 1)
    assert count(registry, "error") >= 2
    sequences = [r["sequence"] for r in recording.reports]
    assert sequences == sorted(set(sequences))


async def test_a_stalled_aggregator_times_out_the_send(
    recorder: tuple[Recorder, str], token_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The report arrives and goes unanswered: the send must end as a timeout (not as some other
    error) within its budget, and say so."""
    recording, url = recorder
    recording.stall.clear()
    reports, registry = counter()
    reporter = DemandReporter(url, "gw", str(token_file), reports, heartbeat=3600, send_timeout=0.2)
    async with running(reporter, DemandFeed(1)):
        await eventually(lambda: count(registry, "error") == 1, within=0.2 + 5)
        assert recording.arrived == 1, "the aggregator had the report and held its answer"
        assert count(registry, "success") == 0
    assert _reporter_warnings(caplog) == [f"demand report to {url} failed: no answer within 0.2 s"]


def _reporter_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "noctaya.gateway.demand.reporter" and record.levelno == logging.WARNING
    ]


async def test_unreachable_aggregator_counts_errors(token_file: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once the probe closes
    reports, registry = counter()
    url = f"http://127.0.0.1:{port}/v1/demand"
    reporter = DemandReporter(url, "gw", str(token_file), reports, heartbeat=0.05)
    async with running(reporter, DemandFeed(1)):
        await eventually(lambda: count(registry, "error") >= 2)
    assert count(registry, "success") == 0


async def test_the_token_is_reread_for_every_send(
    recorder: tuple[Recorder, str], token_file: Path
) -> None:
    recording, url = recorder
    reporter = DemandReporter(url, "gw", str(token_file), counter()[0], heartbeat=0.05)
    rotated = "n" * 43
    async with running(reporter, DemandFeed(1)):
        await eventually(lambda: len(recording.reports) >= 1)
        set_token(token_file, rotated)
        await eventually(
            lambda: recording.headers[-1][b"authorization"] == f"Bearer {rotated}".encode()
        )


async def test_a_real_aggregator_sees_the_reporters_demand_and_its_withdrawal(
    start_aggregator: AggregatorFactory, token_file: Path
) -> None:
    aggregator = await start_aggregator()
    url = f"http://127.0.0.1:{aggregator.http_port}/v1/demand"
    reports, registry = counter()
    reporter = DemandReporter(url, "gw", str(token_file), reports)
    keda = Keda.insecure(aggregator.scaler_port)
    stream = keda.stream()
    assert await stream.next() is False
    feed = DemandFeed(0)
    async with running(reporter, feed):
        feed.publish(2)
        assert await stream.next() is True
        assert await keda.metric() == 2
    assert await stream.next() is False
    assert aggregator.aggregate.members() == 1, "withdrawn, not expired"
    assert count(registry, "success") >= 2
    stream.cancel()
    await keda.close()


async def test_an_endless_reply_is_abandoned_after_a_few_kib(
    token_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An endpoint that streams a body forever must neither hold the send for its whole timeout
    nor fill the reporter's memory: a report's answer is a status and at most a short line."""
    loop = asyncio.get_running_loop()
    stop_at = loop.time() + 30

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
        with contextlib.suppress(ConnectionError):
            while loop.time() < stop_at:
                writer.write(chunk)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(flood, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/demand"
    reports, registry = counter()
    reporter = DemandReporter(url, "gw", str(token_file), reports, heartbeat=3600, send_timeout=30)
    try:
        async with running(reporter, DemandFeed(1)):
            await eventually(lambda: count(registry, "error") == 1, within=10)
    finally:
        stop_at = 0
        server.close()
    assert _reporter_warnings(caplog) == [f"demand report to {url} failed: HTTP 200"]
