"""Where the scaler reads the pods' KV-cache gauge: `NOCTAYA_SCALING_METRIC` and the backend
metrics variables beside it (`NOCTAYA_BACKEND_KV_CACHE_METRIC`, `NOCTAYA_BACKEND_METRICS_PORT`,
`NOCTAYA_BACKEND_METRICS_PATH`), checked at startup so a bad Deployment fails at once.

One reading for the gateway and the aggregator alike, whichever of them serves KEDA. Kept apart
from the reader (`kv_cache`), which brings the upstream HTTP client: a process imports that only
when it scales on KV-cache use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from noctaya.core.plan import gateway_env as names
from noctaya.core.values.go_text import go_quote

QUEUE_DEPTH = "queueDepth"
KV_CACHE_UTIL = "kvCacheUtil"
DEFAULT_METRICS_PATH = "/metrics"
_REQUEST_PATH = re.compile(r"/[!-~]*")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


@dataclass(frozen=True)
class KvCacheSettings:
    metric: str
    """The engine's gauge, a 0–1 fraction per pod."""
    port: int
    path: str


def load_kv_cache_settings(environ: Mapping[str, str]) -> KvCacheSettings | None:
    """None when the scaler reports demand (`queueDepth`, or unset); raise ValueError naming
    the variable for anything that would leave `kvCacheUtil` unable to read a pod."""
    metric_choice = environ.get(names.SCALING_METRIC) or QUEUE_DEPTH
    if metric_choice == QUEUE_DEPTH:
        return None
    if metric_choice != KV_CACHE_UTIL:
        raise ValueError(
            f"{names.SCALING_METRIC} must be {QUEUE_DEPTH} or {KV_CACHE_UTIL}, "
            f"got {go_quote(metric_choice)}"
        )
    gauge = environ.get(names.BACKEND_KV_CACHE_METRIC, "")
    if not _METRIC_NAME.fullmatch(gauge):
        raise ValueError(
            f"{names.BACKEND_KV_CACHE_METRIC} must be a Prometheus metric name with "
            f"{names.SCALING_METRIC} {KV_CACHE_UTIL}, got {go_quote(gauge)}"
        )
    port = environ.get(names.BACKEND_METRICS_PORT, "")
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(
            f"{names.BACKEND_METRICS_PORT} must be a port number with {names.SCALING_METRIC} "
            f"{KV_CACHE_UTIL}, got {go_quote(port)}"
        )
    path = environ.get(names.BACKEND_METRICS_PATH) or DEFAULT_METRICS_PATH
    if not _REQUEST_PATH.fullmatch(path):
        raise ValueError(
            f"{names.BACKEND_METRICS_PATH}: {go_quote(path)} is not an absolute path of "
            "printable ASCII without spaces"
        )
    return KvCacheSettings(metric=gauge, port=int(port), path=path)
