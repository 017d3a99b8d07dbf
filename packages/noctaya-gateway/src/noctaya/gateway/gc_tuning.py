"""The collector tuned for a server that allocates a little for every request and keeps little.

What start-up leaves (modules, the server, the app) lives as long as the process: frozen, no
collection walks it again, where a full collection under load once walked all of it (tens of
milliseconds, the worst of the p99). Young-generation collections run after every 700 net
allocations by default, several times a second per hundred requests; a higher threshold runs
them a fiftieth as often over about the same live objects (the requests in flight).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 35_000
OLDER_THRESHOLDS = (10, 10)


def settle_after_startup() -> None:
    """Call once the process has started serving."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
