"""Response bytes to the client in as few system calls as the exchange allows.

Hypercorn 0.18 writes an HTTP/1.1 response head, its body and its end as separate socket writes,
each followed by a drain under a lock. On loopback a write is the dearest step of a small
request, so the head now waits for the body's first bytes and goes out with them: in the same
write when the body follows within the same turn of the event loop (a proxied answer read in
one piece), alone at the end of that turn otherwise (a stream whose first token takes time), so
no head waits on the backend. And a write the kernel takes whole has nothing to drain: the lock
and the drain are for writes that left bytes behind.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from hypercorn.asyncio.tcp_server import TCPServer
from hypercorn.events import Closed, Event, RawData
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.typing import H11SendableEvent

_protocol_send = TCPServer.protocol_send


class HeadWithBodyH11Protocol(H11Protocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._write = self.send
        self.send = self._send_after_head
        self._held = b""
        self._held_alone: asyncio.Handle | None = None

    async def _send_h11_event(self, event: H11SendableEvent) -> None:
        if type(event) is not h11.Response:
            await super()._send_h11_event(event)
            return
        try:
            data = self.connection.send(event)
        except h11.LocalProtocolError:
            if self.connection.their_state != h11.ERROR:
                raise
            return
        assert data is not None
        self._held = data
        self._held_alone = asyncio.get_running_loop().call_soon(self._send_head_alone)

    async def _send_after_head(self, event: Event) -> None:
        """Every write and connection event of this protocol: the held head goes first."""
        held = self._held
        if held:
            self._held = b""
            if self._held_alone is not None:
                self._held_alone.cancel()
                self._held_alone = None
            if type(event) is RawData:
                event = RawData(data=held + event.data)
            else:
                await self._write(RawData(data=held))
        await self._write(event)

    def _send_head_alone(self) -> None:
        self._held_alone = None
        if self._held:
            self.task_group.spawn(self._send_after_head, RawData(data=b""))


async def _send_unless_buffered(self: TCPServer, event: Event) -> None:
    if type(event) is RawData and not self.send_lock.locked():
        transport = self.writer.transport
        if not transport.is_closing():
            try:
                transport.write(event.data)
            except (ConnectionError, RuntimeError):  # as hypercorn's own write
                await self.protocol.handle(Closed())
                return
            if not transport.get_write_buffer_size():
                return
            event = RawData(data=b"")  # written; what is left is hypercorn's drain
    await _protocol_send(self, event)


def install() -> None:
    """Writes without a drain when none is needed (`HeadWithBodyH11Protocol` is the base of the
    gateway's HTTP/1.1 protocol). Idempotent."""
    TCPServer.protocol_send = _send_unless_buffered  # type: ignore[method-assign]
