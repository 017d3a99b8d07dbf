"""The collector for a server whose start-up heap lives as long as the process.

What start-up leaves (modules, the server, the app) is frozen once serving begins, so no full
collection walks it again under load, where each once walked all of it (tens of milliseconds,
the worst of the p99). The thresholds stay Python's: raising the young one (measured at 35,000)
let asyncio's per-request reference cycles pile up into pauses of over 100 ms.
"""

from __future__ import annotations

import gc


def settle_after_startup() -> None:
    """Call once the process has started serving."""
    gc.collect()
    gc.freeze()
