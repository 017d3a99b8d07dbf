"""Per-connection budgets for HTTP/2 frames that cost the server work but carry no request.

A client can send SETTINGS, PING, PRIORITY, tiny WINDOW_UPDATE, empty DATA or unknown frames
without end, each answered or processed at once (300,000 SETTINGS frames took seconds of the
gateway's only CPU), can open and reset streams faster than any handler finishes (rapid reset,
CVE-2023-44487), and can keep opening streams over the concurrency limit, each one refused.
Like nghttp2 and nginx, the gateway lets a connection spend such frames from a token bucket,
generous for any real client, and ends a connection that overdraws it with GOAWAY
ENHANCE_YOUR_CALM.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import h2.events
from noctaya.gateway.server.patches.http2.stream_scoped import StreamRefused

if TYPE_CHECKING:  # only an annotation: the gateway imports no more of the core for it
    from noctaya.core.ports import Clock

CONTROL_BURST = 10_000
CONTROL_RATE = 1_000.0
"""Control frames per connection: this many at once, refilled at this rate per second."""
RESET_BURST = 1_000
RESET_RATE = 100.0
"""Streams the client resets, or opens only to be refused, per connection (nghttp2 allows
1,000 at once too)."""
SMALL_WINDOW_UPDATE = 4096
"""Real clients batch window updates (Go's client sends none under 4 KiB); smaller ones count
as control frames. Large ones cannot flood: the window overflows 2^31-1 within 2,048 frames."""

_CONTROL_EVENTS = (
    h2.events.RemoteSettingsChanged,
    h2.events.PingReceived,
    h2.events.PingAckReceived,
    h2.events.SettingsAcknowledged,
    h2.events.PriorityUpdated,
    h2.events.UnknownFrameReceived,
)


@dataclass
class TokenBucket:
    burst: float
    rate: float
    tokens: float
    stamp: float

    def take(self, now: float) -> bool:
        """Spend one token; False once the bucket is overdrawn."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate) - 1
        self.stamp = now
        return self.tokens >= 0


class FloodGuard:
    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        now = clock()
        self._control = TokenBucket(CONTROL_BURST, CONTROL_RATE, CONTROL_BURST, now)
        self._resets = TokenBucket(RESET_BURST, RESET_RATE, RESET_BURST, now)

    def allows(self, event: h2.events.Event) -> bool:
        """Charge `event` to its budget; False when the connection has overdrawn it."""
        if isinstance(event, (h2.events.StreamReset, StreamRefused)):
            return self._resets.take(self._clock())
        if _is_control(event):
            return self._control.take(self._clock())
        return True


def _is_control(event: h2.events.Event) -> bool:
    if isinstance(event, _CONTROL_EVENTS):
        return True
    if isinstance(event, h2.events.WindowUpdated):
        return (event.delta or 0) < SMALL_WINDOW_UPDATE
    if isinstance(event, h2.events.DataReceived):
        return not event.data and event.stream_ended is None
    return False
