"""The aggregator's HTTP routes, and the demand report handler's rules in a fixed order.

The order is the defence: cheap checks that need no body (method, concurrency, token, auth) run
before the body is read, so an unauthenticated flood never holds a report slot or a buffer.
"""

from __future__ import annotations

import hmac

from noctaya.gateway.aggregator.aggregate import Aggregate
from noctaya.gateway.aggregator.http_server import BodyTooLarge, Request, Response, text_response
from noctaya.gateway.aggregator.members import ReportResult
from noctaya.gateway.aggregator.metrics import AggregatorMetrics
from noctaya.gateway.aggregator.protocol import (
    MAX_BODY_BYTES,
    bearer,
    decode_report,
    read_demand_token,
)
from noctaya.gateway.metrics import CONTENT_TYPE

REPORT_PATH = "/v1/demand"
MAX_CONCURRENT_REPORTS = 64

_AUTH_UNAVAILABLE = "demand authentication unavailable"


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

    async def __call__(self, request: Request) -> Response:
        if request.path == REPORT_PATH:
            return await self._report(request)
        if request.path == "/healthz":
            return Response(200)
        if request.path == "/readyz":
            if self._token() is None:
                return text_response(503, _AUTH_UNAVAILABLE)
            return Response(200)
        if request.path == "/metrics":
            body = self._metrics.exposition()
            return Response(200, body, (("Content-Type", CONTENT_TYPE),))
        return text_response(404, "404 page not found")

    async def _report(self, request: Request) -> Response:
        if request.method != "POST":
            return text_response(405, "method not allowed", (("Allow", "POST"),))
        if self._reports_in_flight >= MAX_CONCURRENT_REPORTS:
            return text_response(429, "too many demand reports")
        self._reports_in_flight += 1
        try:
            return await self._accept_report(request)
        finally:
            self._reports_in_flight -= 1

    async def _accept_report(self, request: Request) -> Response:
        token = self._token()
        if token is None:
            return text_response(503, _AUTH_UNAVAILABLE)
        if not _authorized(request.header(b"authorization"), token):
            return text_response(401, "unauthorized")
        try:
            body = await request.read_body(MAX_BODY_BYTES)
        except BodyTooLarge:
            return text_response(400, "invalid demand report")
        report = decode_report(body, self._max_demand)
        if report is None:
            return text_response(400, "invalid demand report")
        if self._aggregate.report(report) is ReportResult.CAPACITY:
            return text_response(429, "gateway member capacity reached")
        return Response(204)

    def _token(self) -> bytes | None:
        """The current token, re-read per use so a rotated Secret needs no restart."""
        try:
            return read_demand_token(self._token_file)
        except ValueError:
            return None


def _authorized(header: bytes | None, token: bytes) -> bool:
    """Exact `Bearer <token>`, compared in constant time once the lengths agree."""
    expected = bearer(token)
    return (
        header is not None
        and len(header) == len(expected)
        and hmac.compare_digest(header, expected)
    )
