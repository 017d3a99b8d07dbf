"""The activation lease in motion: one watcher task ends the lease at readiness or at its
deadline, whatever the clients that started it do in the meantime."""

from __future__ import annotations

import asyncio
import contextlib

from noctaya.gateway.backend.readiness import Readiness
from noctaya.gateway.requests.admission import DemandTracker


class ActivationWatcher:
    def __init__(self, tracker: DemandTracker, readiness: Readiness, interval: float = 0.5) -> None:
        self._tracker = tracker
        self._lease = tracker.lease
        self._readiness = readiness
        self._interval = interval
        self._task: asyncio.Task[None] | None = None
        self._grace_timer: asyncio.TimerHandle | None = None
        self._closed = False

    def cold_request(self) -> None:
        """Start or renew the lease; the demand floor shows at once."""
        self._lease.renew()
        self._tracker.publish()
        if not self._closed and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._watch())

    async def close(self) -> None:
        self._closed = True
        if self._grace_timer is not None:
            self._grace_timer.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _watch(self) -> None:
        while True:
            if self._lease.expire_if_due():
                self._tracker.publish()
                return
            try:
                async with asyncio.timeout(self._lease.remaining()):
                    ready = await self._readiness.ready()
            except TimeoutError:
                ready = False
            if ready:
                self._lease.end_on_ready()
                self._tracker.publish()
                self._schedule_grace_end()
                return
            # Never past the deadline: the floor ends when the lease does, not up to a
            # readiness interval later.
            await asyncio.sleep(min(self._interval, self._lease.remaining()))

    def _schedule_grace_end(self) -> None:
        if self._grace_timer is not None:
            self._grace_timer.cancel()
        loop = asyncio.get_running_loop()
        self._grace_timer = loop.call_later(self._lease.grace_remaining(), self._grace_ended)

    def _grace_ended(self) -> None:
        self._grace_timer = None
        if self._lease.grace_remaining() > 0:
            # The loop's timer clock may run a hair ahead of the lease clock: try again.
            self._schedule_grace_end()
            return
        self._tracker.publish()
