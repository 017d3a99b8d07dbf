"""The gateway under cProfile, switched on and off by signals so that only the measured load is
in the profile (not imports, startup or warm-up).

    python -m benchmarks.gateway.profiled STATS_FILE [noctaya-gateway arguments]

SIGUSR1 starts profiling; SIGUSR2 stops and writes the stats to STATS_FILE (readable with
`pstats`). The gateway serves on one thread, the event loop's, which is the one profiled.
"""

from __future__ import annotations

import cProfile
import sys

from benchmarks.gateway.signalled import run_measured


def main() -> int:
    profiler = cProfile.Profile()

    def write(path: str) -> None:
        profiler.disable()
        profiler.dump_stats(path)

    return run_measured(profiler.enable, write)


if __name__ == "__main__":
    sys.exit(main())
