"""The local autoscaler's KEDA semantics: the cooldown's timing on a FakeClock, and its wiring
driven by a scripted activity feed with a real engine process each time.

The feed stands in for the gateway's StreamIsActive (covered end to end elsewhere). Tests wait
for events with deadlines; none sleeps to see that nothing happens.
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
from noctaya.local import log_lines
from noctaya.local.autoscaler import Cooldown, autoscale
from noctaya.local.engine import EngineReplica
from noctaya.local.plan import EnginePlan
from support.fake_clock import FakeClock

from .support import DEADLINE, kill_pid_in, output_holder, pid_exists

SLEEPER = (sys.executable, "-c", "import time; time.sleep(120)")


def scaling(min_replicas: int = 0, cooldown: int = 1) -> AutoscalingPlan:
    return AutoscalingPlan(min_replicas, 1, 1, cooldown, None, None)


async def feed(states: asyncio.Queue[bool]) -> AsyncIterator[bool]:
    """The queued states; `states.join()` returns once the autoscaler has read every one and asked
    for the next (its decisions on a state are made before it awaits anything)."""
    while True:
        yield await states.get()
        states.task_done()


async def eventually(condition: Callable[[], bool], within: float = DEADLINE) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def count(caplog: pytest.LogCaptureFixture, start: str) -> int:
    """How many `noctaya.local` messages start with `start`."""
    return sum(record.getMessage().startswith(start) for record in caplog.records)


class Scaler:
    """autoscale() on a queue-fed activity stream, stopped (engine included) on exit."""

    def __init__(self, plan: AutoscalingPlan, argv: tuple[str, ...] = SLEEPER) -> None:
        engine = EnginePlan(argv=argv, env={}, port=0, stop_grace_seconds=5)
        self.replica = EngineReplica(engine, os.environ, service="svc")
        self.states: asyncio.Queue[bool] = asyncio.Queue()
        self.plan = plan

    async def __aenter__(self) -> Scaler:
        self.task = asyncio.ensure_future(
            autoscale(feed(self.states), self.replica, self.plan, "svc")
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.replica.scale(0)

    def pid(self) -> int | None:
        return self.replica.process.pid if self.replica.process else None


def test_the_cooldown_runs_from_the_moment_demand_turns_inactive() -> None:
    clock = FakeClock()
    cooldown = Cooldown(30, clock)
    assert cooldown.observe(True, above_floor=False)
    assert cooldown.remaining() is None
    clock.advance(100)
    assert cooldown.observe(False, above_floor=True)
    assert cooldown.remaining() == 30
    clock.advance(29.9)
    assert cooldown.remaining() == pytest.approx(0.1)
    clock.advance(0.1)
    assert cooldown.remaining() == 0


def test_demand_returning_within_the_cooldown_cancels_it() -> None:
    clock = FakeClock()
    cooldown = Cooldown(30, clock)
    cooldown.observe(True, above_floor=False)
    cooldown.observe(False, above_floor=True)
    clock.advance(29)
    assert cooldown.observe(True, above_floor=True)
    assert not cooldown.pending
    clock.advance(3600)
    assert cooldown.remaining() is None


def test_a_replayed_state_does_not_restart_the_cooldown() -> None:
    clock = FakeClock()
    cooldown = Cooldown(1, clock)
    cooldown.observe(True, above_floor=False)
    cooldown.observe(False, above_floor=True)
    clock.advance(0.6)
    assert not cooldown.observe(False, above_floor=True), "what a reconnecting stream sends first"
    assert cooldown.remaining() == pytest.approx(0.4)


def test_no_cooldown_runs_for_an_engine_at_its_floor() -> None:
    cooldown = Cooldown(0, FakeClock())
    cooldown.observe(True, above_floor=False)
    cooldown.observe(False, above_floor=False)
    assert not cooldown.pending


async def test_demand_starts_the_engine_and_inactivity_stops_it_after_the_cooldown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="noctaya.local")
    async with Scaler(scaling(cooldown=1)) as scaler:
        await scaler.states.put(False)
        await scaler.states.put(True)
        await eventually(lambda: scaler.pid() is not None)
        pid = scaler.pid()
        assert pid is not None
        inactive_at = time.monotonic()
        await scaler.states.put(False)
        await eventually(lambda: scaler.replica.replicas == 0)
        assert time.monotonic() - inactive_at >= 0.9, "not before the cooldown"
        assert not pid_exists(pid)
    assert count(caplog, log_lines.SCALE_DOWN_PENDING % ("svc", 1)) == 1
    assert count(caplog, log_lines.SCALE_DOWN % ("svc", 1)) == 1


async def test_demand_returning_within_the_cooldown_keeps_the_same_engine(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="noctaya.local")
    async with Scaler(scaling(cooldown=1)) as scaler:
        await scaler.states.put(True)
        await eventually(lambda: scaler.pid() is not None)
        pid = scaler.pid()
        for state in (False, True, False):
            await scaler.states.put(state)
        await eventually(lambda: scaler.replica.replicas == 0)
    assert count(caplog, "svc: engine started") == 1, f"engine {pid} was never stopped in between"
    assert count(caplog, log_lines.SCALE_DOWN_PENDING % ("svc", 1)) == 2
    assert count(caplog, log_lines.SCALE_DOWN % ("svc", 1)) == 1


async def test_a_replayed_state_after_a_reconnect_starts_no_second_countdown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="noctaya.local")
    async with Scaler(scaling(cooldown=1)) as scaler:
        await scaler.states.put(True)
        await eventually(lambda: scaler.pid() is not None)
        await scaler.states.put(False)
        await scaler.states.put(False)  # what a reconnecting stream sends first
        await eventually(lambda: scaler.replica.replicas == 0)
    assert count(caplog, log_lines.SCALE_DOWN_PENDING % ("svc", 1)) == 1


async def test_min_one_runs_the_engine_without_demand_and_never_scales_it_to_zero(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="noctaya.local")
    async with Scaler(scaling(min_replicas=1, cooldown=0)) as scaler:
        await eventually(lambda: scaler.pid() is not None)
        pid = scaler.pid()
        await scaler.states.put(True)
        await scaler.states.put(False)
        await scaler.states.join()
        assert scaler.pid() == pid
    assert count(caplog, "svc: demand inactive") == 0
    assert count(caplog, "svc: engine started") == 1


async def test_an_engine_that_exits_is_started_again_after_a_back_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="noctaya.local")
    crashing = (sys.executable, "-c", "raise SystemExit(3)")
    async with Scaler(scaling(), argv=crashing) as scaler:
        await scaler.states.put(True)
        await eventually(lambda: count(caplog, "svc: engine started") >= 2)
    messages = [record.getMessage() for record in caplog.records]
    assert any("exited on its own: exit code 3" in message for message in messages)
    assert "svc: restarting the engine in 1s" in messages


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
            await eventually(lambda: count(caplog, "svc: engine started") >= 2 and holder.exists())
    finally:
        kill_pid_in(holder)
