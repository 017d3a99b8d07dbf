"""Gateways start a few at a time.

A gateway's start is a Python process importing its server: a fraction of a second of one core.
Services added together (a folder filled by a script, or served at start-up) would otherwise all
start at once and take every core from local mode's own event loop, so that its endpoints,
`/healthz` included, stalled for as long as the crowd took (64 s for 150 services on two cores).
So at most `STARTING_AT_ONCE` gateways are starting at a time, from their exec until they report
their addresses, fail or are stopped, and the next starts as soon as one of them is through. A
service waiting for its turn is Pending (its gateway has no process yet), and a request for it
waits as for a gateway that is starting.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

STARTING_AT_ONCE = min(8, len(os.sched_getaffinity(0)))
"""One per core local mode may use: a start keeps about one core busy, so this keeps the cores
busy without a crowd of processes in front of local mode's event loop; at most 8, since local
mode spawns each gateway and reads its first lines on that one loop. On two cores, 150 services
added at once all served sooner paced (2 at once) than all at once, and the longest `/healthz`
answer went from 16-26 s to under 0.2 s (`benchmarks/local/many_files.py`)."""


class StartTurns:
    """Turns to start a gateway: `take` one (waiting while all are taken), `give_back` it once
    the start is through."""

    def __init__(self, at_once: int = STARTING_AT_ONCE) -> None:
        self._free = asyncio.Semaphore(at_once)

    async def take(self, stop: asyncio.Event) -> bool:
        """Whether a turn was taken; False if `stop` was set first (no turn is held then)."""
        taken = asyncio.ensure_future(self._free.acquire())
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({taken, stopped}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            self._forgo(taken)
            raise
        finally:
            stopped.cancel()
        if taken.done() and not stop.is_set():
            return True
        self._forgo(taken)
        return False

    def give_back(self) -> None:
        self._free.release()

    def _forgo(self, taken: asyncio.Task[Any]) -> None:
        """A turn not to be used: given back if it was taken, else no longer waited for."""
        if taken.done():
            self._free.release()
        else:
            taken.cancel()
