"""The aggregator's lean HTTP/1.1 server: keep-alive, deadlines against slow clients, shutdown.

Driven with raw sockets so every byte (and every silence) is the test's choice.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from noctaya.gateway.aggregator.http_server import (
    BodyTooLarge,
    HTTPServer,
    Request,
    Response,
)

from .raw_http import closed_by_server, connect, response

READ_TIMEOUT = 0.4
IDLE_TIMEOUT = 0.3
CL_AND_TE = b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"
CL_TWICE = b"Content-Length: 1\r\nContent-Length: 2\r\n"


class App:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = asyncio.Event()
        self.outcomes: list[str] = []

    async def __call__(self, request: Request) -> Response:
        if request.path == "/echo":
            try:
                body = await request.read_body(16)
            except BodyTooLarge:
                return Response(413)
            except TimeoutError:
                self.outcomes.append("body timeout")
                raise
            return Response(200, body)
        if request.path == "/hold":
            self.entered.set()
            await self.release.wait()
            return Response(200, b"held")
        if request.path == "/boom":
            raise RuntimeError("handler bug")
        return Response(200, b"ok")


@pytest.fixture
async def app_server() -> AsyncIterator[tuple[App, HTTPServer, int]]:
    app = App()
    server = HTTPServer(app, read_timeout=READ_TIMEOUT, idle_timeout=IDLE_TIMEOUT)
    port = await server.start("127.0.0.1", 0)
    yield app, server, port
    await server.shutdown(0)


async def test_keep_alive_serves_several_requests_on_one_connection(
    app_server: tuple[App, HTTPServer, int],
) -> None:
    _, _, port = app_server
    reader, writer = await connect(port)
    for body in (b"one", b"two"):
        writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n" + body)
        head, echoed = await response(reader)
        assert head.startswith(b"HTTP/1.1 200 ")
        assert echoed == body
    writer.close()


async def test_pipelined_requests_are_answered_in_order(
    app_server: tuple[App, HTTPServer, int],
) -> None:
    _, _, port = app_server
    reader, writer = await connect(port)
    writer.write(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na"
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nb"
    )
    assert (await response(reader))[1] == b"a"
    assert (await response(reader))[1] == b"b"
    writer.close()


async def test_unread_small_body_is_discarded_and_the_connection_kept(
    app_server: tuple[App, HTTPServer, int],
) -> None:
    _, _, port = app_server
    reader, writer = await connect(port)
    writer.write(b"POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
    assert (await response(reader))[1] == b"ok"
    writer.write(b"GET /plain HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await response(reader))[1] == b"ok"
    writer.close()


async def test_headers_trickled_past_the_read_timeout_are_cut_off(
    app_server: tuple[App, HTTPServer, int],
) -> None:
    _, _, port = app_server
    reader, writer = await connect(port)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(ConnectionError):  # noqa: PT012 - the trickle is what is being cut off
        for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.05)
            if reader.at_eof():
                raise ConnectionResetError
    assert loop.time() - started < READ_TIMEOUT + 1.5
    writer.close()


async def test_body_trickled_past_the_read_timeout_ends_the_request_without_a_response(
    app_server: tuple[App, HTTPServer, int],
) -> None:
    app, _, port = app_server
    reader, writer = await connect(port)
    writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
    assert await closed_by_server(reader)
    assert app.outcomes == ["body timeout"]


async def test_idle_keep_alive_connection_is_closed(
    app_server: tuple[App, HTTPServer, int],
) -> None:
    _, _, port = app_server
    reader, writer = await connect(port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await response(reader)
    assert await closed_by_server(reader, within=IDLE_TIMEOUT + 2)


async def test_body_over_the_handlers_limit_is_refused_and_the_connection_closed(
    app_server: tuple[App, HTTPServer, int],
) -> None:
    _, _, port = app_server
    reader, writer = await connect(port)
    writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 100)
    head, _ = await response(reader)
    assert head.startswith(b"HTTP/1.1 413 ")
    assert b"connection: close" in head.lower()
    assert await closed_by_server(reader)


async def test_expect_100_continue_gets_an_interim_response_when_the_body_is_wanted(
    app_server: tuple[App, HTTPServer, int],
) -> None:
    _, _, port = app_server
    reader, writer = await connect(port)
    writer.write(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"
    )
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert interim.startswith(b"HTTP/1.1 100 ")
    writer.write(b"hi")
    assert (await response(reader))[1] == b"hi"
    writer.close()


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"NONSENSE\r\n\r\n", b"400"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", b"431"),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n", b"400"),
        (b"POST /echo HTTP/1.1\r\nHost: x\r\n" + CL_AND_TE + b"\r\n0\r\n\r\n", b"400"),
        (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", b"400"),
        (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", b"501"),
        (b"POST /echo HTTP/1.1\r\nHost: x\r\n" + CL_TWICE + b"\r\n", b"400"),
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
)
async def test_malformed_requests_get_an_error_status_and_are_closed(
    app_server: tuple[App, HTTPServer, int],
    request_bytes: bytes,
    status: bytes,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, _, port = app_server
    reader, writer = await connect(port)
    writer.write(request_bytes)
    head, _ = await response(reader)
    assert head.split(b" ")[1] == status
    assert await closed_by_server(reader)
    assert not [record for record in caplog.records if record.exc_info]


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi",
        b"POST /echo HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi",
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
        b"POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi",
        b"POST /plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi",
    ],
    ids=["connection-close", "http-1.0", "pipelined-then-close", "unread-body-then-close"],
)
async def test_a_request_that_asks_to_close_is_answered_at_once_then_closed(
    request_bytes: bytes,
) -> None:
    """Once the whole request is in, nothing more may be read: the answer must not wait for
    a read deadline (long here, so waiting for it would fail the test)."""
    server = HTTPServer(App(), read_timeout=60, idle_timeout=60)
    port = await server.start("127.0.0.1", 0)
    try:
        reader, writer = await connect(port)
        writer.write(request_bytes)
        bodies = []
        for _ in range(request_bytes.count(b"POST ")):
            head, body = await response(reader)
            assert head.startswith(b"HTTP/1.1 200 ")
            bodies.append(body)
        assert b"connection: close" in head.lower()
        assert set(bodies) <= {b"hi", b"ok"}
        assert await closed_by_server(reader)
        writer.close()
    finally:
        await server.shutdown(0)


async def test_a_failing_handler_answers_500_and_the_server_keeps_serving(
    app_server: tuple[App, HTTPServer, int],
) -> None:
    _, _, port = app_server
    reader, writer = await connect(port)
    writer.write(b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
    head, body = await response(reader)
    assert head.startswith(b"HTTP/1.1 500 ")
    assert body == b"internal server error\n"
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await response(reader))[1] == b"ok"
    writer.close()


async def test_shutdown_closes_idle_connections_and_lets_busy_requests_finish(
    app_server: tuple[App, HTTPServer, int],
) -> None:
    app, server, port = app_server
    idle_reader, _ = await connect(port)
    busy_reader, busy_writer = await connect(port)
    busy_writer.write(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.wait_for(app.entered.wait(), 5)
    stopping = asyncio.ensure_future(server.shutdown(10))
    assert await closed_by_server(idle_reader)
    assert not stopping.done()
    app.release.set()
    head, body = await response(busy_reader)
    assert body == b"held"
    assert b"connection: close" in head.lower()
    await asyncio.wait_for(stopping, 5)
    with pytest.raises(ConnectionRefusedError):
        await connect(port)


async def test_a_request_cut_at_the_end_of_the_grace_logs_no_traceback(
    app_server: tuple[App, HTTPServer, int], caplog: pytest.LogCaptureFixture
) -> None:
    app, server, port = app_server
    busy_reader, busy_writer = await connect(port)
    busy_writer.write(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.wait_for(app.entered.wait(), 5)
    await asyncio.wait_for(server.shutdown(0.05), 5)
    assert await closed_by_server(busy_reader)
    await asyncio.sleep(0)  # the cancelled connection task's done-callbacks run now
    assert not [record for record in caplog.records if record.exc_info]


async def test_a_client_that_half_closes_after_its_answer_is_let_go_at_once() -> None:
    """A client's FIN on an idle keep-alive connection ends it: held until the idle timeout
    instead, churning clients would pile up sockets (and file descriptors) by the thousand."""
    server = HTTPServer(App(), read_timeout=60, idle_timeout=60)
    port = await server.start("127.0.0.1", 0)
    try:
        reader, writer = await connect(port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await response(reader))[1] == b"ok"
        writer.write_eof()
        assert await closed_by_server(reader, within=4)
        writer.close()
    finally:
        await server.shutdown(0)
