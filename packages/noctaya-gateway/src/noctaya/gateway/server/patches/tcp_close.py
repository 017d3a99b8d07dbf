"""Closing a connection whose client has stopped reading.

Hypercorn closes gracefully: asyncio's transport first flushes what it still holds, and waits for
that without end when the client never reads again, keeping the socket, its kernel buffers and
the connection's task. That is where an HTTP/1.1 response abandoned at the send timeout leaves
its connection; a flush that makes no headway within `FLUSH_BUDGET` is cut short with a reset
(like nginx's `reset_timedout_connection`), which frees the kernel's buffers at once too.
"""

from __future__ import annotations

import asyncio
import socket
import struct

from hypercorn.asyncio.tcp_server import TCPServer

FLUSH_BUDGET = 10.0
"""Seconds a closing connection may take to hand the client what it still has to send."""

_RESET_ON_CLOSE = struct.pack("ii", 1, 0)
"""SO_LINGER on with a zero timeout: close() sends RST and drops what is unsent."""
_graceful_close = TCPServer._close


async def _close(self: TCPServer) -> None:
    async with asyncio.timeout(FLUSH_BUDGET) as flushing:
        await _graceful_close(self)  # swallows the timeout's cancellation itself
    if flushing.expired():
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
        self.writer.transport.abort()


def install() -> None:
    """Idempotent."""
    TCPServer._close = _close  # type: ignore[method-assign]
