"""The device budget's rules on a FakeClock, with tenants standing in for engines: who gets the
devices, which idle engine is stopped for whom, and which never is. The processes themselves are
covered end to end in test_swaps.py; here each rule is checked in isolation, with the decision
the budget makes the moment something changes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from noctaya.local.devices import DevicePool
from noctaya.local.swaps import DeviceBudget, Grant, Tenant
from noctaya.local.traffic import Traffic
from support.fake_clock import FakeClock

RESIDENCY = 10.0
ACTIVATION = 60.0


class Engine:
    """A tenant and what an engine replica does with it: claim, hold, give back when told."""

    def __init__(self, budget: DeviceBudget, clock: FakeClock, name: str, pool: DevicePool,
                 count: int = 1, *, pinned: bool = False) -> None:  # fmt: skip
        self.traffic = Traffic(budget.changed, clock)
        self.tenant: Tenant = budget.tenant(
            name, f"model-{name}", pool, count, pinned=pinned, traffic=self.traffic,
            activation_timeout=ACTIVATION,
        )  # fmt: skip
        self.tenant.preempt = self._preempted
        self.swapped_out = 0
        self.claim: asyncio.Task[Grant] | None = None

    def _preempted(self) -> None:
        self.swapped_out += 1

    def request(self) -> None:
        """A request arrives (and stays in flight until `answered`)."""
        self.traffic.began()

    def answered(self) -> None:
        self.traffic.ended()

    async def wants(self) -> None:
        """Its replica claims the devices."""
        self.claim = asyncio.ensure_future(self.tenant.acquire())
        await asyncio.sleep(0)

    @property
    def holds(self) -> tuple[str, ...]:
        return self.tenant.grant.ids if self.tenant.grant is not None else ()

    def ready(self) -> None:
        self.tenant.became_ready()

    async def gone(self) -> None:
        """Its process group is gone (after a swap-out, or a stop): the devices are free."""
        assert self.tenant.grant is not None
        self.tenant.grant.release()
        await asyncio.sleep(0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def budget(clock: FakeClock) -> Iterator[DeviceBudget]:
    made = DeviceBudget(RESIDENCY, clock)
    yield made
    made.close()


def gpus(*ids: str) -> DevicePool:
    return DevicePool("nvidia", ids, "CUDA_VISIBLE_DEVICES", "test")


async def warm(engine: Engine, clock: FakeClock, *, idle_for: float = RESIDENCY) -> None:
    """Claimed, granted, ready, served one request, then idle for `idle_for` seconds."""
    engine.request()
    await engine.wants()
    assert engine.holds
    engine.ready()
    engine.answered()
    clock.advance(idle_for)


async def test_free_devices_are_granted_with_the_vendor_variable(
    budget: DeviceBudget, clock: FakeClock
) -> None:
    pool = gpus("0", "1")
    first, second = Engine(budget, clock, "a", pool), Engine(budget, clock, "b", pool)
    first.request()
    second.request()
    await first.wants()
    await second.wants()
    assert (first.holds, second.holds) == (("0",), ("1",))
    assert first.claim is not None
    assert (await first.claim).env == {"CUDA_VISIBLE_DEVICES": "0"}


async def test_a_cold_model_with_a_request_stops_the_idle_engine_and_then_gets_its_device(
    budget: DeviceBudget, clock: FakeClock
) -> None:
    pool = gpus("0")
    holder, cold = Engine(budget, clock, "a", pool), Engine(budget, clock, "b", pool)
    await warm(holder, clock)
    cold.request()
    await cold.wants()
    assert holder.swapped_out == 1
    assert cold.tenant.phase() == "stopping model-a"
    assert not cold.holds, "not before the holder's process is gone"
    await holder.gone()
    assert cold.holds == ("0",)
    assert holder.tenant.swaps == 1


async def test_an_engine_serving_or_holding_requests_is_never_stopped(
    budget: DeviceBudget, clock: FakeClock
) -> None:
    pool = gpus("0")
    holder, cold = Engine(budget, clock, "a", pool), Engine(budget, clock, "b", pool)
    await warm(holder, clock)
    holder.request()  # a long stream
    cold.request()
    await cold.wants()
    clock.advance(3600)
    budget.changed()
    assert holder.swapped_out == 0
    assert cold.tenant.phase() == "waiting for model-a"
    holder.answered()  # the stream's last byte: idle from now
    assert holder.swapped_out == 1


async def test_the_minimum_residency_holds_a_model_that_just_became_ready(
    budget: DeviceBudget, clock: FakeClock
) -> None:
    pool = gpus("0")
    holder, cold = Engine(budget, clock, "a", pool), Engine(budget, clock, "b", pool)
    await warm(holder, clock, idle_for=RESIDENCY - 1)
    cold.request()
    await cold.wants()
    assert holder.swapped_out == 0
    clock.advance(1)
    budget.changed()  # what the residency timer does when it ends
    assert holder.swapped_out == 1


async def test_a_loading_engine_is_not_stopped_even_when_its_client_left(
    budget: DeviceBudget, clock: FakeClock
) -> None:
    pool = gpus("0")
    loading, cold = Engine(budget, clock, "a", pool), Engine(budget, clock, "b", pool)
    loading.request()
    await loading.wants()
    loading.answered()  # the client disconnected; the load goes on for whoever comes next
    clock.advance(3600)
    cold.request()
    await cold.wants()
    assert loading.swapped_out == 0
    assert cold.tenant.phase() == "waiting for model-a"


async def test_a_pinned_engine_is_never_swapped_out(budget: DeviceBudget, clock: FakeClock) -> None:
    pool = gpus("0")
    pinned, cold = Engine(budget, clock, "a", pool, pinned=True), Engine(budget, clock, "b", pool)
    await warm(pinned, clock, idle_for=3600)
    cold.request()
    await cold.wants()
    assert pinned.swapped_out == 0
    assert cold.tenant.phase() == "waiting for model-a"


async def test_the_least_recently_used_idle_engine_goes_first(
    budget: DeviceBudget, clock: FakeClock
) -> None:
    pool = gpus("0", "1")
    older, newer = Engine(budget, clock, "a", pool), Engine(budget, clock, "b", pool)
    cold = Engine(budget, clock, "c", pool)
    await warm(older, clock, idle_for=5)
    await warm(newer, clock, idle_for=RESIDENCY)
    older.request()  # used again later than `newer`
    older.answered()
    clock.advance(RESIDENCY)
    cold.request()
    await cold.wants()
    assert (older.swapped_out, newer.swapped_out) == (0, 1)


async def test_none_is_stopped_when_they_would_not_free_enough(
    budget: DeviceBudget, clock: FakeClock
) -> None:
    pool = gpus("0", "1")
    idle, busy = Engine(budget, clock, "a", pool), Engine(budget, clock, "b", pool)
    big = Engine(budget, clock, "c", pool, count=2)
    await warm(idle, clock)
    await warm(busy, clock)
    busy.request()
    big.request()
    await big.wants()
    assert idle.swapped_out == 0, "stopping it alone would not make room"
    busy.answered()
    assert (idle.swapped_out, busy.swapped_out) == (1, 1)
    await idle.gone()
    await busy.gone()
    assert sorted(big.holds) == ["0", "1"]


async def test_a_swapped_out_engine_takes_nothing_until_it_is_asked_for_again(
    budget: DeviceBudget, clock: FakeClock
) -> None:
    pool = gpus("0")
    first, second = Engine(budget, clock, "a", pool), Engine(budget, clock, "b", pool)
    await warm(first, clock)
    second.request()
    await second.wants()
    await first.gone()
    await first.wants()  # its replica claims again right away
    second.answered()
    await second.gone()  # the device is free: still not for a model nobody asked for
    assert not first.holds
    assert first.tenant.phase() is None
    first.request()
    assert first.holds == ("0",)


async def test_claims_are_served_in_the_order_they_came(
    budget: DeviceBudget, clock: FakeClock
) -> None:
    pool = gpus("0")
    holder = Engine(budget, clock, "a", pool)
    early, late = Engine(budget, clock, "b", pool), Engine(budget, clock, "c", pool)
    await warm(holder, clock, idle_for=0)
    early.request()
    await early.wants()
    clock.advance(1)
    late.request()
    await late.wants()
    clock.advance(RESIDENCY)
    budget.changed()
    await holder.gone()
    assert (early.holds, late.holds) == (("0",), ())
    assert late.tenant.phase() == "waiting for model-b"


async def test_a_claim_cancelled_as_it_is_granted_gives_the_devices_back(
    budget: DeviceBudget, clock: FakeClock
) -> None:
    pool = gpus("0")
    holder, cold = Engine(budget, clock, "a", pool), Engine(budget, clock, "b", pool)
    await warm(holder, clock)
    cold.request()
    await cold.wants()
    assert cold.claim is not None
    assert holder.tenant.grant is not None
    holder.tenant.grant.release()  # granted to `cold` now; its claim has not run since
    assert budget.holders("nvidia") == {"0": cold.tenant}
    cold.claim.cancel()  # its replica was scaled to zero meanwhile
    with pytest.raises(asyncio.CancelledError):
        await cold.claim
    assert budget.holders("nvidia") == {}
