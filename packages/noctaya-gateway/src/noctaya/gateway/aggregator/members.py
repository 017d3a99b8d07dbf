"""Which gateways are alive and what each last reported: the aggregate's bookkeeping, without I/O.

Every accepted report pushes its member's expiry to `now + ttl`, and `now` never goes backwards,
so keeping members in report order keeps them in expiry order: expiring is a pop from the front,
never a scan, and a report costs O(1) however many gateways there are.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum

from noctaya.gateway.aggregator.protocol import INT64_MAX


class ReportResult(StrEnum):
    ACCEPTED = "accepted"
    STALE = "stale"
    CAPACITY = "capacity"


@dataclass
class _Member:
    sequence: int
    demand: int
    expires_at: float


class MemberTable:
    def __init__(self, max_members: int, ttl: float) -> None:
        self._max_members = max_members
        self._ttl = ttl
        self._members: OrderedDict[str, _Member] = OrderedDict()
        self._sum = 0  # exact (Python ints do not overflow); saturated only when read

    def __len__(self) -> int:
        return len(self._members)

    @property
    def total(self) -> int:
        """Sum of every member's latest demand, saturating at int64's maximum as KEDA reads it."""
        return min(self._sum, INT64_MAX)

    def expire(self, now: float) -> int:
        """Forget members whose last accepted report is `ttl` old; return how many."""
        expired = 0
        while self._members:
            member_id, member = next(iter(self._members.items()))
            if now < member.expires_at:
                break
            del self._members[member_id]
            self._sum -= member.demand
            expired += 1
        return expired

    def update(self, member_id: str, sequence: int, demand: int, now: float) -> ReportResult:
        """Apply one report. Callers expire first, so a dead member never holds capacity."""
        member = self._members.get(member_id)
        if member is None:
            if len(self._members) >= self._max_members:
                return ReportResult.CAPACITY
            self._members[member_id] = _Member(sequence, demand, now + self._ttl)
        elif sequence <= member.sequence:
            return ReportResult.STALE
        else:
            self._sum -= member.demand
            member.sequence, member.demand, member.expires_at = sequence, demand, now + self._ttl
            self._members.move_to_end(member_id)
        self._sum += demand
        return ReportResult.ACCEPTED
