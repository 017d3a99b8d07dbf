"""The ExternalScaler service: demand, as KEDA's four RPCs see it.

The push stream is what makes scale-from-zero fast: KEDA polls only every `pollingInterval`, so
the 0→1 edge must arrive on `StreamIsActive` the moment demand appears. Streams therefore send
the current state at once and then every change of the active flag, never repeats.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, TypeVar

import grpc
from noctaya.gateway.scaler._proto import externalscaler_pb2 as pb
from noctaya.gateway.scaler._proto import externalscaler_pb2_grpc as pb_grpc
from noctaya.gateway.scaler.metadata import (
    METRIC_NAME,
    ScalerRequestError,
    check_metrics_request,
    target_value,
)
from prometheus_client import Gauge

_Request = TypeVar("_Request")


class DemandSource(Protocol):
    """Where demand comes from: the gateway's DemandFeed, or the aggregator's member table."""

    def current(self) -> int: ...

    def subscribe(self) -> AsyncIterator[int]: ...


class ExternalScalerService(pb_grpc.ExternalScalerServicer):
    def __init__(self, source: DemandSource, streams_gauge: Gauge) -> None:
        self._source = source
        self._streams = streams_gauge
        self._closing = asyncio.Event()

    def close(self) -> None:
        """End every open stream cleanly so KEDA reconnects elsewhere instead of waiting."""
        self._closing.set()

    async def IsActive(self, request: pb.ScaledObjectRef, context: Any) -> pb.IsActiveResponse:
        await _validated(context, target_value, request)
        return pb.IsActiveResponse(result=self._source.current() > 0)

    async def StreamIsActive(
        self, request: pb.ScaledObjectRef, context: Any
    ) -> AsyncIterator[pb.IsActiveResponse]:
        await _validated(context, target_value, request)
        self._streams.inc()
        try:
            async for active in self._active_states():
                yield pb.IsActiveResponse(result=active)
        finally:
            self._streams.dec()

    async def GetMetricSpec(
        self, request: pb.ScaledObjectRef, context: Any
    ) -> pb.GetMetricSpecResponse:
        target = await _validated(context, target_value, request)
        spec = pb.MetricSpec(metricName=METRIC_NAME, targetSizeFloat=target)
        return pb.GetMetricSpecResponse(metricSpecs=[spec])

    async def GetMetrics(
        self, request: pb.GetMetricsRequest, context: Any
    ) -> pb.GetMetricsResponse:
        await _validated(context, check_metrics_request, request)
        value = pb.MetricValue(metricName=METRIC_NAME, metricValueFloat=self._source.current())
        return pb.GetMetricsResponse(metricValues=[value])

    async def _active_states(self) -> AsyncIterator[bool]:
        """The active flag now, then each time it flips, until the client leaves or we close."""
        demands = self._source.subscribe()
        closing = asyncio.ensure_future(self._closing.wait())
        step = asyncio.ensure_future(anext(demands))
        try:
            last: bool | None = None
            while True:
                await asyncio.wait((step, closing), return_when=asyncio.FIRST_COMPLETED)
                if not step.done():
                    return
                active = step.result() > 0
                step = asyncio.ensure_future(anext(demands))
                if active != last:
                    last = active
                    yield active
        finally:
            closing.cancel()
            step.cancel()
            await asyncio.wait((step,))  # let the subscription unwind before closing it
            aclose = getattr(demands, "aclose", None)
            if aclose is not None:
                await aclose()


async def _validated(context: Any, check: Callable[[_Request], float], request: _Request) -> float:
    """Run `check`; a bad request ends the RPC with INVALID_ARGUMENT and the check's message."""
    try:
        return check(request)
    except ScalerRequestError as exc:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        raise  # abort() always raises; this keeps the type checker honest
