"""Is a backend ready? `GET <backend><path>` == 200 (`/health` unless configured), cached
briefly and probed single-flight.

This is the probe of the backend Service, for a gateway that does not follow the backend's pods
(`replicas` probes each pod itself when it does): the Service only routes to pods that passed
their model-load readiness probe, so one 200 through it means a ready backend exists. Every
admitted request asks, so the answer is cached and concurrent askers share one probe.

Requests held for a cold backend have it probed more often than the cache lasts (`refresh`):
how soon they learn of readiness is how much the gateway adds to their first token. Such a
probe does not wait behind one that hangs: a connection opened while kube-proxy rewrites the
Service's rules can lose its SYN to a route that is gone a moment later, and TCP retries it on
that same route until the probe times out (2 s). A newer probe, on a new connection, takes
the new route; the newest answer wins, whatever order they end in. A request that finds the
cached answer expired waits for a probe the same way (`ready`): right after a wake, when
those rules change, it would otherwise wait out the one probe it found.

A backend found not ready leaves no idle connection in the pool: those lead to a backend that
has gone (a pod scaled away), and the first request after the next wake must take the
connection the probe that found it ready opened, not one of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from noctaya.core.plan.gateway_env import DEFAULT_BACKEND_READINESS_PATH
from noctaya.gateway.upstream import UpstreamError, UpstreamPool
from noctaya.gateway.upstream.pool import SYN_ANSWER_SECONDS

if TYPE_CHECKING:  # only an annotation: the gateway imports no more of the core for it
    from noctaya.core.ports import Clock

MIN_PROBES = 4
"""Probes that may hang at once, at least. As many are allowed as start, one per `retry`,
within the time a connection waits for its SYN to be answered (`SYN_ANSWER_SECONDS`): while
kube-proxy rewrites the Service's rules, every SYN may be lost for a while, and each poll must
still try a new socket."""


class Readiness(Protocol):
    """What the request path asks of the backend's readiness: a `ReadinessProbe` of the
    Service, or `Replicas` while the gateway follows the backend's pods."""

    on_ready: Callable[[], None] | None

    def cached_ready(self) -> bool: ...

    async def ready(self) -> bool: ...

    def refresh(self, max_age: float) -> None: ...


class ReadinessProbe:
    def __init__(
        self,
        pool: UpstreamPool,
        *,
        path: str = DEFAULT_BACKEND_READINESS_PATH,
        interval: float = 0.5,
        timeout: float = 2.0,
        retry: float = 0.05,
        clock: Clock = time.monotonic,
    ) -> None:
        self._pool = pool
        self._target = pool.path_prefix + path.encode("ascii")
        self._interval = interval
        self._retry = retry
        self._max_probes = max(MIN_PROBES, math.ceil(SYN_ANSWER_SECONDS / retry) + 1)
        self._timeout = timeout
        self._clock = clock
        self._ready = False
        self._probed_at = float("-inf")  # when the cached answer came
        self._answer_began = float("-inf")  # when the probe that gave it began
        self._probes: dict[asyncio.Task[bool], float] = {}  # in flight, with when each began
        self._newest: asyncio.Task[bool] | None = None
        self.on_ready: Callable[[], None] | None = None
        """Called when a probe finds the backend ready (the cold waits wake on it)."""

    def cached_ready(self) -> bool:
        """True only if a fresh cached probe said ready: the warm path's await-free check."""
        return self._ready and self._clock() < self._probed_at + self._interval

    def forget(self) -> None:
        """The backend was found gone (a request could not connect): the next asker probes."""
        self._ready = False
        self._probed_at = float("-inf")

    async def ready(self) -> bool:
        """The cached answer while it lasts, else the first answer to come from then on: from
        the probe in flight (one started if none is), or from another started every `retry`
        seconds while none answers."""
        asked = self._clock()
        if asked < self._probed_at + self._interval:
            return self._ready
        if self._newest is None:
            self._start()
        while True:
            # Not cancelled when this caller gives up: the other callers wait for the same probes.
            done, _ = await asyncio.wait(
                set(self._probes), timeout=self._retry, return_when=asyncio.FIRST_COMPLETED
            )
            if self._probed_at >= asked:
                return self._ready
            for probe in done:
                probe.result()  # a probe that failed otherwise than by an answer fails its callers
            self.refresh(self._retry)
            if not self._probes:
                self._start()

    def refresh(self, max_age: float) -> None:
        """Have an answer younger than `max_age` come: a probe is started unless the cached
        answer, or the newest probe in flight, is younger (or as many as allowed are in flight)."""
        now = self._clock()
        if now - self._probed_at < max_age:
            return
        newest = self._newest
        if newest is not None and (
            now - self._probes[newest] < max_age or len(self._probes) >= self._max_probes
        ):
            return
        self._start()

    async def close(self) -> None:
        for probe in list(self._probes):
            probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probe

    def _start(self) -> asyncio.Task[bool]:
        began = self._clock()
        probe = asyncio.ensure_future(self._probe(began))
        self._probes[probe] = began
        self._newest = probe
        probe.add_done_callback(self._ended)
        return probe

    def _ended(self, probe: asyncio.Task[bool]) -> None:
        del self._probes[probe]
        if self._newest is probe:
            self._newest = None

    async def _probe(self, began: float) -> bool:
        ready = False
        try:
            async with (
                asyncio.timeout(self._timeout),
                self._pool.exchange("GET", self._target, []) as response,
            ):
                await response.read()
                ready = response.status == 200
        except UpstreamError:
            ready = False
        if began < self._answer_began:
            return ready  # a newer probe has answered already
        self._answer_began = began
        self._ready = ready
        self._probed_at = self._clock()
        if not ready:
            self._pool.close_idle()
        elif self.on_ready is not None:
            self.on_ready()
        return ready
