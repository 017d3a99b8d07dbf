"""The gateway tier: replica count, admission and cold-start settings, credentials to mount,
and what the platform gives every gateway where the service says nothing (`GatewayDefaults`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from noctaya.core.api import LLMServiceSpec
from noctaya.core.api.llmservice import GatewayResources
from noctaya.core.errors import NoctayaError
from noctaya.core.plan.container import Scheduling
from noctaya.core.values import Duration

REASON = "GatewayConfig"
INT32_MAX = 2**31 - 1
DEFAULT_MAX_QUEUE = 100


def validate_gateway_replicas(replicas: int) -> int:
    """The operator flag's rule, shared with planning so both say the same thing."""
    if replicas < 1:
        raise ValueError("gateway replicas must be at least 1")
    if replicas > INT32_MAX:
        raise ValueError("gateway replicas must fit in a Kubernetes int32 field")
    return replicas


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """The gateway's bounds on one exchange no LLMService field sets; None: the gateway's own
    default (see its settings)."""

    max_request_body: int | None = None
    """Bytes."""
    request_body_timeout: Duration | None = None
    client_send_timeout: Duration | None = None
    backend_read_timeout: Duration | None = None
    backend_head_timeout: Duration | None = None


@dataclass(frozen=True, slots=True)
class GatewayDefaults:
    """What the platform gives every gateway and aggregator it runs (the operator's
    `--gateway-*` flags): resources where `spec.endpoint.resources` is unset, request limits,
    and where they may run."""

    resources: GatewayResources | None = None
    limits: RequestLimits = field(default_factory=RequestLimits)
    scheduling: Scheduling = field(default_factory=Scheduling)


@dataclass(frozen=True, slots=True)
class ApiKeyPlan:
    secret_name: str
    key: str


@dataclass(frozen=True, slots=True)
class KvCacheScaling:
    """`spec.scaling.metric: kvCacheUtil`: the engine gauge read from each ready pod, where."""

    metric: str
    """The runtime's `spec.metrics.kvCacheUtil`: a 0–1 fraction per pod."""
    port: int
    path: str


@dataclass(frozen=True, slots=True)
class GatewayPlan:
    image: str
    replicas: int
    max_queue: int
    activation_timeout: Duration
    cold_start_mode: str
    heartbeat_interval: Duration
    api_key: ApiKeyPlan | None
    scaler_tls_secret: str | None
    resources: GatewayResources | None
    image_pull_secrets: tuple[str, ...]
    limits: RequestLimits = field(default_factory=RequestLimits)
    scheduling: Scheduling = field(default_factory=Scheduling)
    served_models: tuple[str, ...] = ()
    """The names the engine answers to (`served_model_names`), listed while it is cold."""
    readiness_path: str | None = None
    """The runtime's readiness `httpGet` path where it is not the gateway's default: through the
    Service the gateway must ask what the kubelet asks each pod, or an engine without `/health`
    (llama.cpp's server) is never seen ready."""
    kv_cache: KvCacheScaling | None = None
    """Set when the service scales on KV-cache use instead of demand."""

    @property
    def aggregated(self) -> bool:
        """Several gateways report demand to one aggregate scaler instead of serving gRPC."""
        return self.replicas > 1

    @property
    def max_members(self) -> int:
        """Aggregator membership bound: room for a full rollout's overlap of old and new pods."""
        return max(16, 4 * self.replicas)


def plan_gateway(
    spec: LLMServiceSpec,
    image: str,
    replicas: int,
    scaler_tls_secret: str | None,
    defaults: GatewayDefaults | None = None,
    served_models: tuple[str, ...] = (),
    readiness_path: str | None = None,
    kv_cache: KvCacheScaling | None = None,
) -> GatewayPlan:
    if not image:
        raise NoctayaError(REASON, "gateway image is required")
    try:
        replicas = validate_gateway_replicas(replicas or 1)
    except ValueError as exc:
        raise NoctayaError(REASON, str(exc)) from None
    auth = spec.endpoint.authentication
    defaults = defaults or GatewayDefaults()
    return GatewayPlan(
        image=image,
        replicas=replicas,
        max_queue=spec.endpoint.max_queue or DEFAULT_MAX_QUEUE,
        activation_timeout=spec.scaling.activation_timeout,
        cold_start_mode=spec.endpoint.cold_start.mode.value,
        heartbeat_interval=spec.endpoint.cold_start.heartbeat_interval,
        api_key=ApiKeyPlan(auth.secret_ref.name, auth.secret_ref.key) if auth else None,
        scaler_tls_secret=scaler_tls_secret,
        resources=spec.endpoint.resources or defaults.resources,
        image_pull_secrets=tuple(ref.name for ref in spec.image_pull_secrets if ref.name),
        limits=defaults.limits,
        scheduling=defaults.scheduling,
        served_models=served_models,
        readiness_path=readiness_path,
        kv_cache=kv_cache,
    )
