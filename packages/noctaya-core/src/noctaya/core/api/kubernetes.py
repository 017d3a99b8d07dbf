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
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    api_version: str | None = None
    field_path: str
    """Path of the field to select, for example `metadata.uid`."""


class ResourceFieldSelector(ApiModel):
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    container_name: str | None = None
    resource: str
    divisor: ApiQuantity | None = None


class KeySelector(ApiModel):
    """A key of a ConfigMap or Secret in the Pod's namespace."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    name: str | None = None
    key: str
    optional: StrictBool | None = None


class EnvVarSource(ApiModel):
    """Where an env var's value comes from; unknown (newer) sources pass through unchanged."""

    model_config = ConfigDict(
        extra="allow", json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )

    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    config_map_key_ref: KeySelector | None = None
    secret_key_ref: KeySelector | None = None


class EnvVar(ApiModel):
    name: str
    value: str | None = None
    """Literal value; `{{ .Model.Path }}`, `{{ .Service.Name }}` and `{{ .Service.Namespace }}` are
    expanded."""
    value_from: EnvVarSource | None = None


class Toleration(ApiModel):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: Int64 | None = None


class ExecAction(ApiModel):
    command: list[str] = Field(default_factory=list)


class HTTPHeader(ApiModel):
    name: str
    value: str


class HTTPGetAction(ApiModel):
    path: str | None = None
    port: PortNumberOrName
    host: str | None = None
    scheme: str | None = None
    http_headers: list[HTTPHeader] | None = None


class TCPSocketAction(ApiModel):
    port: PortNumberOrName
    host: str | None = None


class GRPCAction(ApiModel):
    port: PortNumber
    service: str | None = None


class Probe(ApiModel):
    """A core/v1 Probe, copied into the serving container unchanged.

    Its bounds are the Pod validation's (zero means the Kubernetes default), so a runtime that
    would make every backend Pod fail admission is refused when it is written.
    """

    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    grpc: GRPCAction | None = None
    initial_delay_seconds: NonNegativeInt32 | None = None
    timeout_seconds: NonNegativeInt32 | None = None
    period_seconds: NonNegativeInt32 | None = None
    success_threshold: NonNegativeInt32 | None = None
    failure_threshold: NonNegativeInt32 | None = None
    termination_grace_period_seconds: PositiveInt64 | None = None


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
    status: ConditionStatus
    observed_generation: NonNegativeInt64 | None = None
    last_transition_time: datetime
    reason: str = Field(
        min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
    )
    message: str = Field(max_length=32768)


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
