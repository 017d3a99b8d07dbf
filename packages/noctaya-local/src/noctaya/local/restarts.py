"""A service whose processes failed on their own is started again after a back-off (1 s,
doubling to 30 s), as a Deployment replaces a failed pod, while the other services serve on; a
service serving for 10 s after a restart starts again at the first back-off."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from noctaya.local import log_lines
from noctaya.local.routes import Route

log = logging.getLogger("noctaya.local")
FIRST_RESTART, MAX_RESTART = 1.0, 30.0
HEALTHY_SERVING = 10.0


@dataclass
class _Backoff:
    delay: float = FIRST_RESTART
    due: float | None = None
    applied_at: float = 0.0


class Restarts:
    def __init__(self) -> None:
        self._services: dict[str, _Backoff] = {}

    def due(self, routes: Iterable[Route], now: float) -> bool:
        """Whether a failed service's back-off is over, so the services are to be applied again
        (which starts what has ended); logs each failed service's back-off as it begins."""
        due = False
        for route in routes:
            state = self._services.setdefault(route.name, _Backoff())
            ended = route.processes.ended
            if not (ended.done() and not ended.cancelled() and ended.exception() is not None):
                if now - state.applied_at >= HEALTHY_SERVING:
                    state.delay = FIRST_RESTART
                continue
            if state.due is None:
                state.due = now + state.delay
                log.info(log_lines.SERVICE_RESTARTING, route.name, state.delay)
            elif now >= state.due:
                state.due, state.applied_at = None, now
                state.delay = min(MAX_RESTART, 2 * state.delay)
                due = True
        return due
