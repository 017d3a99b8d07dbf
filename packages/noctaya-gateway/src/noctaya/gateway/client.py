"""The client side of one exchange: its request body (bounded) and whether the client is still
there. ASGI reports a disconnect only through `receive()`, which also carries the body, so one
object owns both: it reads the body for whoever forwards it, then watches for the disconnect."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from noctaya.gateway.responses import Receive


class ClientGone(Exception):
    """The client disconnected before the exchange finished."""


class BodyTooLarge(Exception):
    """The request body exceeded the configured maximum."""


class ClientChannel:
    def __init__(self, receive: Receive, limit: int) -> None:
        self._receive = receive
        self._limit = limit
        self._received = 0
        self.body_complete = False
        self.disconnected = False
        self.failure: ClientGone | BodyTooLarge | None = None
        self._gone: asyncio.Event | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._cancel_target: asyncio.Task[object] | None = None
        self._finished = False

    async def next_chunk(self) -> bytes:
        """The next piece of the request body; raises ClientGone or BodyTooLarge."""
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self.disconnected = True
            self.failure = ClientGone()
            raise self.failure
        body: bytes = message.get("body", b"")
        self._received += len(body)
        if self._received > self._limit:
            self.failure = BodyTooLarge()
            raise self.failure
        if not message.get("more_body", False):
            self.body_complete = True
        return body

    async def read_all(self, prefix: bytes = b"") -> bytes:
        chunks = [prefix]
        while not self.body_complete:
            chunks.append(await self.next_chunk())
        return b"".join(chunks)

    async def stream(self, first: bytes) -> AsyncIterator[bytes]:
        """`first`, then the rest of the body as it arrives; starts the watch once it is read."""
        if first:
            yield first
        while not self.body_complete:
            chunk = await self.next_chunk()
            if chunk:
                yield chunk
        self.watch()

    def watch(self) -> None:
        """Start watching for a disconnect; only once the body has been read."""
        if self._watcher is None and self.body_complete and not self.disconnected:
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    def cancel_on_disconnect(self, task: asyncio.Task[object] | None) -> None:
        """Cancel `task` if the client goes away (None stops doing so)."""
        self._cancel_target = task
        if task is not None and self.disconnected:
            task.cancel()

    async def wait_gone(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking early (True) if the client disconnects."""
        if self.disconnected:
            return True
        if self._gone is None:
            self._gone = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._gone.wait()
        return self.disconnected

    def finish(self) -> None:
        """The exchange is over: stop watching (the server's own closing disconnect is moot)."""
        self._finished = True
        self._cancel_target = None
        if self._watcher is not None and not self._watcher.done():
            self._watcher.cancel()

    async def _watch(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        if self._finished:
            return
        self.disconnected = True
        if self._gone is not None:
            self._gone.set()
        if self._cancel_target is not None:
            self._cancel_target.cancel()
