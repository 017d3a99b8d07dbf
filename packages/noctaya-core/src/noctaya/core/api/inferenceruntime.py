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
    ObjectMeta,
    Probe,
    Toleration,
    condition_list,
)
from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator


class RuntimeFamily(StrEnum):
    VLLM = "vllm"


class ContainerPort(ApiModel):
    name: str = Field(default="http", max_length=15, pattern=DNS_LABEL_PATTERN)
    """Port name used by Services and probes."""
    container_port: Int32 = Field(default=8000, ge=1, le=65535)
    """Serving API port."""


class RuntimeContainer(ApiModel):
    image: str = Field(min_length=1)
    """Serving image exposing an OpenAI-compatible API."""
    args: list[str] = Field(default_factory=list)
    """Templates using {{ .Model.Path }}, {{ .Service.Name }} and {{ .Service.Namespace }}."""
    env: list[EnvVar] = Field(default_factory=list)
    port: ContainerPort


class Sharing(ApiModel):
    supported: StrictBool = False
    """Capability placeholder; does not enable fractional allocation."""


class Scheduler(ApiModel):
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
    resource_name: str = Field(min_length=1)
    """Device-plugin resource, for example nvidia.com/gpu."""
    sharing: Sharing | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    scheduler: Scheduler | None = None


class Health(ApiModel):
    readiness: Probe | None = None
    """Defaults to HTTP GET /health on the serving port."""
    liveness: Probe | None = None
    startup: Probe | None = None
    """Defaults to HTTP GET /health every 10 seconds, 60 failures allowed."""


class Lifecycle(ApiModel):
    termination_grace_period_seconds: PositiveInt64 | None = None
    pre_stop_drain: StrictBool = False
    """Sleep for the service's drainTimeout before stopping; needs /bin/sh in the image."""


class Metrics(ApiModel):
    """External scrape metadata; autoscaling uses gateway demand, not these metrics."""

    model_config = ConfigDict(json_schema_extra=rules.validations(rules.METRICS_QUEUE_DEPTH))

    path: str = "/metrics"
    port: str = "http"
    queue_depth: str | None = None
    """Runtime queue metric name; required when metrics is set."""
    kv_cache_util: str | None = None
    running: str | None = None
    ttft: str | None = None

    @model_validator(mode="after")
    def _queue_depth_required(self) -> Metrics:
        rules.METRICS_QUEUE_DEPTH.check(bool(self.queue_depth))
        return self


class InferenceRuntimeSpec(ApiModel):
    family: RuntimeFamily = RuntimeFamily.VLLM
    vendor: VendorName
    """The vendor plugin that renders the accelerator: nvidia and ascend are built in, others
    come from installed `noctaya.vendors` plugins and are checked when a service uses them."""
    priority: Int32 = 0
    """Higher wins within a selected vendor; equal top values are ambiguous."""
    container: RuntimeContainer
    accelerator: Accelerator
    health: Health = Field(default_factory=Health)
    lifecycle: Lifecycle = Field(default_factory=Lifecycle)
    metrics: Metrics | None = None


class InferenceRuntimeStatus(ApiModel):
    """Declared but never populated: the runtime controller is passive."""

    conditions: list[Condition] = condition_list()


class InferenceRuntime(ApiModel):
    """A reusable serving profile: image, arguments, accelerator, scheduling and health."""

    api_version: Literal["serving.noctaya.io/v1alpha1"] = GROUP_VERSION
    kind: Literal["InferenceRuntime"] = "InferenceRuntime"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: InferenceRuntimeSpec
    status: InferenceRuntimeStatus = Field(default_factory=InferenceRuntimeStatus)
