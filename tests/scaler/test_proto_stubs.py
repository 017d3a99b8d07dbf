"""The committed stubs are exactly what the committed proto generates (no hand edits, no drift)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "hack" / "gen-scaler-proto.py"
PROTO_DIR = REPO / "packages/noctaya-local/src/noctaya/local/externalscaler"
STUBS = ("externalscaler_pb2.py", "externalscaler_pb2.pyi", "externalscaler_pb2_grpc.py")


@pytest.mark.parametrize("stub", STUBS)
def test_committed_stub_matches_a_fresh_generation(tmp_path: Path, stub: str) -> None:
    subprocess.run([sys.executable, GENERATOR, "--out", tmp_path], check=True, timeout=120)
    fresh = tmp_path / "noctaya/local/externalscaler" / stub
    assert fresh.read_text() == (PROTO_DIR / stub).read_text(), (
        f"{stub} is stale: run `python hack/gen-scaler-proto.py` and commit the result"
    )


def test_wire_contract_is_kedas() -> None:
    from noctaya.local.externalscaler import externalscaler_pb2 as pb

    service = pb.DESCRIPTOR.services_by_name["ExternalScaler"]
    assert service.full_name == "externalscaler.ExternalScaler"
    methods = {m.name: (m.input_type.name, m.output_type.name) for m in service.methods}
    assert methods == {
        "IsActive": ("ScaledObjectRef", "IsActiveResponse"),
        "StreamIsActive": ("ScaledObjectRef", "IsActiveResponse"),
        "GetMetricSpec": ("ScaledObjectRef", "GetMetricSpecResponse"),
        "GetMetrics": ("GetMetricsRequest", "GetMetricsResponse"),
    }
    assert service.methods_by_name["StreamIsActive"].server_streaming
    fields = {
        name: {f.name: f.number for f in pb.DESCRIPTOR.message_types_by_name[name].fields}
        for name in pb.DESCRIPTOR.message_types_by_name
    }
    assert fields == {
        "ScaledObjectRef": {"name": 1, "namespace": 2, "scalerMetadata": 3},
        "IsActiveResponse": {"result": 1},
        "GetMetricSpecResponse": {"metricSpecs": 1},
        "MetricSpec": {"metricName": 1, "targetSize": 2, "targetSizeFloat": 3},
        "GetMetricsRequest": {"scaledObjectRef": 1, "metricName": 2},
        "GetMetricsResponse": {"metricValues": 1},
        "MetricValue": {"metricName": 1, "metricValue": 2, "metricValueFloat": 3},
    }


def test_numeric_field_types_are_kedas() -> None:
    from google.protobuf.descriptor import FieldDescriptor as F
    from noctaya.local.externalscaler import externalscaler_pb2 as pb

    def kind(message: str, field: str) -> int:
        return int(pb.DESCRIPTOR.message_types_by_name[message].fields_by_name[field].type)

    assert kind("IsActiveResponse", "result") == F.TYPE_BOOL
    assert kind("MetricSpec", "targetSize") == F.TYPE_INT64
    assert kind("MetricSpec", "targetSizeFloat") == F.TYPE_DOUBLE
    assert kind("MetricValue", "metricValue") == F.TYPE_INT64
    assert kind("MetricValue", "metricValueFloat") == F.TYPE_DOUBLE
    scaler_metadata = pb.ScaledObjectRef.DESCRIPTOR.fields_by_name["scalerMetadata"]
    assert scaler_metadata.message_type.GetOptions().map_entry
