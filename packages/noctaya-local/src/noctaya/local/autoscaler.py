"""Local mode's KEDA: scale the engine 0 → 1 when demand appears, back to 0 after the cooldown.

The meaning of the fields is KEDA's, from the ScaledObject the operator renders:
`scaling.scaleDownStabilization` is the cooldown — the engine stops once demand has been
inactive that long, and any demand in between cancels the countdown; `scaling.min` ≥ 1 keeps the
engine up for good. One machine runs one engine at most (the runtime's port is one address and
the gateway has one backend), so `scaling.max` above 1 is honoured only on a cluster.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from noctaya.core.plan.autoscaling import AutoscalingPlan
from noctaya.core.ports import Clock
from noctaya.local import log_lines
from noctaya.local.engine import EngineReplica

log = logging.getLogger("noctaya.local")


class Cooldown:
    """KEDA's scale-down timing on an injected clock: a countdown that starts when demand turns
    inactive while the engine runs above its floor, and that returning demand cancels."""

    def __init__(self, seconds: float, clock: Clock) -> None:
        self.seconds = seconds
        self._clock = clock
        self._active = False
        self._due: float | None = None

    def observe(self, active: bool, *, above_floor: bool) -> bool:
        """Take one state from the stream; False for a replay, which is not a transition."""
        if active == self._active:
            return False
        self._active = active
        self._due = None if active or not above_floor else self._clock() + self.seconds
        return True

    @property
    def pending(self) -> bool:
        return self._due is not None

    def remaining(self) -> float | None:
        """Seconds left before the scale-down (0 once due); None when none is pending."""
        return None if self._due is None else max(0.0, self._due - self._clock())

    def clear(self) -> None:
        self._due = None


async def autoscale(
    states: AsyncIterator[bool], replica: EngineReplica, plan: AutoscalingPlan, service: str = ""
) -> None:
    """Drive `replica` from the active flags in `states` until cancelled (or `states` ends);
    `service` names it in log lines."""
    floor = min(plan.min_replicas, 1)
    await replica.scale(floor)
    cooldown = Cooldown(plan.cooldown_seconds, asyncio.get_running_loop().time)
    reading = asyncio.ensure_future(anext(states))
    try:
        while True:
            done, _ = await asyncio.wait({reading}, timeout=cooldown.remaining())
            if not done:
                cooldown.clear()
                log.info(log_lines.SCALE_DOWN, service, plan.cooldown_seconds)
                await replica.scale(floor)
                continue
            try:
                active = reading.result()
            except StopAsyncIteration:
                return
            reading = asyncio.ensure_future(anext(states))
            if not cooldown.observe(active, above_floor=replica.replicas > floor):
                continue  # a reconnect replays the state
            if active and replica.replicas == 0:
                log.info(log_lines.SCALE_UP, service)
                await replica.scale(1)
            elif cooldown.pending:
                log.info(log_lines.SCALE_DOWN_PENDING, service, plan.cooldown_seconds)
    finally:
        reading.cancel()
        await asyncio.wait({reading})  # the stream unwinds (and closes its channel) before we end
