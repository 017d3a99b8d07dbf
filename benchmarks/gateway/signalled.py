"""A gateway process measured between two signals, so that only the measured load counts (not
imports, startup or warm-up): SIGUSR1 starts the measurement, SIGUSR2 ends it and writes it to
STATS_FILE, the first argument; the rest are the gateway's. It imports only
`noctaya.gateway.process.cli`, so it runs any revision's gateway (PYTHONPATH picks which).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from types import FrameType

from noctaya.gateway.process.cli import main as gateway_main


def run_measured(start: Callable[[], None], write: Callable[[str], None]) -> int:
    """Serve until the gateway stops; `write(path)` ends the measurement into `path`."""
    stats_file, argv = sys.argv[1], sys.argv[2:]

    def on_start(signum: int, frame: FrameType | None) -> None:
        # Signal handlers run on the main thread, the event loop's, between its callbacks.
        start()

    def on_stop(signum: int, frame: FrameType | None) -> None:
        write(stats_file + ".part")
        os.replace(stats_file + ".part", stats_file)  # whole or absent for whoever waits on it

    signal.signal(signal.SIGUSR1, on_start)
    signal.signal(signal.SIGUSR2, on_stop)
    return gateway_main(argv)
