"""Latest-value-wins broadcast of demand to any number of subscribers (KEDA streams, reporters).

Subscribers that fall behind skip intermediate values instead of queueing them: only the newest
demand matters to a scaler, and a slow consumer must never hold memory for a fast producer.
Demand changes with every admitted request, so a change nobody waits for allocates nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator


class DemandFeed:
    def __init__(self, initial: int = 0) -> None:
        self._value = initial
        self._changed: asyncio.Event | None = None  # made by the first subscriber to wait

    def current(self) -> int:
        return self._value

    def publish(self, value: int) -> bool:
        """Record `value`; wake subscribers only if it differs. Returns whether it changed."""
        if value == self._value:
            return False
        self._value = value
        if self._changed is not None:
            self._changed.set()
            self._changed = None
        return True

    async def subscribe(self) -> AsyncIterator[int]:
        """Yield the current value at once, then every later distinct value (coalesced)."""
        last: int | None = None
        while True:
            value = self._value
            if value != last:
                last = value
                yield value
            else:
                if self._changed is None:
                    self._changed = asyncio.Event()
                await self._changed.wait()
