"""The aggregator's environment, checked at startup so a bad Deployment fails at once.

Integers are read as the reference implementation reads them, on purpose: an optional sign and
ASCII digits, within 64 bits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from noctaya.core.plan import gateway_env as names
from noctaya.core.values.go_text import go_positive_int
from noctaya.gateway.aggregator.protocol import INT64_MAX, read_demand_token
from noctaya.gateway.process.config_shared import DEFAULT_SCALER_LISTEN_ADDR, listen_addr_setting
from noctaya.gateway.scaler.kv_cache_settings import KvCacheSettings, load_kv_cache_settings
from noctaya.gateway.scaler.tls import ScalerTLS, load_scaler_tls

if TYPE_CHECKING:  # the gateway's settings, read only for kvCacheUtil (see `_backend_pods`)
    from noctaya.gateway.process.config import BackendEndpoints

DEFAULT_MAX_MEMBERS = 1024
DEFAULT_MAX_DEMAND = 100
DEFAULT_LISTEN_ADDR = ":9091"


@dataclass(frozen=True)
class AggregatorConfig:
    token_file: str
    max_members: int
    max_demand: int
    listen_addr: str
    scaler_listen_addr: str
    tls: ScalerTLS | None
    kv_cache: KvCacheSettings | None = None
    """Set for kvCacheUtil scaling: KEDA then gets the pods' KV-cache sum, read here."""
    backend_endpoints: BackendEndpoints | None = None
    """With `kv_cache`: the backend Service whose EndpointSlices name the pods to read."""


def load_config(environ: Mapping[str, str]) -> AggregatorConfig:
    """Read and validate the environment, or raise ValueError with the message to print."""
    token_file = environ.get(names.DEMAND_AUTH_TOKEN_FILE, "")
    read_demand_token(token_file)
    max_members = _positive_int(environ, names.MAX_GATEWAY_MEMBERS, DEFAULT_MAX_MEMBERS)
    max_demand = _positive_int(environ, names.MAX_GATEWAY_DEMAND, DEFAULT_MAX_DEMAND)
    listen_addr = listen_addr_setting(environ, names.AGGREGATOR_LISTEN_ADDR, DEFAULT_LISTEN_ADDR)
    scaler_listen_addr = listen_addr_setting(
        environ, names.SCALER_LISTEN_ADDR, DEFAULT_SCALER_LISTEN_ADDR
    )
    kv_cache = load_kv_cache_settings(environ)
    return AggregatorConfig(
        token_file=token_file,
        max_members=max_members,
        max_demand=max_demand,
        listen_addr=listen_addr,
        scaler_listen_addr=scaler_listen_addr,
        tls=load_scaler_tls(environ),
        kv_cache=kv_cache,
        backend_endpoints=_backend_pods(environ) if kv_cache is not None else None,
    )


def _backend_pods(environ: Mapping[str, str]) -> BackendEndpoints:
    """Read as the gateway reads them, imported only here: a demand-only aggregator holds
    none of the gateway's settings or its HTTP client."""
    from noctaya.gateway.process.config import _backend_endpoints

    wanted = _backend_endpoints(environ)
    if wanted is None:
        raise ValueError(
            f"{names.SCALING_METRIC} kvCacheUtil needs {names.BACKEND_ENDPOINTS}, "
            "the backend Service whose pods' KV-cache gauges are read"
        )
    return wanted


def _positive_int(environ: Mapping[str, str], name: str, default: int) -> int:
    """An integer (module docstring) above zero; `default` when unset or empty."""
    raw = environ.get(name, "")
    if not raw:
        return default
    value = go_positive_int(raw)
    if value is None or value > INT64_MAX:
        raise ValueError(f"{name} must be a positive integer")
    return value
