"""The aggregator's HTTP routes as an ASGI app, and the demand report handler's rules in a fixed
order.

The order is the defence: cheap checks that need no body (method, concurrency, token, auth) run
before the body is read, so an unauthenticated flood never holds a report slot or a buffer. A
report's body must arrive within `BODY_TIMEOUT`; the server bounds the head (its head timeout)
and keeps a connection whose request body was left unread (it discards the rest first).

Statuses and error texts are the reference implementation's, byte for byte, on purpose: clients
compare them.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from noctaya.gateway.aggregator.aggregate import Aggregate
from noctaya.gateway.aggregator.members import ReportResult
from noctaya.gateway.aggregator.metrics import AggregatorMetrics
from noctaya.gateway.aggregator.protocol import (
    MAX_BODY_BYTES,
    bearer,
    decode_report,
    read_demand_token,
)
from noctaya.gateway.metrics.exposition import CONTENT_TYPE
from noctaya.gateway.requests.client import (
    BodyTooLarge,
    ClientChannel,
    ClientGone,
    ambiguous_framing,
    declared_length,
)
from noctaya.gateway.requests.lifespan import serve_lifespan
from noctaya.gateway.requests.responses import NOSNIFF, PLAIN_TEXT, Receive, Send, closing

REPORT_PATH = "/v1/demand"
MAX_CONCURRENT_REPORTS = 64
BODY_TIMEOUT = 5.0
"""Seconds a report's body may take to arrive once its head has."""

_AUTH_UNAVAILABLE = "demand authentication unavailable"


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    headers: Sequence[tuple[bytes, bytes]] = ()
    close: bool = False  # HTTP/1.x: the connection ends after it


def text_response(status: int, message: str, *headers: tuple[bytes, bytes]) -> Response:
    """A plain-text error: the message and a newline, with `nosniff` (see the module docstring)."""
    return Response(
        status, f"{message}\n".encode(), ((b"content-type", PLAIN_TEXT), NOSNIFF, *headers)
    )


class AggregatorRoutes:
    def __init__(
        self, aggregate: Aggregate, metrics: AggregatorMetrics, token_file: str, max_demand: int
    ) -> None:
        self._aggregate = aggregate
        self._metrics = metrics
        self._token_file = token_file
        self._max_demand = max_demand
        self._reports_in_flight = 0

    @property
    def reports_in_flight(self) -> int:
        return self._reports_in_flight

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        channel = ClientChannel(receive, MAX_BODY_BYTES)
        http1 = scope["http_version"][0] == "1"
        if http1:
            send = channel.guard(send)  # an unread body is read away, keeping the connection
        try:
            response = await self._answer(scope, channel)
            if response is None:
                return  # the client left
            if http1 and (response.close or ambiguous_framing(scope)):
                send = closing(send)
            body = b"" if scope["method"] == "HEAD" else response.body
            headers = [*response.headers, (b"content-length", b"%d" % len(response.body))]
            start = {"type": "http.response.start", "status": response.status, "headers": headers}
            await send(start)
            await send({"type": "http.response.body", "body": body})
        finally:
            channel.finish()

    async def _answer(self, scope: dict[str, Any], channel: ClientChannel) -> Response | None:
        path = scope["path"]
        if path == REPORT_PATH:
            return await self._report(scope, channel)
        if path == "/healthz":
            return Response(200)
        if path == "/readyz":
            if await self._token() is None:
                return text_response(503, _AUTH_UNAVAILABLE)
            return Response(200)
        if path == "/metrics":
            return Response(
                200, self._metrics.exposition(), ((b"content-type", CONTENT_TYPE.encode()),)
            )
        return text_response(404, "404 page not found")

    async def _report(self, scope: dict[str, Any], channel: ClientChannel) -> Response | None:
        if scope["method"] != "POST":
            return text_response(405, "method not allowed", (b"allow", b"POST"))
        if self._reports_in_flight >= MAX_CONCURRENT_REPORTS:
            return text_response(429, "too many demand reports")
        self._reports_in_flight += 1
        try:
            return await self._accept_report(scope, channel)
        finally:
            self._reports_in_flight -= 1

    async def _accept_report(
        self, scope: dict[str, Any], channel: ClientChannel
    ) -> Response | None:
        token = await self._token()
        if token is None:
            return text_response(503, _AUTH_UNAVAILABLE)
        if not _authorized(_header(scope, b"authorization"), token):
            return text_response(401, "unauthorized")
        if declared_length(scope) > MAX_BODY_BYTES:
            return text_response(400, "invalid demand report")
        try:
            async with asyncio.timeout(BODY_TIMEOUT):
                body = await channel.read_all()
        except BodyTooLarge:
            return text_response(400, "invalid demand report")
        except ClientGone:
            return None
        except TimeoutError:
            # What is left of the body is not worth waiting for on this connection either.
            return Response(408, b"request timeout\n", ((b"content-type", PLAIN_TEXT),), True)
        report = decode_report(body, self._max_demand)
        if report is None:
            return text_response(400, "invalid demand report")
        if self._aggregate.report(report) is ReportResult.CAPACITY:
            return text_response(429, "gateway member capacity reached")
        return Response(204)

    async def _token(self) -> bytes | None:
        """The current token, re-read per use (on a worker thread: it is a file) so a rotated
        Secret needs no restart."""
        try:
            return await asyncio.to_thread(read_demand_token, self._token_file)
        except ValueError:
            return None


def _header(scope: dict[str, Any], name: bytes) -> bytes | None:
    """The first value of header `name` (lower-case); repeats of it are ignored."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def _authorized(header: bytes | None, token: bytes) -> bool:
    """Exact `Bearer <token>`, compared in constant time once the lengths agree."""
    expected = bearer(token)
    return (
        header is not None
        and len(header) == len(expected)
        and hmac.compare_digest(header, expected)
    )
