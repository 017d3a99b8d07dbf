"""The controller work queue: at most one worker per key, deduplication, per-key backoff.

The semantics are those of client-go's rate-limited work queue, on purpose: the reconciler
relies on them as any Kubernetes controller does. A key added while it waits is stored once; a
key added while a worker holds it is handed out again only after that worker calls `done`;
failures are retried after an exponential per-key delay that `forget` resets.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from noctaya.core.ports import Clock

K = TypeVar("K", bound=Hashable)

DEFAULT_BASE_DELAY = 0.005
DEFAULT_MAX_DELAY = 1000.0


class ExponentialBackoff(Generic[K]):
    """Per-key delay `base * 2**failures`, capped (by default 5 ms, doubling up to 1000 s)."""

    def __init__(
        self, base_delay: float = DEFAULT_BASE_DELAY, max_delay: float = DEFAULT_MAX_DELAY
    ) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError(
                f"backoff delays must satisfy 0 < base_delay <= max_delay "
                f"(base_delay={base_delay}, max_delay={max_delay})"
            )
        self._base = base_delay
        self._max = max_delay
        self._failures: dict[K, int] = {}
        self._lock = threading.Lock()

    def when(self, key: K) -> float:
        """The delay before the next retry of `key`; counts one more failure."""
        with self._lock:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        # Past ~2**60 the float is inf or huge; the cap applies either way.
        return min(self._base * 2.0 ** min(failures, 64), self._max)

    def failures(self, key: K) -> int:
        with self._lock:
            return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        with self._lock:
            self._failures.pop(key, None)


class WorkQueue(Generic[K]):
    """A thread-safe queue of keys for reconcile workers.

    `get` blocks until a key is ready and marks it in flight; the caller must call `done` with
    it. `get` returns None once `shut_down` was called, so workers finish their current key and
    take no new one (queued keys are dropped: the next leader relists everything anyway).
    """

    def __init__(
        self, backoff: ExponentialBackoff[K] | None = None, clock: Clock = time.monotonic
    ) -> None:
        self._backoff: ExponentialBackoff[K] = backoff or ExponentialBackoff()
        self._clock = clock
        self._ready: deque[K] = deque()
        self._dirty: set[K] = set()  # wants processing: queued, or re-added while in flight
        self._processing: set[K] = set()
        self._waiting: dict[K, float] = {}  # key -> earliest time it is due
        self._waiting_heap: list[tuple[float, int, K]] = []
        self._sequence = itertools.count()  # heap tie-breaker: keys need not be orderable
        self._shutting_down = False
        self._cond = threading.Condition()

    def add(self, key: K) -> None:
        with self._cond:
            self._add_locked(key)

    def add_after(self, key: K, delay: float) -> None:
        """Add `key` once `delay` seconds have passed; an earlier pending time wins."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutting_down:
                return
            due = self._clock() + delay
            current = self._waiting.get(key)
            if current is not None and current <= due:
                return
            self._waiting[key] = due
            heapq.heappush(self._waiting_heap, (due, next(self._sequence), key))
            self._cond.notify()

    def add_rate_limited(self, key: K) -> None:
        """Retry `key` after its backoff delay (which grows with each call until `forget`)."""
        self.add_after(key, self._backoff.when(key))

    def forget(self, key: K) -> None:
        """`key` succeeded: its next failure starts again from the base delay."""
        self._backoff.forget(key)

    def failures(self, key: K) -> int:
        return self._backoff.failures(key)

    def get(self, timeout: float | None = None) -> K | None:
        """The next ready key, or None on shutdown or when `timeout` passes first."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                if self._shutting_down:
                    return None
                wait = self._promote_due_locked()
                if self._ready:
                    key = self._ready.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                if deadline is not None:
                    remaining = deadline - self._clock()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._cond.wait(wait)

    def done(self, key: K) -> None:
        """The worker finished `key`; if it was added meanwhile, it is queued again now."""
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty and not self._shutting_down:
                self._ready.append(key)
                self._cond.notify()

    def shut_down(self) -> None:
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down

    def __len__(self) -> int:
        """Keys ready to be handed out (not counting delayed retries or keys in flight)."""
        with self._cond:
            self._promote_due_locked()
            return len(self._ready)

    def _add_locked(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._ready.append(key)
        self._cond.notify()

    def _promote_due_locked(self) -> float | None:
        """Move due delayed keys to the ready queue; return seconds until the next one is due."""
        now = self._clock()
        while self._waiting_heap:
            due, _, key = self._waiting_heap[0]
            if self._waiting.get(key) != due:
                heapq.heappop(self._waiting_heap)  # superseded by an earlier time
                continue
            if due > now:
                return due - now
            heapq.heappop(self._waiting_heap)
            del self._waiting[key]
            self._add_locked(key)
        return None
