"""The aggregator's own Prometheus registry: its four series, the KEDA stream gauge and, for
kvCacheUtil scaling, the discarded KV-cache readings.

Served in the gateway's exposition format (`noctaya.gateway.metrics.exposition.CONTENT_TYPE`)."""

from __future__ import annotations

from noctaya.gateway.metrics.exposition import Counter, Gauge, Registry
from noctaya.gateway.metrics.gateway_metrics import kv_cache_discarded


class AggregatorMetrics:
    def __init__(self) -> None:
        self.registry = Registry()
        self.demand = Gauge(
            "noctaya_scaler_demand",
            "Aggregate demand of all unexpired gateways, as served to KEDA.",
            registry=self.registry,
        )
        self.members = Gauge(
            "noctaya_scaler_gateway_members",
            "Gateways whose last accepted report has not expired.",
            registry=self.registry,
        )
        self.reports = Counter(
            "noctaya_scaler_demand_reports",
            "Well-formed, authorized demand reports by outcome (accepted, stale, capacity).",
            ["result"],
            registry=self.registry,
        )
        self.expired = Counter(
            "noctaya_scaler_expired_members",
            "Gateways forgotten because they stopped reporting.",
            registry=self.registry,
        )
        self.streams = Gauge(
            "noctaya_gateway_scaler_streams",
            "Connected KEDA StreamIsActive streams.",
            registry=self.registry,
        )
        self.kv_cache_discarded = kv_cache_discarded(self.registry)

    def exposition(self) -> bytes:
        return self.registry.render()
