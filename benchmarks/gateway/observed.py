"""The gateway with a loop-lag sampler and `gc` pause accounting, switched by signals so that only
the measured load is observed (not imports, startup or warm-up): where a p99 comes from.

    [BENCH_WITHOUT=change,...] python -m benchmarks.gateway.observed STATS_FILE [arguments]

SIGUSR1 starts observing; SIGUSR2 stops and writes JSON to STATS_FILE: the event loop's lag
(how late a 5 ms timer fires: p50, p99, max) and the collector's runs per generation with their
total and longest pause (`signalled`).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import time
from typing import Any

from benchmarks.gateway.signalled import run_measured

LAG_TICK = 0.005


class Observer:
    def __init__(self) -> None:
        self.lags: list[float] = []
        self.pauses: list[tuple[int, float]] = []  # (generation, seconds)
        self._gc_started = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.lags.clear()
        self.pauses.clear()
        self._due = 0.0  # no lag across the pause between measurements
        gc.callbacks.append(self._on_gc)
        self._tick(loop)

    def stop(self) -> dict[str, Any]:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._timer is not None:
            self._timer.cancel()
        lags = sorted(self.lags)
        by_generation = [[s for g, s in self.pauses if g == gen] for gen in range(3)]
        return {
            "lag_ms": {
                "samples": len(lags),
                "p50": _at(lags, 0.5) * 1e3,
                "p99": _at(lags, 0.99) * 1e3,
                "max": (lags[-1] if lags else 0.0) * 1e3,
            },
            "gc": {
                "collections": [len(pauses) for pauses in by_generation],
                "pause_total_ms": sum(s for _, s in self.pauses) * 1e3,
                "pause_max_ms": max((s for _, s in self.pauses), default=0.0) * 1e3,
            },
        }

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        now = time.perf_counter()
        if self._due:
            self.lags.append(max(0.0, now - self._due))
        self._due = now + LAG_TICK
        self._timer = loop.call_later(LAG_TICK, self._tick, loop)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.pauses.append((info["generation"], time.perf_counter() - self._gc_started))


def _at(values: list[float], quantile: float) -> float:
    return values[min(len(values) - 1, int(len(values) * quantile))] if values else 0.0


def main() -> int:
    if os.environ.get("BENCH_WITHOUT"):  # this tree with some of its changes undone
        from benchmarks.gateway import without  # imports hypercorn: only when asked

        if not without.undo_named():
            return 2
    observer = Observer()

    def write(path: str) -> None:
        with open(path, "w") as output:
            json.dump(observer.stop(), output)

    return run_measured(lambda: observer.start(asyncio.get_running_loop()), write)


if __name__ == "__main__":
    sys.exit(main())
