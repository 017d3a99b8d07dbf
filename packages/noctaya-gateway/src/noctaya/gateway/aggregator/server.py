"""One running aggregator: the report endpoint and the ExternalScaler fed by the aggregate, on one
server (the scaler's, with the reports on a plain listener of their own).

For `kvCacheUtil` scaling the aggregator reads the pods' KV-cache gauges itself (`pods`: the
backend's EndpointSlice watch), not the gateways: each pod is then counted once, however many
gateways there are.

Memory-only by design: after a restart the total rebuilds from the gateways' 2 s heartbeats,
well inside KEDA's polling interval, so there is nothing to persist or to get out of sync.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from noctaya.core.plan import gateway_env as names
from noctaya.gateway.aggregator.aggregate import MEMBER_TTL_SECONDS, SWEEP_PERIOD_SECONDS, Aggregate
from noctaya.gateway.aggregator.config import AggregatorConfig
from noctaya.gateway.aggregator.metrics import AggregatorMetrics
from noctaya.gateway.aggregator.routes import AggregatorRoutes
from noctaya.gateway.scaler.server import PlainListener, ScalerServer, start_scaler

if TYPE_CHECKING:  # the reader brings the upstream client, imported only to scale on KV cache
    from noctaya.gateway.scaler.kv_cache import KvCacheReader, PodEndpoints


class AggregatorServer:
    def __init__(
        self,
        config: AggregatorConfig,
        *,
        member_ttl: float = MEMBER_TTL_SECONDS,
        sweep_period: float = SWEEP_PERIOD_SECONDS,
        pods: PodEndpoints | None = None,
    ) -> None:
        """`pods` is required when `config.kv_cache` is set."""
        self.config = config
        self.metrics = AggregatorMetrics()
        self.aggregate = Aggregate(config.max_members, self.metrics, member_ttl=member_ttl)
        self.routes = AggregatorRoutes(
            self.aggregate, self.metrics, config.token_file, config.max_demand
        )
        self._sweep_period = sweep_period
        self._sweeper: asyncio.Task[None] | None = None
        self._server: ScalerServer | None = None
        self._kv_cache: KvCacheReader | None = None
        settings = config.kv_cache
        if settings is not None and pods is not None:
            from noctaya.gateway.scaler.kv_cache import KvCacheReader

            self._kv_cache = KvCacheReader.of_pods(pods, settings, self.metrics.kv_cache_discarded)
        self.http_port = 0
        self.scaler_port = 0

    async def start(self) -> None:
        """Bind both listeners (OSError if either is taken) and start expiring members;
        ValueError for kvCacheUtil scaling without the pods to read."""
        if self.config.kv_cache is not None and self._kv_cache is None:
            raise ValueError(
                f"{names.SCALING_METRIC} kvCacheUtil needs the backend's pods "
                f"({names.BACKEND_ENDPOINTS}) to read their KV-cache gauges"
            )
        self._server = await start_scaler(
            self.aggregate,
            self.config.scaler_listen_addr,
            self.config.tls,
            self.metrics.streams,
            PlainListener(self.config.listen_addr, self.routes),
            self._kv_cache,
        )
        assert self._server.plain_port is not None
        self.http_port = self._server.plain_port
        self.scaler_port = self._server.port
        self._sweeper = asyncio.create_task(self.aggregate.sweep_forever(self._sweep_period))

    async def stop(self, grace: float) -> None:
        """Finish in-flight reports and RPCs within `grace` seconds, then close everything."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        if self._server is not None:
            await self._server.stop(grace)
        if self._kv_cache is not None:
            await self._kv_cache.close()
