"""A deadline on each response write: a client that stops reading must not hold its slot, its
connection's memory and the backend's work for ever. Over HTTP/1.1 a write waits on the TCP
buffer; over HTTP/2 on the client's flow-control window (see `http2.flow`)."""

from __future__ import annotations

import asyncio

from noctaya.gateway.responses import Message, Send


class ClientStalled(Exception):
    """The client made no room for a response write within the send timeout."""


def with_send_timeout(send: Send, seconds: float) -> Send:
    async def bounded(message: Message) -> None:
        try:
            async with asyncio.timeout(seconds) as deadline:
                await send(message)
        except TimeoutError:
            if deadline.expired():
                raise ClientStalled(f"no response write accepted for {seconds:g}s") from None
            raise

    return bounded
