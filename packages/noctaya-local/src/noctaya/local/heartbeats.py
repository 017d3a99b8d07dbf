"""Held streams told what is happening: the gateway's heartbeat comments, rewritten on their way
to the client into `: noctaya: <phase>` (`stopping qwen`, `starting`, `loading 12s`), and a
comment of their own as soon as a stream is held and whenever the phase changes.

They stay SSE comments, which no client parses as content. A stream is rewritten only while it
is held: from a `200 text/event-stream` head until the first byte that is not a heartbeat; from
there on its bytes pass untouched. Comments are only ever written between whole frames.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from noctaya.gateway.requests.coldstart import HEARTBEAT
from noctaya.gateway.requests.responses import Message, Send
from noctaya.local.service_view import Phase

PREFIX = b": noctaya: "
_READY = Phase("ready", "ready")
"""A heartbeat the gateway sent before it saw the engine ready, when local mode already has."""


def comment(text: str) -> bytes:
    return PREFIX + text.encode("utf-8", errors="replace") + b"\n\n"


class PhaseStream:
    """The client's side of one proxied exchange: `send` for the proxy, `announce` for phase
    changes."""

    def __init__(self, send: Send, phase: Callable[[], Phase | None]) -> None:
        self._send = send
        self._phase = phase
        self._lock = asyncio.Lock()
        self.holding = False
        self._partial = b""  # the start of a heartbeat frame, until the rest arrives
        self._announced: str | None = None

    async def send(self, message: Message) -> None:
        async with self._lock:
            if message["type"] == "http.response.start":
                self.holding = message["status"] == 200 and _is_event_stream(message)
                await self._send(message)
                if self.due():
                    await self._say()
                return
            if message["type"] == "http.response.body" and self.holding:
                message = {**message, "body": self._rewrite(message)}
            await self._send(message)

    def close(self) -> None:
        """The exchange is over: nothing more is announced."""
        self.holding = False

    def due(self) -> bool:
        """Whether `announce` would say something: a held client, told another kind of phase."""
        if not self.holding or self._partial:
            return False
        phase = self._phase()
        return phase is not None and phase.kind != self._announced

    async def announce(self) -> None:
        """Tell a held client the phase now, if its kind changed since it was last told."""
        async with self._lock:
            if self.due():
                await self._say()

    async def _say(self) -> None:
        phase = self._phase()
        if phase is not None:
            self._announced = phase.kind
            await self._send(
                {"type": "http.response.body", "body": comment(phase.text), "more_body": True}
            )

    def _rewrite(self, message: Message) -> bytes:
        body: bytes = message.get("body", b"")
        data = self._partial + body
        self._partial = b""
        told = []
        while data.startswith(HEARTBEAT):
            phase = self._phase() or _READY
            self._announced = phase.kind
            told.append(comment(phase.text))
            data = data[len(HEARTBEAT) :]
        if data and HEARTBEAT.startswith(data) and message.get("more_body", False):
            self._partial, data = data, b""
        elif data:
            self.holding = False
        return b"".join(told) + data


def _is_event_stream(message: Message) -> bool:
    return any(
        name.lower() == b"content-type" and value.startswith(b"text/event-stream")
        for name, value in message.get("headers", ())
    )
