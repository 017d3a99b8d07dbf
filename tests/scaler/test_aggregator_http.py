"""The aggregator's report listener, a plain-HTTP listener of the scaler's own server: keep-alive,
deadlines against slow clients, malformed requests, shutdown, and which listener serves what.

Driven with raw sockets so every byte (and every silence) is the test's choice.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import aiohttp
import grpc
import pytest
from noctaya.gateway.aggregator import routes
from noctaya.gateway.aggregator.server import AggregatorServer
from noctaya.gateway.scaler import server as scaler_server
from noctaya.gateway.server.patches import head_timeout

from .certs import CertificateAuthority
from .conftest import TOKEN, AggregatorFactory
from .keda import Keda
from .raw_http import closed_by_server, connect, response
from .reports import report

AUTHORIZED = f"Authorization: Bearer {TOKEN}\r\n".encode()
CL_AND_TE = b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"
CL_TWICE = b"Content-Length: 1\r\nContent-Length: 2\r\n"


def post(body: bytes, *extra: bytes) -> bytes:
    """An authorized report of `body`, its head followed by `extra` header lines."""
    head = b"POST /v1/demand HTTP/1.1\r\nHost: x\r\n" + AUTHORIZED + b"".join(extra)
    return head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


@pytest.fixture
async def aggregator(start_aggregator: AggregatorFactory) -> AggregatorServer:
    return await start_aggregator()


async def test_keep_alive_and_pipelined_reports_are_answered_in_order(
    aggregator: AggregatorServer,
) -> None:
    reader, writer = await connect(aggregator.http_port)
    writer.write(post(report("gw/a", 1, 1)))
    assert (await response(reader))[0].startswith(b"HTTP/1.1 204 ")
    writer.write(post(report("gw/a", 2, 2)) + b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await response(reader))[0].startswith(b"HTTP/1.1 204 ")
    assert (await response(reader))[0].startswith(b"HTTP/1.1 404 ")
    writer.close()
    assert aggregator.aggregate.current() == 2


async def test_a_report_connection_lasts_past_a_thousand_reports(
    aggregator: AggregatorServer,
) -> None:
    """A gateway keeps its connection and reports every 2 s: the server must not end it after a
    count of requests (hypercorn's default ends one after 1,000)."""
    reader, writer = await connect(aggregator.http_port)
    for sequence in range(1, 1102):
        writer.write(post(report("gw/a", sequence, sequence % 2)))
        assert (await response(reader))[0].startswith(b"HTTP/1.1 204 ")
    writer.close()


async def test_a_body_left_unread_is_discarded_and_the_connection_kept(
    aggregator: AggregatorServer,
) -> None:
    """A report refused before its body is read (no token) still leaves the connection usable."""
    reader, writer = await connect(aggregator.http_port)
    body = report("gw/a")
    writer.write(b"POST /v1/demand HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
    writer.write(body)
    head, answer = await response(reader)
    assert (head.split(b" ")[1], answer) == (b"401", b"unauthorized\n")
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await response(reader))[0].startswith(b"HTTP/1.1 200 ")
    writer.close()


async def test_a_head_trickled_past_its_deadline_is_cut_off(
    aggregator: AggregatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(head_timeout, "HEAD_TIMEOUT", 0.4)
    reader, writer = await connect(aggregator.http_port)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(ConnectionError):  # noqa: PT012 - the trickle is what is being cut off
        for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.05)
            if reader.at_eof():
                raise ConnectionResetError
    assert loop.time() - started < 0.4 + 1.5
    writer.close()


async def test_a_body_trickled_past_its_deadline_is_answered_408_and_closed(
    aggregator: AggregatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(routes, "BODY_TIMEOUT", 0.3)
    reader, writer = await connect(aggregator.http_port)
    writer.write(post(report("gw/a"))[:-3])
    head, answer = await response(reader)
    assert (head.split(b" ")[1], answer) == (b"408", b"request timeout\n")
    assert b"connection: close" in head.lower()
    assert await closed_by_server(reader)
    assert aggregator.aggregate.members() == 0


async def test_an_idle_keep_alive_connection_is_closed_after_the_idle_budget(
    start_aggregator: AggregatorFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scaler_server, "IDLE_CONNECTION_SECONDS", 0.3)
    aggregator = await start_aggregator()
    reader, writer = await connect(aggregator.http_port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    await response(reader)
    assert await closed_by_server(reader, within=2.5)


async def test_expect_100_continue_gets_an_interim_response(aggregator: AggregatorServer) -> None:
    reader, writer = await connect(aggregator.http_port)
    body = report("gw/a")
    head = post(body, b"Expect: 100-continue\r\n")
    writer.write(head[: -len(body)])
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert interim.startswith(b"HTTP/1.1 100 ")
    writer.write(body)
    assert (await response(reader))[0].startswith(b"HTTP/1.1 204 ")
    writer.close()


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"NONSENSE\r\n\r\n", b"400"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n", b"431"),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n", b"400"),
        (b"POST /v1/demand HTTP/1.1\r\nHost: x\r\n" + CL_AND_TE + b"\r\n0\r\n\r\n", b"401"),
        (
            b"POST /v1/demand HTTP/1.1\r\nHost: x\r\n" + AUTHORIZED
            + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"400",
        ),
        (b"POST /v1/demand HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", b"501"),
        (b"POST /v1/demand HTTP/1.1\r\nHost: x\r\n" + CL_TWICE + b"\r\n", b"400"),
    ],
    ids=[
        "garbage",
        "oversized-headers",
        "bad-content-length",
        "content-length-and-chunked",
        "bad-chunk-size-read-by-the-handler",
        "unknown-transfer-coding",
        "conflicting-content-lengths",
    ],
)  # fmt: skip
async def test_malformed_requests_get_an_error_status_and_are_closed(
    aggregator: AggregatorServer,
    request_bytes: bytes,
    status: bytes,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A head is bounded by h11 as it arrives in pieces (16 KiB) and by the server's read size
    (64 KiB) when it comes in one. Content-Length beside chunked is framed by its chunks and
    answered, then the connection closed: a proxy in front may have framed it otherwise."""
    reader, writer = await connect(aggregator.http_port)
    writer.write(request_bytes)
    head, _ = await response(reader)
    assert head.split(b" ")[1] == status
    assert await closed_by_server(reader)
    assert not [record for record in caplog.records if record.exc_info]
    assert aggregator.aggregate.members() == 0


@pytest.mark.parametrize(
    "request_bytes",
    [
        post(report("gw/a"), b"Connection: close\r\n"),
        post(report("gw/a")).replace(b"HTTP/1.1", b"HTTP/1.0"),
        post(report("gw/a")) + post(report("gw/a", 2), b"Connection: close\r\n"),
        b"POST /v1/demand HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi",
    ],
    ids=["connection-close", "http-1.0", "pipelined-then-close", "unread-body-then-close"],
)
async def test_a_request_that_asks_to_close_is_answered_at_once_then_closed(
    aggregator: AggregatorServer, request_bytes: bytes
) -> None:
    """Once the whole request is in, nothing more may be read: the answer must not wait for a
    read deadline."""
    reader, writer = await connect(aggregator.http_port)
    writer.write(request_bytes)
    for _ in range(request_bytes.count(b"POST ")):
        head, _ = await asyncio.wait_for(response(reader), 2)
        assert head.split(b" ")[1] in (b"204", b"401")
    assert await closed_by_server(reader, within=2)
    writer.close()


async def test_a_failing_handler_answers_500_and_the_server_keeps_serving(
    aggregator: AggregatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("handler bug")

    monkeypatch.setattr(aggregator.aggregate, "report", broken)
    reader, writer = await connect(aggregator.http_port)
    writer.write(post(report("gw/a")))
    head, _ = await response(reader)
    assert head.startswith(b"HTTP/1.1 500 ")
    writer.close()
    reader, writer = await connect(aggregator.http_port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await response(reader))[0].startswith(b"HTTP/1.1 200 ")
    writer.close()


async def test_shutdown_closes_idle_connections_and_lets_a_report_in_progress_finish(
    aggregator: AggregatorServer,
) -> None:
    idle_reader, idle_writer = await connect(aggregator.http_port)
    idle_writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    await response(idle_reader)
    busy_reader, busy_writer = await connect(aggregator.http_port)
    whole = post(report("gw/a"))
    busy_writer.write(whole[:-3])
    await asyncio.sleep(0.1)
    stopping = asyncio.ensure_future(aggregator.stop(10))
    assert await closed_by_server(idle_reader)
    assert not stopping.done()
    busy_writer.write(whole[-3:])
    head, _ = await response(busy_reader)
    assert head.startswith(b"HTTP/1.1 204 ")
    assert await closed_by_server(busy_reader)
    await asyncio.wait_for(stopping, 5)
    with pytest.raises(ConnectionRefusedError):
        await connect(aggregator.http_port)


async def test_a_report_cut_at_the_end_of_the_grace_logs_no_traceback(
    aggregator: AggregatorServer, caplog: pytest.LogCaptureFixture
) -> None:
    busy_reader, busy_writer = await connect(aggregator.http_port)
    busy_writer.write(post(report("gw/a"))[:-3])
    await asyncio.sleep(0.1)
    await asyncio.wait_for(aggregator.stop(0.05), 5)
    answer = await asyncio.wait_for(busy_reader.read(), 5)  # to the end: the server closed it
    assert answer == b"" or answer.startswith(b"HTTP/1.1 500 ")  # hypercorn's, for a cut call
    await asyncio.sleep(0)  # the cancelled connection task's done-callbacks run now
    assert not [record for record in caplog.records if record.exc_info]


async def test_a_client_that_half_closes_after_its_answer_is_let_go_at_once(
    aggregator: AggregatorServer,
) -> None:
    """A client's FIN on an idle keep-alive connection ends it: held until the idle timeout
    instead, churning clients would pile up sockets (and file descriptors) by the thousand."""
    reader, writer = await connect(aggregator.http_port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    await response(reader)
    writer.write_eof()
    assert await closed_by_server(reader, within=4)
    writer.close()


async def test_each_listener_serves_its_own_routes(aggregator: AggregatorServer) -> None:
    """Reports are not served on the scaler's port, nor gRPC on the reports' port."""
    async with aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{aggregator.scaler_port}/v1/demand"
        async with session.post(url, data=report("gw/a")) as reply:
            assert reply.status == 505  # gRPC's answer to HTTP/1.1
    keda = Keda.insecure(aggregator.http_port)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await keda.is_active()
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED  # gRPC's reading of a 404
    finally:
        await keda.close()
    keda = Keda.insecure(aggregator.scaler_port)
    try:
        assert await keda.is_active() is False
    finally:
        await keda.close()
    assert aggregator.aggregate.members() == 0


@pytest.fixture
async def tls_aggregator(
    start_aggregator: AggregatorFactory, tmp_path: Path
) -> tuple[AggregatorServer, CertificateAuthority]:
    authority = CertificateAuthority("noctaya-test-ca")
    cert, key = authority.issue("scaler", dns=("localhost",), server=True).write(tmp_path, "s")
    ca = tmp_path / "ca.crt"
    ca.write_bytes(authority.cert_pem)
    aggregator = await start_aggregator(
        NOCTAYA_SCALER_TLS_CERT_FILE=str(cert),
        NOCTAYA_SCALER_TLS_KEY_FILE=str(key),
        NOCTAYA_SCALER_TLS_CLIENT_CA_FILE=str(ca),
    )
    return aggregator, authority


async def test_with_scaler_tls_the_report_listener_stays_plain_http(
    tls_aggregator: tuple[AggregatorServer, CertificateAuthority],
) -> None:
    aggregator, authority = tls_aggregator
    reader, writer = await connect(aggregator.http_port)
    writer.write(post(report("gw/a")))
    assert (await response(reader))[0].startswith(b"HTTP/1.1 204 ")
    writer.close()
    context = ssl.create_default_context(cadata=authority.cert_pem.decode())
    with pytest.raises(ssl.SSLError):
        await asyncio.open_connection("127.0.0.1", aggregator.http_port, ssl=context,
                                      server_hostname="localhost")  # fmt: skip
    reader, writer = await connect(aggregator.scaler_port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert await closed_by_server(reader), "the scaler's port speaks TLS only"
