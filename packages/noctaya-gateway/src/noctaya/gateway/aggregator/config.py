"""The aggregator's environment (§3.2), checked at startup so a bad Deployment fails at once."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from noctaya.gateway.addresses import parse_listen_addr
from noctaya.gateway.aggregator.protocol import INT64_MAX, read_demand_token
from noctaya.gateway.scaler.tls import ScalerTLS, load_scaler_tls

TOKEN_FILE_ENV = "NOCTAYA_DEMAND_AUTH_TOKEN_FILE"
MAX_MEMBERS_ENV = "NOCTAYA_MAX_GATEWAY_MEMBERS"
MAX_DEMAND_ENV = "NOCTAYA_MAX_GATEWAY_DEMAND"
LISTEN_ADDR_ENV = "NOCTAYA_AGGREGATOR_LISTEN_ADDR"
SCALER_LISTEN_ADDR_ENV = "NOCTAYA_SCALER_LISTEN_ADDR"

DEFAULT_MAX_MEMBERS = 1024
DEFAULT_MAX_DEMAND = 100
DEFAULT_LISTEN_ADDR = ":9091"
DEFAULT_SCALER_LISTEN_ADDR = ":9090"

_GO_INT = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class AggregatorConfig:
    token_file: str
    max_members: int
    max_demand: int
    listen_addr: str
    scaler_listen_addr: str
    tls: ScalerTLS | None


def load_config(environ: Mapping[str, str]) -> AggregatorConfig:
    """Read and validate the environment; ValueError carries the reference's message."""
    token_file = environ.get(TOKEN_FILE_ENV, "")
    read_demand_token(token_file)
    max_members = _positive_int(environ, MAX_MEMBERS_ENV, DEFAULT_MAX_MEMBERS)
    max_demand = _positive_int(environ, MAX_DEMAND_ENV, DEFAULT_MAX_DEMAND)
    listen_addr = environ.get(LISTEN_ADDR_ENV, "") or DEFAULT_LISTEN_ADDR
    scaler_listen_addr = environ.get(SCALER_LISTEN_ADDR_ENV, "") or DEFAULT_SCALER_LISTEN_ADDR
    addresses = ((LISTEN_ADDR_ENV, listen_addr), (SCALER_LISTEN_ADDR_ENV, scaler_listen_addr))
    for name, addr in addresses:
        try:
            parse_listen_addr(addr)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    return AggregatorConfig(
        token_file=token_file,
        max_members=max_members,
        max_demand=max_demand,
        listen_addr=listen_addr,
        scaler_listen_addr=scaler_listen_addr,
        tls=load_scaler_tls(environ),
    )


def _positive_int(environ: Mapping[str, str], name: str, default: int) -> int:
    """Go's strconv.Atoi (int64 range, optional sign) restricted to values above zero."""
    raw = environ.get(name, "")
    if not raw:
        return default
    if not _GO_INT.fullmatch(raw) or not 0 < int(raw) <= INT64_MAX:
        raise ValueError(f"{name} must be a positive integer")
    return int(raw)
