"""Bytes that are no request message, sent raw through a real channel to every method.

A hostile or broken client must get INVALID_ARGUMENT and cost one log line, never a traceback,
and the scaler must go on serving KEDA.
"""

from __future__ import annotations

import logging

import grpc
import pytest

from .conftest import Scaler
from .keda import STEP_TIMEOUT, Keda

SERVICE = "/externalscaler.ExternalScaler/"
UNARY_METHODS = ("IsActive", "GetMetricSpec", "GetMetrics")

# Bytes of a would-be ScaledObjectRef; GetMetrics gets them as its scaledObjectRef field.
PAYLOADS = {
    "garbage": b"\xff\xff\xff\xff",
    "truncated-field": b"\x1a\x10\x0a",
    "bad-utf8-name": b"\x0a\x02\xff\xfe",
    "bad-utf8-metadata-key": b"\x1a\x06\x0a\x02\xc3\x28\x12\x00",
    "utf8-encoded-surrogate": b"\x1a\x08\x0a\x01k\x12\x03\xed\xa0\x80",
    "unknown-groups-nested-too-deep": b"\x0b" * 5000 + b"\x0c" * 5000,
}


def _request(method: str, ref_bytes: bytes) -> bytes:
    if method != "GetMetrics":
        return ref_bytes
    return b"\x0a" + _varint(len(ref_bytes)) + ref_bytes


def _varint(value: int) -> bytes:
    encoded = bytearray()
    while value >= 0x80:
        encoded.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(encoded + bytes([value]))


def _raw_unary(keda: Keda, method: str) -> grpc.aio.UnaryUnaryMultiCallable:
    return keda.channel.unary_unary(
        SERVICE + method, request_serializer=None, response_deserializer=None
    )


async def _expect_refused(call: object, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call  # type: ignore[misc]
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (raised.value.details() or "").startswith("malformed request: ")
    assert not [record for record in caplog.records if record.exc_info], "no traceback"
    warnings = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(warnings) == 1, "one log line per refused call"


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
@pytest.mark.parametrize("method", UNARY_METHODS)
async def test_unary_methods_refuse_undecodable_bytes_with_invalid_argument(
    scaler: Scaler, keda: Keda, caplog: pytest.LogCaptureFixture, method: str, payload: bytes
) -> None:
    scaler.feed.publish(2)
    call = _raw_unary(keda, method)(_request(method, payload), timeout=STEP_TIMEOUT)
    await _expect_refused(call, caplog)
    assert await keda.is_active() is True
    assert await keda.metric() == 2


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
async def test_stream_refuses_undecodable_bytes_and_is_never_counted(
    scaler: Scaler, keda: Keda, caplog: pytest.LogCaptureFixture, payload: bytes
) -> None:
    stream = keda.channel.unary_stream(
        SERVICE + "StreamIsActive", request_serializer=None, response_deserializer=None
    )(payload, timeout=STEP_TIMEOUT)
    await _expect_refused(stream.read(), caplog)
    assert scaler.streams() == 0
    fresh = keda.stream()
    assert await fresh.next() is False
    fresh.cancel()


async def test_an_empty_message_is_a_request_with_no_metadata_not_a_malformed_one(
    keda: Keda,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await _raw_unary(keda, "IsActive")(b"", timeout=STEP_TIMEOUT)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == "targetValue metadata is required"
