"""Activation lease and the demand floor: how a gateway keeps KEDA awake across a cold start.

A request that finds no ready backend may leave at once (reject mode, client gave up), yet the
backend it asked for must still come up. The lease decouples demand from the client connection:
every cold request renews it, and while it lasts demand is at least one. It ends at readiness
(followed by a short grace, so a backend that just became ready is not scaled away before the
retrying clients arrive) or at the activation deadline, so a load that never succeeds cannot keep
demand up forever. Time comes from an injected clock so the policy is tested without waiting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # an annotation: every gateway imports this module, not the ports behind it
    from noctaya.core.ports import Clock

READY_GRACE_SECONDS = 15.0


class ActivationLease:
    """Lease state for one gateway; `demand(pending)` is what the gateway reports to the scaler."""

    def __init__(self, timeout: float, clock: Clock, grace: float = READY_GRACE_SECONDS) -> None:
        if timeout <= 0:
            raise ValueError(f"activation timeout must be positive, got {timeout}")
        if grace < 0:
            raise ValueError(f"ready grace must not be negative, got {grace}")
        self._timeout = timeout
        self._grace = grace
        self._clock = clock
        self._active = False
        self._deadline = 0.0
        self._ready_grace_until = float("-inf")

    @property
    def active(self) -> bool:
        return self._active

    @property
    def deadline(self) -> float:
        return self._deadline

    @property
    def ready_grace_until(self) -> float:
        return self._ready_grace_until

    def renew(self) -> None:
        """A cold request arrived: hold demand up for another full activation timeout."""
        self._active = True
        self._deadline = self._clock() + self._timeout

    def expire_if_due(self) -> bool:
        """End the lease if its deadline passed without renewal; True if it ended now."""
        if self._active and self._clock() >= self._deadline:
            self._active = False
            return True
        return False

    def remaining(self) -> float:
        """Seconds until the deadline (0 when inactive or past it): bounds a readiness probe."""
        if not self._active:
            return 0.0
        return max(0.0, self._deadline - self._clock())

    def grace_remaining(self) -> float:
        """Seconds until the post-readiness grace ends (0 when it is over)."""
        return max(0.0, self._ready_grace_until - self._clock())

    def end_on_ready(self) -> float:
        """The backend is ready: end the lease, start the grace; returns when the grace ends."""
        self._active = False
        self._ready_grace_until = self._clock() + self._grace
        return self._ready_grace_until

    def floor(self) -> int:
        """1 while the lease holds or the post-readiness grace runs, else 0."""
        now = self._clock()
        if (self._active and now < self._deadline) or now < self._ready_grace_until:
            return 1
        return 0

    def demand(self, pending: int) -> int:
        """Effective demand: admitted requests if any, otherwise the floor."""
        if pending > 0:
            return pending
        return self.floor()
