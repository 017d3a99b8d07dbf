"""Hypercorn's per-connection events, without asyncio.Event's deque, behave as the events they
replace: a set wakes every waiter, a waiter woken stays woken whatever follows, a clear makes
the next wait wait."""

from __future__ import annotations

import asyncio

from noctaya.gateway.server.patches.slim_connections import SlimEvent


async def test_a_set_wakes_every_waiter() -> None:
    event = SlimEvent()
    waiters = [asyncio.ensure_future(event.wait()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(waiter.done() for waiter in waiters)
    await event.set()
    await asyncio.sleep(0)
    await event.clear()  # too late to hold back the waiters already woken
    await asyncio.wait_for(asyncio.gather(*waiters), 1)
    assert not event.is_set()


async def test_a_wait_after_a_clear_waits_again_and_a_set_event_does_not() -> None:
    event = SlimEvent()
    await event.set()
    await asyncio.wait_for(event.wait(), 1)
    await event.clear()
    waiting = asyncio.ensure_future(event.wait())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    await event.set()  # a cancelled waiter is no trouble
    assert event.is_set()
