"""Activation latency: a cold request's arrival at the gateway → KEDA's StreamIsActive `true`.

Real processes over loopback: a gateway whose backend never becomes ready (reject mode, short
activation lease so demand falls back to zero between rounds) and a KEDA stand-in on the
ExternalScaler stream, either on the gateway itself or on the aggregator the gateway reports to.

    .venv/bin/python benchmarks/scaler/activation_latency.py [--activations 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

import grpc

sys.path.insert(0, os.path.dirname(__file__))

import procs
from loadgen import percentile, print_table
from noctaya.gateway.scaler._proto import externalscaler_pb2 as pb
from noctaya.gateway.scaler._proto import externalscaler_pb2_grpc as pb_grpc

LEASE = "100ms"
COLD_REQUEST = b"GET /v1/models HTTP/1.1\r\nHost: gateway\r\n\r\n"


async def measure(http_port: int, scaler_port: int, activations: int) -> list[float]:
    """Seconds from writing each cold request to the stream's `true`, once demand was zero."""
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{scaler_port}")
    ref = pb.ScaledObjectRef(name="bench", namespace="default", scalerMetadata={"targetValue": "1"})
    stream = pb_grpc.ExternalScalerStub(channel).StreamIsActive(ref)
    samples: list[float] = []
    try:
        active = (await stream.read()).result
        for _ in range(activations):
            while active:  # the lease ends and the stream reports inactive again
                active = (await asyncio.wait_for(stream.read(), 30)).result
            reader, writer = await asyncio.open_connection("127.0.0.1", http_port)
            started = time.perf_counter()
            writer.write(COLD_REQUEST)
            active = (await asyncio.wait_for(stream.read(), 30)).result
            samples.append(time.perf_counter() - started)
            assert active, "the first message after a cold request must be `true`"
            await reader.readuntil(b"\r\n\r\n")
            writer.close()
    finally:
        stream.cancel()
        await channel.close()
    return samples


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--activations", type=int, default=200)
    args = parser.parse_args()
    cold = {"NOCTAYA_COLDSTART_MODE": "reject", "NOCTAYA_ACTIVATION_TIMEOUT": LEASE}
    rows = []

    gateway, http_port, scaler_port = procs.gateway(cold)
    try:
        samples = asyncio.run(measure(http_port, scaler_port, args.activations))
        rows.append(_row("single gateway", samples))
    finally:
        procs.stop(gateway)

    token = procs.token_file()
    aggregator, agg_http, agg_grpc = procs.aggregator(token)
    gateway, http_port, _ = procs.gateway(
        {
            **cold,
            "NOCTAYA_DEMAND_AGGREGATOR_URL": f"http://127.0.0.1:{agg_http}/v1/demand",
            "NOCTAYA_GATEWAY_ID": "bench",
            "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": token,
        }
    )
    try:
        samples = asyncio.run(measure(http_port, agg_grpc, args.activations))
        rows.append(_row("via aggregator", samples))
    finally:
        procs.stop(gateway)
        procs.stop(aggregator)

    print_table(("path", "activations", "p50 ms", "p99 ms", "max ms"), rows)
    return 0


def _row(path: str, samples: list[float]) -> tuple[object, ...]:
    return (
        path,
        len(samples),
        percentile(samples, 0.5) * 1e3,
        percentile(samples, 0.99) * 1e3,
        max(samples) * 1e3,
    )


if __name__ == "__main__":
    sys.exit(main())
