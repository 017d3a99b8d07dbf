"""What hypercorn feeds each request's `receive()` from.

Hypercorn 0.18 gives every request an `asyncio.Queue` (four deques and an event, about 2.9 KiB
kept for as long as the request lasts: a held cold stream keeps it for minutes) and two callables
for synchronous (WSGI) apps, which an ASGI app never calls. `ReceiveQueue` keeps asyncio.Queue's
behaviour for what hypercorn and the app do with it (bounded puts that wait, FIFO gets, waiters
woken in order and cancellable) in one short list, with waiter lists made only when someone
waits.
It also tells the app of a disconnect as it is reported, so that no task per request has to
wait in `receive()` to notice one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.asyncio.task_group import TaskGroup, _handle
from hypercorn.config import Config
from hypercorn.typing import AppWrapper, ASGIFramework, ASGIReceiveEvent, ASGISendEvent, Scope

_DISCONNECT = "http.disconnect"


class ReceiveQueue:
    """Called, it is the request's `receive()`."""

    __slots__ = ("_getters", "_items", "_maxsize", "_on_disconnect", "_putters")

    def __init__(self, maxsize: int) -> None:
        self._items: list[ASGIReceiveEvent] = []  # a message or two: a deque is ~0.7 KiB
        self._maxsize = maxsize
        self._getters: list[asyncio.Future[None]] | None = None
        self._putters: list[asyncio.Future[None]] | None = None
        self._on_disconnect: Callable[[], None] | None = None

    def on_disconnect(self, callback: Callable[[], None] | None) -> None:
        """Call `callback` once the server reports the client gone (at once if it already has),
        so that nobody needs to wait in `receive()` for it; None stops it."""
        self._on_disconnect = callback
        if callback is not None and any(item["type"] == _DISCONNECT for item in self._items):
            callback()

    async def put(self, item: ASGIReceiveEvent) -> None:
        while 0 < self._maxsize <= len(self._items):
            if self._putters is None:
                self._putters = []
            await _wait(self._putters, lambda: len(self._items) < self._maxsize)
        self._items.append(item)
        _wake_next(self._getters)
        if item["type"] == _DISCONNECT and self._on_disconnect is not None:
            self._on_disconnect()

    async def get(self) -> ASGIReceiveEvent:
        while not self._items:
            if self._getters is None:
                self._getters = []
            await _wait(self._getters, lambda: bool(self._items))
        item = self._items.pop(0)
        _wake_next(self._putters)
        return item

    __call__ = get


async def _wait(waiters: list[asyncio.Future[None]], ready: Callable[[], bool]) -> None:
    """Wait in line; a waiter woken but cancelled passes its turn on (as asyncio.Queue's do)."""
    waiter = asyncio.get_running_loop().create_future()
    waiters.append(waiter)
    try:
        await waiter
    except BaseException:
        waiter.cancel()
        with contextlib.suppress(ValueError):  # else already woken and taken off the line
            waiters.remove(waiter)
        if ready() and not waiter.cancelled():
            _wake_next(waiters)
        raise


def _wake_next(waiters: list[asyncio.Future[None]] | None) -> None:
    while waiters:
        waiter = waiters.pop(0)
        if not waiter.done():
            waiter.set_result(None)
            return


def _no_sync_calls(*args: Any) -> Any:
    raise RuntimeError("the gateway serves an ASGI app: nothing runs synchronously")


async def _spawn_app(
    self: TaskGroup,
    app: AppWrapper,
    config: Config,
    scope: Scope,
    send: Callable[[ASGISendEvent | None], Awaitable[None]],
) -> Callable[[ASGIReceiveEvent], Awaitable[None]]:
    queue = ReceiveQueue(config.max_app_queue_size)
    if type(app) is ASGIWrapper:
        self.spawn(_run_asgi, app.app, config, scope, queue, send)
    else:
        self.spawn(_handle, app, config, scope, queue, send, _no_sync_calls, _no_sync_calls)
    return queue.put


async def _run_asgi(
    app: ASGIFramework,
    config: Config,
    scope: Scope,
    receive: ReceiveQueue,
    send: Callable[[ASGISendEvent | None], Awaitable[None]],
) -> None:
    """Hypercorn's `_handle` for an ASGI app, calling it directly instead of through its
    wrapper: one coroutine frame less, kept as long as the request (minutes, for a cold
    stream)."""
    try:
        await app(scope, receive, send)
    except asyncio.CancelledError:
        raise
    except Exception:
        await config.log.exception("Error in ASGI Framework")
    finally:
        await send(None)


def install() -> None:
    """Idempotent."""
    TaskGroup.spawn_app = _spawn_app  # type: ignore[method-assign]
