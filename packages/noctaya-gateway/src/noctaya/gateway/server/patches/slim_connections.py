"""What each client connection keeps while it lasts, without a deque it rarely uses.

A held cold stream keeps its connection for minutes, thousands at once. asyncio gives every
`Event` (hypercorn makes one per connection to pause its reads) a deque of about 0.7 KiB,
allocated whether or not anyone ever waits; here its waiters wait in a list made when someone
does.
"""

from __future__ import annotations

import asyncio
import contextlib

from hypercorn.asyncio.worker_context import WorkerContext


class SlimEvent:
    """Hypercorn's asyncio `EventWrapper` with the same behaviour: a set wakes every waiter,
    waiters woken stay woken whatever comes after."""

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._waiters: list[asyncio.Future[None]] | None = None

    async def clear(self) -> None:
        self._set = False

    async def set(self) -> None:
        self._set = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self) -> None:
        if self._set:
            return
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        waiters = self._waiters
        waiters.append(waiter)
        try:
            await waiter
        finally:
            with contextlib.suppress(ValueError):  # else `set` has let go of them all
                waiters.remove(waiter)

    def is_set(self) -> bool:
        return self._set


def install() -> None:
    """Idempotent."""
    WorkerContext.event_class = SlimEvent
