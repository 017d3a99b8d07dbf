"""The ExternalScaler service: demand, as KEDA's four RPCs see it.

The push stream is what makes scale-from-zero fast: KEDA polls only every `pollingInterval`, so
the 0→1 edge must arrive on `StreamIsActive` the moment demand appears. Streams therefore send
the current state at once and then every change of the active flag, never repeats.

A stream never ends on its own, yet each one holds a call slot of the server. So at most
`MAX_ACTIVE_STREAMS` (well below the server's limit on calls) stay open: a new one ends the
oldest, whose client reconnects and gets the current state at once. A flood of streams thus never
leaves KEDA's unary calls (IsActive, GetMetrics) refused with RESOURCE_EXHAUSTED.

GetMetrics reports demand too, unless the service scales on another metric (`ScaledMetric`:
KV-cache use for `kvCacheUtil`); activation, IsActive and the stream, stays demand's either way,
since a backend at zero replicas has no KV cache to read.

Answers are encoded messages; a request KEDA should not have sent raises ScalerRequestError.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from noctaya.gateway.demand.feed import Subscription
from noctaya.gateway.metrics.exposition import Gauge
from noctaya.gateway.scaler.messages import (
    GetMetricsRequest,
    ScaledObjectRef,
    get_metric_spec_response,
    get_metrics_response,
    is_active_response,
)
from noctaya.gateway.scaler.metadata import METRIC_NAME, check_metrics_request, target_value

MAX_ACTIVE_STREAMS = 256


class DemandSource(Protocol):
    """Where demand comes from: the gateway's DemandFeed, or the aggregator's member table."""

    def current(self) -> int: ...

    def subscribe(self) -> Subscription: ...


class ScaledMetric(Protocol):
    """What GetMetrics reports in place of demand, summed over the backend's replicas."""

    async def current(self) -> float: ...


class ActiveStream:
    """One StreamIsActive call: iterate for its messages; `end()` ends it cleanly (the client
    left, or the server is stopping), `close()` releases it once the call is over."""

    __slots__ = ("_demands", "_service")

    def __init__(self, service: ExternalScalerService, demands: Subscription) -> None:
        self._service = service
        self._demands = demands

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The active flag now, then each time it flips. The call's own task waits on the
        subscription, so a flip is written in the event loop's next turn."""
        last: bool | None = None
        async for demand in self._demands:
            active = demand > 0
            if active != last:
                last = active
                yield is_active_response(active)

    def end(self) -> None:
        self._demands.end()

    def close(self) -> None:
        self._demands.end()
        self._service._release(self._demands)


class ExternalScalerService:
    def __init__(
        self,
        source: DemandSource,
        streams_gauge: Gauge,
        max_streams: int = MAX_ACTIVE_STREAMS,
        metric: ScaledMetric | None = None,
    ) -> None:
        self._source = source
        self._metric = metric
        self._streams = streams_gauge
        self._max_streams = max_streams
        self._open: dict[Subscription, None] = {}  # each open stream's demands, oldest first
        self._closing = False

    def close(self) -> None:
        """End every open stream cleanly so KEDA reconnects elsewhere instead of waiting."""
        self._closing = True
        for demands in self._open:
            demands.end()

    async def is_active(self, ref: ScaledObjectRef) -> bytes:
        target_value(ref)
        return is_active_response(self._source.current() > 0)

    def open_stream(self, ref: ScaledObjectRef) -> ActiveStream:
        """Counted in the streams gauge from here until `close()`."""
        target_value(ref)
        if len(self._open) >= self._max_streams:
            oldest = next(iter(self._open))
            del self._open[oldest]
            oldest.end()
        demands = self._source.subscribe()
        if self._closing:
            demands.end()
        self._open[demands] = None
        self._streams.inc()
        return ActiveStream(self, demands)

    def _release(self, demands: Subscription) -> None:
        self._open.pop(demands, None)
        self._streams.dec()

    async def get_metric_spec(self, ref: ScaledObjectRef) -> bytes:
        return get_metric_spec_response(METRIC_NAME, target_value(ref))

    async def get_metrics(self, request: GetMetricsRequest) -> bytes:
        check_metrics_request(request)
        if self._metric is not None:
            return get_metrics_response(METRIC_NAME, await self._metric.current())
        return get_metrics_response(METRIC_NAME, self._source.current())
