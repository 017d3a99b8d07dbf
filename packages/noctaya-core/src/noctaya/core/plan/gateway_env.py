"""The gateway's configuration contract: its `NOCTAYA_*` names and how a plan fills them.

Apart from `--mode`, the gateway and aggregator are configured by this environment alone. The
operator renders it into a Deployment and local mode into a child process, so the names, their
order and the value forms live here once; only addresses and file paths differ per platform and
come in as a `GatewayPlacement`.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the gateway reads these names without the API models behind a plan
    from noctaya.core.plan.gateway import GatewayPlan, KvCacheScaling

BACKEND_URL = "NOCTAYA_BACKEND_URL"
BACKEND_READINESS_PATH = "NOCTAYA_BACKEND_READINESS_PATH"
DEFAULT_BACKEND_READINESS_PATH = "/health"
"""What the gateway GETs through the backend's address when `BACKEND_READINESS_PATH` is unset."""
LISTEN_ADDR = "NOCTAYA_LISTEN_ADDR"
MAX_QUEUE = "NOCTAYA_MAX_QUEUE"
SERVED_MODELS = "NOCTAYA_SERVED_MODELS"
SCALER_LISTEN_ADDR = "NOCTAYA_SCALER_LISTEN_ADDR"
DEMAND_AGGREGATOR_URL = "NOCTAYA_DEMAND_AGGREGATOR_URL"
GATEWAY_ID = "NOCTAYA_GATEWAY_ID"
ACTIVATION_TIMEOUT = "NOCTAYA_ACTIVATION_TIMEOUT"
COLDSTART_MODE = "NOCTAYA_COLDSTART_MODE"
HEARTBEAT_INTERVAL = "NOCTAYA_HEARTBEAT_INTERVAL"
CLIENT_API_KEY_FILE = "NOCTAYA_CLIENT_API_KEY_FILE"
MAX_REQUEST_BODY = "NOCTAYA_MAX_REQUEST_BODY"
REQUEST_BODY_TIMEOUT = "NOCTAYA_REQUEST_BODY_TIMEOUT"
CLIENT_SEND_TIMEOUT = "NOCTAYA_CLIENT_SEND_TIMEOUT"
BACKEND_READ_TIMEOUT = "NOCTAYA_BACKEND_READ_TIMEOUT"
BACKEND_HEAD_TIMEOUT = "NOCTAYA_BACKEND_HEAD_TIMEOUT"
DEMAND_AUTH_TOKEN_FILE = "NOCTAYA_DEMAND_AUTH_TOKEN_FILE"
SCALER_TLS_CERT_FILE = "NOCTAYA_SCALER_TLS_CERT_FILE"
SCALER_TLS_KEY_FILE = "NOCTAYA_SCALER_TLS_KEY_FILE"
SCALER_TLS_CLIENT_CA_FILE = "NOCTAYA_SCALER_TLS_CLIENT_CA_FILE"
AGGREGATOR_LISTEN_ADDR = "NOCTAYA_AGGREGATOR_LISTEN_ADDR"
MAX_GATEWAY_MEMBERS = "NOCTAYA_MAX_GATEWAY_MEMBERS"
MAX_GATEWAY_DEMAND = "NOCTAYA_MAX_GATEWAY_DEMAND"
BACKEND_ENDPOINTS = "NOCTAYA_BACKEND_ENDPOINTS"
"""`<namespace>/<service>`: the backend Service whose EndpointSlices the gateway (or aggregator)
follows, to send to and read from pod addresses; unset, it knows only `BACKEND_URL`."""
KUBERNETES_TOKEN_FILE = "NOCTAYA_KUBERNETES_TOKEN_FILE"
"""The projected ServiceAccount token the EndpointSlice watch presents (re-read as it rotates)."""
KUBERNETES_CA_FILE = "NOCTAYA_KUBERNETES_CA_FILE"
"""The CA bundle that signs the Kubernetes API server's certificate."""
SCALING_METRIC = "NOCTAYA_SCALING_METRIC"
"""`queueDepth` (unset) or `kvCacheUtil`: what the External Push scaler reports to KEDA."""
KV_CACHE_UTIL = "kvCacheUtil"
BACKEND_METRICS_PORT = "NOCTAYA_BACKEND_METRICS_PORT"
BACKEND_METRICS_PATH = "NOCTAYA_BACKEND_METRICS_PATH"
BACKEND_KV_CACHE_METRIC = "NOCTAYA_BACKEND_KV_CACHE_METRIC"
"""The engine's KV-cache gauge (a 0–1 fraction), read from each ready pod for `kvCacheUtil`."""


class FromReplica(enum.Enum):
    """A value no plan knows: the platform supplies it to each replica as it starts."""

    IDENTITY = "identity"
    """Unique per replica, so the aggregator counts each gateway once (a pod's UID)."""


EnvValue = str | FromReplica
EnvEntry = tuple[str, EnvValue]


@dataclass(frozen=True, slots=True)
class ScalerTLSFiles:
    cert_file: str
    key_file: str
    client_ca_file: str


@dataclass(frozen=True, slots=True)
class DemandReporting:
    """Where several replicas send their demand, and the token file that authenticates them."""

    aggregator_url: str
    token_file: str


@dataclass(frozen=True, slots=True)
class GatewayPlacement:
    """What differs between platforms: addresses and where the credentials are mounted."""

    backend_url: str
    listen_addr: str
    scaler_listen_addr: str
    """Where a lone gateway serves KEDA's gRPC (unused when the plan is aggregated)."""
    api_key_file: str | None = None
    scaler_tls: ScalerTLSFiles | None = None
    reporting: DemandReporting | None = None
    """Required when the plan runs several replicas."""
    readiness_path: str | None = None
    """Where the gateway itself asks whether the engine is ready, when nothing in front of the
    engine gates traffic on its readiness probe (local mode); unset, the gateway's default."""
    endpoints: str | None = None
    """`<namespace>/<service>` whose EndpointSlices the gateway follows (Kubernetes only)."""
    kubernetes_token_file: str | None = None
    kubernetes_ca_file: str | None = None


def scaler_tls_env(files: ScalerTLSFiles) -> list[EnvEntry]:
    return [
        (SCALER_TLS_CERT_FILE, files.cert_file),
        (SCALER_TLS_KEY_FILE, files.key_file),
        (SCALER_TLS_CLIENT_CA_FILE, files.client_ca_file),
    ]


def endpoints_env(
    endpoints: str, token_file: str | None = None, ca_file: str | None = None
) -> list[EnvEntry]:
    """The backend Service whose EndpointSlices a process follows, and the credentials its
    watch presents where the platform does not supply them another way."""
    result: list[EnvEntry] = [(BACKEND_ENDPOINTS, endpoints)]
    if token_file is not None:
        result.append((KUBERNETES_TOKEN_FILE, token_file))
    if ca_file is not None:
        result.append((KUBERNETES_CA_FILE, ca_file))
    return result


def kv_cache_env(scaling: KvCacheScaling) -> list[EnvEntry]:
    """For the process that serves KEDA: report the engine's KV-cache gauge, read from each
    ready pod its EndpointSlice watch knows, instead of the queue depth."""
    return [
        (SCALING_METRIC, KV_CACHE_UTIL),
        (BACKEND_METRICS_PORT, str(scaling.port)),
        (BACKEND_METRICS_PATH, scaling.path),
        (BACKEND_KV_CACHE_METRIC, scaling.metric),
    ]


def served_models_value(names: tuple[str, ...]) -> str:
    """A JSON list of strings: a model name may hold any character, commas included."""
    return json.dumps(list(names), ensure_ascii=False)


def request_limits_env(plan: GatewayPlan) -> list[EnvEntry]:
    """The limits the platform set; the gateway's own defaults stand for the others."""
    limits = plan.limits
    entries: list[tuple[str, object]] = [
        (MAX_REQUEST_BODY, limits.max_request_body),
        (REQUEST_BODY_TIMEOUT, limits.request_body_timeout),
        (CLIENT_SEND_TIMEOUT, limits.client_send_timeout),
        (BACKEND_READ_TIMEOUT, limits.backend_read_timeout),
        (BACKEND_HEAD_TIMEOUT, limits.backend_head_timeout),
    ]
    return [(name, str(value)) for name, value in entries if value is not None]


def gateway_env(plan: GatewayPlan, placement: GatewayPlacement) -> list[EnvEntry]:
    """In one fixed order: backend (its readiness path, the Service whose EndpointSlices it
    follows), listen, queue, scaler (and what it reports), timeout, cold start, served models,
    credentials, request limits.

    KV-cache scaling reads each pod, so a gateway that knows only the backend's address (local
    mode, a placement without `endpoints`) reports the queue depth."""
    result: list[EnvEntry] = [(BACKEND_URL, placement.backend_url)]
    if placement.readiness_path is not None:
        result.append((BACKEND_READINESS_PATH, placement.readiness_path))
    if placement.endpoints is not None:
        result.extend(
            endpoints_env(
                placement.endpoints, placement.kubernetes_token_file, placement.kubernetes_ca_file
            )
        )
    result += [(LISTEN_ADDR, placement.listen_addr), (MAX_QUEUE, str(plan.max_queue))]
    reporting = placement.reporting
    if plan.aggregated:
        if reporting is None:
            raise ValueError("several gateway replicas need a demand aggregator to report to")
        result.append((DEMAND_AGGREGATOR_URL, reporting.aggregator_url))
        result.append((GATEWAY_ID, FromReplica.IDENTITY))
    else:
        result.append((SCALER_LISTEN_ADDR, placement.scaler_listen_addr))
        if plan.kv_cache is not None and placement.endpoints is not None:
            result.extend(kv_cache_env(plan.kv_cache))
    if plan.activation_timeout.nanoseconds > 0:
        result.append((ACTIVATION_TIMEOUT, str(plan.activation_timeout)))
    if plan.cold_start_mode:
        result.append((COLDSTART_MODE, plan.cold_start_mode))
        if plan.heartbeat_interval.nanoseconds > 0:
            result.append((HEARTBEAT_INTERVAL, str(plan.heartbeat_interval)))
    if plan.served_models:
        result.append((SERVED_MODELS, served_models_value(plan.served_models)))
    if placement.api_key_file is not None:
        result.append((CLIENT_API_KEY_FILE, placement.api_key_file))
    if reporting is not None and plan.aggregated:
        result.append((DEMAND_AUTH_TOKEN_FILE, reporting.token_file))
    elif placement.scaler_tls is not None:
        result.extend(scaler_tls_env(placement.scaler_tls))
    result.extend(request_limits_env(plan))
    return result
