"""KEDA's externalscaler messages (`_proto/externalscaler.proto`), read and written by the scaler.

Requests decode to plain values; responses are encoded straight to bytes, since the scaler only
ever sends them. Field numbers are the proto file's; `tests/scaler/test_messages.py` checks both
directions against the generated protobuf classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from noctaya.gateway.scaler.protobuf_wire import (
    LEN,
    bool_field,
    double_field,
    fields,
    message_field,
    string_field,
    text,
)


@dataclass(frozen=True, slots=True)
class ScaledObjectRef:
    name: str = ""
    namespace: str = ""
    scaler_metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GetMetricsRequest:
    scaled_object_ref: ScaledObjectRef | None
    metric_name: str


def decode_scaled_object_ref(data: bytes, into: ScaledObjectRef | None = None) -> ScaledObjectRef:
    """`into` is merged with, as protobuf merges an embedded message that occurs twice."""
    name, namespace = (into.name, into.namespace) if into else ("", "")
    metadata = dict(into.scaler_metadata) if into else {}
    for number, wire, value in fields(data):
        if wire != LEN:
            continue
        if number == 1:
            name = text(number, value)
        elif number == 2:
            namespace = text(number, value)
        elif number == 3:
            entry = _map_entry(value)
            if entry is not None:
                metadata[entry[0]] = entry[1]
    return ScaledObjectRef(name, namespace, metadata)


def decode_get_metrics_request(data: bytes) -> GetMetricsRequest:
    ref: ScaledObjectRef | None = None
    metric_name = ""
    for number, wire, value in fields(data):
        if wire != LEN:
            continue
        if number == 1:
            assert isinstance(value, bytes)
            ref = decode_scaled_object_ref(value, ref)
        elif number == 2:
            metric_name = text(number, value)
    return GetMetricsRequest(ref, metric_name)


def _map_entry(data: int | bytes) -> tuple[str, str] | None:
    """(key, value); None for an entry with other fields, which protobuf sets aside as unknown
    instead of adding to the map."""
    assert isinstance(data, bytes)
    key = item = ""
    unknown = False
    for number, wire, value in fields(data):
        if wire == LEN and number == 1:
            key = text(number, value)
        elif wire == LEN and number == 2:
            item = text(number, value)
        else:
            unknown = True
    return None if unknown else (key, item)


def is_active_response(result: bool) -> bytes:
    return bool_field(1, result)


def get_metric_spec_response(metric_name: str, target_size: float) -> bytes:
    """One MetricSpec; the deprecated integer `targetSize` (field 2) is left at its default."""
    spec = string_field(1, metric_name) + double_field(3, target_size)
    return message_field(1, spec)


def get_metrics_response(metric_name: str, value: float) -> bytes:
    """One MetricValue; the deprecated integer `metricValue` (field 2) is left at its default."""
    metric = string_field(1, metric_name) + double_field(3, value)
    return message_field(1, metric)
