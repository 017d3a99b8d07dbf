"""A deadline on each HTTP/1.1 request head, apart from the keep-alive budget.

Hypercorn 0.18 has one timer for a connection with no request in progress: 120 s here, so that
proxies pooling idle connections do not race a close. Unpatched, a head still arriving gets as
long, so a client trickling header bytes holds its connection, its task and up to
`h11_max_incomplete_size` of buffer for two minutes, and one peer could hold thousands. Here a
head must be complete within `HEAD_TIMEOUT` of its first byte arriving (10 s, the reference
implementation's header timeout); past that the connection is closed without an answer, since
h11 can answer only a request it has read. Idle connections keep the keep-alive budget. The
protocol also answers the heads h11 refuses in the shape of their route (`framing_refusals`),
and frames a chunked body's chunks itself (`body_frames`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import hypercorn.protocol
from hypercorn.events import Closed, Event, RawData
from noctaya.gateway.server.patches.body_frames import BodyFramesH11Protocol
from noctaya.gateway.server.patches.framing_refusals import FramingRefusalsH11Protocol

HEAD_TIMEOUT = 10.0
"""Seconds from a request head's first byte to its end."""


class GatewayH11Protocol(FramingRefusalsH11Protocol, BodyFramesH11Protocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None

    async def handle(self, event: Event) -> None:
        try:
            await super().handle(event)
        except BaseException:  # handed over to HTTP/2, or failed: the deadline is not ours
            self._disarm()
            raise
        if self.stream is None and isinstance(event, RawData) and event.data:
            if self._head_deadline is None:  # the head's first bytes
                loop = asyncio.get_running_loop()
                self._head_deadline = loop.call_later(HEAD_TIMEOUT, self._head_late)
        else:
            self._disarm()  # a request is in progress, or the connection is over

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_late(self) -> None:
        self._head_deadline = None
        if self.stream is None:
            self.task_group.spawn(self.send, Closed())


def install() -> None:
    """Serve HTTP/1.1 with `GatewayH11Protocol`."""
    hypercorn.protocol.H11Protocol = GatewayH11Protocol  # type: ignore[attr-defined]
