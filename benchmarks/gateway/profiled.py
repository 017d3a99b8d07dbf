"""The gateway under cProfile, switched on and off by signals so that only the measured load is
in the profile (not imports, startup or warm-up).

    python -m benchmarks.gateway.profiled STATS_FILE [noctaya-gateway arguments]

SIGUSR1 starts profiling; SIGUSR2 stops and writes the stats to STATS_FILE (readable with
`pstats`). The gateway serves on one thread, the event loop's, which is the one profiled.
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
from types import FrameType

from noctaya.gateway.cli import main as gateway_main


def main() -> int:
    stats_file, argv = sys.argv[1], sys.argv[2:]
    profiler = cProfile.Profile()

    def start(signum: int, frame: FrameType | None) -> None:
        profiler.enable()

    def stop(signum: int, frame: FrameType | None) -> None:
        profiler.disable()
        profiler.dump_stats(stats_file + ".part")
        os.replace(stats_file + ".part", stats_file)  # whole or absent for whoever waits on it

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    return gateway_main(argv)


if __name__ == "__main__":
    sys.exit(main())
