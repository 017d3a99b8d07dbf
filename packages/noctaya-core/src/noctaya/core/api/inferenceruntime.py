"""InferenceRuntime (cluster-scoped): a reusable serving image with its accelerator and health."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from noctaya.core.api import rules
from noctaya.core.api.base import (
    DNS_LABEL_PATTERN,
    GROUP_VERSION,
    ApiModel,
    Int32,
    PositiveInt64,
    StrictBool,
    VendorName,
)
from noctaya.core.api.kubernetes import (
    Condition,
    EnvVar,
    HTTPGetAction,
    ObjectMeta,
    Probe,
    Toleration,
    condition_list,
)
from noctaya.core.api.security_context import SecurityContext
from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator


class RuntimeFamily(StrEnum):
    """The serving engine a runtime's image runs, shown in the `Family` column.

    This is the one place a family is defined, and it changes nothing Noctaya renders: engine
    arguments, health probes and metric names come from the runtime's own `container`, `health`
    and `metrics` fields, whatever the family.
    """

    VLLM = "vllm"
    LLAMACPP = "llamacpp"


class ContainerPort(ApiModel):
    """The serving container's API port."""

    name: str = Field(default="http", max_length=15, pattern=DNS_LABEL_PATTERN)
    """Port name used by Services and probes."""
    container_port: Int32 = Field(default=8000, ge=1, le=65535)
    """Serving API port."""


class RuntimeContainer(ApiModel):
    """The serving container every backend replica runs."""

    image: str = Field(min_length=1)
    """Serving image exposing an OpenAI-compatible API."""
    args: list[str] = Field(default_factory=list)
    """Templates using {{ .Model.Path }}, {{ .Service.Name }} and {{ .Service.Namespace }}."""
    env: list[EnvVar] = Field(default_factory=list)
    """Environment of the serving container; literal values take the same templates."""
    port: ContainerPort
    """Where the engine serves its API; the backend Service and the probes use it."""
    security_context: SecurityContext | None = None
    """Copied to the serving container and its init container; the backend meets the
    restricted Pod Security level when this does. Whatever would break baseline is refused."""


class Sharing(ApiModel):
    """Reserved for fractional accelerator sharing."""

    supported: StrictBool = False
    """Capability placeholder; does not enable fractional allocation."""


class Scheduler(ApiModel):
    """Which scheduler places backend and prewarm Pods."""

    model_config = ConfigDict(
        json_schema_extra=rules.validations(rules.SCHEDULER_QUEUE_NEEDS_VOLCANO)
    )

    name: str | None = None
    """Pod schedulerName, for example volcano."""
    queue: str | None = None
    """Volcano queue annotation; requires name volcano."""

    @field_validator("queue")
    @classmethod
    def _queue_needs_volcano(cls, value: str | None, info: ValidationInfo) -> str | None:
        rules.SCHEDULER_QUEUE_NEEDS_VOLCANO.check(not value or info.data.get("name") == "volcano")
        return value


class Accelerator(ApiModel):
    """The device plugin resource and scheduling of backend Pods (prewarm Pods are placed the
    same way but request no accelerator)."""

    resource_name: str = Field(min_length=1)
    """Device-plugin resource, for example nvidia.com/gpu."""
    sharing: Sharing | None = None
    """Reserved: sharing.supported is a placeholder; true fails reconciliation (Render)."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Node labels backend and prewarm Pods require, for example the accelerator's product."""
    tolerations: list[Toleration] = Field(default_factory=list)
    """Tolerations of backend and prewarm Pods, for accelerator nodes' taints."""
    scheduler: Scheduler | None = None
    """A scheduler other than the default, and its queue."""


class ReadinessHTTPGet(HTTPGetAction):
    """The readiness probe's HTTP GET, whose path the gateway also requests itself."""

    model_config = ConfigDict(json_schema_extra=rules.validations(rules.REQUEST_PATH_PRINTABLE))

    _path_printable = field_validator("path")(rules.printable_path)


class ReadinessProbe(Probe):
    """A core/v1 Probe whose httpGet path the gateway can send as a request target."""

    http_get: ReadinessHTTPGet | None = None
    """Send an HTTP GET to the container; the gateway asks the same path."""


class Health(ApiModel):
    """Probes of the serving container (core/v1 Probes, copied as given)."""

    readiness: ReadinessProbe | None = None
    """Defaults to HTTP GET /health on the serving port."""
    liveness: Probe | None = None
    """None by default; restarts a serving container that stops answering."""
    startup: Probe | None = None
    """Defaults to HTTP GET /health every 10 seconds, 60 failures allowed."""


class Lifecycle(ApiModel):
    """How backend Pods stop."""

    termination_grace_period_seconds: PositiveInt64 | None = None
    """Base Pod shutdown budget; widened to drainTimeout + 10 s when preStopDrain is on."""
    pre_stop_drain: StrictBool = False
    """Sleep for the service's drainTimeout before stopping; needs /bin/sh in the image."""


class Metrics(ApiModel):
    """Where the engine's metrics are scraped and their names; only kvCacheUtil is read by
    Noctaya itself, for services that scale on it (`spec.scaling.metric: kvCacheUtil`)."""

    model_config = ConfigDict(
        json_schema_extra=rules.validations(rules.METRICS_QUEUE_DEPTH, rules.REQUEST_PATH_PRINTABLE)
    )

    path: str = "/metrics"
    """HTTP path of the engine's metrics."""
    port: str = "http"
    """Name of the port that serves them."""
    queue_depth: str | None = None
    """Runtime queue metric name; required when metrics is set."""
    kv_cache_util: str | None = None
    """KV-cache gauge name, a 0–1 fraction per replica (vLLM's vllm:kv_cache_usage_perc);
    services with scaling.metric kvCacheUtil scale on it."""
    running: str | None = None
    """Running-requests metric name."""
    ttft: str | None = None
    """Time-to-first-token metric name."""

    _path_printable = field_validator("path")(rules.printable_path)

    @model_validator(mode="after")
    def _queue_depth_required(self) -> Metrics:
        rules.METRICS_QUEUE_DEPTH.check(bool(self.queue_depth))
        return self


class InferenceRuntimeSpec(ApiModel):
    family: RuntimeFamily = RuntimeFamily.VLLM
    """Serving-engine family: vllm or llamacpp (llama.cpp's OpenAI-compatible server). Shown in
    the Family column; it changes nothing rendered: arguments, probes and metrics come from the
    runtime's own fields."""
    vendor: VendorName
    """The vendor plugin that renders the accelerator: nvidia, ascend and cpu are built in,
    others come from installed `noctaya.vendors` plugins and are checked when a service uses
    them."""
    priority: Int32 = 0
    """Higher wins within a selected vendor; equal top values are ambiguous."""
    container: RuntimeContainer
    """The serving container: image, templated args and env, port."""
    accelerator: Accelerator
    """The accelerator resource and where backend Pods may run."""
    health: Health = Field(default_factory=Health)
    """Readiness, liveness and startup probes of the serving container."""
    lifecycle: Lifecycle = Field(default_factory=Lifecycle)
    """Shutdown budget and pre-stop drain."""
    metrics: Metrics | None = None
    """Scrape metadata of the engine's own metrics; kvCacheUtil scaling reads its gauge."""


class InferenceRuntimeStatus(ApiModel):
    """Declared but never populated: the runtime controller is passive."""

    conditions: list[Condition] = condition_list()
    """Always empty: each LLMService reports the state of the runtime it uses."""


class InferenceRuntime(ApiModel):
    """A reusable serving profile: image, arguments, accelerator, scheduling and health."""

    api_version: Literal["serving.noctaya.io/v1alpha1"] = GROUP_VERSION
    kind: Literal["InferenceRuntime"] = "InferenceRuntime"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: InferenceRuntimeSpec
    status: InferenceRuntimeStatus = Field(default_factory=InferenceRuntimeStatus)
