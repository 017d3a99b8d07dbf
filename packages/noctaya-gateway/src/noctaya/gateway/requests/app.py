"""The gateway's ASGI application: diagnostics routes, then authorize → read the body → admit →
activate → proxy. The model list routes stop before admission (`model_list`): never demand.

Order matters: a request is authenticated before it may take a queue slot (a bad key gets 401
even when the queue is full), its body has arrived before it counts as demand, and it is
refused with 429 before any backend work.

With `NOCTAYA_BACKEND_ENDPOINTS` set, `GatewayApp.endpoints` follows the backend's pods
(`backend.endpoints`) and `GatewayApp.replicas` sends each request to one of them; anything
else that reads each pod (the KV-cache scraper) takes its addresses from `endpoints` too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from noctaya.core.scaling import ActivationLease
from noctaya.gateway.backend.readiness import ReadinessProbe
from noctaya.gateway.backend.replicas import Replicas
from noctaya.gateway.demand.feed import DemandFeed
from noctaya.gateway.metrics.gateway_metrics import CONTENT_TYPE, GatewayMetrics
from noctaya.gateway.process.config import GatewayConfig
from noctaya.gateway.requests.activation import ActivationWatcher
from noctaya.gateway.requests.admission import DemandTracker
from noctaya.gateway.requests.auth import ApiKeyAuth
from noctaya.gateway.requests.client import BodyTooLarge, ClientChannel, ClientGone
from noctaya.gateway.requests.client_endpoint import ClientEndpoint
from noctaya.gateway.requests.coldstart import ColdStart
from noctaya.gateway.requests.model_list import ModelList, model_list_target
from noctaya.gateway.requests.proxy import Upstream, UpstreamUnavailable
from noctaya.gateway.requests.responses import (
    BODY_TOO_LARGE,
    JSON,
    QUEUE_FULL,
    GatewayError,
    Send,
    is_openai_path,
    send_body,
    send_error,
    sse_error_frame,
)
from noctaya.gateway.upstream import UpstreamPool

_log = logging.getLogger("noctaya.gateway.http")

if TYPE_CHECKING:  # the watch's modules load only where it is configured (not in local mode)
    from noctaya.gateway.backend.endpoints import Endpoint, EndpointWatch


class GatewayApp(ClientEndpoint):
    """One gateway: build it on the running loop, serve it, then `await close()`."""

    def __init__(
        self,
        config: GatewayConfig,
        pool: UpstreamPool,
        *,
        feed: DemandFeed | None = None,
        metrics: GatewayMetrics | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics or GatewayMetrics()
        self.feed = feed or DemandFeed()
        lease = ActivationLease(config.activation_timeout, time.monotonic, config.ready_grace)
        self.demand = DemandTracker(lease, self.feed, self.metrics, config.max_queue)
        self.max_body = config.max_request_body
        self.body_timeout = config.request_body_timeout
        self.send_timeout = config.client_send_timeout
        self.auth = ApiKeyAuth(config.client_api_key_file) if config.client_api_key_file else None
        self.readiness = ReadinessProbe(
            pool,
            path=config.backend_readiness_path,
            interval=config.readiness_interval,
            timeout=config.readiness_timeout,
            retry=config.held_readiness_interval,
        )
        self.endpoints = _endpoint_watch(config, self.metrics)
        """The backend's pods; None without `NOCTAYA_BACKEND_ENDPOINTS`."""
        self.replicas = Replicas(
            self.readiness,
            self.endpoints,
            lambda endpoint: _pod_pool(config, endpoint),
            path=config.backend_readiness_path,
            timeout=config.readiness_timeout,
        )
        self._upstream = Upstream(
            pool, self.metrics, strip_authorization=self.auth is not None, replicas=self.replicas
        )
        self.activation = ActivationWatcher(self.demand, self.replicas, config.readiness_interval)
        self._cold = ColdStart(config, self.replicas, self.activation, self.metrics, self._forward)
        self._models = ModelList(config.served_models)
        if self.endpoints is not None:
            self.endpoints.start()

    def end_cold_waits_at(self, when: float) -> None:
        """Draining: requests waiting for the backend get their 503 at `when` (loop time)."""
        self._cold.end_waits_at(when)

    async def close(self) -> None:
        await self._cold.close()
        await self.activation.close()
        if self.endpoints is not None:
            await self.endpoints.close()
        await self.replicas.close()

    def answer(
        self, scope: dict[str, Any], channel: ClientChannel, send: Send, http1: bool
    ) -> Awaitable[None]:
        path = scope["path"]
        if path == "/healthz":
            return send_body(send, 200, b"", b"")
        if path == "/noctaya/queue":
            return send_body(send, 200, JSON, b'{"pending":%d}\n' % self.demand.current())
        if path == "/metrics":
            return send_body(send, 200, CONTENT_TYPE.encode(), self.metrics.render())
        return self._serve(scope, channel, send, is_openai_path(path), http1)

    async def _serve(
        self, scope: dict[str, Any], channel: ClientChannel, send: Send, openai: bool, http1: bool
    ) -> None:
        """Authorize, read the whole body (within its deadline), and only then admit: a slot and
        the demand it reports belong to requests the backend could start on, never to a client
        still trickling its body."""
        if not await self.authorized(scope, send, openai):
            return
        body = await self.read_body(scope, channel, send, openai, http1)
        if body is None:
            return
        channel.watch()
        if (target := model_list_target(scope)) is not None:
            await self._model_list(scope, channel, body, send, target)
            return
        if not self.demand.try_admit():
            await self.refuse(send, QUEUE_FULL, openai, reason="queue_full")
            return
        try:
            if (
                self.replicas.cached_ready() or await self.replicas.ready()
            ) and await self._forward(scope, channel, body, send, openai, False):
                return
            await self._cold.handle(scope, channel, body, send, openai)
        finally:
            self.demand.release()

    async def _model_list(
        self, scope: dict[str, Any], channel: ClientChannel, body: bytes, send: Send, target: str
    ) -> None:
        """Never demand: a ready backend answers, else the gateway does, with no queue slot and
        no activation lease either way."""
        if self.replicas.cached_ready() or await self.replicas.ready():
            await self._forward(scope, channel, body, send, True, False)
        else:
            self.metrics.count_response(await self._models.answer(target, send))

    async def _forward(
        self,
        scope: dict[str, Any],
        channel: ClientChannel,
        body: bytes,
        send: Send,
        openai: bool,
        committed: bool,
    ) -> bool:
        """Proxy in this task, which a client disconnect cancels (aborting the backend request,
        so an engine stops generating for nobody); map failures to responses.

        False, with nothing answered, when no connection to the backend could be made: it has
        gone since it was seen ready (scaled away a moment before, the Service still routing
        to it), and the request waits for the next one as a cold request does."""
        try:
            with channel.gone_cancels():
                await self._upstream.forward(scope, channel, body, send, committed=committed)
        except ClientGone:
            return True
        except BodyTooLarge:
            if not committed:
                await self.refuse(send, BODY_TOO_LARGE, openai)
            return True
        except UpstreamUnavailable as failure:
            if failure.unsent:
                self.replicas.forget()
                return False
            # What reached the backend is not sent again, so the client's answer is an error:
            # said here, since a held stream's 200 was counted when it began.
            _log.warning(
                "proxy: backend failed before answering, %s %d to the client: %s",
                "error event" if committed else "answered",
                failure.error.status,
                failure,
            )
            if not committed:
                await self.refuse(send, failure.error, openai)
                return True
            frame = sse_error_frame(failure.error, openai)
            await send({"type": "http.response.body", "body": frame, "more_body": False})
            return True
        if committed:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        return True

    async def refuse(
        self, send: Send, error: GatewayError, openai: bool, reason: str = "", kind: str = "http"
    ) -> None:
        await send_error(send, error, openai, kind)
        self.metrics.count_response(error.status)
        if reason:
            self.metrics.reject(reason)


def _endpoint_watch(config: GatewayConfig, metrics: GatewayMetrics) -> EndpointWatch | None:
    wanted = config.backend_endpoints
    if wanted is None:
        return None
    from noctaya.gateway.backend.endpoints import WatchState, follow

    states = tuple(state.value for state in WatchState)
    return follow(
        wanted,
        config.endpoints_retry_interval,
        lambda state: metrics.watch_state(state.value, states),
    )


def _pod_pool(config: GatewayConfig, endpoint: Endpoint) -> UpstreamPool:
    """Keep-alive connections to one pod, under the backend URL's scheme and path."""
    parts = urlsplit(config.backend_url)
    host = f"[{endpoint.address}]" if ":" in endpoint.address else endpoint.address
    return UpstreamPool(
        f"{parts.scheme}://{host}:{endpoint.port}{parts.path}",
        read_timeout=config.backend_read_timeout,
        head_timeout=config.backend_head_timeout,
    )
