"""The gateway's Prometheus series on a private registry: no process or platform collectors,
so `/metrics` shows exactly what dashboards and the example alerts rely on."""

from __future__ import annotations

from collections.abc import Callable

from noctaya.gateway.metrics.exposition import CONTENT_TYPE, Counter, Gauge, Histogram, Registry

ACTIVATION_WAIT_BUCKETS = (0.01, 0.1, 1, 5, 15, 30, 60, 120, 300)
__all__ = ["CONTENT_TYPE", "GatewayMetrics", "kv_cache_discarded"]


def kv_cache_discarded(registry: Registry) -> Counter:
    """The series of whichever process serves KEDA for kvCacheUtil: the lone gateway or the
    aggregator. Without that scaling it stays empty."""
    return Counter(
        "noctaya_gateway_kv_cache_discarded",
        "KV-cache readings of a backend pod discarded, by reason.",
        ["reason"],
        registry=registry,
    )


class GatewayMetrics:
    """One gateway's series. The scaler code is handed `scaler_streams` and `demand_reports`."""

    def __init__(self) -> None:
        self.registry = Registry()
        r = self.registry
        self.pending = Gauge(
            "noctaya_gateway_pending", "Admitted requests waiting or in flight.", registry=r
        )
        self.demand = Gauge(
            "noctaya_gateway_demand",
            "Effective local demand, including the activation lease floor.",
            registry=r,
        )
        self.requests = Counter(
            "noctaya_gateway_requests_total", "Responses by status code.", ["code"], registry=r
        )
        self.rejections = Counter(
            "noctaya_gateway_rejections_total",
            "Requests the gateway refused or gave up on, by reason.",
            ["reason"],
            registry=r,
        )
        self.activation_wait = Histogram(
            "noctaya_gateway_activation_wait_seconds",
            "Time cold requests waited for a ready backend before proceeding.",
            buckets=ACTIVATION_WAIT_BUCKETS,
            registry=r,
        )
        self.scaler_streams = Gauge(
            "noctaya_gateway_scaler_streams", "Connected KEDA StreamIsActive streams.", registry=r
        )
        self.activation_events = Counter(
            "noctaya_gateway_activation_events_total",
            "Transitions of demand from inactive to active.",
            registry=r,
        )
        self.demand_reports = Counter(
            "noctaya_gateway_demand_reports_total",
            "Multi-gateway demand reports by result.",
            ["result"],
            registry=r,
        )
        self.endpoints_watch = Gauge(
            "noctaya_gateway_endpoints_watch",
            "1 for the state of the watch of the backend's EndpointSlices: watching (requests "
            "go to pod addresses) or fallback (to the backend Service). Absent without a watch.",
            ["state"],
            registry=r,
        )
        self.kv_cache_discarded = kv_cache_discarded(r)
        self._uncounted: dict[int, int] = {}

    def read_demand(self, pending: Callable[[], int], demand: Callable[[], int]) -> None:
        """The gauges read admitted requests and effective demand from these when scraped."""
        self.pending.set_function(pending)
        self.demand.set_function(demand)

    def count_response(self, status: int) -> None:
        """Count one response (added to the counter at the next scrape)."""
        uncounted = self._uncounted
        if status not in uncounted:
            self.requests.labels(code=str(status))  # the series exists from the first response
            uncounted[status] = 0
        uncounted[status] += 1

    def watch_state(self, state: str, states: tuple[str, ...]) -> None:
        """`state` of `states` is the endpoints watch's now."""
        for each in states:
            self.endpoints_watch.labels(state=each).set(1 if each == state else 0)

    def reject(self, reason: str) -> None:
        self.rejections.labels(reason=reason).inc()

    def render(self) -> bytes:
        for status, count in self._uncounted.items():
            if count:
                self.requests.labels(code=str(status)).inc(count)
                self._uncounted[status] = 0
        return self.registry.render()
