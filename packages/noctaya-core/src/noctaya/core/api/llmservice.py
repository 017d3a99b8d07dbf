"""LLMService (namespaced): a model endpoint with its resources, scaling, cache and cold start."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from noctaya.core.api import rules
from noctaya.core.api.base import (
    GROUP_VERSION,
    ApiDuration,
    ApiModel,
    Int32,
    NonNegativeInt32,
    NonNegativeQuantity,
    StrictBool,
    VendorName,
    empty_object_default,
)
from noctaya.core.api.kubernetes import (
    Condition,
    LLMServiceMeta,
    LocalObjectReference,
    condition_list,
)
from noctaya.core.model_source import SECRET_REF_SCHEMES, holds_credentials
from noctaya.core.values import Duration
from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator


class ModelSource(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=rules.validations(
            rules.URI_WITHOUT_CREDENTIALS, rules.SECRET_REF_SOURCES, rules.SECRET_REF_NAME
        )
    )

    uri: str = Field(min_length=1)
    """hf:// (or huggingface://), modelscope://, oci://<registry>/<repository>@sha256:<digest>,
    or pvc://<claim>[/<subpath>]. Never with credentials: user:password@ or token@ is refused,
    and so is any @ in an hf:// or modelscope:// URI (it would reach the engine's arguments and
    the served-model list); secretRef gives them."""
    secret_ref: LocalObjectReference | None = None
    """A Secret in the service namespace with the source's credentials. oci://: a
    kubernetes.io/dockerconfigjson Secret for the registry. hf:// and modelscope://: a Secret
    whose key `token` holds the hub access token (gated or private models), given to the
    prewarm Job and the serving container as HF_TOKEN or MODELSCOPE_API_TOKEN."""

    @field_validator("uri")
    @classmethod
    def _uri_without_credentials(cls, value: str) -> str:
        rules.URI_WITHOUT_CREDENTIALS.check(not holds_credentials(value))
        return value

    @field_validator("secret_ref")
    @classmethod
    def _secret_ref_for_credentialed_sources(
        cls, value: LocalObjectReference | None, info: ValidationInfo
    ) -> LocalObjectReference | None:
        if value is not None:
            if "uri" in info.data:  # else the uri's own error is the one to report
                scheme = info.data["uri"].partition("://")[0].lower()
                rules.SECRET_REF_SOURCES.check(scheme in SECRET_REF_SCHEMES)
            rules.SECRET_REF_NAME.check(bool(value.name))
        return value


class ModelSpec(ApiModel):
    model_config = ConfigDict(json_schema_extra=rules.validations(rules.MODEL_SOURCE_EXCLUSIVE))

    source: ModelSource | None = None
    """Where the weights come from: a hub, an OCI artifact or an existing claim."""
    catalog_ref: str | None = None
    """Reserved for model-catalog lookup; not implemented."""

    @model_validator(mode="after")
    def _exactly_one_source(self) -> ModelSpec:
        rules.MODEL_SOURCE_EXCLUSIVE.check((self.source is not None) != bool(self.catalog_ref))
        return self


class RuntimeSelector(ApiModel):
    vendor: list[VendorName] | None = Field(default=None, min_length=1)
    """Vendors in preference order (built in: nvidia, ascend, cpu; others come from installed vendor
    plugins); the first with a runtime wins, then the highest priority."""


class RuntimeSelection(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=rules.validations(rules.RUNTIME_SELECTION_EXCLUSIVE)
    )

    name: str | None = None
    """Pins one cluster-scoped InferenceRuntime."""
    selector: RuntimeSelector | None = None
    """Selects a runtime by vendor instead of by name."""
    args_override: list[str] = Field(default_factory=list)
    """Arguments appended after the runtime's templated arguments (templated too)."""

    @model_validator(mode="after")
    def _exactly_one_selection(self) -> RuntimeSelection:
        by_vendor = self.selector is not None and bool(self.selector.vendor)
        rules.RUNTIME_SELECTION_EXCLUSIVE.check(bool(self.name) != by_vendor)
        return self


class Fraction(ApiModel):
    """Reserved for sub-device sharing; any value fails reconciliation."""

    memory: NonNegativeQuantity | None = None
    """Reserved: a share of one device's memory."""
    cores: NonNegativeQuantity | None = None
    """Reserved: a share of one device's cores."""


class Resources(ApiModel):
    """What each backend replica requests: whole accelerators, CPU and memory."""

    accelerators: Int32 = Field(default=1, ge=1)
    """Devices requested per backend replica: whole GPUs or NPUs, or CPU cores for the cpu
    vendor."""
    cpu: NonNegativeQuantity | None = None
    """CPU request per backend replica."""
    memory: NonNegativeQuantity | None = None
    """Memory request and limit per backend replica."""
    fraction: Fraction | None = None
    """Reserved for sub-device sharing; not implemented, so any value fails reconciliation
    (reason Render)."""


class ScalingMetric(StrEnum):
    QUEUE_DEPTH = "queueDepth"
    KV_CACHE_UTIL = "kvCacheUtil"


class AuthenticationKind(StrEnum):
    TRIGGER_AUTHENTICATION = "TriggerAuthentication"
    CLUSTER_TRIGGER_AUTHENTICATION = "ClusterTriggerAuthentication"


class AuthenticationRef(ApiModel):
    """The KEDA authentication object the ScaledObject's trigger names."""

    name: str | None = Field(default=None, min_length=1)
    """The KEDA object that supplies caCert, tlsClientCert and tlsClientKey."""
    kind: AuthenticationKind = AuthenticationKind.TRIGGER_AUTHENTICATION
    """TriggerAuthentication (in the service's namespace) or ClusterTriggerAuthentication."""


class ScalerTLS(ApiModel):
    """Mutual TLS between KEDA and the scaler; Noctaya consumes existing credentials and neither
    issues nor rotates them."""

    model_config = ConfigDict(json_schema_extra=rules.validations(rules.SCALER_TLS_COMPLETE))

    server_secret_name: str | None = Field(default=None, min_length=1)
    """Existing Secret with tls.crt, tls.key and the client-verifying ca.crt."""
    authentication_ref: AuthenticationRef | None = None
    """The KEDA object holding KEDA's client certificate and the server's CA."""

    @model_validator(mode="after")
    def _both_fields(self) -> ScalerTLS:
        ref = self.authentication_ref
        rules.SCALER_TLS_COMPLETE.check(
            bool(self.server_secret_name) and ref is not None and bool(ref.name)
        )
        return self


class ExternalScaler(ApiModel):
    """How KEDA reaches the service's External Push scaler."""

    tls: ScalerTLS | None = None
    """Mutual TLS for the gRPC connection; unset: plaintext inside the cluster."""


class Scaling(ApiModel):
    """Backend replicas between min and max, driven by the gateways' demand through KEDA."""

    model_config = ConfigDict(
        json_schema_extra=rules.validations(
            rules.SCALING_MIN_MAX,
            rules.ACTIVATION_TIMEOUT_POSITIVE,
            rules.STABILIZATION_WHOLE_SECONDS,
            rules.DRAIN_TIMEOUT_NON_NEGATIVE,
            rules.KV_CACHE_TARGET_PERCENT,
        )
    )

    min: Int32 = Field(default=0, ge=0)
    """Minimum backend replicas; 0 enables scale-to-zero."""
    max: Int32 = Field(default=1, ge=1, validate_default=True)
    """Maximum backend replicas; at least min."""
    metric: ScalingMetric = ScalingMetric.QUEUE_DEPTH
    """queueDepth (the gateways' held and in-flight requests) or kvCacheUtil (the engine's
    KV-cache gauge of each ready replica, named by the runtime's metrics.kvCacheUtil)."""
    target: Int32 = Field(default=10, ge=1)
    """Per backend replica: requests for queueDepth, percent of KV cache (1 to 100) for
    kvCacheUtil."""
    activation_timeout: ApiDuration = Field(default="5m", validate_default=True)
    """Bounds a cold request's wait or a reject-mode activation lease."""
    scale_down_stabilization: ApiDuration = Field(default="5m", validate_default=True)
    """HPA stabilization window and KEDA cooldown before scale-to-zero."""
    drain_timeout: ApiDuration = Field(default="2m", validate_default=True)
    """Pre-stop drain time when the runtime enables preStopDrain."""
    external_scaler: ExternalScaler | None = None
    """The KEDA External Push scaler's connection settings."""

    @field_validator("max")
    @classmethod
    def _min_not_above_max(cls, value: int, info: ValidationInfo) -> int:
        minimum = info.data.get("min")
        rules.SCALING_MIN_MAX.check(minimum is None or minimum <= value)
        return value

    @field_validator("target")
    @classmethod
    def _kv_cache_target_percent(cls, value: int, info: ValidationInfo) -> int:
        kv_cache = info.data.get("metric") is ScalingMetric.KV_CACHE_UTIL
        rules.KV_CACHE_TARGET_PERCENT.check(not kv_cache or value <= 100)
        return value

    @field_validator("activation_timeout")
    @classmethod
    def _activation_positive(cls, value: Duration) -> Duration:
        rules.ACTIVATION_TIMEOUT_POSITIVE.check(value.nanoseconds > 0)
        return value

    @field_validator("scale_down_stabilization")
    @classmethod
    def _stabilization_whole_seconds(cls, value: Duration) -> Duration:
        rules.STABILIZATION_WHOLE_SECONDS.check(
            value.is_whole_seconds() and Duration(0) <= value <= Duration.parse("1h")
        )
        return value

    @field_validator("drain_timeout")
    @classmethod
    def _drain_non_negative(cls, value: Duration) -> Duration:
        rules.DRAIN_TIMEOUT_NON_NEGATIVE.check(value.nanoseconds >= 0)
        return value


class CacheStrategy(StrEnum):
    NODE_LOCAL_PVC = "NodeLocalPVC"
    HOST_PATH = "HostPath"
    SHARED_PVC = "SharedPVC"
    BAKED_IMAGE = "BakedImage"
    """Reserved; not implemented."""
    NONE = "None"


class Cache(ApiModel):
    """Where the model's files are kept between backend starts."""

    strategy: CacheStrategy = CacheStrategy.NODE_LOCAL_PVC
    """NodeLocalPVC (a ReadWriteOnce claim), SharedPVC (ReadWriteMany), HostPath (a node
    folder), None (no cache: the engine downloads on each start); BakedImage is reserved."""
    size: NonNegativeQuantity | None = None
    """PVC request for NodeLocalPVC or SharedPVC; the controller defaults it to 50Gi."""
    storage_class_name: str | None = None
    """StorageClass of the cache claim; unset: the cluster's default class. SharedPVC needs one
    that supports ReadWriteMany."""
    prewarm: StrictBool = False
    """Download a hub model into the persistent cache with a one-off Job before serving."""


class ComputeAmounts(ApiModel):
    """CPU and memory amounts."""

    cpu: NonNegativeQuantity | None = None
    """CPU, for example 100m."""
    memory: NonNegativeQuantity | None = None
    """Memory, for example 128Mi."""


class GatewayResources(ApiModel):
    """Requests and limits of each gateway replica's container."""

    requests: ComputeAmounts | None = None
    """CPU and memory each gateway replica requests."""
    limits: ComputeAmounts | None = None
    """CPU and memory limits of each gateway replica."""


class SecretKeyReference(ApiModel):
    """A key of a Secret in the service's namespace."""

    name: str = Field(min_length=1)
    """The Secret's name."""
    key: str = Field(min_length=1)
    """Secret data key holding the accepted Bearer token."""


class EndpointAuthentication(ApiModel):
    """Clients must send `Authorization: Bearer <key>`; the gateway rereads the key on every
    request, so rotating the Secret needs no restart."""

    secret_ref: SecretKeyReference
    """The Secret key holding the accepted key."""


class ColdStartMode(StrEnum):
    KEEPALIVE = "keepalive"
    REJECT = "reject"


class ColdStart(ApiModel):
    """What a request meets while the backend is scaled to zero or starting."""

    model_config = ConfigDict(json_schema_extra=rules.validations(rules.HEARTBEAT_POSITIVE))

    mode: ColdStartMode = ColdStartMode.KEEPALIVE
    """keepalive holds streams with SSE heartbeats; reject returns 503 with Retry-After."""
    heartbeat_interval: ApiDuration = Field(default="10s", validate_default=True)
    """Time between SSE `: heartbeat` comments to a held streaming request."""

    @field_validator("heartbeat_interval")
    @classmethod
    def _heartbeat_positive(cls, value: Duration) -> Duration:
        rules.HEARTBEAT_POSITIVE.check(value.nanoseconds > 0)
        return value


class Endpoint(ApiModel):
    """The always-on gateway: admission, authentication, cold-start behaviour and resources."""

    open_ai_compatible: StrictBool = Field(default=True, alias="openAICompatible")
    """Informational; the gateway always serves the OpenAI-compatible API."""
    max_queue: Int32 = Field(default=100, ge=1)
    """Admitted requests per gateway replica; overflow gets 429 with Retry-After."""
    resources: GatewayResources | None = None
    """CPU and memory of each gateway replica; unset: the operator's --gateway-* defaults."""
    authentication: EndpointAuthentication | None = None
    """Bearer-key authentication of the proxied routes; unset: none."""
    cold_start: ColdStart = empty_object_default(ColdStart)
    """What a request meets while no backend is ready."""


class LLMServiceSpec(ApiModel):
    model: ModelSpec
    """The model to serve: exactly one of source or catalogRef."""
    runtime: RuntimeSelection
    """The InferenceRuntime to serve it with: exactly one of name or selector.vendor."""
    resources: Resources = empty_object_default(Resources)
    """What each backend replica requests."""
    scaling: Scaling = empty_object_default(Scaling)
    """Backend replicas, scale-to-zero and the activation of a cold backend."""
    cache: Cache = empty_object_default(Cache)
    """Where the model's files are kept between backend starts."""
    endpoint: Endpoint = empty_object_default(Endpoint)
    """The always-on OpenAI-compatible gateway in front of the backend."""
    image_pull_secrets: list[LocalObjectReference] = Field(default_factory=list)
    """Applied to backend, gateway and prewarm Pods."""


class Phase(StrEnum):
    PENDING = "Pending"
    LOADING = "Loading"
    READY = "Ready"
    SCALED_TO_ZERO = "ScaledToZero"
    DEGRADED = "Degraded"


class LLMServiceStatus(ApiModel):
    phase: Phase | None = None
    """Summary: Pending, Loading, Ready, ScaledToZero or Degraded."""
    resolved_runtime: str | None = None
    """Name of the InferenceRuntime the controller selected."""
    replicas: NonNegativeInt32 | None = None
    """Ready backend replicas (gateway replicas not included)."""
    endpoint_url: str | None = Field(default=None, alias="endpointURL")
    """In-cluster OpenAI-compatible base URL, ending in /v1."""
    conditions: list[Condition] = condition_list()
    """Ready (serving now), Degraded (a failure that will not fix itself) and AutoscalingReady
    (KEDA External Push configured), each at the reconciled generation."""


class LLMService(ApiModel):
    """A model endpoint: a scale-to-zero engine backend behind an always-on gateway."""

    api_version: Literal["serving.noctaya.io/v1alpha1"] = GROUP_VERSION
    kind: Literal["LLMService"] = "LLMService"
    metadata: LLMServiceMeta = Field(default_factory=LLMServiceMeta)
    spec: LLMServiceSpec
    status: LLMServiceStatus = Field(default_factory=LLMServiceStatus)
