"""The per-write send deadline: its outcomes, and that it costs one timer per exchange rather
than one per write (a proxied response is three writes, a stream one per token)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from noctaya.gateway.requests.responses import Message
from noctaya.gateway.requests.send_timeout import ClientStalled, SendDeadline


class _Client:
    """A send that accepts writes at once until `stall` is set, then waits for `room`."""

    def __init__(self) -> None:
        self.stall = False
        self.room = asyncio.Event()
        self.written: list[Message] = []

    async def send(self, message: Message) -> None:
        if self.stall:
            await self.room.wait()
        self.written.append(message)


def _count_timers(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    call_at = loop.call_at

    def counting(when: float, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        armed.append(when)
        return call_at(when, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counting)
    return armed


async def test_writes_accepted_at_once_share_one_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    client = _Client()
    armed = _count_timers(monkeypatch)
    deadline = SendDeadline(client.send, 60)
    for _ in range(100):
        await deadline({"type": "http.response.body", "body": b"x", "more_body": True})
    deadline.close()
    assert len(client.written) == 100
    assert len(armed) == 1


async def test_a_write_the_client_makes_no_room_for_ends_at_the_deadline() -> None:
    client = _Client()
    deadline = SendDeadline(client.send, 0.2)
    await deadline({"type": "http.response.start", "status": 200, "headers": []})
    client.stall = True
    started = asyncio.get_running_loop().time()
    with pytest.raises(ClientStalled, match=r"no response write accepted for 0\.2s"):
        await deadline({"type": "http.response.body", "body": b"x", "more_body": True})
    assert 0.15 <= asyncio.get_running_loop().time() - started < 5
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
    deadline.close()


async def test_each_write_gets_the_whole_budget() -> None:
    """Writes that each take most of the budget never add up to a stall."""
    client = _Client()
    client.stall = True
    deadline = SendDeadline(client.send, 0.3)
    loop = asyncio.get_running_loop()
    for _ in range(4):
        loop.call_later(0.2, client.room.set)
        await deadline({"type": "http.response.body", "body": b"x", "more_body": True})
        client.room.clear()
    deadline.close()
    assert len(client.written) == 4


async def test_a_cancel_from_elsewhere_stays_a_cancel() -> None:
    client = _Client()
    client.stall = True
    deadline = SendDeadline(client.send, 60)
    writing = asyncio.get_running_loop().create_task(
        deadline({"type": "http.response.body", "body": b"x", "more_body": True})
    )
    await asyncio.sleep(0)
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    deadline.close()
