"""The gateway's ASGI application: diagnostics routes, then authorize → admit → activate → proxy.

Order matters: a request is authenticated before it may take a queue slot (a bad key gets 401
even when the queue is full), and it is refused with 429 before any backend work.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable
from typing import Any

from noctaya.core.scaling import ActivationLease
from noctaya.gateway.activation import ActivationWatcher
from noctaya.gateway.auth import ApiKeyAuth, AuthResult
from noctaya.gateway.client import BodyTooLarge, ClientChannel, ClientGone
from noctaya.gateway.coldstart import ColdStart
from noctaya.gateway.config import GatewayConfig
from noctaya.gateway.demand import DemandTracker
from noctaya.gateway.demand_feed import DemandFeed
from noctaya.gateway.metrics import CONTENT_TYPE, GatewayMetrics
from noctaya.gateway.proxy import Upstream, UpstreamUnavailable
from noctaya.gateway.readiness import ReadinessProbe
from noctaya.gateway.request_target import origin_form
from noctaya.gateway.responses import (
    AUTHENTICATION_UNAVAILABLE,
    BODY_TOO_LARGE,
    JSON,
    QUEUE_FULL,
    UNAUTHORIZED,
    GatewayError,
    Receive,
    Send,
    is_openai_path,
    send_bad_request,
    send_body,
    send_error,
    sse_error_frame,
)
from noctaya.gateway.upstream import UpstreamPool

WHOLE_BODY_BELOW = 64 * 1024
"""Bodies up to this size are read before forwarding (sent with a known length, cheaply);
larger ones stream through."""


class GatewayApp:
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
        self._auth = ApiKeyAuth(config.client_api_key_file) if config.client_api_key_file else None
        self._upstream = Upstream(pool, self.metrics, strip_authorization=self._auth is not None)
        self.readiness = ReadinessProbe(
            pool,
            interval=config.readiness_interval,
            timeout=config.readiness_timeout,
        )
        self.activation = ActivationWatcher(self.demand, self.readiness, config.readiness_interval)
        self._cold = ColdStart(config, self.readiness, self.activation, self.metrics, self._forward)

    def end_cold_waits_at(self, when: float) -> None:
        """Draining: requests waiting for the backend get their 503 at `when` (loop time)."""
        self._cold.end_waits_at(when)

    async def close(self) -> None:
        await self.activation.close()
        await self.readiness.close()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await _lifespan(receive, send)
            return
        if kind != "http":
            return
        channel = ClientChannel(receive, self.config.max_request_body)
        http1 = scope["http_version"][0] == "1"
        if http1:
            send = channel.guard(send)
        origin = origin_form(scope)
        try:
            if origin is None:
                await send_bad_request(send, close=http1)
                return
            scope = origin
            path = scope["path"]
            if path == "/healthz":
                await send_body(send, 200, b"", b"")
            elif path == "/noctaya/queue":
                await send_body(send, 200, JSON, b'{"pending":%d}\n' % self.demand.current())
            elif path == "/metrics":
                await send_body(send, 200, CONTENT_TYPE.encode(), self.metrics.render())
            else:
                await self._admit(scope, channel, send, is_openai_path(path))
        finally:
            channel.finish()

    async def _admit(
        self, scope: dict[str, Any], channel: ClientChannel, send: Send, openai: bool
    ) -> None:
        if self._auth is not None and not await self._authorized(scope, send, openai):
            return
        if _declared_length(scope) > self.config.max_request_body:
            await self._error(send, BODY_TOO_LARGE, openai)
            return
        if not self.demand.try_admit():
            await self._error(send, QUEUE_FULL, openai, reason="queue_full")
            return
        try:
            if self.readiness.cached_ready() or await self.readiness.ready():
                await self._warm(scope, channel, send, openai)
            else:
                await self._cold.handle(scope, channel, send, openai)
        finally:
            self.demand.release()

    async def _authorized(self, scope: dict[str, Any], send: Send, openai: bool) -> bool:
        assert self._auth is not None
        authorization = next(
            (value for name, value in scope["headers"] if name == b"authorization"), None
        )
        result = self._auth.check(authorization)
        if result is AuthResult.OK:
            return True
        error = UNAUTHORIZED if result is AuthResult.UNAUTHORIZED else AUTHENTICATION_UNAVAILABLE
        await self._error(send, error, openai, reason=result.value)
        return False

    async def _warm(
        self, scope: dict[str, Any], channel: ClientChannel, send: Send, openai: bool
    ) -> None:
        try:
            prefix = await channel.read_prefix(WHOLE_BODY_BELOW)
        except BodyTooLarge:
            await self._error(send, BODY_TOO_LARGE, openai)
            return
        except ClientGone:
            return
        body: bytes | AsyncIterable[bytes]
        if channel.body_complete:
            body = prefix
            channel.watch()
        else:
            body = channel.stream(prefix)
        await self._forward(scope, channel, body, send, openai, False)

    async def _forward(
        self,
        scope: dict[str, Any],
        channel: ClientChannel,
        body: bytes | AsyncIterable[bytes],
        send: Send,
        openai: bool,
        committed: bool,
    ) -> None:
        """Proxy in a child task that a client disconnect cancels (which aborts the backend
        request, so an engine stops generating for nobody); map failures to responses."""
        forwarding = asyncio.get_running_loop().create_task(
            self._upstream.forward(scope, channel, body, send, committed=committed)
        )
        channel.cancel_on_disconnect(forwarding)
        try:
            await forwarding
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if forwarding.cancelled() and channel.disconnected and not (
                current is not None and current.cancelling()
            ):
                return
            raise
        except ClientGone:
            return
        except BodyTooLarge:
            if not committed:
                await self._error(send, BODY_TOO_LARGE, openai)
            return
        except UpstreamUnavailable as failure:
            if not committed:
                await self._error(send, failure.error, openai)
                return
            frame = sse_error_frame(failure.error, openai)
            await send({"type": "http.response.body", "body": frame, "more_body": False})
            return
        finally:
            channel.cancel_on_disconnect(None)
        if committed:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _error(
        self, send: Send, error: GatewayError, openai: bool, reason: str = ""
    ) -> None:
        await send_error(send, error, openai)
        self.metrics.count_response(error.status)
        if reason:
            self.metrics.reject(reason)


def _declared_length(scope: dict[str, Any]) -> int:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
