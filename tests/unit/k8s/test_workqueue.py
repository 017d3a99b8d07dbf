"""The reconcile work queue: one worker per key, deduplication, re-queue after done, backoff."""

from __future__ import annotations

import threading

import pytest
from noctaya.k8s.runtime.workqueue import ExponentialBackoff, WorkQueue
from support.fake_clock import FakeClock

A = ("default", "a")
B = ("default", "b")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def queue(clock: FakeClock) -> WorkQueue[tuple[str, str]]:
    return WorkQueue(clock=clock)


def drain(queue: WorkQueue[tuple[str, str]]) -> list[tuple[str, str]]:
    """Every key ready now, each marked done right away."""
    keys = []
    while (key := queue.get(timeout=0)) is not None:
        keys.append(key)
        queue.done(key)
    return keys


def test_keys_come_out_in_the_order_they_were_added(queue: WorkQueue[tuple[str, str]]) -> None:
    queue.add(A)
    queue.add(B)
    assert drain(queue) == [A, B]


def test_a_key_added_twice_while_waiting_is_handed_out_once(
    queue: WorkQueue[tuple[str, str]],
) -> None:
    queue.add(A)
    queue.add(B)
    queue.add(A)
    assert len(queue) == 2
    assert drain(queue) == [A, B]


def test_a_key_in_flight_is_not_handed_to_a_second_worker(
    queue: WorkQueue[tuple[str, str]],
) -> None:
    queue.add(A)
    assert queue.get(timeout=0) == A
    queue.add(A)
    assert queue.get(timeout=0) is None


def test_a_key_added_while_in_flight_comes_back_once_after_done(
    queue: WorkQueue[tuple[str, str]],
) -> None:
    queue.add(A)
    key = queue.get(timeout=0)
    queue.add(A)
    queue.add(A)
    queue.done(key)  # type: ignore[arg-type]
    assert drain(queue) == [A]


def test_done_without_a_new_add_does_not_requeue(queue: WorkQueue[tuple[str, str]]) -> None:
    queue.add(A)
    queue.done(queue.get(timeout=0))  # type: ignore[arg-type]
    assert queue.get(timeout=0) is None


def due_after(queue: WorkQueue[tuple[str, str]], clock: FakeClock, delay: float) -> bool:
    """True if the queue holds back its key until exactly `delay` has passed, then hands it out."""
    clock.advance(delay * 0.999)
    early = queue.get(timeout=0)
    clock.advance(delay * 0.001)
    key = queue.get(timeout=0)
    if key is not None:
        queue.done(key)
    return early is None and key is not None


def test_failures_back_off_exponentially_from_five_milliseconds(
    queue: WorkQueue[tuple[str, str]], clock: FakeClock
) -> None:
    for expected in (0.005, 0.01, 0.02, 0.04, 0.08):
        queue.add_rate_limited(A)
        assert due_after(queue, clock, expected)


def test_backoff_doubles_up_to_the_cap_and_counts_per_key() -> None:
    backoff: ExponentialBackoff[str] = ExponentialBackoff(base_delay=0.005, max_delay=1000.0)
    delays = [backoff.when("a") for _ in range(100)]
    assert delays[17] == pytest.approx(655.36)
    assert delays[18:] == [1000.0] * 82
    assert backoff.when("b") == 0.005
    assert backoff.failures("a") == 100


def test_forget_after_success_restarts_the_backoff(
    queue: WorkQueue[tuple[str, str]], clock: FakeClock
) -> None:
    for expected in (0.005, 0.01, 0.02):
        queue.add_rate_limited(A)
        assert due_after(queue, clock, expected)
    assert queue.failures(A) == 3
    queue.forget(A)
    assert queue.failures(A) == 0
    queue.add_rate_limited(A)
    assert due_after(queue, clock, 0.005)


def test_a_delayed_key_is_not_ready_before_its_time(
    queue: WorkQueue[tuple[str, str]], clock: FakeClock
) -> None:
    queue.add_after(A, 2.0)
    clock.advance(1.999)
    assert queue.get(timeout=0) is None
    clock.advance(0.001)
    assert queue.get(timeout=0) == A


def test_the_earlier_of_two_delays_for_one_key_wins_and_it_comes_out_once(
    queue: WorkQueue[tuple[str, str]], clock: FakeClock
) -> None:
    queue.add_after(A, 10.0)
    queue.add_after(A, 1.0)
    queue.add_after(A, 5.0)
    clock.advance(1.0)
    assert drain(queue) == [A]
    clock.advance(20.0)
    assert drain(queue) == []


def test_a_delayed_key_due_while_in_flight_waits_for_done(
    queue: WorkQueue[tuple[str, str]], clock: FakeClock
) -> None:
    queue.add(A)
    key = queue.get(timeout=0)
    queue.add_rate_limited(A)  # the worker failed: retry in 5 ms
    clock.advance(1.0)
    assert queue.get(timeout=0) is None
    queue.done(key)  # type: ignore[arg-type]
    assert queue.get(timeout=0) == A


def test_shutdown_wakes_blocked_workers_and_refuses_new_keys() -> None:
    queue: WorkQueue[str] = WorkQueue()
    results: list[str | None] = []
    worker = threading.Thread(target=lambda: results.append(queue.get()))
    worker.start()
    queue.shut_down()
    worker.join(5)
    assert not worker.is_alive()
    assert results == [None]
    queue.add("late")
    assert queue.get(timeout=0) is None


def test_a_blocked_get_returns_the_key_once_its_delay_passes_on_the_real_clock() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("soon", 0.05)
    assert queue.get(timeout=5) == "soon"


def test_concurrent_workers_never_hold_the_same_key_at_once() -> None:
    queue: WorkQueue[int] = WorkQueue()
    in_flight: set[int] = set()
    overlaps: list[int] = []
    processed: list[int] = []
    guard = threading.Lock()

    def work() -> None:
        while (key := queue.get()) is not None:
            with guard:
                if key in in_flight:
                    overlaps.append(key)
                in_flight.add(key)
            for _ in range(200):  # give other workers time to try the same key
                pass
            with guard:
                in_flight.discard(key)
                processed.append(key)
            queue.done(key)

    workers = [threading.Thread(target=work) for _ in range(4)]
    for worker in workers:
        worker.start()
    pause = threading.Event()  # never set: only for bounded waits
    for round_ in range(300):
        for key in range(3):
            queue.add(key)
        if round_ % 50 == 0:
            pause.wait(0.001)
    for _ in range(500):  # at most 5 s for the workers to empty the queue
        if len(queue) == 0:
            break
        pause.wait(0.01)
    queue.shut_down()
    for worker in workers:
        worker.join(5)
    assert overlaps == []
    assert set(processed) == {0, 1, 2}


def test_bad_backoff_settings_are_rejected_with_both_values_named() -> None:
    with pytest.raises(ValueError, match=r"base_delay=0.*max_delay=1"):
        ExponentialBackoff(base_delay=0, max_delay=1)
