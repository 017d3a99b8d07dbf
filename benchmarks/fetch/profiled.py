"""`noctaya-fetch` under cProfile, every thread included (blobs download on worker threads).

    python benchmarks/fetch/profiled.py STATS_FILE [noctaya-fetch arguments]

Each thread gets its own profiler; at exit they are merged into STATS_FILE (read with `pstats`).
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import threading

from noctaya.fetch.cli import main as fetch_main

_profiles: list[cProfile.Profile] = []
_lock = threading.Lock()
_bootstrap_inner = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]


def _profiled_bootstrap(self: threading.Thread) -> None:
    """Around the whole thread, so subclasses that override `run` (anyio's workers) count."""
    profiler = cProfile.Profile()
    with _lock:
        _profiles.append(profiler)
    profiler.runcall(_bootstrap_inner, self)


def main() -> int:
    stats_file, argv = sys.argv[1], sys.argv[2:]
    threading.Thread._bootstrap_inner = _profiled_bootstrap  # type: ignore[attr-defined]
    profiler = cProfile.Profile()
    code = profiler.runcall(fetch_main, argv)
    stats = pstats.Stats(profiler)
    with _lock:
        for thread_profile in _profiles:
            stats.add(thread_profile)
    stats.dump_stats(stats_file)
    return code


if __name__ == "__main__":
    sys.exit(main())
