"""The member table on its own: acceptance, staleness, capacity, expiry order, saturation."""

from __future__ import annotations

from noctaya.gateway.aggregator.members import MemberTable, ReportResult
from noctaya.gateway.aggregator.protocol import INT64_MAX

TTL = 10.0


def test_total_is_the_sum_of_each_members_latest_demand() -> None:
    table = MemberTable(max_members=8, ttl=TTL)
    assert table.update("a", 1, 2, now=0) is ReportResult.ACCEPTED
    assert table.update("b", 1, 3, now=0) is ReportResult.ACCEPTED
    assert table.update("a", 2, 5, now=1) is ReportResult.ACCEPTED
    assert (table.total, len(table)) == (8, 2)


def test_a_report_no_newer_than_the_stored_one_is_stale_and_ignored() -> None:
    table = MemberTable(max_members=8, ttl=TTL)
    table.update("a", 5, 2, now=0)
    assert table.update("a", 5, 9, now=1) is ReportResult.STALE
    assert table.update("a", 4, 9, now=1) is ReportResult.STALE
    assert table.total == 2
    assert table.expire(now=TTL) == 1, "a stale report does not extend the member's life"


def test_new_members_beyond_capacity_are_refused_but_known_ones_still_update() -> None:
    table = MemberTable(max_members=2, ttl=TTL)
    table.update("a", 1, 1, now=0)
    table.update("b", 1, 1, now=0)
    assert table.update("c", 1, 1, now=0) is ReportResult.CAPACITY
    assert table.update("a", 2, 4, now=0) is ReportResult.ACCEPTED
    assert (table.total, len(table)) == (5, 2)


def test_members_expire_ttl_after_their_last_accepted_report() -> None:
    table = MemberTable(max_members=8, ttl=TTL)
    table.update("old", 1, 2, now=0)
    table.update("new", 1, 1, now=4)
    table.update("old", 2, 2, now=5)  # renewed: now expires after "new"
    assert table.expire(now=14.9) == 1
    assert (table.total, len(table)) == (2, 1)
    assert table.expire(now=15) == 1
    assert (table.total, len(table)) == (0, 0)


def test_replacement_overlap_counts_both_until_the_old_member_expires() -> None:
    table = MemberTable(max_members=8, ttl=TTL)
    table.update("gw/old", 7, 2, now=0)
    table.update("gw/new", 1, 1, now=3)
    assert table.total == 3
    table.expire(now=10)
    assert table.total == 1


def test_total_saturates_at_int64_max_and_recovers_exactly() -> None:
    table = MemberTable(max_members=8, ttl=TTL)
    table.update("a", 1, INT64_MAX, now=0)
    table.update("b", 1, INT64_MAX, now=1)
    assert table.total == INT64_MAX
    table.update("a", 2, 0, now=2)
    assert table.total == INT64_MAX
    table.update("b", 2, 5, now=3)
    assert table.total == 5
