"""The gateway's ASGI application: diagnostics routes, then authorize → read the body → admit →
activate → proxy. The model list routes stop before admission (`model_list`): never demand.

Order matters: a request is authenticated before it may take a queue slot (a bad key gets 401
even when the queue is full), its body has arrived before it counts as demand, and it is
refused with 429 before any backend work.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from noctaya.core.scaling import ActivationLease
from noctaya.gateway.activation import ActivationWatcher
from noctaya.gateway.auth import ApiKeyAuth, AuthResult
from noctaya.gateway.client import (
    BodyTooLarge,
    ClientChannel,
    ClientGone,
    declared_length,
)
from noctaya.gateway.coldstart import ColdStart
from noctaya.gateway.config import GatewayConfig
from noctaya.gateway.demand import DemandTracker
from noctaya.gateway.demand_feed import DemandFeed
from noctaya.gateway.exchange import open_exchange
from noctaya.gateway.lifespan import serve_lifespan
from noctaya.gateway.metrics import CONTENT_TYPE, GatewayMetrics
from noctaya.gateway.model_list import ModelList, model_list_target
from noctaya.gateway.proxy import Upstream, UpstreamUnavailable
from noctaya.gateway.readiness import ReadinessProbe
from noctaya.gateway.request_target import origin_form
from noctaya.gateway.responses import (
    AUTHENTICATION_UNAVAILABLE,
    BODY_TOO_LARGE,
    JSON,
    METHOD_NOT_ALLOWED,
    QUEUE_FULL,
    REQUEST_TIMEOUT,
    UNAUTHORIZED,
    WEBSOCKET_UNSUPPORTED,
    GatewayError,
    Receive,
    Send,
    closing,
    is_openai_path,
    send_bad_request,
    send_body,
    send_error,
    sse_error_frame,
)
from noctaya.gateway.send_timeout import ClientStalled
from noctaya.gateway.upstream import UpstreamPool


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
            path=config.backend_readiness_path,
            interval=config.readiness_interval,
            timeout=config.readiness_timeout,
            retry=config.held_readiness_interval,
        )
        self.activation = ActivationWatcher(self.demand, self.readiness, config.readiness_interval)
        self._cold = ColdStart(config, self.readiness, self.activation, self.metrics, self._forward)
        self._models = ModelList(config.served_models)

    def end_cold_waits_at(self, when: float) -> None:
        """Draining: requests waiting for the backend get their 503 at `when` (loop time)."""
        self._cold.end_waits_at(when)

    async def close(self) -> None:
        await self._cold.close()
        await self.activation.close()
        await self.readiness.close()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await serve_lifespan(receive, send)
            return
        if kind == "websocket":
            # The gateway proxies HTTP only; a handshake gets an answer, not hypercorn's 500.
            await send_error(send, WEBSOCKET_UNSUPPORTED, is_openai_path(scope["path"]), kind)
            self.metrics.count_response(WEBSOCKET_UNSUPPORTED.status)
            return
        if kind != "http":
            return
        channel, send, deadline, http1 = open_exchange(
            scope, receive, send, self.config.max_request_body, self.config.client_send_timeout
        )
        origin = origin_form(scope)
        try:
            if scope["method"] == "CONNECT":
                await self._error(send, METHOD_NOT_ALLOWED, is_openai_path(scope["path"]))
                return
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
                await self._serve(scope, channel, send, is_openai_path(path), http1)
        except ClientStalled:
            return  # the server ends the response unfinished: HTTP/1.1 closes, HTTP/2 resets
        finally:
            channel.finish()
            deadline.close()

    async def _serve(
        self, scope: dict[str, Any], channel: ClientChannel, send: Send, openai: bool, http1: bool
    ) -> None:
        """Authorize, read the whole body (within its deadline), and only then admit: a slot and
        the demand it reports belong to requests the backend could start on, never to a client
        still trickling its body."""
        if self._auth is not None and not await self._authorized(scope, send, openai):
            return
        if declared_length(scope) > self.config.max_request_body:
            await self._error(send, BODY_TOO_LARGE, openai)
            return
        try:
            async with asyncio.timeout(self.config.request_body_timeout):
                body = await channel.read_all()
        except BodyTooLarge:
            await self._error(send, BODY_TOO_LARGE, openai)
            return
        except ClientGone:
            return
        except TimeoutError:
            # The rest of the body is not worth waiting for on this connection either.
            await self._error(closing(send) if http1 else send, REQUEST_TIMEOUT, openai)
            return
        channel.watch()
        if (target := model_list_target(scope)) is not None:
            await self._model_list(scope, channel, body, send, target)
            return
        if not self.demand.try_admit():
            await self._error(send, QUEUE_FULL, openai, reason="queue_full")
            return
        try:
            if (
                self.readiness.cached_ready() or await self.readiness.ready()
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
        if self.readiness.cached_ready() or await self.readiness.ready():
            await self._forward(scope, channel, body, send, True, False)
        else:
            self.metrics.count_response(await self._models.answer(target, send))

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
                await self._error(send, BODY_TOO_LARGE, openai)
            return True
        except UpstreamUnavailable as failure:
            if failure.unsent:
                self.readiness.forget()
                return False
            if not committed:
                await self._error(send, failure.error, openai)
                return True
            frame = sse_error_frame(failure.error, openai)
            await send({"type": "http.response.body", "body": frame, "more_body": False})
            return True
        if committed:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        return True

    async def _error(self, send: Send, error: GatewayError, openai: bool, reason: str = "") -> None:
        await send_error(send, error, openai)
        self.metrics.count_response(error.status)
        if reason:
            self.metrics.reject(reason)
