"""The ExternalScaler service: demand, as KEDA's four RPCs see it.

The push stream is what makes scale-from-zero fast: KEDA polls only every `pollingInterval`, so
the 0→1 edge must arrive on `StreamIsActive` the moment demand appears. Streams therefore send
the current state at once and then every change of the active flag, never repeats.

A stream never ends on its own, yet gRPC counts it against the server's concurrent-RPC limit. So
at most `MAX_ACTIVE_STREAMS` (well below that limit) stay open: a new one ends the oldest, whose
client reconnects and gets the current state at once. A flood of streams thus never leaves KEDA's
unary calls (IsActive, GetMetrics) refused with RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any, Protocol, TypeVar

import grpc
from noctaya.gateway.demand_feed import Subscription
from noctaya.gateway.scaler._proto import externalscaler_pb2 as pb
from noctaya.gateway.scaler._proto import externalscaler_pb2_grpc as pb_grpc
from noctaya.gateway.scaler.metadata import (
    METRIC_NAME,
    ScalerRequestError,
    check_metrics_request,
    target_value,
)
from noctaya.gateway.scaler.request_decoding import MalformedRequest
from prometheus_client import Gauge

_Request = TypeVar("_Request")
_Ref = pb.ScaledObjectRef | MalformedRequest
MAX_ACTIVE_STREAMS = 256

_log = logging.getLogger(__name__)


class DemandSource(Protocol):
    """Where demand comes from: the gateway's DemandFeed, or the aggregator's member table."""

    def current(self) -> int: ...

    def subscribe(self) -> Subscription: ...


class ExternalScalerService(pb_grpc.ExternalScalerServicer):
    def __init__(
        self, source: DemandSource, streams_gauge: Gauge, max_streams: int = MAX_ACTIVE_STREAMS
    ) -> None:
        self._source = source
        self._streams = streams_gauge
        self._max_streams = max_streams
        self._open: dict[Subscription, None] = {}  # each open stream's demands, oldest first
        self._closing = False

    def close(self) -> None:
        """End every open stream cleanly so KEDA reconnects elsewhere instead of waiting."""
        self._closing = True
        for demands in self._open:
            demands.end()

    async def IsActive(self, request: _Ref, context: Any) -> pb.IsActiveResponse:
        await _validated(context, target_value, request)
        return pb.IsActiveResponse(result=self._source.current() > 0)

    async def StreamIsActive(
        self, request: _Ref, context: Any
    ) -> AsyncGenerator[pb.IsActiveResponse, None]:
        """The active flag now, then each time it flips, until the client leaves or the stream
        is ended. The handler's own task waits on the subscription, so a flip is written in
        the event loop's next turn."""
        await _validated(context, target_value, request)
        if len(self._open) >= self._max_streams:
            oldest = next(iter(self._open))
            del self._open[oldest]
            oldest.end()
        demands = self._source.subscribe()
        if self._closing:
            demands.end()
        self._open[demands] = None
        self._streams.inc()
        try:
            last: bool | None = None
            async for demand in demands:
                active = demand > 0
                if active != last:
                    last = active
                    yield pb.IsActiveResponse(result=active)
        finally:
            self._open.pop(demands, None)
            self._streams.dec()

    async def GetMetricSpec(self, request: _Ref, context: Any) -> pb.GetMetricSpecResponse:
        target = await _validated(context, target_value, request)
        spec = pb.MetricSpec(metricName=METRIC_NAME, targetSizeFloat=target)
        return pb.GetMetricSpecResponse(metricSpecs=[spec])

    async def GetMetrics(
        self, request: pb.GetMetricsRequest | MalformedRequest, context: Any
    ) -> pb.GetMetricsResponse:
        await _validated(context, check_metrics_request, request)
        value = pb.MetricValue(metricName=METRIC_NAME, metricValueFloat=self._source.current())
        return pb.GetMetricsResponse(metricValues=[value])


async def _validated(
    context: Any, check: Callable[[_Request], float], request: _Request | MalformedRequest
) -> float:
    """Run `check`; a bad request ends the RPC with INVALID_ARGUMENT and the check's message."""
    try:
        if isinstance(request, MalformedRequest):
            _log.warning(
                "refused a malformed scaler request from %s: %s", context.peer(), request.reason
            )
            raise ScalerRequestError(f"malformed request: {request.reason}")
        return check(request)
    except ScalerRequestError as exc:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        raise  # abort() always raises; this keeps the type checker honest
