"""The fleet's demand as KEDA sees it: member reports in, one deduplicated total out.

This is the aggregator's DemandSource for the ExternalScaler. Expired members are dropped by a
periodic sweep and also lazily before every read, so KEDA never sees a dead gateway's demand for
longer than the member lifetime, even between sweeps.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from noctaya.gateway.aggregator.members import MemberTable, ReportResult
from noctaya.gateway.aggregator.metrics import AggregatorMetrics
from noctaya.gateway.aggregator.protocol import DemandReport
from noctaya.gateway.demand.feed import DemandFeed, Subscription

if TYPE_CHECKING:  # only an annotation: the gateway imports no more of the core for it
    from noctaya.core.ports import Clock

MEMBER_TTL_SECONDS = 10.0
SWEEP_PERIOD_SECONDS = 1.0


class Aggregate:
    def __init__(
        self,
        max_members: int,
        metrics: AggregatorMetrics,
        *,
        member_ttl: float = MEMBER_TTL_SECONDS,
        clock: Clock = time.monotonic,
    ) -> None:
        self._table = MemberTable(max_members, member_ttl)
        self._feed = DemandFeed(0)
        self._metrics = metrics
        self._clock = clock
        self._publish()

    def current(self) -> int:
        self.expire()
        return self._feed.current()

    def subscribe(self) -> Subscription:
        self.expire()
        return self._feed.subscribe()

    def members(self) -> int:
        self.expire()
        return len(self._table)

    def report(self, report: DemandReport) -> ReportResult:
        self.expire()
        result = self._table.update(report.member_id, report.sequence, report.demand, self._clock())
        self._metrics.reports.labels(result.value).inc()
        if result is ReportResult.ACCEPTED:
            self._publish()
        return result

    def expire(self) -> None:
        expired = self._table.expire(self._clock())
        if expired:
            self._metrics.expired.inc(expired)
            self._publish()

    async def sweep_forever(self, period: float = SWEEP_PERIOD_SECONDS) -> None:
        """Expire on a timer, so a vanished gateway's demand also leaves streams nobody polls."""
        while True:
            await asyncio.sleep(period)
            self.expire()

    def _publish(self) -> None:
        total = self._table.total
        self._feed.publish(total)
        self._metrics.demand.set(total)
        self._metrics.members.set(len(self._table))
