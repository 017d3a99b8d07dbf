"""Latest-value-wins broadcast of demand to any number of subscribers (KEDA streams, reporters).

Subscribers that fall behind skip intermediate values instead of queueing them: only the newest
demand matters to a scaler, and a slow consumer must never hold memory for a fast producer.
Demand changes with every admitted request, so a change nobody waits for allocates nothing.

A change must reach KEDA within one turn of the event loop, because under load a turn lasts
milliseconds: `publish` resolves each waiting subscriber's own future, which wakes the very task
that pushes the value on. No helper task or `asyncio.wait` sits in between (each would cost a
turn of its own), so a subscription is ended through itself (`Subscription.end`) and a consumer
bounds its wait with `asyncio.timeout`, never by racing it against another awaitable.
"""

from __future__ import annotations

import asyncio


class DemandFeed:
    def __init__(self, initial: int = 0) -> None:
        self._value = initial
        self._waiters: set[asyncio.Future[None]] = set()

    def current(self) -> int:
        return self._value

    def publish(self, value: int) -> bool:
        """Record `value`; wake subscribers only if it differs. Returns whether it changed."""
        if value == self._value:
            return False
        self._value = value
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()
        return True

    def subscribe(self) -> Subscription:
        """The current value at once, then every later distinct value (coalesced)."""
        return Subscription(self)

    async def _changed(self, wake: asyncio.Future[None]) -> None:
        """Wait until the next change, or until someone else resolves `wake`."""
        self._waiters.add(wake)
        try:
            await wake
        finally:
            self._waiters.discard(wake)


class Subscription:
    """One subscriber's position in a feed: an async iterator of distinct values.

    Waiting is cancellation-safe: a cancelled `anext` (a heartbeat timeout) leaves the position
    as it was, so the next call still returns any change it missed.
    """

    def __init__(self, feed: DemandFeed) -> None:
        self._feed = feed
        self._last: int | None = None
        self._wake: asyncio.Future[None] | None = None
        self._ended = False

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> int:
        while not self._ended:
            value = self._feed.current()
            if value != self._last:
                self._last = value
                return value
            self._wake = asyncio.get_running_loop().create_future()
            try:
                await self._feed._changed(self._wake)
            finally:
                self._wake = None
        raise StopAsyncIteration

    def end(self) -> None:
        """Stop iterating: a pending `anext` raises StopAsyncIteration at the next turn."""
        self._ended = True
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
