"""POST /v1/demand over real HTTP: every rule of the report handler, in the order it checks them.

Each refused report must leave the aggregate exactly as it was (total, members, counters).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from gateway.support import eventually, sample
from noctaya.gateway.aggregator.server import AggregatorServer

from .conftest import TOKEN, AggregatorFactory
from .raw_http import closed_by_server, connect, response
from .reports import Reporter, report, set_token, snapshot

INVALID = "invalid demand report\n"


@pytest.fixture
async def aggregator(start_aggregator: AggregatorFactory) -> AggregatorServer:
    return await start_aggregator(NOCTAYA_MAX_GATEWAY_DEMAND="2", NOCTAYA_MAX_GATEWAY_MEMBERS="3")


@pytest.fixture
async def reporter(aggregator: AggregatorServer) -> AsyncIterator[Reporter]:
    async with aiohttp.ClientSession() as session:
        yield Reporter(session, aggregator)


@pytest.fixture
async def seeded(aggregator: AggregatorServer, reporter: Reporter) -> tuple[object, ...]:
    """One member with demand 1 already counted; returns the snapshot refusals must keep."""
    assert (await reporter.post(report("gw/seed", 1, 1))).status == 204
    return snapshot(aggregator)


async def test_accepted_report_is_204_and_counts_toward_the_total(
    aggregator: AggregatorServer, reporter: Reporter
) -> None:
    reply = await reporter.post(report("gw/a", 1, 2))
    assert (reply.status, reply.body) == (204, "")
    assert aggregator.aggregate.current() == 2
    registry = aggregator.metrics.registry
    assert sample(registry, "noctaya_scaler_demand") == 2
    assert sample(registry, "noctaya_scaler_gateway_members") == 1
    assert sample(registry, "noctaya_scaler_demand_reports_total", {"result": "accepted"}) == 1


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
async def test_other_methods_get_405_with_allow_post_before_any_auth(
    aggregator: AggregatorServer, reporter: Reporter, seeded: tuple[object, ...], method: str
) -> None:
    reply = await reporter.post(b"", method=method, authorization=None)
    assert (reply.status, reply.body, reply.headers["Allow"]) == (
        405,
        "method not allowed\n",
        "POST",
    )
    assert reply.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert reply.headers["X-Content-Type-Options"] == "nosniff"
    assert snapshot(aggregator) == seeded


async def test_more_than_64_reports_at_once_get_429(
    aggregator: AggregatorServer, reporter: Reporter, seeded: tuple[object, ...]
) -> None:
    held = [await _hold_report_slot(aggregator.http_port) for _ in range(64)]
    await eventually(lambda: aggregator.routes.reports_in_flight == 64)
    reply = await reporter.post(report("gw/a", 1, 1))
    assert (reply.status, reply.body) == (429, "too many demand reports\n")
    assert snapshot(aggregator) == seeded
    for writer in held:
        writer.close()
    await eventually(lambda: aggregator.routes.reports_in_flight == 0)
    assert (await reporter.post(report("gw/a", 1, 1))).status == 204


async def test_unreadable_or_short_token_file_gets_503_and_readyz_fails(
    aggregator: AggregatorServer, reporter: Reporter, seeded: tuple[object, ...], token_file: Path
) -> None:
    for broken in (None, "short"):
        set_token(token_file, broken)
        reply = await reporter.post(report("gw/a", 1, 1), authorization=None)
        assert (reply.status, reply.body) == (503, "demand authentication unavailable\n")
        ready = await reporter.get("/readyz")
        assert (ready.status, ready.body) == (503, "demand authentication unavailable\n")
        assert snapshot(aggregator) == seeded
    set_token(token_file, TOKEN)
    assert (await reporter.get("/readyz")).status == 200


async def test_rotated_token_takes_effect_without_restart(
    reporter: Reporter, token_file: Path
) -> None:
    rotated = "r" * 40
    set_token(token_file, rotated)
    assert (await reporter.post(report("gw/a", 1, 1))).status == 401
    assert (
        await reporter.post(report("gw/a", 1, 1), authorization=f"Bearer {rotated}")
    ).status == 204


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        f"bearer {TOKEN}",
        f"Bearer  {TOKEN}",
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        TOKEN,
    ],
)
async def test_wrong_authorization_gets_401_even_with_a_bad_body(
    aggregator: AggregatorServer,
    reporter: Reporter,
    seeded: tuple[object, ...],
    authorization: str | None,
) -> None:
    reply = await reporter.post(b"{not json", authorization=authorization)
    assert (reply.status, reply.body) == (401, "unauthorized\n")
    assert snapshot(aggregator) == seeded


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{not json",
        b"[]",
        b'"text"',
        b"null",
        report("gw/a", 1, 1, extra=1),
        report("gw/a", 1, 1) + b" {}",
        report("gw/a", 1, 1) + b" x",
        b'{"memberID":"gw/a","sequence":"1","demand":1}',
        b'{"memberID":"gw/a","sequence":1.0,"demand":1}',
        b'{"memberID":"gw/a","sequence":1,"demand":1e0}',
        b'{"memberID":"gw/a","sequence":1,"demand":true}',
        b'{"memberID":"gw/a","sequence":1,"demand":NaN}',
        b'{"memberID":"gw/a","sequence":1,"demand":null}',
        b'{"memberID":7,"sequence":1,"demand":1}',
        b'{"memberID":"gw/a","sequence":18446744073709551616,"demand":1}',
        b"[" * 50000 + b"]" * 50000,
        b'{"memberID":"gw/\xff","sequence":1,"demand":1}',
        b'{"memberID":"gw/\xed\xa0\x80","sequence":1,"demand":1}',
        b'{"memberID":"\\ud800","sequence":1,"demand":1}',
        b'{"memberID":"gw/\\udfff\\ud800","sequence":1,"demand":1}',
        b'\xef\xbb\xbf{"memberID":"gw/a","sequence":1,"demand":1}',
        b'{"memberID":"gw/a","memberID":"gw/b","sequence":1,"demand":1}',
        b'{"memberID":"gw/a","sequence":1,"demand":1,"demand":2}',
        b'{"memberID":"gw/a","sequence":1,"demand":Infinity}',
        b'{"memberID":"gw/a","sequence":-Infinity,"demand":1}',
        b'{"memberID":"gw/a","sequence":1e999,"demand":1}',
        b'{"memberID":"gw/a","sequence":1,"demand":9223372036854775808}',
        b'{"memberID":"gw/a","sequence":1,"demand":' + b"9" * 5000 + b"}",
        b'{"memberID":["gw/a"],"sequence":1,"demand":1}',
        b'{"memberID":{"id":"gw/a"},"sequence":1,"demand":1}',
        b'{"memberID":"gw/a","sequence":[1],"demand":1}',
        b'{"memberID":"gw/a","sequence":1,"demand":{}}',
        b'{"memberID":' + b"[" * 20000 + b"]" * 20000 + b',"sequence":1,"demand":1}',
        report("x" * (64 * 1024), 1, 1),
    ],
    ids=lambda body: body[:40].decode("utf-8", "replace"),
)
async def test_malformed_report_gets_400_without_a_traceback(
    aggregator: AggregatorServer,
    reporter: Reporter,
    seeded: tuple[object, ...],
    body: bytes,
    caplog: pytest.LogCaptureFixture,
) -> None:
    reply = await reporter.post(body)
    assert (reply.status, reply.body) == (400, INVALID)
    assert snapshot(aggregator) == seeded
    assert not [record for record in caplog.records if record.exc_info]


@pytest.mark.parametrize(
    "body",
    [
        b'{"sequence":1,"demand":1}',
        report("", 1, 1),
        report("g" * 513, 1, 1),
        report("é" * 257, 1, 1),
        report("gw/a", 0, 1),
        report("gw/a", -1, 1),
        report("gw/a", 1, -1),
        report("gw/a", 1, 3),
    ],
    ids=[
        "missing-member",
        "empty-member",
        "513-bytes",
        "514-utf8-bytes",
        "sequence-0",
        "sequence-negative",
        "demand-negative",
        "demand-above-max-2",
    ],
)
async def test_report_out_of_bounds_gets_400(
    aggregator: AggregatorServer, reporter: Reporter, seeded: tuple[object, ...], body: bytes
) -> None:
    reply = await reporter.post(body)
    assert (reply.status, reply.body) == (400, INVALID)
    assert snapshot(aggregator) == seeded


async def test_bounds_are_inclusive(aggregator: AggregatorServer, reporter: Reporter) -> None:
    assert (await reporter.post(report("g" * 512, 2**64 - 1, 2))).status == 204
    assert (await reporter.post(report("gw/b", 1, 0))).status == 204
    assert aggregator.aggregate.current() == 2


async def test_body_of_exactly_64_kib_is_read_and_one_byte_more_is_refused(
    aggregator: AggregatorServer, reporter: Reporter
) -> None:
    body = report("gw/a", 1, 1)
    padded = body + b" " * (64 * 1024 - len(body))
    assert (await reporter.post(padded)).status == 204
    reply = await reporter.post(report("gw/a", 2, 2) + b" " * (64 * 1024 - len(body) + 1))
    assert (reply.status, reply.body) == (400, INVALID)
    assert aggregator.aggregate.current() == 1


async def test_stale_sequence_is_ignored_with_204(
    aggregator: AggregatorServer, reporter: Reporter
) -> None:
    assert (await reporter.post(report("gw/a", 5, 2))).status == 204
    before = aggregator.aggregate.current()
    for sequence in (5, 4, 1):
        reply = await reporter.post(report("gw/a", sequence, 0))
        assert (reply.status, reply.body) == (204, "")
    assert aggregator.aggregate.current() == before == 2
    registry = aggregator.metrics.registry
    assert sample(registry, "noctaya_scaler_demand_reports_total", {"result": "stale"}) == 3


async def test_new_member_beyond_capacity_gets_429_and_known_members_still_report(
    aggregator: AggregatorServer, reporter: Reporter
) -> None:
    for member in ("gw/a", "gw/b", "gw/c"):
        assert (await reporter.post(report(member, 1, 1))).status == 204
    before = snapshot(aggregator)
    reply = await reporter.post(report("gw/d", 1, 2))
    assert (reply.status, reply.body) == (429, "gateway member capacity reached\n")
    assert aggregator.aggregate.current() == 3
    registry = aggregator.metrics.registry
    assert sample(registry, "noctaya_scaler_demand_reports_total", {"result": "capacity"}) == 1
    assert snapshot(aggregator)[:2] == before[:2]
    assert (await reporter.post(report("gw/a", 2, 2))).status == 204
    assert aggregator.aggregate.current() == 4


async def test_probes_and_metrics_routes(reporter: Reporter) -> None:
    assert (await reporter.get("/healthz")).status == 200
    assert (await reporter.get("/readyz")).status == 200
    metrics = await reporter.get("/metrics")
    assert metrics.status == 200
    assert metrics.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8", (
        "the classic text format, as the gateway serves it"
    )
    for series in (
        "noctaya_scaler_demand 0",
        "noctaya_scaler_gateway_members 0",
        "noctaya_scaler_expired_members_total 0",
        "noctaya_gateway_scaler_streams 0",
    ):
        assert series in metrics.body
    missing = await reporter.get("/v1/demand/extra")
    assert (missing.status, missing.body) == (404, "404 page not found\n")


AUTHORIZED_POST = (
    b"POST /v1/demand HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n"
)


def _chunked_post(body: bytes, size: int) -> bytes:
    """An authorized report whose body is sent in chunks of `size` bytes."""
    pieces = [body[at : at + size] for at in range(0, len(body), size)]
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
    return AUTHORIZED_POST + b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"


async def test_the_reported_lone_surrogate_with_connection_close_gets_400_at_once(
    aggregator: AggregatorServer, seeded: tuple[object, ...], caplog: pytest.LogCaptureFixture
) -> None:
    """The report as it was sent: answered 400 well before the 5 s read timeout, then closed."""
    body = b'{"memberID":"\\ud800","sequence":1,"demand":1}'
    reader, writer = await connect(aggregator.http_port)
    writer.write(
        AUTHORIZED_POST + b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    head, answer = await asyncio.wait_for(response(reader), 4)
    assert (head.split(b" ")[1], answer) == (b"400", INVALID.encode())
    assert await closed_by_server(reader, within=4)
    writer.close()
    assert snapshot(aggregator) == seeded
    assert not [record for record in caplog.records if record.exc_info]


@pytest.mark.parametrize(
    ("framing", "status", "closes"),
    [
        (b"\r\n" + report("gw/r"), b"400", False),  # no Content-Length: an empty body
        (b"Content-Length: 99999999999\r\n\r\n" + report("gw/r"), b"400", True),
        (b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (3, b"{}}"), b"400", True),
    ],
    ids=["missing-content-length", "oversized-content-length", "connection-close"],
)
async def test_raw_report_framings_are_answered_at_once(
    aggregator: AggregatorServer,
    seeded: tuple[object, ...],
    framing: bytes,
    status: bytes,
    closes: bool,
) -> None:
    reader, writer = await connect(aggregator.http_port)
    writer.write(AUTHORIZED_POST + framing)
    head, answer = await asyncio.wait_for(response(reader), 4)
    assert (head.split(b" ")[1], answer) == (status, INVALID.encode())
    if closes:
        assert await closed_by_server(reader, within=4)
    writer.close()
    assert snapshot(aggregator) == seeded


async def test_an_http_1_0_report_is_accepted_at_once(aggregator: AggregatorServer) -> None:
    body = report("gw/old")
    reader, writer = await connect(aggregator.http_port)
    head = AUTHORIZED_POST.replace(b"HTTP/1.1", b"HTTP/1.0")
    writer.write(head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    answer, _ = await asyncio.wait_for(response(reader), 4)
    assert answer.startswith(b"HTTP/1.1 204 ")
    assert await closed_by_server(reader, within=4)
    writer.close()
    assert aggregator.aggregate.current() == 1


async def test_a_chunked_report_is_accepted(aggregator: AggregatorServer) -> None:
    reader, writer = await connect(aggregator.http_port)
    writer.write(_chunked_post(report("gw/c"), 7))
    head, _ = await response(reader)
    assert head.startswith(b"HTTP/1.1 204 ")
    writer.close()
    assert aggregator.aggregate.current() == 1


async def test_a_chunked_report_past_64_kib_is_refused_and_the_connection_still_serves(
    aggregator: AggregatorServer, seeded: tuple[object, ...]
) -> None:
    body = report("gw/c") + b" " * (64 * 1024)
    reader, writer = await connect(aggregator.http_port)
    writer.write(_chunked_post(body, 4096))
    head, answer = await response(reader)
    assert (head.split(b" ")[1], answer) == (b"400", INVALID.encode())
    assert snapshot(aggregator) == seeded
    writer.write(_chunked_post(report("gw/c"), 9))
    head, _ = await response(reader)
    assert head.startswith(b"HTTP/1.1 204 ")
    writer.close()


async def _hold_report_slot(port: int) -> asyncio.StreamWriter:
    """An authorized report whose body never finishes: it occupies one handler slot."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /v1/demand HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
        + f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
        + b'{"memberID":'
    )
    await writer.drain()
    return writer
