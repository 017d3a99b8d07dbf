"""The activation lease keeps demand at one across a cold start, and never longer than it should."""

import pytest
from noctaya.core.scaling import READY_GRACE_SECONDS, ActivationLease
from support.fake_clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_fresh_lease_gives_no_demand_without_pending_requests(clock: FakeClock) -> None:
    lease = ActivationLease(300, clock)
    assert not lease.active
    assert lease.demand(0) == 0


def test_pending_requests_are_the_demand_whatever_the_lease(clock: FakeClock) -> None:
    lease = ActivationLease(300, clock)
    assert lease.demand(7) == 7
    lease.renew()
    assert lease.demand(3) == 3


def test_rejected_cold_request_leaves_a_floor_of_one_until_the_deadline(
    clock: FakeClock,
) -> None:
    lease = ActivationLease(300, clock)
    lease.renew()
    assert lease.demand(0) == 1
    clock.advance(299.9)
    assert lease.demand(0) == 1
    clock.advance(0.1)
    assert lease.demand(0) == 0, "the floor must not outlive the deadline even before expiry runs"
    assert lease.expire_if_due()
    assert not lease.active
    assert not lease.expire_if_due(), "an ended lease ends only once"


def test_later_cold_request_renews_the_deadline(clock: FakeClock) -> None:
    lease = ActivationLease(10, clock)
    lease.renew()
    clock.advance(8)
    lease.renew()
    clock.advance(8)
    assert not lease.expire_if_due()
    assert lease.demand(0) == 1
    assert lease.remaining() == pytest.approx(2)
    clock.advance(2)
    assert lease.expire_if_due()
    assert lease.remaining() == 0


def test_readiness_ends_the_lease_but_keeps_the_floor_for_the_grace(clock: FakeClock) -> None:
    lease = ActivationLease(300, clock, grace=0.25)
    lease.renew()
    grace_end = lease.end_on_ready()
    assert grace_end == pytest.approx(clock.now + 0.25)
    assert not lease.active
    clock.advance(0.125)
    assert lease.demand(0) == 1
    assert lease.grace_remaining() == pytest.approx(0.125)
    clock.advance(0.125)
    assert lease.demand(0) == 0
    assert lease.grace_remaining() == 0


def test_default_grace_is_fifteen_seconds(clock: FakeClock) -> None:
    lease = ActivationLease(300, clock)
    lease.renew()
    lease.end_on_ready()
    clock.advance(READY_GRACE_SECONDS - 0.001)
    assert lease.floor() == 1
    clock.advance(0.001)
    assert lease.floor() == 0
    assert READY_GRACE_SECONDS == 15.0


def test_remaining_is_zero_for_an_inactive_lease(clock: FakeClock) -> None:
    assert ActivationLease(5, clock).remaining() == 0


@pytest.mark.parametrize(("timeout", "grace"), [(0, 1), (-1, 1), (1, -0.5)])
def test_nonsense_timings_are_refused(clock: FakeClock, timeout: float, grace: float) -> None:
    with pytest.raises(ValueError, match="must"):
        ActivationLease(timeout, clock, grace=grace)
