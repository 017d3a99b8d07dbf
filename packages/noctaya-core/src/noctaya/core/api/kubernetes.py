"""The Kubernetes types the API embeds, modelled as far as Noctaya copies them into Pods.

They follow the core/v1 and meta/v1 field names and formats so a manifest round-trips unchanged.
Only `EnvVarSource` keeps unknown keys (`x-kubernetes-preserve-unknown-fields`): Kubernetes keeps
adding sources (`fileKeyRef` arrived in 1.34), and an env var is copied verbatim into the serving
container, so the cluster's own Pod validation, not this schema, is the right judge of a source
this version does not know.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from noctaya.core.api import names
from noctaya.core.api.base import (
    ApiModel,
    ApiQuantity,
    Int64,
    NonNegativeInt32,
    NonNegativeInt64,
    PortNumber,
    PortNumberOrName,
    PositiveInt64,
    StrictBool,
)
from pydantic import AfterValidator, ConfigDict, Field


class LocalObjectReference(ApiModel):
    """A reference to an object by name in the same namespace."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    name: str | None = None
    """Name of the referent."""


class ObjectFieldSelector(ApiModel):
    """A field of the Pod, as the downward API exposes it."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    api_version: str | None = None
    """Version of the schema `fieldPath` is written in; v1 by default."""
    field_path: str
    """Path of the field to select, for example `metadata.uid`."""


class ResourceFieldSelector(ApiModel):
    """A container's resource request or limit, as the downward API exposes it."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    container_name: str | None = None
    """The container whose resource is read; the serving container by default."""
    resource: str
    """The resource, for example limits.memory."""
    divisor: ApiQuantity | None = None
    """The unit the value is given in; 1 by default."""


class KeySelector(ApiModel):
    """A key of a ConfigMap or Secret in the Pod's namespace."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    name: str | None = None
    """The ConfigMap's or Secret's name."""
    key: str
    """The key whose value is used."""
    optional: StrictBool | None = None
    """Start the container even when the object or key is missing."""


class EnvVarSource(ApiModel):
    """Where an env var's value comes from; unknown (newer) sources pass through unchanged."""

    model_config = ConfigDict(
        extra="allow", json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )

    field_ref: ObjectFieldSelector | None = None
    """A field of the Pod, for example metadata.name."""
    resource_field_ref: ResourceFieldSelector | None = None
    """A resource request or limit of a container."""
    config_map_key_ref: KeySelector | None = None
    """A key of a ConfigMap in the service's namespace."""
    secret_key_ref: KeySelector | None = None
    """A key of a Secret in the service's namespace, for example a hub token."""


class EnvVar(ApiModel):
    """An environment variable of the serving container (a core/v1 EnvVar)."""

    name: str
    """The variable's name."""
    value: str | None = None
    """Literal value; `{{ .Model.Path }}`, `{{ .Service.Name }}` and `{{ .Service.Namespace }}` are
    expanded."""
    value_from: EnvVarSource | None = None
    """Where the value comes from instead (core/v1 sources, newer ones included)."""


class Toleration(ApiModel):
    """A core/v1 Toleration: lets a Pod run on nodes with a matching taint."""

    key: str | None = None
    """The taint key; empty with operator Exists matches every taint."""
    operator: str | None = None
    """Equal (the default) or Exists."""
    value: str | None = None
    """The taint value to match with Equal."""
    effect: str | None = None
    """NoSchedule, PreferNoSchedule or NoExecute; empty matches all three."""
    toleration_seconds: Int64 | None = None
    """For NoExecute: how long the Pod stays on a node after the taint appears."""


class ExecAction(ApiModel):
    """A command run in the container; exit status 0 passes."""

    command: list[str] = Field(default_factory=list)
    """The command and its arguments (not run in a shell)."""


class HTTPHeader(ApiModel):
    """A header sent with the probe's request."""

    name: str
    """Header name."""
    value: str
    """Header value."""


class HTTPGetAction(ApiModel):
    """An HTTP GET to the container; a status from 200 to 399 passes."""

    path: str | None = None
    """Request path, for example /health."""
    port: PortNumberOrName
    """Port number or name, for example http."""
    host: str | None = None
    """Host to connect to; the Pod's IP by default."""
    scheme: str | None = None
    """HTTP (the default) or HTTPS."""
    http_headers: list[HTTPHeader] | None = None
    """Extra request headers."""


class TCPSocketAction(ApiModel):
    """A TCP connection to the container; connecting passes."""

    port: PortNumberOrName
    """Port number or name."""
    host: str | None = None
    """Host to connect to; the Pod's IP by default."""


class GRPCAction(ApiModel):
    """A gRPC health check (grpc.health.v1) against the container."""

    port: PortNumber
    """Port number of the gRPC server."""
    service: str | None = None
    """Service name sent in the health check request."""


class Probe(ApiModel):
    """A core/v1 Probe, copied into the serving container unchanged.

    Its bounds are the Pod validation's (zero means the Kubernetes default), so a runtime that
    would make every backend Pod fail admission is refused when it is written.
    """

    exec: ExecAction | None = None
    """Run a command in the container."""
    http_get: HTTPGetAction | None = None
    """Send an HTTP GET to the container."""
    tcp_socket: TCPSocketAction | None = None
    """Open a TCP connection to the container."""
    grpc: GRPCAction | None = None
    """Ask the container's gRPC health service."""
    initial_delay_seconds: NonNegativeInt32 | None = None
    """Seconds after the container starts before the first probe."""
    timeout_seconds: NonNegativeInt32 | None = None
    """Seconds one probe may take; 1 by default."""
    period_seconds: NonNegativeInt32 | None = None
    """Seconds between probes; 10 by default."""
    success_threshold: NonNegativeInt32 | None = None
    """Consecutive successes that count as passing after a failure; 1 by default."""
    failure_threshold: NonNegativeInt32 | None = None
    """Consecutive failures that count as failing; 3 by default."""
    termination_grace_period_seconds: PositiveInt64 | None = None
    """For liveness and startup probes: the grace period of a Pod stopped by this probe."""


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(ApiModel):
    """A meta/v1 Condition, with the same bounds and patterns the API server enforces."""

    type: str = Field(
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
    """Ready, Degraded or AutoscalingReady."""
    status: ConditionStatus
    """True, False or Unknown."""
    observed_generation: NonNegativeInt64 | None = None
    """The metadata.generation the condition was computed for."""
    last_transition_time: datetime
    """When the status last changed."""
    reason: str = Field(
        min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
    )
    """A stable reason, listed in Troubleshooting."""
    message: str = Field(max_length=32768)
    """What happened, naming the field or object at fault."""


def condition_list() -> Any:
    """Conditions as a map list keyed by `type`, so server-side apply merges them per type."""
    return Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


def _named(rule: names.NameRule) -> AfterValidator:
    """A name checked by `rule`; an empty one is left to whoever requires a name."""

    def check(value: str | None) -> str | None:
        if value:
            names.rule_error(rule.problem(value))
        return value

    return AfterValidator(check)


def _labels(labels: dict[str, str]) -> dict[str, str]:
    for key, value in labels.items():
        names.rule_error(names.qualified_name_problem(key) or names.label_value_problem(value))
    return labels


def _annotations(annotations: dict[str, str]) -> dict[str, str]:
    for key in annotations:
        names.rule_error(names.qualified_name_problem(key))
    names.rule_error(names.annotations_size_problem(annotations))
    return annotations


class ObjectMeta(ApiModel):
    """The metadata fields Noctaya reads, checked as the API server checks them on create;
    everything else the API server sends is kept."""

    model_config = ConfigDict(extra="allow")

    name: Annotated[str | None, _named(names.OBJECT_NAME)] = None
    namespace: Annotated[str | None, _named(names.NAMESPACE_NAME)] = None
    uid: str | None = None
    resource_version: str | None = None
    generation: NonNegativeInt64 | None = None
    labels: Annotated[dict[str, str], AfterValidator(_labels)] = Field(default_factory=dict)
    annotations: Annotated[dict[str, str], AfterValidator(_annotations)] = Field(
        default_factory=dict
    )


class LLMServiceMeta(ObjectMeta):
    """An LLMService's name also names its Services and, suffixed, label values."""

    name: Annotated[str | None, _named(names.LLMSERVICE_NAME)] = None
