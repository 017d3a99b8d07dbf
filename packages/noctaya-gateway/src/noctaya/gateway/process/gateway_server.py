"""One gateway process: hypercorn serving the app, plus either the KEDA scaler (single gateway)
or the demand reporter (several gateways), all on one event loop; and the drain that ends it.

Drain order: HTTP first (stop accepting, let in-flight requests and streams finish within the
shutdown budget), then the scaler and the reporter, so the demand of the draining requests stays
visible to KEDA until they are done and the backend is not scaled away under them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from noctaya.core.plan import gateway_env as names
from noctaya.gateway.demand.feed import DemandFeed
from noctaya.gateway.metrics.gateway_metrics import GatewayMetrics
from noctaya.gateway.process.addresses import with_port
from noctaya.gateway.process.config import GatewayConfig
from noctaya.gateway.process.running import quiet_cancelled_callbacks
from noctaya.gateway.process.version import gateway_version
from noctaya.gateway.requests.app import GatewayApp
from noctaya.gateway.server.hypercorn_config import hypercorn_config
from noctaya.gateway.server.listen_socket import listen_socket, serve_on
from noctaya.gateway.server.patches import install_server_patches
from noctaya.gateway.upstream import UpstreamPool

if TYPE_CHECKING:
    from noctaya.gateway.demand.reporter import DemandReporter
    from noctaya.gateway.scaler.kv_cache import KvCacheReader
    from noctaya.gateway.scaler.tls import ScalerTLS

log = logging.getLogger("noctaya.gateway")
SCALER_STOP_GRACE = 1.0
DRAIN_ANSWER_MARGIN = 1.0
"""Cold waits are answered this long (at most a quarter of the budget) before the forced close."""


class GatewayServer:
    """Start with `await start()`, stop with `await stop()` (the drain)."""

    def __init__(
        self,
        config: GatewayConfig,
        environ: Mapping[str, str] | None = None,
        *,
        serve_scaler: bool = True,
    ) -> None:
        self.config = config
        self._environ = environ if environ is not None else {}
        self._serve_scaler = serve_scaler
        self.metrics = GatewayMetrics()
        self.feed = DemandFeed()
        self.app: GatewayApp | None = None
        self.port = 0
        self.scaler: Any = None
        self.reporter: asyncio.Task[None] | None = None
        self._pool: UpstreamPool | None = None
        self._kv_cache: KvCacheReader | None = None
        self._stopping = asyncio.Event()
        self.stopped = False
        self._serving: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Check the scaler's TLS or the reporter's settings, serve HTTP, then start the scaler or
        reporter. A bad setting fails before any port is opened (and before "listening on" is
        logged); a later startup error undoes what began."""
        install_server_patches()
        quiet_cancelled_callbacks(asyncio.get_running_loop())
        reporter = self._reporter() if self.config.demand_aggregator_url else None
        tls = self._scaler_tls() if reporter is None and self._serve_scaler else None
        sock = listen_socket(self.config.listen_addr)
        self.port = sock.getsockname()[1]
        self._pool = UpstreamPool(
            self.config.backend_url,
            read_timeout=self.config.backend_read_timeout,
            head_timeout=self.config.backend_head_timeout,
        )
        self.app = GatewayApp(self.config, self._pool, feed=self.feed, metrics=self.metrics)
        self._serving = serve_on(sock, self.app, hypercorn_config(self.config), self._stopping.wait)
        log.info(
            "Noctaya gateway version %s listening on %s, backend %s",
            gateway_version(),
            with_port(self.config.listen_addr, self.port),
            self.config.backend_url,
        )
        try:
            if reporter is not None:
                self.reporter = asyncio.get_running_loop().create_task(reporter.run(self.feed))
                log.info("Noctaya gateway publishing demand to %s", reporter.endpoint)
            elif self._serve_scaler:
                await self._start_scaler(tls)
        except BaseException:
            await self.stop()
            raise

    def _scaler_tls(self) -> ScalerTLS | None:
        from noctaya.gateway.scaler.tls import load_scaler_tls

        return load_scaler_tls(self._environ)

    async def _start_scaler(self, tls: ScalerTLS | None) -> None:
        from noctaya.gateway.scaler.server import start_scaler

        self._kv_cache = self._kv_cache_reader()
        self.scaler = await start_scaler(
            self.feed,
            self.config.scaler_listen_addr,
            tls,
            self.metrics.scaler_streams,
            metric=self._kv_cache,
        )
        log.info(
            "Noctaya external scaler listening on %s",
            with_port(self.config.scaler_listen_addr, self.scaler.port),
        )

    def _kv_cache_reader(self) -> KvCacheReader | None:
        """For kvCacheUtil: the reader of the pods the app follows, its discarded readings
        counted on the gateway's own page. ValueError without the pods to read."""
        settings = self.config.kv_cache
        if settings is None:
            return None
        assert self.app is not None
        if self.app.endpoints is None:
            raise ValueError(
                f"{names.SCALING_METRIC} kvCacheUtil needs the backend's pods "
                f"({names.BACKEND_ENDPOINTS})"
            )
        from noctaya.gateway.scaler.kv_cache import KvCacheReader

        return KvCacheReader.of_pods(self.app.endpoints, settings, self.metrics.kv_cache_discarded)

    def _reporter(self) -> DemandReporter:
        from noctaya.gateway.demand.reporter import DemandReporter

        url = self.config.demand_aggregator_url
        assert url is not None
        environ = {**self._environ, names.DEMAND_AGGREGATOR_URL: url}
        return DemandReporter.from_environ(environ, self.metrics.demand_reports)

    async def stop(self) -> None:
        """Drain: stop accepting, finish in-flight work within the budget, then close."""
        if self.stopped:
            return
        self.stopped = True
        self._stopping.set()
        if self.app is not None:
            budget = self.config.shutdown_timeout
            margin = min(DRAIN_ANSWER_MARGIN, budget / 4)
            self.app.end_cold_waits_at(asyncio.get_running_loop().time() + budget - margin)
        if self._serving is not None:
            await self._serving
        if self.scaler is not None:
            await self.scaler.stop(SCALER_STOP_GRACE)
        if self._kv_cache is not None:
            await self._kv_cache.close()
        if self.reporter is not None:
            self.reporter.cancel()  # the reporter withdraws (reports 0) as it ends
            try:
                await self.reporter
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("demand reporter failed")
        if self.app is not None:
            await self.app.close()
        if self._pool is not None:
            await self._pool.close()

    async def wait(self) -> None:
        """Until the HTTP server ends (after `stop()` or on a fatal server error)."""
        if self._serving is not None:
            await asyncio.shield(self._serving)
