"""Local mode's KEDA: scale the engine 0 → 1 when demand appears, back to 0 after the cooldown.

The meaning of the fields is KEDA's, from the ScaledObject the operator renders (§1.11):
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
from noctaya.gateway.local import log_lines
from noctaya.gateway.local.engine import EngineReplica

log = logging.getLogger("noctaya.local")


async def autoscale(
    states: AsyncIterator[bool], replica: EngineReplica, plan: AutoscalingPlan
) -> None:
    """Drive `replica` from the active flags in `states` until cancelled (or `states` ends)."""
    floor = min(plan.min_replicas, 1)
    await replica.scale(floor)
    loop = asyncio.get_running_loop()
    cooldown = plan.cooldown_seconds
    active = False
    scale_down_at: float | None = None
    reading = asyncio.ensure_future(anext(states))
    try:
        while True:
            timeout = None if scale_down_at is None else max(0.0, scale_down_at - loop.time())
            done, _ = await asyncio.wait({reading}, timeout=timeout)
            if not done:
                scale_down_at = None
                log.info(log_lines.SCALE_DOWN, cooldown)
                await replica.scale(floor)
                continue
            try:
                now_active = reading.result()
            except StopAsyncIteration:
                return
            reading = asyncio.ensure_future(anext(states))
            if now_active == active:
                continue  # a reconnect replays the state; it is not a transition
            active = now_active
            if active:
                scale_down_at = None
                if replica.replicas == 0:
                    log.info(log_lines.SCALE_UP)
                    await replica.scale(1)
            elif replica.replicas > floor:
                scale_down_at = loop.time() + cooldown
                log.info(log_lines.SCALE_DOWN_PENDING, cooldown)
    finally:
        reading.cancel()
        await asyncio.wait({reading})  # the stream unwinds (and closes its channel) before we end
