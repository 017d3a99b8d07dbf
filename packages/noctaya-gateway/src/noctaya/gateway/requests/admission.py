"""Admission and effective demand: the bounded queue of admitted requests plus the activation
lease floor, published to the scaler feed and the gauges whenever the value changes."""

from __future__ import annotations

from noctaya.core.scaling import ActivationLease
from noctaya.gateway.demand.feed import DemandFeed
from noctaya.gateway.metrics.gateway_metrics import GatewayMetrics


class DemandTracker:
    """Everything runs on one event loop, so a plain counter is the semaphore and publishing is
    serialized by construction. The gauges read `pending` and the published demand at scrape."""

    def __init__(
        self, lease: ActivationLease, feed: DemandFeed, metrics: GatewayMetrics, max_queue: int
    ) -> None:
        self.lease = lease
        self._feed = feed
        self._metrics = metrics
        self._max_queue = max_queue
        self._pending = 0
        self._published = feed.current()
        metrics.read_demand(lambda: self._pending, lambda: self._published)

    @property
    def pending(self) -> int:
        return self._pending

    def try_admit(self) -> bool:
        """Take a slot, or return False when all `maxQueue` slots are held."""
        if self._pending >= self._max_queue:
            return False
        self._pending += 1
        self.publish()
        return True

    def release(self) -> None:
        self._pending -= 1
        self.publish()

    def current(self) -> int:
        return self.lease.demand(self._pending)

    def publish(self) -> None:
        """Push the current demand if it changed; count inactive→active transitions."""
        value = self.lease.demand(self._pending)
        if value == self._published:
            return
        if self._published == 0:
            self._metrics.activation_events.inc()
        self._published = value
        self._feed.publish(value)
