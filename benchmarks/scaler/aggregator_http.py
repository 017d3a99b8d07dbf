"""The aggregator's report endpoint, measured on real `--mode=aggregator` processes: accepted
demand reports per second and their latency on keep-alive connections, and the process's idle
RSS. `--compare REV` measures another revision's aggregator in turn with this tree's (`--rounds`
alternates them), so one run prints before and after.

    .venv/bin/python benchmarks/scaler/aggregator_http.py [--seconds 5] [--rounds 3]
        [--compare REV]

Each gateway reports on every change of its demand and every 2 s: a fleet at the aggregator's
default member cap (1,024 gateways) sends about 512 reports per second at rest.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import procs
from loadgen import percentile, print_table, run_load

from benchmarks.gateway import revision

SETTLE_SECONDS = 1.0


@dataclass
class Contender:
    name: str
    pythonpath: str
    rps: dict[int, list[float]] = field(default_factory=dict)
    p50_ms: dict[int, list[float]] = field(default_factory=dict)
    p99_ms: dict[int, list[float]] = field(default_factory=dict)
    idle_mib: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    errors: int = 0


def _report_request(client: int, n: int) -> bytes:
    body = json.dumps({"memberID": f"gw/{client}", "sequence": n, "demand": n % 3}).encode()
    return (
        b"POST /v1/demand HTTP/1.1\r\nHost: aggregator\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {procs.TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def measure(contender: Contender, token: str, levels: list[int], seconds: float) -> None:
    process, http_port, _ = procs.aggregator(token, PYTHONPATH=contender.pythonpath)
    try:
        time.sleep(SETTLE_SECONDS)
        contender.idle_mib.append(procs.rss_mib(process.pid)[0])
        for connections in levels:
            tally = asyncio.run(run_load(http_port, connections, seconds, _report_request))
            contender.rps.setdefault(connections, []).append(len(tally.latencies) / seconds)
            contender.p50_ms.setdefault(connections, []).append(
                percentile(tally.latencies, 0.5) * 1e3
            )
            contender.p99_ms.setdefault(connections, []).append(
                percentile(tally.latencies, 0.99) * 1e3
            )
            for status, count in tally.statuses.items():
                contender.statuses[status] = contender.statuses.get(status, 0) + count
            contender.errors += tally.errors
    finally:
        procs.stop(process)


def _span(values: list[float], form: str) -> str:
    if len(values) == 1:
        return form.format(values[0])
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{form.format(low)}-{form.format(high)} ({form.format(mid)})"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", default="1,64")
    parser.add_argument("--compare", metavar="REV", help="also measure the aggregator at REV")
    args = parser.parse_args()
    levels = [int(c) for c in args.connections.split(",")]
    token = procs.token_file()
    with contextlib.ExitStack() as stack:
        contenders = [Contender("this tree", os.environ.get("PYTHONPATH", ""))]
        if args.compare is not None:
            path = stack.enter_context(revision.pythonpath(args.compare))
            contenders.insert(0, Contender(revision.describe(args.compare), path))
        for _ in range(args.rounds):
            for contender in contenders:
                measure(contender, token, levels, args.seconds)
    rows = []
    for connections in levels:
        for contender in contenders:
            rows.append(
                (
                    contender.name,
                    connections,
                    _span(contender.rps[connections], "{:,.0f}"),
                    _span(contender.p50_ms[connections], "{:.2f}"),
                    _span(contender.p99_ms[connections], "{:.2f}"),
                    contender.statuses,
                    contender.errors,
                )
            )
    print(
        f"Demand reports on keep-alive connections ({args.rounds} rounds of {args.seconds:g}s "
        "per contender and point, taken in turn)"
    )
    print_table(
        ("aggregator", "conns", "reports/s", "p50 ms", "p99 ms", "statuses", "errors"), rows
    )
    print("\nIdle RSS after start-up (MiB, one fresh process per round)")
    print_table(
        ("aggregator", "idle RSS MiB"),
        [(c.name, _span(c.idle_mib, "{:.1f}")) for c in contenders],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
