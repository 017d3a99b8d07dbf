"""When a client connection ends: an idle one after the keep-alive budget, at once when its client
can send nothing more, and at once when the server begins to drain; one with a request in progress
when its client's side ends, as a disconnect.

Hypercorn 0.18 keeps one task per idle period for this, which it cancels, awaits and creates
again twice per request (a fifth of a small request's cost in the server); here a timer stands in
for it, and a task runs only to close a connection.

Hypercorn also stops reading at the client's EOF (or a read error) but leaves an idle connection
to its keep-alive timer, 120 s here: every client that closed after its answer would leave its
socket, its task and about 12 KiB in the gateway for two minutes (4,000 short-lived connections
would hold 4,000 descriptors). Once the client's side is done, an idle connection can never carry
another request, so it is closed at once, over HTTP/1.1 and HTTP/2 alike. With a request in
progress the EOF ends the exchange as a client disconnect, since a half-close is
indistinguishable on the wire from a client that closed and went away. Hypercorn hands that EOF
to h11 too, which, when the body is still arriving, makes it a malformed request answered 400 or
not depending on whether the EOF came in the same read as the last bytes: here it is always the
disconnect, and never answered.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any

from hypercorn.asyncio.task_group import TaskGroup
from hypercorn.asyncio.tcp_server import MAX_RECV, TCPServer
from hypercorn.asyncio.worker_context import WorkerContext
from hypercorn.events import Closed, RawData

_init = TCPServer.__init__

_idle_by_context: weakref.WeakKeyDictionary[WorkerContext, set[IdleTimer]] = (
    weakref.WeakKeyDictionary()
)
"""The idle connections of each server, closed together when it begins to drain."""


class IdleTimer:
    """Hypercorn's `SingleTask` for a connection's idle period (`TCPServer.idle_task`)."""

    __slots__ = ("_closing", "_idle", "_server", "_task_group", "_timer")

    def __init__(self, server: TCPServer) -> None:
        self._server = server
        self._idle: set[IdleTimer] | None = None  # its server's idle connections
        self._timer: asyncio.TimerHandle | None = None
        self._task_group: TaskGroup | None = None
        self._closing: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """The connection is idle: no request in progress."""
        return self._timer is not None

    async def restart(self, task_group: TaskGroup, action: Callable[[], Any]) -> None:
        """Begin an idle period (`action` is hypercorn's own idle wait, which this replaces)."""
        await self.stop()
        server = self._server
        if _client_done(server) or server.context.terminated.is_set():
            self._close_in(task_group)
            return
        self._task_group = task_group
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(server.config.keep_alive_timeout, self._expire)
        if self._idle is None:
            self._idle = _idle_of(server.context)
        self._idle.add(self)

    async def stop(self) -> None:
        """A request begins, or the connection is over."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            assert self._idle is not None
            self._idle.discard(self)
        closing, self._closing = self._closing, None
        if closing is not None and not closing.done():
            closing.cancel()  # the close itself is shielded: it goes on
            await asyncio.wait([closing])

    def expire_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._expire()

    def _expire(self) -> None:
        self._timer = None
        assert self._idle is not None
        self._idle.discard(self)
        assert self._task_group is not None
        self._close_in(self._task_group)

    def _close_in(self, task_group: TaskGroup) -> None:
        self._task_group = None
        closing = _close(self._server)
        try:
            self._closing = task_group._task_group.create_task(closing)
        except RuntimeError:  # the group is being torn down, and the connection closes with it
            closing.close()


async def _close(server: TCPServer) -> None:
    await asyncio.shield(server._initiate_server_close())


def _client_done(server: TCPServer) -> bool:
    return server.reader.at_eof() or server.reader.exception() is not None


def _idle_of(context: WorkerContext) -> set[IdleTimer]:
    idle = _idle_by_context.get(context)
    if idle is None:
        idle = _idle_by_context[context] = set()
        asyncio.get_running_loop().create_task(_close_on_drain(context, idle))
    return idle


async def _close_on_drain(context: WorkerContext, idle: set[IdleTimer]) -> None:
    """One task per server: when it begins to drain, its idle connections close at once."""
    await context.terminated.wait()
    for timer in list(idle):
        timer.expire_now()


def _init_connection(self: TCPServer, *args: Any, **kwargs: Any) -> None:
    _init(self, *args, **kwargs)
    self.idle_task = IdleTimer(self)  # type: ignore[assignment]  # the same interface


async def _read_data(self: TCPServer) -> None:
    """Hypercorn's read loop, but for the EOF of a request in progress (and without a timeout
    task around each read when there is no read timeout)."""
    reader, protocol, timeout = self.reader, self.protocol, self.config.read_timeout
    idle = self.idle_task
    assert isinstance(idle, IdleTimer)
    while True:
        try:
            if timeout is None:
                data = await reader.read(MAX_RECV)
            else:
                data = await asyncio.wait_for(reader.read(MAX_RECV), timeout)
        except (OSError, TimeoutError):  # SSL and connection errors included
            break
        if not data:  # the client's EOF
            if idle.running:  # no request in progress: h11 may still answer a head cut short
                await protocol.handle(RawData(data))
            break  # else a disconnect (below), not a malformed request
        await protocol.handle(RawData(data))
        # Once handled, a read's bytes are h11's and the app's: kept here too, a cold request
        # held for minutes would keep its prompt twice while this waits for the next read.
        del data
    await protocol.handle(Closed())
    if idle.running:  # idle and the client is done: close now
        idle.expire_now()


def install() -> None:
    """Idempotent."""
    TCPServer.__init__ = _init_connection  # type: ignore[method-assign]
    TCPServer._read_data = _read_data  # type: ignore[method-assign]
