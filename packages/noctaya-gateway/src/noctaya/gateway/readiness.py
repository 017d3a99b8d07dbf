"""Is a backend ready? `GET <backend><path>` == 200 (`/health` unless configured), cached
briefly and probed single-flight.

The gateway has no Kubernetes credentials; the backend Service only routes to pods that passed
their model-load readiness probe, so one 200 through it means a ready backend exists. Every
admitted request asks, so the answer is cached and concurrent askers share one probe. Requests
held for a cold backend ask more often than the cache lasts (`max_age`): how soon they learn of
readiness is how much the gateway adds to their first token.

A backend found not ready leaves no idle connection in the pool: those lead to a backend that
has gone (a pod scaled away), and the first request after the next wake must take the
connection the probe that found it ready opened, not one of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from noctaya.gateway.upstream import UpstreamError, UpstreamPool


class ReadinessProbe:
    def __init__(
        self,
        pool: UpstreamPool,
        *,
        path: str = "/health",
        interval: float = 0.5,
        timeout: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = pool
        self._target = pool.path_prefix + path.encode("ascii")
        self._interval = interval
        self._timeout = timeout
        self._clock = clock
        self._ready = False
        self._probed_at = float("-inf")
        self._inflight: asyncio.Task[bool] | None = None

    def cached_ready(self) -> bool:
        """True only if a fresh cached probe said ready: the warm path's await-free check."""
        return self._ready and self._clock() < self._probed_at + self._interval

    def forget(self) -> None:
        """The backend was found gone (a request could not connect): the next asker probes."""
        self._ready = False
        self._probed_at = float("-inf")

    async def ready(self, max_age: float | None = None) -> bool:
        """The cached answer if younger than the interval (and `max_age`), else a probe's."""
        age = self._clock() - self._probed_at
        if age < self._interval and (max_age is None or age < max_age):
            return self._ready
        if self._inflight is None:
            self._inflight = asyncio.ensure_future(self._probe())
        # Shielded: one caller giving up must not cancel the probe the others wait for.
        return await asyncio.shield(self._inflight)

    async def close(self) -> None:
        if self._inflight is not None:
            self._inflight.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._inflight

    async def _probe(self) -> bool:
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
        finally:
            self._ready = ready
            self._probed_at = self._clock()
            self._inflight = None
        if not ready:
            self._pool.close_idle()
        return ready
