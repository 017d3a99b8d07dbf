"""What an admitted request does when no backend is ready: reject at once, or wait.

Either way the activation lease is renewed first, so the backend comes up even if the client
leaves. Waiting streaming requests get their 200 `text/event-stream` head at once and SSE
heartbeat comments while the backend loads, so proxies and SDKs keep the connection open.
When the gateway drains, waits end just before its forced close: a 503 `backend not ready` (or,
on a committed stream, that error frame) tells the client to retry, where the close would leave
it a bare 500 or a cut stream.

Thousands of streams may wait at once, so every wait is served by `ColdWaits` (one readiness
poll, one heartbeat tick, one deadline timer) and a disconnect cancels its waiter
(`ClientChannel.gone_cancels`): a waiting stream wakes only to send its heartbeat and holds no
timer of its own, where each once polled on its own and armed a heartbeat and a deadline timer.
Streams share the tick, so a stream's first heartbeat comes with the others', within one interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from noctaya.gateway.backend.readiness import Readiness
from noctaya.gateway.metrics.gateway_metrics import GatewayMetrics
from noctaya.gateway.process.config import ColdStartMode, GatewayConfig
from noctaya.gateway.requests.activation import ActivationWatcher
from noctaya.gateway.requests.client import ClientChannel, ClientGone
from noctaya.gateway.requests.responses import (
    ACTIVATION_TIMEOUT,
    COLD_START,
    STREAM_TIMEOUT,
    GatewayError,
    Send,
    send_error,
    sse_error_frame,
)

Forward = Callable[[dict[str, Any], ClientChannel, bytes, Send, bool, bool], Awaitable[bool]]
"""(scope, channel, body, send, openai, committed): proxy the request to the ready backend;
False, with nothing sent, if it could not be reached after all (gone again): wait on."""

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


class Outcome(enum.Enum):
    """Why a wait woke."""

    READY = enum.auto()
    BEAT = enum.auto()  # a stream's heartbeat is due
    TIMEOUT = enum.auto()  # the activation deadline passed
    DRAINED = enum.auto()  # the drain's cutoff came first


class _Wait:
    __slots__ = ("deadline", "stream", "woken")

    def __init__(self, deadline: float, stream: bool) -> None:
        self.deadline = deadline
        self.stream = stream
        self.woken: asyncio.Future[Outcome] | None = None  # while the waiter sleeps


class ColdWaits:
    """Every wait for a ready backend, served together: one readiness poll every
    `poll_interval`, one heartbeat tick for all waiting streams and one timer for the earliest
    deadline, all running only while someone waits. A held stream costs a small record and,
    while it sleeps, one future: no timer, task or event of its own.

    Every wait gets the same activation timeout from its admission, so admission order is
    deadline order and the first deadline is the first wait's (the drain's cutoff keeps it so).
    """

    def __init__(
        self, readiness: Readiness, poll_interval: float, heartbeat: float, timeout: float
    ) -> None:
        self._readiness = readiness
        self._poll_interval = poll_interval
        self._heartbeat = heartbeat
        self._timeout = timeout
        self._waits: dict[_Wait, None] = {}  # in admission (and so deadline) order
        self._streams = 0
        self._next_beat = math.inf
        self._cutoff = math.inf
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._poll: asyncio.Task[None] | None = None
        readiness.on_ready = self._ready

    def add(self, stream: bool) -> _Wait:
        """A wait starting now; `remove` it when done with it."""
        wait = _Wait(asyncio.get_running_loop().time() + self._timeout, stream)
        self._enter(wait)
        return wait

    def resume(self, wait: _Wait) -> None:
        """`wait`, removed when the backend was seen ready, waits again with its own deadline:
        the backend went before the request could reach it. Rare: the waits are put back in
        deadline order by a sort."""
        last = next(reversed(self._waits), None)
        self._enter(wait)
        if last is not None and last.deadline > wait.deadline:
            self._waits = dict.fromkeys(sorted(self._waits, key=lambda each: each.deadline))
            self._arm()

    def _enter(self, wait: _Wait) -> None:
        loop = asyncio.get_running_loop()
        self._waits[wait] = None
        if wait.stream:
            self._streams += 1
            if self._streams == 1:
                self._next_beat = loop.time() + self._heartbeat
        if self._poll is None:
            self._poll = loop.create_task(self._polling())
        self._arm()

    def remove(self, wait: _Wait) -> None:
        """Idempotent. The timer is left as it is (firing early only re-arms it) unless no one
        waits any more."""
        if wait not in self._waits:
            return
        del self._waits[wait]
        if wait.stream:
            self._streams -= 1
        if not self._waits:
            self._disarm()

    def next(self, wait: _Wait) -> asyncio.Future[Outcome]:
        """Resolves once the backend is ready, the wait ends, or (a stream) a heartbeat is due.

        A plain future, not a coroutine: a sleeping stream holds no frame for it. Readiness is
        the probe's fresh answer or the poll's, which wakes every sleeping wait."""
        woken: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        ended = self._ended(wait, asyncio.get_running_loop().time())
        if self._readiness.cached_ready():
            woken.set_result(Outcome.READY)
        elif ended is not None:
            woken.set_result(ended)
        else:
            wait.woken = woken
        return woken

    def end_waits_at(self, when: float) -> None:
        """Every wait still running at `when` (event-loop time), and every later one, ends then."""
        self._cutoff = min(self._cutoff, when)
        self._arm()

    async def close(self) -> None:
        self._disarm()
        if self._poll is not None:
            self._poll.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poll

    def _ended(self, wait: _Wait, now: float) -> Outcome | None:
        if self._cutoff <= min(now, wait.deadline):
            return Outcome.DRAINED
        return Outcome.TIMEOUT if wait.deadline <= now else None

    def _arm(self) -> None:
        """The timer, at the next heartbeat or the first deadline (or cutoff), if sooner."""
        when = math.inf
        if self._waits:
            when = min(next(iter(self._waits)).deadline, self._cutoff)
            if self._streams:
                when = min(when, self._next_beat)
        if when == self._timer_at:
            return
        self._disarm()
        if when < math.inf:
            self._timer = asyncio.get_running_loop().call_at(when, self._fire)
            self._timer_at = when

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = math.inf

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        now = asyncio.get_running_loop().time()
        while self._waits:
            first = next(iter(self._waits))
            ended = self._ended(first, now)
            if ended is None:
                break
            self.remove(first)
            _wake(first, ended)
        if self._streams and self._next_beat <= now:
            self._next_beat = now + self._heartbeat
            for wait in self._waits:
                if wait.stream:
                    _wake(wait, Outcome.BEAT)
        self._arm()

    async def _polling(self) -> None:
        try:
            while self._waits:
                await asyncio.sleep(self._poll_interval)
                self._readiness.refresh(self._poll_interval)
        finally:
            self._poll = None

    def _ready(self) -> None:
        for wait in self._waits:
            _wake(wait, Outcome.READY)


def _wake(wait: _Wait, outcome: Outcome) -> None:
    """A waiter busy elsewhere (writing a heartbeat) is not sleeping: it sees what changed when it
    asks again."""
    woken, wait.woken = wait.woken, None
    if woken is not None and not woken.done():
        woken.set_result(outcome)


class ColdStart:
    def __init__(
        self,
        config: GatewayConfig,
        readiness: Readiness,
        activation: ActivationWatcher,
        metrics: GatewayMetrics,
        forward: Forward,
    ) -> None:
        self._config = config
        self._readiness = readiness
        self._activation = activation
        self._metrics = metrics
        self._forward = forward
        self._waits = ColdWaits(
            readiness,
            config.held_readiness_interval,
            config.heartbeat_interval,
            config.activation_timeout,
        )

    def handle(
        self, scope: dict[str, Any], channel: ClientChannel, body: bytes, send: Send, openai: bool
    ) -> Coroutine[Any, Any, None]:
        """The coroutine that answers a cold request, `body` its whole body, already read. It is
        handed back rather than awaited here: a held stream keeps one frame less."""
        self._activation.cold_request()
        if self._config.coldstart_mode is ColdStartMode.REJECT:
            return self._refuse(send, COLD_START, "cold_start", openai)
        if is_streaming_request(scope["method"], body, self._config.peek_limit):
            return self._stream_wait(scope, channel, body, send, openai)
        return self._wait(scope, channel, body, send, openai)

    async def close(self) -> None:
        await self._waits.close()

    def end_waits_at(self, when: float) -> None:
        """Draining: every wait still running at `when` (event-loop time), and every later one,
        ends then, before the server's forced close would cut it off without an answer."""
        self._waits.end_waits_at(when)

    async def _wait(
        self, scope: dict[str, Any], channel: ClientChannel, body: bytes, send: Send, openai: bool
    ) -> None:
        wait = self._waits.add(stream=False)
        outcome = await self._held(wait, scope, channel, body, send, openai)
        if outcome is Outcome.DRAINED:
            await self._refuse(send, COLD_START, "cold_start", openai)
        elif outcome is Outcome.TIMEOUT:
            await self._refuse(send, ACTIVATION_TIMEOUT, "activation_timeout", openai)

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
        wait = self._waits.add(stream=True)
        outcome = await self._held(wait, scope, channel, body, send, openai)
        if outcome is Outcome.DRAINED:
            self._metrics.reject("cold_start")
            await _end_stream(send, sse_error_frame(COLD_START, openai))
        elif outcome is Outcome.TIMEOUT:
            self._metrics.reject("activation_timeout")
            await _end_stream(send, sse_error_frame(STREAM_TIMEOUT, openai))

    async def _held(
        self,
        wait: _Wait,
        scope: dict[str, Any],
        channel: ClientChannel,
        body: bytes,
        send: Send,
        openai: bool,
    ) -> Outcome | None:
        """Hold the request (a stream gets its heartbeats) until the backend is ready, then
        forward it; the outcome that ended the wait otherwise (None: forwarded, or the client
        left). A backend gone again before the request reached it is waited for anew, within
        the same deadline."""
        start = time.monotonic()
        while True:
            try:
                with channel.gone_cancels():
                    while (outcome := await self._waits.next(wait)) is Outcome.BEAT:
                        await send(_HEARTBEAT_MESSAGE)
            except ClientGone:
                return None
            finally:
                self._waits.remove(wait)
            if outcome is not Outcome.READY:
                return outcome
            waited, proceeded = time.monotonic() - start, True
            try:
                proceeded = await self._forward(scope, channel, body, send, openai, wait.stream)
            finally:
                if proceeded:
                    self._metrics.activation_wait.observe(waited)
            if proceeded:
                return None
            self._waits.resume(wait)

    async def _refuse(self, send: Send, error: GatewayError, reason: str, openai: bool) -> None:
        await send_error(send, error, openai)
        self._metrics.count_response(error.status)
        self._metrics.reject(reason)


async def _end_stream(send: Send, frame: bytes) -> None:
    await send({"type": "http.response.body", "body": frame, "more_body": False})
