"""A test client that plays KEDA: the same proto, the same four RPCs, real gRPC over loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import grpc
from noctaya.local.externalscaler import externalscaler_pb2 as pb
from noctaya.local.externalscaler import externalscaler_pb2_grpc as pb_grpc

METADATA = {"targetValue": "1"}
STEP_TIMEOUT = 10.0


def ref(metadata: Mapping[str, str] = METADATA) -> pb.ScaledObjectRef:
    return pb.ScaledObjectRef(name="demo", namespace="default", scalerMetadata=dict(metadata))


class Keda:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        self.stub = pb_grpc.ExternalScalerStub(channel)

    @classmethod
    def insecure(cls, port: int) -> Keda:
        return cls(grpc.aio.insecure_channel(f"127.0.0.1:{port}"))

    async def close(self) -> None:
        await self.channel.close()

    async def is_active(self, metadata: Mapping[str, str] = METADATA) -> bool:
        reply = await self.stub.IsActive(ref(metadata), timeout=STEP_TIMEOUT)
        return bool(reply.result)

    async def metric(self, metadata: Mapping[str, str] = METADATA) -> float:
        request = pb.GetMetricsRequest(scaledObjectRef=ref(metadata), metricName="pending")
        reply = await self.stub.GetMetrics(request, timeout=STEP_TIMEOUT)
        (value,) = reply.metricValues
        assert value.metricName == "pending"
        return float(value.metricValueFloat)

    def stream(self, metadata: Mapping[str, str] = METADATA) -> ActiveStream:
        return ActiveStream(self.stub.StreamIsActive(ref(metadata)))


class ActiveStream:
    """One StreamIsActive call; `next()` is the next message, bounded by a deadline."""

    def __init__(self, call: grpc.aio.UnaryStreamCall) -> None:
        self.call = call
        self._read: asyncio.Future[object] | None = None

    async def next(self, within: float = STEP_TIMEOUT) -> bool:
        reply = await asyncio.wait_for(asyncio.shield(self._pending()), within)
        self._read = None
        assert reply is not grpc.aio.EOF, "the stream ended"
        assert isinstance(reply, pb.IsActiveResponse)
        return bool(reply.result)

    async def ended(self, within: float = STEP_TIMEOUT) -> bool:
        """Whether the server ends the stream (rather than sending) within `within` s."""
        reply = await asyncio.wait_for(asyncio.shield(self._pending()), within)
        self._read = None
        return reply is grpc.aio.EOF

    def cancel(self) -> None:
        if self._read is not None:
            self._read.cancel()
        self.call.cancel()

    def _pending(self) -> asyncio.Future[object]:
        if self._read is None:
            self._read = asyncio.ensure_future(self.call.read())
        return self._read
