"""The scaler's own protobuf codec against the generated protobuf classes of the same proto file.

The scaler no longer runs the protobuf runtime, so these tests are what keeps it speaking KEDA's
messages exactly: requests decode to what protobuf decodes (or are refused where protobuf refuses
them), and answers are byte for byte what protobuf writes.
"""

from __future__ import annotations

import math

import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from noctaya.gateway.scaler.messages import (
    GetMetricsRequest,
    ScaledObjectRef,
    decode_get_metrics_request,
    decode_scaled_object_ref,
    get_metric_spec_response,
    get_metrics_response,
    is_active_response,
)
from noctaya.gateway.scaler.protobuf_wire import MAX_GROUP_DEPTH, WireError
from noctaya.local.externalscaler import externalscaler_pb2 as pb

SETTINGS = settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Decoded = tuple[str, str, dict[str, str]] | None


def _ref(ref: pb.ScaledObjectRef | ScaledObjectRef) -> Decoded:
    if isinstance(ref, ScaledObjectRef):
        return ref.name, ref.namespace, ref.scaler_metadata
    return ref.name, ref.namespace, dict(ref.scalerMetadata)


def protobufs_ref(data: bytes) -> Decoded | str:
    try:
        return _ref(pb.ScaledObjectRef.FromString(data))
    except DecodeError:
        return "refused"


def ours_ref(data: bytes) -> Decoded | str:
    try:
        return _ref(decode_scaled_object_ref(data))
    except WireError:
        return "refused"


def protobufs_metrics_request(data: bytes) -> tuple[Decoded, str] | str:
    try:
        request = pb.GetMetricsRequest.FromString(data)
    except DecodeError:
        return "refused"
    ref = _ref(request.scaledObjectRef) if request.HasField("scaledObjectRef") else None
    return ref, request.metricName


def ours_metrics_request(data: bytes) -> tuple[Decoded, str] | str:
    try:
        request: GetMetricsRequest = decode_get_metrics_request(data)
    except WireError:
        return "refused"
    ref = _ref(request.scaled_object_ref) if request.scaled_object_ref is not None else None
    return ref, request.metric_name


# Bytes near the wire format: tags of the fields in play (all wire types, groups), lengths, UTF-8
# lead and continuation bytes, varint continuation; plus fully random bytes.
WIRE_BYTES = st.lists(
    st.one_of(
        st.sampled_from(
            list(
                b"\x00\x01\x02\x03\x04\x05\x08\t\n\x0b\x0c\r\x10\x12\x15\x1a\x1b\x1c\x80\xc3\xed\xa0\xffa"
            )
        ),
        st.integers(0, 255),
    ),
    max_size=24,
).map(bytes)


@SETTINGS
@given(WIRE_BYTES)
def test_a_scaled_object_ref_decodes_as_protobuf_decodes_it(data: bytes) -> None:
    assert ours_ref(data) == protobufs_ref(data)


@SETTINGS
@given(WIRE_BYTES)
def test_a_metrics_request_decodes_as_protobuf_decodes_it(data: bytes) -> None:
    assert ours_metrics_request(data) == protobufs_metrics_request(data)


EDGE_CASES = {
    "map-entry-with-an-unknown-field": b"\x1a\x02\x08\x09",
    "map-entry-with-a-group": b"\x1a\x02\x0b\x0c",
    "map-entry-with-an-unknown-field-then-bad-utf8": b"\x1a\x05\x08\x02\x0a\x01\xff",
    "map-entry-value-only": b"\x1a\x03\x12\x01v",
    "field-zero-inside-a-skipped-group": b"\x0b\x00\x41\x0c",
    "field-zero": b"\x00\x01",
    "six-byte-key": b"\x80\xff\xff\xff\x8a\x00\x03",
    "five-byte-key": b"\xf8\xff\xff\xff\x01\x00",
    "eleven-byte-varint": b"\x08" + b"\xff" * 10 + b"\x01",
    "group-closed-by-another": b"\x0b\x14",
    "unclosed-group": b"\x0b\x0a\x00",
    "end-group-at-top-level": b"\x0c",
    "wire-type-6": b"\x0e",
    "known-field-with-another-wire-type": b"\x08\x01\x11" + b"\x00" * 8 + b"\x0a\x01n",
    "utf8-encoded-surrogate": b"\x0a\x03\xed\xa0\x80",
}


@pytest.mark.parametrize("data", EDGE_CASES.values(), ids=EDGE_CASES.keys())
def test_edge_cases_decode_as_protobuf_decodes_them(data: bytes) -> None:
    assert ours_ref(data) == protobufs_ref(data)
    embedded = b"\x0a" + bytes([len(data)]) + data
    assert ours_metrics_request(embedded) == protobufs_metrics_request(embedded)


@settings(max_examples=300, deadline=None)
@given(
    st.text(),
    st.text(),
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=6),
    st.text(),
)
def test_what_a_client_serializes_is_decoded_whole(
    name: str, namespace: str, metadata: dict[str, str], metric_name: str
) -> None:
    ref = pb.ScaledObjectRef(name=name, namespace=namespace, scalerMetadata=metadata)
    assert ours_ref(ref.SerializeToString()) == (name, namespace, metadata)
    request = pb.GetMetricsRequest(scaledObjectRef=ref, metricName=metric_name)
    decoded = ours_metrics_request(request.SerializeToString())
    assert decoded == ((name, namespace, metadata), metric_name)


def test_an_embedded_ref_sent_twice_is_merged_as_protobuf_merges_it() -> None:
    first = pb.ScaledObjectRef(name="a", scalerMetadata={"k": "1", "x": "1"})
    second = pb.ScaledObjectRef(namespace="b", scalerMetadata={"k": "2"})
    data = b"".join(
        pb.GetMetricsRequest(scaledObjectRef=ref).SerializeToString() for ref in (first, second)
    )
    expected = (("a", "b", {"k": "2", "x": "1"}), "")
    assert protobufs_metrics_request(data) == expected
    assert ours_metrics_request(data) == expected


@pytest.mark.parametrize("depth", [MAX_GROUP_DEPTH - 1, MAX_GROUP_DEPTH])
def test_unknown_groups_are_skipped_up_to_protobufs_depth(depth: int) -> None:
    data = b"\x0b" * depth + b"\x0c" * depth + b"\x0a\x01n"
    assert ours_ref(data) == protobufs_ref(data) == ("n", "", {})


def test_groups_nested_deeper_than_protobuf_allows_are_refused() -> None:
    depth = MAX_GROUP_DEPTH + 1
    data = b"\x0b" * depth + b"\x0c" * depth
    assert protobufs_ref(data) == "refused"
    with pytest.raises(WireError, match=f"groups nested more than {MAX_GROUP_DEPTH} deep"):
        decode_scaled_object_ref(data)


@pytest.mark.parametrize("result", [True, False])
def test_is_active_response_is_protobufs_bytes(result: bool) -> None:
    assert is_active_response(result) == pb.IsActiveResponse(result=result).SerializeToString()


VALUES = [0.0, -0.0, 1.0, 2.5, 1e-300, 1e300, -3.0, math.inf, 2.0**53 + 1]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("name", ["pending", ""])
def test_metric_answers_are_protobufs_bytes(name: str, value: float) -> None:
    spec = pb.MetricSpec(metricName=name, targetSizeFloat=value)
    assert get_metric_spec_response(name, value) == (
        pb.GetMetricSpecResponse(metricSpecs=[spec]).SerializeToString()
    )
    metric = pb.MetricValue(metricName=name, metricValueFloat=value)
    assert get_metrics_response(name, value) == (
        pb.GetMetricsResponse(metricValues=[metric]).SerializeToString()
    )


def test_a_nan_metric_round_trips() -> None:
    reply = pb.GetMetricsResponse.FromString(get_metrics_response("pending", math.nan))
    assert math.isnan(reply.metricValues[0].metricValueFloat)
