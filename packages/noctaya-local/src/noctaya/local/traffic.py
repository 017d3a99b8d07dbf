"""What each service's clients are doing, as local mode's endpoint sees it: requests in flight
(held while the engine starts, or being answered, streams until their last byte), when the last
one arrived and when the last one ended.

Every request of a service passes through local mode's endpoint (the gateways listen on private
ports), so these counts are exact: they decide which engine is busy, which one was used least
recently, and which cold service has clients waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from noctaya.core.ports import Clock


class Traffic:
    """One service's requests; kept by name, so it outlives a restart of the service."""

    def __init__(self, on_change: Callable[[], None], clock: Clock = time.monotonic) -> None:
        self._on_change = on_change
        self._clock = clock
        self.in_flight = 0
        self.last_request: float | None = None
        """When the latest request arrived (monotonic clock)."""
        self.last_end: float | None = None
        """When the latest request ended: its response's last byte, or the client leaving."""

    def began(self) -> None:
        self.in_flight += 1
        self.last_request = self._clock()
        self._on_change()

    def ended(self) -> None:
        self.in_flight -= 1
        self.last_end = self._clock()
        self._on_change()


class TrafficBoard:
    """The traffic of every service by name; one callback hears every change."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._listeners: list[Callable[[], None]] = []
        self._services: dict[str, Traffic] = {}

    def of(self, service: str) -> Traffic:
        traffic = self._services.get(service)
        if traffic is None:
            traffic = self._services[service] = Traffic(self._changed, self._clock)
        return traffic

    def listen(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()
