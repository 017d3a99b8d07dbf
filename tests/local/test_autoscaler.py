"""The local autoscaler's KEDA semantics, driven by a scripted activity feed and real processes.

The feed stands in for the gateway's StreamIsActive (covered end to end elsewhere) so cooldown
edges can be tested at second scale; the engine is a real child process each time.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from noctaya.core.plan.autoscaling import AutoscalingPlan
from noctaya.gateway.local.autoscaler import autoscale
from noctaya.gateway.local.engine import EngineReplica
from noctaya.gateway.local.plan import EnginePlan

from .support import kill_pid_in, output_holder, pid_exists

SLEEPER = (sys.executable, "-c", "import time; time.sleep(120)")
DEADLINE = 10.0


def scaling(min_replicas: int = 0, cooldown: int = 1) -> AutoscalingPlan:
    return AutoscalingPlan(min_replicas, 1, 1, cooldown, None, None)


async def feed(states: asyncio.Queue[bool]) -> AsyncIterator[bool]:
    while True:
        yield await states.get()


async def eventually(condition: Callable[[], bool], within: float = DEADLINE) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


class Scaler:
    """autoscale() on a queue-fed activity stream, stopped (engine included) on exit."""

    def __init__(self, plan: AutoscalingPlan, argv: tuple[str, ...] = SLEEPER) -> None:
        engine = EnginePlan(argv=argv, env={}, port=0, stop_grace_seconds=5)
        self.replica = EngineReplica(engine, os.environ)
        self.states: asyncio.Queue[bool] = asyncio.Queue()
        self.plan = plan

    async def __aenter__(self) -> Scaler:
        self.task = asyncio.ensure_future(autoscale(feed(self.states), self.replica, self.plan))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.replica.scale(0)

    def pid(self) -> int | None:
        return self.replica.process.pid if self.replica.process else None


async def test_demand_starts_the_engine_and_inactivity_stops_it_after_the_cooldown() -> None:
    async with Scaler(scaling(cooldown=1)) as scaler:
        await scaler.states.put(False)
        await scaler.states.put(True)
        await eventually(lambda: scaler.pid() is not None)
        pid = scaler.pid()
        assert pid is not None
        inactive_at = time.monotonic()
        await scaler.states.put(False)
        await eventually(lambda: scaler.replica.replicas == 0)
        assert time.monotonic() - inactive_at >= 0.9
        assert not pid_exists(pid)


async def test_demand_returning_within_the_cooldown_keeps_the_same_engine() -> None:
    async with Scaler(scaling(cooldown=1)) as scaler:
        await scaler.states.put(True)
        await eventually(lambda: scaler.pid() is not None)
        pid = scaler.pid()
        await scaler.states.put(False)
        await scaler.states.put(True)
        await asyncio.sleep(1.5)  # longer than the cooldown: nothing may happen in it
        assert scaler.pid() == pid
        await scaler.states.put(False)
        await eventually(lambda: scaler.replica.replicas == 0)


async def test_a_replayed_state_after_a_reconnect_does_not_restart_the_cooldown() -> None:
    async with Scaler(scaling(cooldown=1)) as scaler:
        await scaler.states.put(True)
        await eventually(lambda: scaler.pid() is not None)
        inactive_at = time.monotonic()
        await scaler.states.put(False)
        await asyncio.sleep(0.6)
        await scaler.states.put(False)  # what a reconnecting stream sends first
        await eventually(lambda: scaler.replica.replicas == 0)
        assert time.monotonic() - inactive_at < 1.5


async def test_min_one_runs_the_engine_without_demand_and_never_scales_it_to_zero() -> None:
    async with Scaler(scaling(min_replicas=1, cooldown=0)) as scaler:
        await eventually(lambda: scaler.pid() is not None)
        pid = scaler.pid()
        await scaler.states.put(True)
        await scaler.states.put(False)
        await asyncio.sleep(0.5)
        assert scaler.pid() == pid


async def test_an_engine_that_exits_is_started_again_after_a_back_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="noctaya.local")
    crashing = (sys.executable, "-c", "raise SystemExit(3)")
    async with Scaler(scaling(), argv=crashing) as scaler:
        await scaler.states.put(True)

        def starts() -> int:
            return sum(r.getMessage().startswith("engine started") for r in caplog.records)

        await eventually(lambda: starts() >= 2)
    messages = [record.getMessage() for record in caplog.records]
    assert any("exited on its own: exit code 3" in message for message in messages)
    assert "restarting the engine in 1s" in messages


async def test_an_engine_that_exits_leaving_its_output_open_is_started_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A child that escaped into its own session keeps the output pipe open after the engine
    exits; the supervisor must not wait for that pipe to close before restarting."""
    caplog.set_level(logging.INFO, logger="noctaya.local")
    holder = tmp_path / "holder.pid"
    script = (
        f"[ -e {holder} ] || {output_holder(holder)} &\n"
        f"until [ -e {holder} ]; do sleep 0.05; done\n"
        "exit 3\n"
    )
    leaving = ("/bin/sh", "-c", script)
    try:
        async with asyncio.timeout(3 * DEADLINE), Scaler(scaling(), argv=leaving) as scaler:
            await scaler.states.put(True)

            def starts() -> int:
                return sum(r.getMessage().startswith("engine started") for r in caplog.records)

            await eventually(lambda: starts() >= 2 and holder.exists())
    finally:
        kill_pid_in(holder)
