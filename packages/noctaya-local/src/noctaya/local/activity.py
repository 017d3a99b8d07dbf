"""Whether the service has demand, as KEDA learns it: the gateway's `StreamIsActive` push stream.

Local mode subscribes with the trigger metadata the operator writes into the ScaledObject
(`metricName: pending`, `targetValue: <scaling.target>`), so the gateway validates and answers it
exactly as it answers KEDA. A stream that ends or fails is dialled again, as KEDA does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc
from noctaya.core.plan.autoscaling import METRIC_NAME
from noctaya.local.externalscaler import externalscaler_pb2 as pb
from noctaya.local.externalscaler import externalscaler_pb2_grpc as pb_grpc

log = logging.getLogger("noctaya.local")
RECONNECT_DELAY = 1.0


def scaled_object_ref(name: str, namespace: str, address: str, target: int) -> pb.ScaledObjectRef:
    metadata = {"scalerAddress": address, "metricName": METRIC_NAME, "targetValue": str(target)}
    return pb.ScaledObjectRef(name=name, namespace=namespace, scalerMetadata=metadata)


async def active_states(address: str, ref: pb.ScaledObjectRef) -> AsyncIterator[bool]:
    """Every active flag the scaler sends (the current one first after each connect); endless."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
        while True:
            try:
                async for reply in stub.StreamIsActive(ref):
                    yield bool(reply.result)
                log.info("the scaler ended the activity stream; reconnecting")
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    raise  # a wrong ref stays wrong; retrying would hide it
                log.info("activity stream failed (%s); reconnecting", error.details())
            await asyncio.sleep(RECONNECT_DELAY)
