"""Who holds the machine's devices, and the swaps that hand them on.

Each engine whose vendor's devices are budgeted (`noctaya.local.devices`) asks for its
devices before its process starts (a claim) and gives them back once its process group is gone,
so no two engines ever hold one device. A claim that finds too few free devices may stop idle
engines to get them (a swap), chosen by these rules:

- Only a claim with clients behind it may stop another engine: requests in flight for its
  service, or one that arrived within its activation timeout (a client that gave up, or a
  rejected cold request, still counts: its load is not abandoned). An engine that was swapped
  out claims again, but takes nothing until a request for it arrives.
- An engine is never stopped while it serves or holds requests, while it loads (before its first
  readiness), while it is pinned, or during its minimum residency after it became ready. So the
  requests that queued for a cold model are all served before the device moves on, and a busy
  model is never interrupted: the waiting model gets the device as soon as the holder is idle.
- Of the engines it may stop, the least recently used go first (idle since their last response
  ended, or since they became ready if they served none), and only as many as the claim needs;
  if they would not free enough, none is stopped.
- Claims are served in the order they became due; a claim that cannot be served yet holds back
  later claims on the same devices, so a big model is not starved by small ones.

Time comes from an injected clock; the budget is driven by calls (a claim, a release, a
readiness, a change of traffic) and one timer for the next residency that ends.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from noctaya.core.ports import Clock
from noctaya.local import log_lines
from noctaya.local.devices import DevicePool
from noctaya.local.traffic import Traffic

log = logging.getLogger("noctaya.local")
DEFAULT_MIN_RESIDENCY = 10.0
"""Seconds an engine keeps its devices after it became ready, whoever waits: at most one swap
per this long on a device, however requests alternate."""


class Grant:
    """Devices one engine holds until `release()`."""

    def __init__(self, budget: DeviceBudget, tenant: Tenant, ids: tuple[str, ...]) -> None:
        self._budget = budget
        self.tenant = tenant
        self.ids = ids
        self._released = False

    @property
    def env(self) -> dict[str, str]:
        """The vendor's visible-devices variable naming them (nothing if it has none)."""
        variable = self.tenant.pool.visible_env
        return {} if variable is None else {variable: ",".join(self.ids)}

    def release(self) -> None:
        """Idempotent."""
        if not self._released:
            self._released = True
            self._budget._release(self)


@dataclass(frozen=True, slots=True)
class StartTimes:
    """How long an engine's last start took, from the request that asked for it."""

    stopped: tuple[str, ...]
    """The services stopped to free its devices."""
    stop: float
    """The request's arrival (or the claim, if no request made it) → its devices free: the
    wait for other engines to stop, if any."""
    start: float
    """Devices free → its process started."""
    load: float
    """Process started → ready."""


@dataclass(eq=False)
class _Claim:
    tenant: Tenant
    since: float
    granted: asyncio.Future[Grant]
    stopping: tuple[Tenant, ...] = ()
    """Engines being stopped for it."""
    waiting_for: tuple[Tenant, ...] = ()
    """Engines it waits for, which it may not stop (yet)."""


@dataclass(eq=False)
class Tenant:
    """One service's engine as the budget sees it."""

    budget: DeviceBudget
    name: str
    model: str
    """The name clients know it by, in messages."""
    pool: DevicePool
    count: int
    pinned: bool
    traffic: Traffic
    activation_timeout: float
    grant: Grant | None = None
    ready_at: float | None = None
    """When its engine first passed readiness since it got its devices."""
    evicting: bool = False
    swapped_out_at: float | None = None
    """When it last gave its devices up to another claim; None once it holds devices again."""
    swaps: int = 0
    """Times its engine was stopped for another claim."""
    last_start: StartTimes | None = None
    claim: _Claim | None = None
    preempt: Callable[[], None] = field(default=lambda: None)
    """Set by its replica: stop the engine and claim again."""
    _asked_at: float | None = None
    _granted_at: float | None = None
    _spawned_at: float | None = None
    _stopped_for: tuple[str, ...] = ()

    async def acquire(self) -> Grant:
        """Wait for the devices (cancellable; a grant that races a cancellation is released)."""
        return await self.budget._acquire(self)

    def spawned(self) -> None:
        """Its process started with the devices."""
        self._spawned_at = self.budget.clock()

    def became_ready(self) -> None:
        if self.grant is not None and self.ready_at is None:
            self.ready_at = self.budget.clock()
            self._record_start(self.ready_at)
            self.budget.changed()

    def _record_start(self, ready: float) -> None:
        granted = self._granted_at if self._granted_at is not None else ready
        asked = self._asked_at if self._asked_at is not None else granted
        spawned = self._spawned_at if self._spawned_at is not None else granted
        self.last_start = StartTimes(
            self._stopped_for, granted - asked, spawned - granted, ready - spawned
        )
        self._asked_at, self._stopped_for = None, ()
        log.info(
            log_lines.STARTED_IN,
            self.name,
            ready - asked,
            self.last_start.stop,
            " ".join(self.last_start.stopped) or "nothing",
            self.last_start.start,
            self.last_start.load,
        )

    def idle_since(self) -> float:
        ends = self.traffic.last_end
        ready = self.ready_at if self.ready_at is not None else -math.inf
        return max(ready, ends if ends is not None else -math.inf)

    def phase(self) -> str | None:
        """What its waiting clients are told while it claims devices: `stopping <model>`,
        `waiting for <model>`; None when it is not waiting for devices."""
        claim = self.claim
        if claim is None:
            return None
        if claim.stopping:
            return "stopping " + ", ".join(sorted(each.model for each in claim.stopping))
        if claim.waiting_for:
            return "waiting for " + ", ".join(sorted(each.model for each in claim.waiting_for))
        return None


class DeviceBudget:
    def __init__(
        self,
        min_residency: float = DEFAULT_MIN_RESIDENCY,
        clock: Clock = time.monotonic,
    ) -> None:
        self.min_residency = min_residency
        self.clock = clock
        self._claims: list[_Claim] = []
        self._held: dict[str, dict[str, Tenant]] = {}  # vendor → device id → holder
        self._timer: asyncio.TimerHandle | None = None
        self._listeners: list[Callable[[], None]] = []

    def tenant(
        self,
        name: str,
        model: str,
        pool: DevicePool,
        count: int,
        *,
        pinned: bool,
        traffic: Traffic,
        activation_timeout: float,
    ) -> Tenant:
        return Tenant(self, name, model, pool, count, pinned, traffic, activation_timeout)

    def listen(self, listener: Callable[[], None]) -> None:
        """Called after every change of who holds, claims or stops what."""
        self._listeners.append(listener)

    def holders(self, vendor: str) -> dict[str, Tenant]:
        """Device id → the tenant holding it, for the vendor's held devices."""
        return dict(self._held.get(vendor, {}))

    def changed(self) -> None:
        """Something a decision depends on changed (traffic, readiness): decide again."""
        self._schedule()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _acquire(self, tenant: Tenant) -> Grant:
        claim = _Claim(tenant, self.clock(), asyncio.get_running_loop().create_future())
        self._claims.append(claim)
        tenant.claim = claim
        self._schedule()
        try:
            return await claim.granted
        except asyncio.CancelledError:
            if claim.granted.done() and not claim.granted.cancelled():
                claim.granted.result().release()
            raise
        finally:
            if claim in self._claims:
                self._claims.remove(claim)
            if tenant.claim is claim:
                tenant.claim = None
                self._notify()

    def _release(self, grant: Grant) -> None:
        tenant = grant.tenant
        held = self._held.get(tenant.pool.vendor, {})
        for device in grant.ids:
            if held.get(device) is tenant:
                del held[device]
        if tenant.grant is grant:
            tenant.grant = None
            tenant.ready_at = None
            if tenant.evicting:
                tenant.evicting = False
                tenant.swapped_out_at = self.clock()
                tenant.swaps += 1
        self._schedule()

    def _urgent(self, tenant: Tenant, now: float) -> bool:
        """Clients wait for it: it may stop other engines."""
        traffic = tenant.traffic
        if traffic.in_flight > 0:
            return True
        return self._asked_since_swap(tenant) and (
            traffic.last_request is not None
            and now - traffic.last_request < tenant.activation_timeout
        )

    @staticmethod
    def _asked_since_swap(tenant: Tenant) -> bool:
        """Not swapped out, or asked for since (a swapped-out engine takes nothing until then)."""
        if tenant.swapped_out_at is None or tenant.traffic.in_flight > 0:
            return True
        last = tenant.traffic.last_request
        return last is not None and last > tenant.swapped_out_at

    def _evictable(self, holder: Tenant, now: float) -> bool:
        return (
            not holder.pinned
            and not holder.evicting
            and holder.traffic.in_flight == 0
            and holder.ready_at is not None
            and now >= holder.ready_at + self.min_residency
        )

    def _schedule(self) -> None:
        now = self.clock()
        wake = math.inf
        blocked: set[str] = set()  # vendors an earlier claim waits on
        for claim in sorted(self._claims, key=lambda each: each.since):
            if claim.granted.done():
                continue
            tenant = claim.tenant
            vendor = tenant.pool.vendor
            held = self._held.setdefault(vendor, {})
            holders = list(dict.fromkeys(held.values()))
            free = [device for device in tenant.pool.ids if device not in held]
            claim.stopping, claim.waiting_for = (), ()
            if not self._asked_since_swap(tenant):
                continue
            if vendor not in blocked and len(free) >= tenant.count:
                self._grant(claim, tuple(free[: tenant.count]))
                continue
            if not self._urgent(tenant, now):
                claim.waiting_for = tuple(holders)
                continue
            if tenant._asked_at is None:
                tenant._asked_at = _asked_at(tenant, now)
            stopping = [each for each in holders if each.evicting]
            if vendor in blocked:
                claim.waiting_for = tuple(holders)
                continue
            blocked.add(vendor)
            short = tenant.count - len(free) - sum(_held_count(each) for each in stopping)
            if short > 0:
                chosen, short, due = self._victims(holders, short, now)
                wake = min(wake, due)
                for victim in chosen:
                    self._evict(victim, tenant)
                stopping += chosen
            claim.stopping = tuple(stopping)
            if short > 0:
                claim.waiting_for = tuple(each for each in holders if each not in stopping)
        self._arm(wake)
        self._notify()

    def _victims(
        self, holders: list[Tenant], short: int, now: float
    ) -> tuple[list[Tenant], int, float]:
        """The least recently used holders that free `short` devices (none if they cannot),
        what is still short, and when a residency ends that may change the answer."""
        candidates = sorted(
            (each for each in holders if self._evictable(each, now)),
            key=lambda each: each.idle_since(),
        )
        chosen: list[Tenant] = []
        left = short
        for candidate in candidates:
            if left <= 0:
                break
            chosen.append(candidate)
            left -= _held_count(candidate)
        if left > 0:
            resident = [
                each.ready_at + self.min_residency
                for each in holders
                if each.ready_at is not None and each.ready_at + self.min_residency > now
            ]
            return [], short, min(resident, default=math.inf)
        return chosen, left, math.inf

    def _evict(self, victim: Tenant, claimant: Tenant) -> None:
        victim.evicting = True
        claimant._stopped_for = (*claimant._stopped_for, victim.name)
        log.info(log_lines.SWAP_OUT, victim.name, claimant.name)
        victim.preempt()

    def _grant(self, claim: _Claim, ids: tuple[str, ...]) -> None:
        tenant = claim.tenant
        grant = Grant(self, tenant, ids)
        held = self._held.setdefault(tenant.pool.vendor, {})
        for device in ids:
            held[device] = tenant
        tenant.grant = grant
        tenant.ready_at = None
        tenant.swapped_out_at = None
        tenant._granted_at = self.clock()
        if tenant._asked_at is None:
            tenant._asked_at = _asked_at(tenant, claim.since)
        claim.granted.set_result(grant)
        self._claims.remove(claim)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if when < math.inf:
            loop = asyncio.get_running_loop()
            delay = max(0.0, when - self.clock())
            self._timer = loop.call_later(delay, self._schedule)

    def _notify(self) -> None:
        for listener in self._listeners:
            listener()


def _asked_at(tenant: Tenant, otherwise: float) -> float:
    """When the request that made the claim due arrived (`otherwise` if none did)."""
    last = tenant.traffic.last_request
    fresh = last is not None and (tenant.swapped_out_at is None or last > tenant.swapped_out_at)
    return last if fresh and last is not None else otherwise


def _held_count(tenant: Tenant) -> int:
    return 0 if tenant.grant is None else len(tenant.grant.ids)
