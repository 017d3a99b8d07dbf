"""Soak: 64 abusive clients against a gateway's scaler and an aggregator, good peers alongside.

Abusers flood malformed reports (bad JSON, bad token, oversized, slow headers, slow bodies,
non-HTTP bytes) and malformed RPCs (bad metadata, oversized messages, stream churn, non-HTTP/2
bytes). Meanwhile a well-formed gateway reports every 100 ms and a KEDA stand-in checks that
GetMetrics always equals what was reported. Prints RSS before/after and the peers' outcomes.

    .venv/bin/python benchmarks/scaler/soak.py [--seconds 60] [--abusers 64]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import grpc

sys.path.insert(0, os.path.dirname(__file__))

import procs
from loadgen import percentile, print_table, read_response
from noctaya.local.externalscaler import externalscaler_pb2 as pb
from noctaya.local.externalscaler import externalscaler_pb2_grpc as pb_grpc

GOOD = {"targetValue": "1"}
ops: Counter[str] = Counter()


def report_request(body: bytes, token: str = procs.TOKEN, length: int | None = None) -> bytes:
    return (
        b"POST /v1/demand HTTP/1.1\r\nHost: aggregator\r\n"
        + f"Authorization: Bearer {token}\r\n".encode()
        + f"Content-Length: {len(body) if length is None else length}\r\n\r\n".encode()
        + body
    )


async def http_flood(port: int, request: bytes, kind: str, deadline: float) -> None:
    """Send `request` over keep-alive connections as fast as answers come back."""
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, ValueError):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                while time.monotonic() < deadline:
                    writer.write(request)
                    await read_response(reader)
                    ops[kind] += 1
            finally:
                writer.close()
        ops[kind + " (reconnect)"] += 1


async def trickle(port: int, prefix: bytes, kind: str, deadline: float) -> None:
    """Send `prefix` then one byte every 200 ms until the server gives up on us."""
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(prefix)
            while time.monotonic() < deadline and not reader.at_eof():
                writer.write(b"a")
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(reader.read(1024), 0.2)
            writer.close()
            ops[kind] += 1


async def garbage(port: int, kind: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, TimeoutError):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(os.urandom(4096))
            await asyncio.wait_for(reader.read(4096), 5)
            writer.close()
            ops[kind] += 1


async def rpc_flood(port: int, kind: str, deadline: float) -> None:
    """Invalid metadata, oversized messages and abandoned streams on one channel."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        bad = pb.ScaledObjectRef(scalerMetadata={"targetValue": "NaN"})
        huge = pb.ScaledObjectRef(scalerMetadata={"targetValue": "1", "x": "y" * 100_000})
        n = 0
        while time.monotonic() < deadline:
            n += 1
            with contextlib.suppress(grpc.aio.AioRpcError):
                if n % 3 == 0:
                    stream = stub.StreamIsActive(pb.ScaledObjectRef(scalerMetadata=GOOD))
                    await stream.read()
                    stream.cancel()
                else:
                    await stub.IsActive(huge if n % 3 == 1 else bad, timeout=5)
            ops[kind] += 1


async def good_reporter(
    http_port: int, grpc_port: int, deadline: float, outcome: Counter[str], latency: list[float]
) -> None:
    """A well-formed gateway: every report must be 204 and KEDA must see exactly its demand."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        ref = pb.ScaledObjectRef(scalerMetadata=GOOD)
        sequence = 0
        reader, writer = await asyncio.open_connection("127.0.0.1", http_port)
        while time.monotonic() < deadline:
            sequence += 1
            demand = sequence % 4
            body = json.dumps({"memberID": "good/1", "sequence": sequence, "demand": demand})
            started = time.perf_counter()
            try:
                writer.write(report_request(body.encode()))
                status = await asyncio.wait_for(read_response(reader), 5)
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                outcome["report failed (connection)"] += 1
                reader, writer = await asyncio.open_connection("127.0.0.1", http_port)
                continue
            latency.append(time.perf_counter() - started)
            outcome["report 204" if status == 204 else f"report {status}"] += 1
            reply = await stub.GetMetrics(
                pb.GetMetricsRequest(scaledObjectRef=ref, metricName="pending"), timeout=5
            )
            seen = reply.metricValues[0].metricValueFloat
            outcome["metric matches" if seen == demand else "metric WRONG"] += 1
            await asyncio.sleep(0.1)
        writer.close()


async def good_keda(grpc_port: int, deadline: float, outcome: Counter[str]) -> None:
    """KEDA on the single gateway: no demand, so IsActive stays false; a stream stays open."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        ref = pb.ScaledObjectRef(scalerMetadata=GOOD)
        stream = stub.StreamIsActive(ref)
        outcome["gateway stream first=false"] += not (await stream.read()).result
        while time.monotonic() < deadline:
            try:
                active = (await stub.IsActive(ref, timeout=5)).result
                outcome["gateway IsActive false" if not active else "gateway IsActive WRONG"] += 1
            except grpc.aio.AioRpcError as error:
                outcome[f"gateway IsActive {error.code().name}"] += 1
            await asyncio.sleep(0.1)
        stream.cancel()


def abusers(agg_http: int, agg_grpc: int, gw_grpc: int, deadline: float) -> list[Awaitable[None]]:
    big = report_request(b"x" * (1024 * 1024))
    kinds: list[Callable[[], Awaitable[None]]] = [
        lambda: http_flood(agg_http, report_request(b"{not json"), "report bad json", deadline),
        lambda: http_flood(
            agg_http, report_request(b"{}", token="wrong" * 10), "report bad token", deadline
        ),
        lambda: http_flood(agg_http, big, "report 1 MiB body", deadline),
        lambda: http_flood(
            agg_http,
            report_request(b'{"memberID":"x","sequence":1,"demand":1,"extra":1}'),
            "report unknown field",
            deadline,
        ),
        lambda: trickle(
            agg_http, b"POST /v1/demand HTTP/1.1\r\nX-Slow: ", "slow headers", deadline
        ),
        lambda: trickle(
            agg_http,
            report_request(b'{"memberID":"', length=1000),
            "slow body (token ok)",
            deadline,
        ),
        lambda: garbage(agg_http, "non-HTTP bytes to :9091", deadline),
        lambda: rpc_flood(agg_grpc, "bad RPCs to aggregator", deadline),
        lambda: rpc_flood(gw_grpc, "bad RPCs to gateway", deadline),
        lambda: garbage(gw_grpc, "non-HTTP/2 bytes to gateway :9090", deadline),
    ]
    return [kinds[i % len(kinds)]() for i in range(64)]


async def soak(seconds: float, count: int) -> None:
    token = procs.token_file()
    aggregator, agg_http, agg_grpc = procs.aggregator(token)
    gateway, _, gw_grpc = procs.gateway({})
    try:
        await asyncio.sleep(2)
        before = {
            "aggregator": procs.rss_mib(aggregator.pid),
            "gateway": procs.rss_mib(gateway.pid),
        }
        deadline = time.monotonic() + seconds
        outcome: Counter[str] = Counter()
        latency: list[float] = []
        await asyncio.gather(
            good_reporter(agg_http, agg_grpc, deadline, outcome, latency),
            good_keda(gw_grpc, deadline, outcome),
            *abusers(agg_http, agg_grpc, gw_grpc, deadline)[:count],
        )
        await asyncio.sleep(6)  # let the servers' own deadlines release the last slow clients
        after = {"aggregator": procs.rss_mib(aggregator.pid), "gateway": procs.rss_mib(gateway.pid)}
    finally:
        procs.stop(gateway)
        procs.stop(aggregator)
    print_table(
        ("process", "RSS before MiB", "RSS after MiB", "peak RSS MiB"),
        [(name, before[name][0], after[name][0], after[name][1]) for name in before],
    )
    print()
    print_table(("abusive operation", "count"), sorted(ops.items()))
    print()
    good_rows = sorted(outcome.items())
    good_rows.append(("good report p50 ms", round(percentile(latency, 0.5) * 1e3, 2)))
    good_rows.append(("good report p99 ms", round(percentile(latency, 0.99) * 1e3, 2)))
    print_table(("well-formed peers", "count"), good_rows)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--abusers", type=int, default=64)
    args = parser.parse_args()
    asyncio.run(soak(args.seconds, args.abusers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
