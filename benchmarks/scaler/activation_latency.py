"""Activation latency: a cold request's arrival at the gateway → KEDA's StreamIsActive `true`.

Real processes over loopback: a gateway whose backend never becomes ready (reject mode, short
activation lease so demand falls back to zero between rounds) and a KEDA stand-in on the
ExternalScaler stream, either on the gateway itself or on the aggregator the gateway reports to.

    .venv/bin/python benchmarks/scaler/activation_latency.py [--activations 200]
        [--load 0,64] [--compare REV | --without CHANGE] [--rounds 1]

`--load` lists the points to measure at: 0 is a quiet gateway, C > 0 has `wrk` keep C keep-alive
connections of health probes going through the same gateway the whole time. Probes never count
as demand (admitted requests would keep it above zero, and nothing could activate), yet each one
takes the gateway's event loop through a whole HTTP exchange, on a machine whose two cores the
load, the gateway, the aggregator and the KEDA stand-in now share. `--compare REV` measures the
gateway and aggregator of another revision in turn with this tree's at every point (`--rounds`
alternates them that many times, pooling the samples), so one run prints before and after;
`--without CHANGE` measures this tree with one of its changes to the server undone instead
(`benchmarks.gateway.without`), the ledger's figure for that change.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import procs
from loadgen import percentile, print_table
from noctaya.local.externalscaler import externalscaler_pb2 as pb
from noctaya.local.externalscaler import externalscaler_pb2_grpc as pb_grpc

from benchmarks.gateway import revision

LEASE = "100ms"
COLD_REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
    b"Content-Length: 71\r\n\r\n"
    b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'
)
"""A streamed chat completion: what counts as demand (a model list never does)."""
PATHS = ("single gateway", "via aggregator")
LOAD_WARMUP_SECONDS = 1.0
RESAMPLES = 1000
"""Bootstrap resamples behind the p99 ratio's interval."""


@dataclass
class Contender:
    name: str
    pythonpath: str
    without: str = ""
    samples: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    load_rps: dict[tuple[str, int], list[float]] = field(default_factory=dict)


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


@contextlib.contextmanager
def probe_load(http_port: int, connections: int) -> Iterator[list[float]]:
    """`wrk` sending health probes on `connections` connections while the context lasts; the
    yielded list receives its requests per second when it ends."""
    rps: list[float] = []
    if connections == 0:
        yield rps
        return
    command = ["wrk", "-t1", f"-c{connections}", "-d10m", f"http://127.0.0.1:{http_port}/healthz"]
    load = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(LOAD_WARMUP_SECONDS)
        yield rps
    finally:
        load.send_signal(signal.SIGINT)  # wrk stops and prints its totals
        output, _ = load.communicate(timeout=30)
        match = re.search(r"Requests/sec:\s+([\d.]+)", output)
        if match is None:
            raise RuntimeError(f"unexpected wrk output:\n{output}")
        rps.append(float(match.group(1)))


def measure_point(
    path: str, load: int, contender: Contender, activations: int
) -> tuple[list[float], float]:
    """One contender at one point: fresh processes, then (samples, load req/s)."""
    own = {"PYTHONPATH": contender.pythonpath, procs.WITHOUT: contender.without}
    cold = {"NOCTAYA_COLDSTART_MODE": "reject", "NOCTAYA_ACTIVATION_TIMEOUT": LEASE, **own}
    with contextlib.ExitStack() as stack:
        if path == "single gateway":
            gateway, http_port, scaler_port = procs.gateway(cold)
            stack.callback(procs.stop, gateway)
        else:
            token = procs.token_file()
            aggregator, agg_http, scaler_port = procs.aggregator(token, **own)
            stack.callback(procs.stop, aggregator)
            gateway, http_port, _ = procs.gateway(
                {
                    **cold,
                    "NOCTAYA_DEMAND_AGGREGATOR_URL": f"http://127.0.0.1:{agg_http}/v1/demand",
                    "NOCTAYA_GATEWAY_ID": "bench",
                    "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": token,
                }
            )
            stack.callback(procs.stop, gateway)
        with probe_load(http_port, load) as rps:
            samples = asyncio.run(measure(http_port, scaler_port, activations))
    return samples, rps[0] if rps else 0.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--activations", type=int, default=200, help="per point and round")
    parser.add_argument(
        "--load", default="0", help="wrk connections of health probes per point (0: quiet)"
    )
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--compare", metavar="REV", help="also measure the processes at REV")
    choice.add_argument("--without", metavar="CHANGE", help="also measure without CHANGE")
    parser.add_argument("--rounds", type=int, default=1, help="turns per point and contender")
    args = parser.parse_args()
    loads = [int(c) for c in args.load.split(",")]
    if any(loads) and shutil.which("wrk") is None:
        print("--load drives probes with wrk: apt-get install wrk", file=sys.stderr)
        return 1
    with contextlib.ExitStack() as stack:
        contenders = [Contender("this tree", os.environ.get("PYTHONPATH", ""))]
        if args.compare is not None:
            path = stack.enter_context(revision.pythonpath(args.compare))
            contenders.insert(0, Contender(revision.describe(args.compare), path))
        if args.without is not None:
            here = os.environ.get("PYTHONPATH", "")
            contenders.append(Contender(f"without {args.without}", here, args.without))
        for point in [(path, load) for load in loads for path in PATHS]:
            for _ in range(args.rounds):
                for contender in contenders:
                    samples, rps = measure_point(*point, contender, args.activations)
                    contender.samples.setdefault(point, []).extend(samples)
                    contender.load_rps.setdefault(point, []).append(rps)
    first = contenders[0]
    rows = [_row(point, contender, first) for point in first.samples for contender in contenders]
    print_table(
        (
            "path",
            "load",
            "probes/s",
            "processes",
            "activations",
            "p50 ms",
            "p99 ms",
            "max ms",
            f"p99 / {first.name} (95% interval)",
        ),
        rows,
    )
    return 0


def _row(point: tuple[str, int], contender: Contender, first: Contender) -> tuple[object, ...]:
    path, load = point
    samples = contender.samples[point]
    rps = contender.load_rps[point]
    return (
        path,
        f"wrk c={load}" if load else "quiet",
        f"{sum(rps) / len(rps):,.0f}" if load else "",
        contender.name,
        len(samples),
        percentile(samples, 0.5) * 1e3,
        percentile(samples, 0.99) * 1e3,
        max(samples) * 1e3,
        "" if contender is first else _p99_ratio(first.samples[point], samples),
    )


def _p99_ratio(before: list[float], after: list[float]) -> str:
    """after's p99 over before's, with a bootstrap 95% interval: a tail estimated from a few
    hundred samples moves by more than the differences worth reporting, and the interval says
    how far."""
    rng = random.Random(0)
    ratios = sorted(
        percentile(rng.choices(after, k=len(after)), 0.99)
        / percentile(rng.choices(before, k=len(before)), 0.99)
        for _ in range(RESAMPLES)
    )
    low, high = ratios[int(0.025 * RESAMPLES)], ratios[int(0.975 * RESAMPLES) - 1]
    return f"{percentile(after, 0.99) / percentile(before, 0.99):.2f}x ({low:.2f}-{high:.2f})"


if __name__ == "__main__":
    sys.exit(main())
