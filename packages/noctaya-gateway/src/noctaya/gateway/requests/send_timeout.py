"""A deadline on each response write: a client that stops reading must not hold its slot, its
connection's memory and the backend's work for ever. Over HTTP/1.1 a write waits on the TCP
buffer; over HTTP/2 on the client's flow-control window (see `http2.flow`).

Almost every write is accepted at once, so one timer serves all the writes of an exchange
instead of a timeout armed and cancelled around each: each write notes when it began, and the
timer, when it fires, ends the write still in progress since it was armed, moves on to a later
write in progress, or lapses until the next write arms it again."""

from __future__ import annotations

import asyncio

from noctaya.gateway.requests.responses import Message, Send


class ClientStalled(Exception):
    """The client made no room for a response write within the send timeout."""


class SendDeadline:
    """`send` for one exchange, each write bounded by `seconds`; `close()` when it is over."""

    __slots__ = ("_armed_for", "_began", "_hit", "_loop", "_seconds", "_send", "_task", "_timer")

    def __init__(self, send: Send, seconds: float) -> None:
        self._send = send
        self._seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._began: float | None = None  # when the write in progress began
        self._armed_for = 0.0  # the beginning the timer's expiry is reckoned from
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[object] | None = None
        self._hit = False  # the timer cancelled the writing task

    async def __call__(self, message: Message) -> None:
        self._began = began = self._loop.time()
        # The loop given: without it, asking for the running loop is a getpid() system call
        # on every write.
        self._task = asyncio.current_task(self._loop)
        if self._timer is None:
            self._arm(began)
        try:
            await self._send(message)
        except asyncio.CancelledError:
            if self._hit:
                self._hit = False
                assert self._task is not None
                if self._task.uncancel() == 0:
                    raise ClientStalled(
                        f"no response write accepted for {self._seconds:g}s"
                    ) from None
            raise
        finally:
            self._began = None

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, began: float) -> None:
        self._armed_for = began
        self._timer = self._loop.call_at(began + self._seconds, self._expire)

    def _expire(self) -> None:
        self._timer = None
        began = self._began
        if began is None:
            return
        if began > self._armed_for:
            self._arm(began)
            return
        # The write in progress began no later than the one the timer was armed for.
        assert self._task is not None
        self._hit = True
        self._task.cancel()
