"""The client side of one exchange: its request body (bounded) and whether the client is still
there. ASGI reports a disconnect through `receive()`, which also carries the body, so one object
owns both: it reads the body for whoever forwards it, then has the server's receive queue tell it
of the disconnect (no task waits in `receive()` for it)."""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Any

from noctaya.gateway.requests.responses import Message, Receive, Send
from noctaya.gateway.server.patches.receive_queue import ReceiveQueue

DRAIN_LIMIT = 1024 * 1024
DRAIN_SECONDS = 1.0


class ClientGone(Exception):
    """The client disconnected before the exchange finished."""


class BodyTooLarge(Exception):
    """The request body exceeded the configured maximum."""


def declared_length(scope: dict[str, Any]) -> int:
    """The request's `Content-Length` (0 when absent or not a number: the body's own framing
    then bounds what is read)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def ambiguous_framing(scope: dict[str, Any]) -> bool:
    """`Content-Length` beside `Transfer-Encoding`: framed by the chunks, but whatever follows on
    the connection may be read differently by someone in front (request smuggling), so none of
    it should be served (RFC 9112)."""
    chunked = length = False
    for name, _ in scope["headers"]:
        if name == b"transfer-encoding":
            chunked = True
        elif name == b"content-length":
            length = True
    return chunked and length


class ClientChannel:
    # One per request, thousands at once while cold streams are held: no per-instance dict.
    __slots__ = (
        "_cancel_target",
        "_finished",
        "_guarded",
        "_limit",
        "_read_done",
        "_reading",
        "_receive",
        "_received",
        "_watching",
        "body_complete",
        "cancelled_on_disconnect",
        "disconnected",
        "failure",
    )

    def __init__(self, receive: Receive, limit: int) -> None:
        self._receive = receive
        self._limit = limit
        self._received = 0
        self.body_complete = False
        self.disconnected = False
        self.failure: ClientGone | BodyTooLarge | None = None
        self._watching = False
        self._cancel_target: asyncio.Task[Any] | None = None
        self.cancelled_on_disconnect = False  # the disconnect cancelled the target task
        self._finished = False
        self._reading = False  # a task is waiting in receive() for the next body message
        self._read_done: asyncio.Event | None = None
        self._guarded: Send | None = None  # what `guard` wraps

    async def _take(self) -> bytes:
        self._reading = True
        try:
            message = await self._receive()
        finally:
            self._reading = False
            if self._read_done is not None:
                self._read_done.set()
        if message["type"] == "http.disconnect":
            self.disconnected = True
            self.failure = ClientGone()
            raise self.failure
        body: bytes = message.get("body", b"")
        self._received += len(body)
        if not message.get("more_body", False):
            self.body_complete = True
        return body

    async def next_chunk(self) -> bytes:
        """The next piece of the request body; raises ClientGone or BodyTooLarge."""
        body = await self._take()
        if self._received > self._limit:
            self.failure = BodyTooLarge()
            raise self.failure
        return body

    async def read_prefix(self, size: int) -> bytes:
        """At least `size` bytes of the body, or all of it if shorter. Small bodies are then
        forwarded whole, with their length known, which costs far less than streaming."""
        chunks: list[bytes] = []
        read = 0
        while not self.body_complete and read < size:
            chunk = await self.next_chunk()
            chunks.append(chunk)
            read += len(chunk)
        return b"".join(chunks)

    async def read_all(self) -> bytes:
        return await self.read_prefix(self._limit + 1)

    def guard(self, send: Send) -> Send:
        """For HTTP/1.1: `send`, except that the last message of a response waits until the
        request body has been read (or `drain` gave up on it). Hypercorn can reuse a connection
        only once the request was read whole, so a response that did not need the body (a
        refusal, an early backend answer) discards the rest first and keeps the connection.
        A bound method rather than a closure: a third of the memory, kept as long as the
        request.
        """
        self._guarded = send
        return self._send_guarded

    async def _send_guarded(self, message: Message) -> None:
        if (
            not self.body_complete
            and message["type"] == "http.response.body"
            and not message.get("more_body", False)
        ):
            await self.drain(DRAIN_LIMIT, DRAIN_SECONDS)
        assert self._guarded is not None
        await self._guarded(message)

    async def drain(self, limit: int, seconds: float) -> None:
        """Discard what is left of the request body, up to `limit` bytes and `seconds`."""
        if self.body_complete or self.disconnected:
            return
        with contextlib.suppress(TimeoutError, ClientGone):
            async with asyncio.timeout(seconds):
                end = self._received + limit
                while not self.body_complete and self._received <= end and not self.disconnected:
                    if self._reading:
                        # The body stream still feeds the backend: let it read, never race it.
                        self._read_done = asyncio.Event()
                        await self._read_done.wait()
                    else:
                        await self._take()

    def watch(self) -> None:
        """Notice a disconnect from now on; only once the body has been read (until then the
        body's reader notices it)."""
        if self._watching or not self.body_complete or self.disconnected:
            return
        queue = self._receive
        assert isinstance(queue, ReceiveQueue), "served by the gateway's hypercorn"
        self._watching = True
        queue.on_disconnect(self._client_gone)

    def cancel_on_disconnect(self, task: asyncio.Task[Any] | None) -> None:
        """Cancel `task` if the client goes away (None stops doing so)."""
        self._cancel_target = task
        if task is not None and self.disconnected:
            self._cancel(task)

    def _cancel(self, task: asyncio.Task[Any]) -> None:
        self.cancelled_on_disconnect = True
        task.cancel()

    def gone_cancels(self) -> ClientChannel:
        """`with channel.gone_cancels():` within the block, a client disconnect cancels this
        task, which leaves the block as ClientGone: waits need no timer or event of their own to
        notice it (`watch()` first). The channel is its own context manager, so a stream held
        for minutes keeps no generator for it."""
        return self

    def __enter__(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.cancel_on_disconnect(task)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.cancel_on_disconnect(None)
        if kind is not None and issubclass(kind, asyncio.CancelledError):
            task = asyncio.current_task()
            assert task is not None
            if self.cancelled_on_disconnect and task.uncancel() == 0:
                self.cancelled_on_disconnect = False
                raise ClientGone() from None

    def finish(self) -> None:
        """The exchange is over: stop watching (the server's own closing disconnect is moot)."""
        self._finished = True
        self._cancel_target = None
        if self._watching:
            self._watching = False
            assert isinstance(self._receive, ReceiveQueue)
            self._receive.on_disconnect(None)  # the queue outlives the exchange

    def _client_gone(self) -> None:
        if self._finished or self.disconnected:
            return
        self.disconnected = True
        if self._cancel_target is not None:
            self._cancel(self._cancel_target)
