"""The queue behind each request's `receive()` behaves as the asyncio.Queue it replaces, for what
hypercorn and the app do with it: bounded puts wait, gets come in order, a waiter cancelled after
being woken passes its turn on (else a message would sit unread while someone waits)."""

from __future__ import annotations

import asyncio

from hypercorn.typing import HTTPRequestEvent
from noctaya.gateway.server.patches.receive_queue import ReceiveQueue

BODY: HTTPRequestEvent = {"type": "http.request", "body": b"", "more_body": False}


def _message(n: int) -> HTTPRequestEvent:
    return {"type": "http.request", "body": b"%d" % n, "more_body": True}


async def _body(queue: ReceiveQueue) -> bytes:
    message = await queue.get()
    assert message["type"] == "http.request"
    return message["body"]


async def test_messages_come_out_in_order() -> None:
    queue = ReceiveQueue(10)
    for n in range(3):
        await queue.put(_message(n))
    assert [await _body(queue) for _ in range(3)] == [b"0", b"1", b"2"]


async def test_a_put_waits_while_the_queue_is_full() -> None:
    queue = ReceiveQueue(2)
    await queue.put(_message(0))
    await queue.put(_message(1))
    third = asyncio.ensure_future(queue.put(_message(2)))
    await asyncio.sleep(0)
    assert not third.done()
    assert await _body(queue) == b"0"
    await asyncio.wait_for(third, 1)
    assert [await _body(queue) for _ in range(2)] == [b"1", b"2"]


async def test_a_waiting_get_is_woken_by_a_put() -> None:
    queue = ReceiveQueue(10)
    getting = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    assert not getting.done()
    await queue.put(BODY)
    assert await asyncio.wait_for(getting, 1) is BODY


async def test_a_getter_cancelled_after_its_wakeup_passes_the_message_on() -> None:
    queue = ReceiveQueue(10)
    first = asyncio.ensure_future(queue.get())
    second = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    await queue.put(BODY)  # wakes `first`
    first.cancel()  # before it ran
    assert await asyncio.wait_for(second, 1) is BODY
    assert first.cancelled()


async def test_a_cancelled_put_leaves_no_waiter_behind() -> None:
    queue = ReceiveQueue(1)
    await queue.put(_message(0))
    blocked = asyncio.ensure_future(queue.put(_message(1)))
    await asyncio.sleep(0)
    blocked.cancel()
    await asyncio.sleep(0)
    assert await _body(queue) == b"0"
    await queue.put(_message(2))
    assert await _body(queue) == b"2"


async def test_a_disconnect_is_told_as_it_is_reported_or_at_once_if_it_was() -> None:
    told: list[str] = []
    queue = ReceiveQueue(10)
    queue.on_disconnect(lambda: told.append("later"))
    await queue.put(BODY)
    assert told == []
    await queue.put({"type": "http.disconnect"})
    assert told == ["later"]
    queue.on_disconnect(None)
    await queue.put({"type": "http.disconnect"})
    assert told == ["later"]
    queue.on_disconnect(lambda: told.append("already"))
    assert told == ["later", "already"]
    assert await queue() is BODY  # called, it is receive(); the messages are all still there
