"""What an admitted request does when no backend is ready: reject at once, or wait.

Either way the activation lease is renewed first, so the backend comes up even if the client
leaves. Waiting streaming requests get their 200 `text/event-stream` head at once and SSE
heartbeat comments while the backend loads, so proxies and SDKs keep the connection open.
When the gateway drains, waits end just before its forced close: a 503 `backend not ready` (or,
on a committed stream, that error frame) tells the client to retry, where the close would leave
it a bare 500 or a cut stream.

Thousands of streams may wait at once, so they share one readiness poll (`ReadyWaiters`) and a
disconnect cancels its waiter (`ClientChannel.gone_cancels`): a waiting stream wakes only to
send its heartbeat, where each once polled on its own every readiness interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from noctaya.gateway.activation import ActivationWatcher
from noctaya.gateway.client import ClientChannel, ClientGone
from noctaya.gateway.config import ColdStartMode, GatewayConfig
from noctaya.gateway.metrics import GatewayMetrics
from noctaya.gateway.readiness import ReadinessProbe
from noctaya.gateway.responses import (
    ACTIVATION_TIMEOUT,
    COLD_START,
    STREAM_TIMEOUT,
    GatewayError,
    Send,
    send_error,
    sse_error_frame,
)

Forward = Callable[[dict[str, Any], ClientChannel, bytes, Send, bool, bool], Awaitable[None]]
"""(scope, channel, body, send, openai, committed): proxy the request to the ready backend."""

HEARTBEAT = b": heartbeat\n\n"
_HEARTBEAT_MESSAGE = {"type": "http.response.body", "body": HEARTBEAT, "more_body": True}
_SSE_HEAD = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
_HTTP1_KEEPALIVE = (b"connection", b"keep-alive")  # connection-specific: HTTP/1.x only


def is_streaming_request(method: str, body: bytes, peek_limit: int) -> bool:
    """A non-GET request whose JSON body has `"stream": true`; anything else (too large to peek,
    not JSON, not an object, `stream` not a boolean) is treated as non-streaming."""
    if method == "GET" or not body or len(body) > peek_limit or b'"stream"' not in body:
        return False
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(document, dict) and document.get("stream") is True


class ReadyWaiters:
    """Waits for a ready backend, all served by one poll every readiness interval that runs
    only while someone waits (the probe itself is cached and single-flight)."""

    def __init__(self, readiness: ReadinessProbe, interval: float) -> None:
        self._readiness = readiness
        self._interval = interval
        self._waiting = 0
        self._ready = asyncio.Event()  # replaced by a fresh one each time it is set
        self._poll: asyncio.Task[None] | None = None

    async def wait(self, seconds: float | None) -> bool:
        """True once a backend is ready; False if none is within `seconds` (None: no limit)."""
        if await self._readiness.ready():
            return True
        if self._poll is None:
            self._poll = asyncio.get_running_loop().create_task(self._polling())
        self._waiting += 1
        try:
            async with asyncio.timeout(seconds) as limit:
                await self._ready.wait()
        except TimeoutError:
            if not limit.expired():
                raise
            return False
        finally:
            self._waiting -= 1
        return True

    async def close(self) -> None:
        if self._poll is not None:
            self._poll.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poll

    async def _polling(self) -> None:
        try:
            while self._waiting:
                await asyncio.sleep(self._interval)
                if await self._readiness.ready():
                    ready, self._ready = self._ready, asyncio.Event()
                    ready.set()
        finally:
            self._poll = None


class ColdStart:
    def __init__(
        self,
        config: GatewayConfig,
        readiness: ReadinessProbe,
        activation: ActivationWatcher,
        metrics: GatewayMetrics,
        forward: Forward,
    ) -> None:
        self._config = config
        self._readiness = readiness
        self._activation = activation
        self._metrics = metrics
        self._forward = forward
        self._waits: set[asyncio.Timeout] = set()
        self._cutoff = math.inf
        self._ready = ReadyWaiters(readiness, config.readiness_interval)

    async def handle(
        self, scope: dict[str, Any], channel: ClientChannel, body: bytes, send: Send, openai: bool
    ) -> None:
        """`body` is the whole request body, already read."""
        self._activation.cold_request()
        if self._config.coldstart_mode is ColdStartMode.REJECT:
            await self._refuse(send, COLD_START, "cold_start", openai)
            return
        if is_streaming_request(scope["method"], body, self._config.peek_limit):
            await self._stream_wait(scope, channel, body, send, openai)
        else:
            await self._wait(scope, channel, body, send, openai)

    async def close(self) -> None:
        await self._ready.close()

    def end_waits_at(self, when: float) -> None:
        """Draining: every wait still running at `when` (event-loop time), and every later one,
        ends then, before the server's forced close would cut it off without an answer."""
        self._cutoff = min(self._cutoff, when)
        for wait in self._waits:
            deadline = wait.when()
            if not wait.expired() and deadline is not None and when < deadline:
                wait.reschedule(when)

    @asynccontextmanager
    async def _bounded(self) -> AsyncIterator[asyncio.Timeout]:
        """The activation deadline (or the drain's cutoff, if sooner) for one wait."""
        deadline = asyncio.get_running_loop().time() + self._config.activation_timeout
        async with asyncio.timeout_at(min(deadline, self._cutoff)) as wait:
            self._waits.add(wait)
            try:
                yield wait
            finally:
                self._waits.discard(wait)

    def _drained(self, wait: asyncio.Timeout) -> bool:
        """Did the drain's cutoff, rather than the activation deadline, end this wait?"""
        return wait.when() == self._cutoff

    async def _wait(
        self, scope: dict[str, Any], channel: ClientChannel, body: bytes, send: Send, openai: bool
    ) -> None:
        start = time.monotonic()
        try:
            with channel.gone_cancels():
                async with self._bounded() as wait:
                    await self._ready.wait(None)
        except ClientGone:
            return
        except TimeoutError:
            if not wait.expired():
                raise
            if self._drained(wait):
                await self._refuse(send, COLD_START, "cold_start", openai)
            else:
                await self._refuse(send, ACTIVATION_TIMEOUT, "activation_timeout", openai)
            return
        self._metrics.activation_wait.observe(time.monotonic() - start)
        await self._forward(scope, channel, body, send, openai, False)

    async def _stream_wait(
        self, scope: dict[str, Any], channel: ClientChannel, body: bytes, send: Send, openai: bool
    ) -> None:
        if channel.disconnected:
            return
        headers = list(_SSE_HEAD)
        if scope.get("http_version", "1.1").startswith("1"):
            headers.append(_HTTP1_KEEPALIVE)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        self._metrics.count_response(200)
        start = last_beat = time.monotonic()
        beat = self._config.heartbeat_interval
        try:
            with channel.gone_cancels():
                async with self._bounded() as wait:
                    while not await self._ready.wait(max(0.0, last_beat + beat - time.monotonic())):
                        await send(_HEARTBEAT_MESSAGE)
                        last_beat = time.monotonic()
        except ClientGone:
            return
        except TimeoutError:
            if not wait.expired():
                raise
            if self._drained(wait):
                self._metrics.reject("cold_start")
                await _end_stream(send, sse_error_frame(COLD_START, openai))
            else:
                self._metrics.reject("activation_timeout")
                await _end_stream(send, sse_error_frame(STREAM_TIMEOUT, openai))
            return
        self._metrics.activation_wait.observe(time.monotonic() - start)
        await self._forward(scope, channel, body, send, openai, True)

    async def _refuse(self, send: Send, error: GatewayError, reason: str, openai: bool) -> None:
        await send_error(send, error, openai)
        self._metrics.count_response(error.status)
        self._metrics.reject(reason)


async def _end_stream(send: Send, frame: bytes) -> None:
    await send({"type": "http.response.body", "body": frame, "more_body": False})
