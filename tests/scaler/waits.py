"""Deadline-bounded waiting for state that has no event to await (gauges, process output)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

POLL_INTERVAL = 0.01


async def eventually(condition: Callable[[], object], within: float = 10.0) -> None:
    """Return as soon as `condition()` is truthy; fail if it is not within `within` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        assert loop.time() < deadline, f"condition not reached within {within} s"
        await asyncio.sleep(POLL_INTERVAL)
