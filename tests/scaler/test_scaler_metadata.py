"""Every malformed ScaledObject gets INVALID_ARGUMENT naming the bad field, on every RPC."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

import grpc
import pytest
from noctaya.local.externalscaler import externalscaler_pb2 as pb

from .conftest import Scaler
from .keda import Keda, ref

INVALID_METADATA = [
    ({"metricName": "queue", "targetValue": "1"}, 'unsupported metricName "queue"'),
    ({"metricName": 'a"b\n', "targetValue": "1"}, 'unsupported metricName "a\\"b\\n"'),
    ({}, "targetValue metadata is required"),
    ({"targetValue": ""}, "targetValue metadata is required"),
    ({"targetValue": "zero"}, 'targetValue "zero" must be a positive number'),
    ({"targetValue": "NaN"}, 'targetValue "NaN" must be a positive number'),
    ({"targetValue": "+Inf"}, 'targetValue "+Inf" must be a positive number'),
    ({"targetValue": "0"}, 'targetValue "0" must be a positive number'),
    ({"targetValue": "-1"}, 'targetValue "-1" must be a positive number'),
    ({"targetValue": " 1"}, 'targetValue " 1" must be a positive number'),
    ({"targetValue": "1_0"}, 'targetValue "1_0" must be a positive number'),
    # Go's ParseFloat requires the p exponent of a hexadecimal mantissa
    ({"targetValue": "0x10"}, 'targetValue "0x10" must be a positive number'),
    ({"targetValue": "0x1.8"}, 'targetValue "0x1.8" must be a positive number'),
    ({"targetValue": "0xp1"}, 'targetValue "0xp1" must be a positive number'),
    ({"targetValue": "0x1p99999"}, 'targetValue "0x1p99999" must be a positive number'),
    ({"targetValue": "1e99999"}, 'targetValue "1e99999" must be a positive number'),
]

Rpc = Callable[[Keda, Mapping[str, str]], Awaitable[object]]


def _is_active(keda: Keda, metadata: Mapping[str, str]) -> Awaitable[object]:
    return keda.stub.IsActive(ref(metadata))


def _metric_spec(keda: Keda, metadata: Mapping[str, str]) -> Awaitable[object]:
    return keda.stub.GetMetricSpec(ref(metadata))


def _metrics(keda: Keda, metadata: Mapping[str, str]) -> Awaitable[object]:
    return keda.stub.GetMetrics(
        pb.GetMetricsRequest(scaledObjectRef=ref(metadata), metricName="pending")
    )


def _stream(keda: Keda, metadata: Mapping[str, str]) -> Awaitable[object]:
    return keda.stub.StreamIsActive(ref(metadata)).read()


RPCS = {
    "IsActive": _is_active,
    "GetMetricSpec": _metric_spec,
    "GetMetrics": _metrics,
    "StreamIsActive": _stream,
}


async def expect_invalid(call: Awaitable[object], message: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == message


@pytest.mark.parametrize("rpc", RPCS.values(), ids=RPCS.keys())
@pytest.mark.parametrize(("metadata", "message"), INVALID_METADATA)
async def test_invalid_metadata_is_rejected_with_the_reference_message(
    scaler: Scaler, keda: Keda, rpc: Rpc, metadata: Mapping[str, str], message: str
) -> None:
    scaler.feed.publish(3)
    await expect_invalid(rpc(keda, metadata), message)
    assert scaler.feed.current() == 3
    assert scaler.streams() == 0, "a rejected stream is never counted"


async def test_get_metrics_without_a_scaled_object_ref_is_rejected(keda: Keda) -> None:
    request = pb.GetMetricsRequest(metricName="pending")
    await expect_invalid(keda.stub.GetMetrics(request), "scaledObjectRef is required")


@pytest.mark.parametrize(
    ("metric", "message"),
    [
        ("queue", 'metricName "queue" does not match configured metric "pending"'),
        ("", 'metricName "" does not match configured metric "pending"'),
    ],
)
async def test_get_metrics_for_another_metric_is_rejected(
    keda: Keda, metric: str, message: str
) -> None:
    request = pb.GetMetricsRequest(scaledObjectRef=ref(), metricName=metric)
    await expect_invalid(keda.stub.GetMetrics(request), message)


@pytest.mark.parametrize(
    ("raw", "target"),
    [
        ("2.5", 2.5),
        ("10", 10.0),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("0x1p-2", 0.25),
        ("0X1.8P1", 3.0),
        ("0x.8p1", 1.0),
    ],
)
async def test_target_value_accepts_go_float_syntax(keda: Keda, raw: str, target: float) -> None:
    reply = await keda.stub.GetMetricSpec(ref({"targetValue": raw, "metricName": ""}))
    assert [spec.targetSizeFloat for spec in reply.metricSpecs] == [target]


LONG = 60_000  # within the 64 KiB request limit
ECHOED = 128


@pytest.mark.parametrize("rpc", RPCS.values(), ids=RPCS.keys())
@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (
            {"targetValue": "x" * LONG},
            f'targetValue "{"x" * ECHOED}"... must be a positive number',
        ),
        (
            {"metricName": "m" * LONG, "targetValue": "1"},
            f'unsupported metricName "{"m" * ECHOED}"...',
        ),
    ],
    ids=["targetValue", "metricName"],
)
async def test_a_long_invalid_value_is_echoed_cut_short_so_the_message_reaches_keda(
    keda: Keda, rpc: Rpc, metadata: Mapping[str, str], message: str
) -> None:
    """Echoed whole, the message would outgrow the client's trailer limit: KEDA would see
    RESOURCE_EXHAUSTED instead of what is wrong with its ScaledObject."""
    await expect_invalid(rpc(keda, metadata), message)


async def test_get_metrics_for_a_long_metric_name_is_refused_with_the_name_cut_short(
    keda: Keda,
) -> None:
    request = pb.GetMetricsRequest(scaledObjectRef=ref(), metricName="q" * LONG)
    message = f'metricName "{"q" * ECHOED}"... does not match configured metric "pending"'
    await expect_invalid(keda.stub.GetMetrics(request), message)


@pytest.mark.parametrize(
    "raw", ["0x" + "a" * LONG, "0x" + "a" * (LONG // 2) + "." + "a" * (LONG // 2)]
)
async def test_a_long_hexadecimal_target_value_is_refused_at_once(keda: Keda, raw: str) -> None:
    """A hexadecimal mantissa without its exponent once cost time quadratic in its length
    (tens of seconds of a blocked event loop for one request)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    call = keda.stub.GetMetricSpec(ref({"targetValue": raw}), timeout=30)
    await expect_invalid(call, f'targetValue "{raw[:ECHOED]}"... must be a positive number')
    assert loop.time() - started < 5
