"""Requests refused before the app runs, for framing the HTTP/1.1 parser will not guess at: each is
answered in the shape of the route it named (the OpenAI error object on `/v1/*`, plain text
elsewhere) and the connection closed, where hypercorn's own answer had an empty body."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from noctaya.gateway.server.patches.framing_refusals import HEAD_START, refusal

from .conftest import StartGateway
from .support import Engine

BIG_URI = "?q=" + "a" * 200_000
MANY_HEADERS = "x-h: 1\r\n" * 20_000

CASES = {
    "duplicate content-length": (
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{{}}",
        400,
        "bad_request",
    ),
    "negative content-length": (
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        400,
        "bad_request",
    ),
    "200 KB target": (
        "GET {path}" + BIG_URI + " HTTP/1.1\r\nHost: x\r\n\r\n",
        431,
        "request_header_fields_too_large",
    ),
    "20,000 header fields": (
        "GET {path} HTTP/1.1\r\nHost: x\r\n" + MANY_HEADERS + "\r\n",
        431,
        "request_header_fields_too_large",
    ),
    "te: gzip, chunked": (
        "POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        501,
        "not_implemented",
    ),
}


async def _refusal(port: int, request: str) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of the answer; the connection must close after it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request.encode("latin-1"))
        async with asyncio.timeout(10):
            reply = await reader.read(-1)
    finally:
        writer.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    assert int(headers["content-length"]) == len(body), "one response, then the close"
    return int(status_line.split()[1]), headers, body


@pytest.mark.parametrize(("request_", "status", "code"), CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("path", ["/v1/completions", "http://gateway.example/v1/models"])
async def test_a_refusal_on_an_openai_route_carries_the_openai_error_object(
    engine: Engine,
    start_gateway: StartGateway,
    caplog: pytest.LogCaptureFixture,
    request_: str,
    status: int,
    code: str,
    path: str,
) -> None:
    gateway = await start_gateway(engine.url)
    answered, headers, body = await _refusal(gateway.server.port, request_.format(path=path))
    assert answered == status
    assert headers["content-type"] == "application/json"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", code)
    assert error["message"]
    assert engine.requests == []
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == [], "no traceback"


@pytest.mark.parametrize(("request_", "status", "code"), CASES.values(), ids=CASES.keys())
async def test_a_refusal_elsewhere_is_plain_text(
    engine: Engine,
    start_gateway: StartGateway,
    caplog: pytest.LogCaptureFixture,
    request_: str,
    status: int,
    code: str,
) -> None:
    gateway = await start_gateway(engine.url)
    answered, headers, body = await _refusal(gateway.server.port, request_.format(path="/generate"))
    assert answered == status
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert body == refusal(status).message.encode() + b"\n"
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == [], "no traceback"


CUT_SHORT = "M" * (HEAD_START - len(" /v1")) + " /v1" + "x" * 100_000 + " HTTP/1.1\r\n\r\n"
"""A target whose first bytes kept end at `/v1`: it might as well be `/v1x`."""


@pytest.mark.parametrize(
    "request_",
    ["\x16\x03\x01\x02\x00garbage\r\n\r\n", CUT_SHORT],
    ids=["no request line", "target cut short"],
)
async def test_a_refusal_whose_route_is_not_known_is_plain_text(
    engine: Engine, start_gateway: StartGateway, request_: str
) -> None:
    gateway = await start_gateway(engine.url)
    _, headers, _ = await _refusal(gateway.server.port, request_)
    assert headers["content-type"] == "text/plain; charset=utf-8"


async def test_a_refused_head_request_is_answered_without_a_body(
    engine: Engine, start_gateway: StartGateway
) -> None:
    gateway = await start_gateway(engine.url)
    answered, headers, body = await _refusal(
        gateway.server.port, "HEAD /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"
    )
    assert (answered, headers["content-type"], body) == (400, "application/json", b"")


async def test_a_body_refused_on_a_kept_alive_connection_is_judged_by_its_own_route(
    engine: Engine, start_gateway: StartGateway
) -> None:
    """The second request's target decides, not the first's; and its body, not only its head,
    may be refused (a chunk size that is not hex)."""
    gateway = await start_gateway(engine.url)
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.server.port)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        async with asyncio.timeout(10):
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200")
            await reader.readexactly(int(head.lower().split(b"content-length: ")[1].split()[0]))
            writer.write(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                b"\r\nzz\r\n{}\r\n0\r\n\r\n"
            )
            reply = await reader.read(-1)
    finally:
        writer.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    assert json.loads(body)["error"]["code"] == "bad_request"
