"""Run every gateway measurement in one go and print the tables.

    .venv/bin/python -m benchmarks.gateway [--seconds 5] [--hold 1000]
    .venv/bin/python -m benchmarks.gateway --profile [--seconds 10]

Non-streaming: `wrk` posts a 60-byte chat completion at concurrency 1, 64 and 256, straight at
the engine stub and through the gateway (tokens=1, no token delay: the engine costs almost
nothing, so the difference is the gateway). The same load through bare reference proxies shows
what the upstream client alone costs. Streams: 20 tokens 10 ms apart, the added time to first
token and the added gap between tokens. Memory: the gateway's RSS idle and while holding cold
keepalive streams (the backend never becomes ready, so they live on heartbeats).

`--profile` measures nothing else: it runs the gateway under cProfile while wrk drives it at
c=64 (profiling only the measured seconds) and prints the top-20 flat profile by own time.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks.gateway import procs, wrk

PATH = "/v1/chat/completions"
PROFILE_CONCURRENCY = 64
PROFILE_TOP = 20


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway")
    parser.add_argument("--seconds", type=float, default=5.0, help="per wrk point")
    parser.add_argument("--concurrency", default="1,64,256")
    parser.add_argument("--streams", type=int, default=400)
    parser.add_argument("--stream-concurrency", type=int, default=16)
    parser.add_argument("--hold", type=int, default=1000, help="cold streams to hold")
    parser.add_argument(
        "--profile", action="store_true", help="only profile the gateway under wrk at c=64"
    )
    args = parser.parse_args()
    if not wrk.available():
        print("this benchmark drives load with wrk: apt-get install wrk", file=sys.stderr)
        return 1
    if args.profile:
        print(_profile(args.seconds))
        return 0
    levels = [int(c) for c in args.concurrency.split(",")]
    _print_table(
        "Non-streaming chat completions (wrk, 60-byte body, keep-alive)",
        (
            "concurrency",
            "direct req/s",
            "gateway req/s",
            "ratio",
            "direct p50/p99 ms",
            "gateway p50/p99 ms",
            "added p50 ms",
            "errors",
        ),
        _non_streaming(levels, args.seconds),
    )
    _print_table(
        "Upstream client choice (hypercorn+uvloop proxies, c=64; CPU = proxy process per request)",
        ("proxy", "req/s", "CPU us/req", "p50 ms", "p99 ms", "errors"),
        _client_choice(args.seconds),
    )
    _print_table(
        f"Streams ({args.streams} x 20 tokens, 10 ms apart, {args.stream_concurrency} at once)",
        ("path", "TTFT p50 ms", "TTFT p99 ms", "gap mean ms", "gap p99 ms", "errors"),
        _streams(args.streams, args.stream_concurrency),
    )
    _print_table(
        "Gateway memory",
        ("state", "RSS MiB", "errors"),
        _memory(args.hold),
    )
    return 0


def _non_streaming(levels: list[int], seconds: float) -> list[tuple[object, ...]]:
    engine = procs.engine()
    gateway = procs.gateway(engine.url)
    rows: list[tuple[object, ...]] = []
    try:
        for concurrency in levels:
            for target in (engine, gateway):  # steady state: connections open, pools filled
                wrk.run(target.url + PATH, concurrency, 1)
            direct = wrk.run(engine.url + PATH, concurrency, seconds)
            via = wrk.run(gateway.url + PATH, concurrency, seconds)
            rows.append(
                (
                    concurrency,
                    f"{direct.rps:,.0f}",
                    f"{via.rps:,.0f}",
                    f"{via.rps / direct.rps:.0%}",
                    f"{direct.p50_ms:.2f} / {direct.p99_ms:.2f}",
                    f"{via.p50_ms:.2f} / {via.p99_ms:.2f}",
                    f"{via.p50_ms - direct.p50_ms:.2f}",
                    direct.errors + via.errors,
                )
            )
    finally:
        gateway.stop()
        engine.stop()
    return rows


def _profile(seconds: float) -> str:
    """The gateway's flat profile (by own time) while wrk drives it at c=64."""
    engine = procs.engine()
    with tempfile.TemporaryDirectory() as folder:
        stats_file = Path(folder) / "gateway.prof"
        command = [sys.executable, "-m", "benchmarks.gateway.profiled", str(stats_file)]
        gateway = procs.gateway(engine.url, command=command)
        try:
            wrk.run(gateway.url + PATH, PROFILE_CONCURRENCY, 1)
            os.kill(gateway.popen.pid, signal.SIGUSR1)
            result = wrk.run(gateway.url + PATH, PROFILE_CONCURRENCY, seconds)
            os.kill(gateway.popen.pid, signal.SIGUSR2)
            deadline = time.monotonic() + 60
            while not stats_file.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError("the profiled gateway wrote no stats")
                time.sleep(0.1)
        finally:
            gateway.stop()
            engine.stop()
        text = io.StringIO()
        stats = pstats.Stats(str(stats_file), stream=text)
        stats.sort_stats(pstats.SortKey.TIME).print_stats(PROFILE_TOP)
    header = (
        f"Gateway profile under wrk at c={PROFILE_CONCURRENCY} for {seconds:g}s "
        f"(cProfile: {result.rps:,.0f} req/s, p50 {result.p50_ms:.2f} ms, "
        f"p99 {result.p99_ms:.2f} ms, errors {result.errors}; slower than unprofiled)"
    )
    body = text.getvalue()
    return header + "\n" + body[body.index("   ncalls") :]


def _client_choice(seconds: float) -> list[tuple[object, ...]]:
    engine = procs.engine()
    rows: list[tuple[object, ...]] = []
    candidates = [("noctaya gateway (lean client)", procs.gateway(engine.url))]
    candidates += [
        (f"bare hypercorn + {name}", procs.reference_proxy(client, engine.url))
        for name, client in (
            ("no upstream (ceiling)", "none"),
            ("lean raw-asyncio client", "raw"),
            ("aiohttp", "aiohttp"),
            ("httpx", "httpx"),
        )
    ]
    try:
        for name, proxy in candidates:
            wrk.run(proxy.url + PATH, 8, 1)
            before = proxy.cpu_seconds()
            result = wrk.run(proxy.url + PATH, 64, seconds)
            cpu_us = (proxy.cpu_seconds() - before) / (result.rps * seconds) * 1e6
            rows.append(
                (
                    name,
                    f"{result.rps:,.0f}",
                    f"{cpu_us:,.0f}",
                    f"{result.p50_ms:.2f}",
                    f"{result.p99_ms:.2f}",
                    result.errors,
                )
            )
    finally:
        for _, proxy in candidates:
            proxy.stop()
        engine.stop()
    return rows


def _streams(count: int, concurrency: int) -> list[tuple[object, ...]]:
    engine = procs.engine(STUB_TOKEN_COUNT="20", STUB_TOKEN_DELAY="10ms")
    gateway = procs.gateway(engine.url)
    rows: list[tuple[object, ...]] = []
    try:
        reports = {}
        for name, target in (("direct", engine), ("gateway", gateway)):
            _stream_load("measure", target.url, str(max(concurrency, 16)), str(concurrency))
            reports[name] = json.loads(
                _stream_load("measure", target.url, str(count), str(concurrency))
            )
        for name, report in reports.items():
            rows.append(
                (
                    name,
                    f"{report['ttft_p50_ms']:.2f}",
                    f"{report['ttft_p99_ms']:.2f}",
                    f"{report['gap_mean_ms']:.2f}",
                    f"{report['gap_p99_ms']:.2f}",
                    report["errors"],
                )
            )
        direct, via = reports["direct"], reports["gateway"]
        rows.append(
            (
                "added by gateway",
                f"{via['ttft_p50_ms'] - direct['ttft_p50_ms']:.2f}",
                f"{via['ttft_p99_ms'] - direct['ttft_p99_ms']:.2f}",
                f"{via['gap_mean_ms'] - direct['gap_mean_ms']:.2f}",
                f"{via['gap_p99_ms'] - direct['gap_p99_ms']:.2f}",
                "",
            )
        )
    finally:
        gateway.stop()
        engine.stop()
    return rows


def _memory(hold: int) -> list[tuple[object, ...]]:
    # A backend that never answers: every request is a cold keepalive stream.
    gateway = procs.gateway(f"http://127.0.0.1:{procs.free_port()}")
    rows: list[tuple[object, ...]] = []
    try:
        time.sleep(1)
        rows.append(("idle", f"{gateway.rss_mib():.1f}", ""))
        holder = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.gateway.streams", "hold", gateway.url, str(hold)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None
        assert holder.stdin is not None
        line = holder.stdout.readline().split()  # "held <n> errors <e>"
        pending = _gauge(gateway.url, "noctaya_gateway_pending")
        time.sleep(2)
        rows.append(
            (
                f"holding {line[1]} cold streams (pending={pending:.0f})",
                f"{gateway.rss_mib():.1f}",
                line[3],
            )
        )
        holder.stdin.close()
        holder.wait(60)
    finally:
        gateway.stop()
    return rows


def _stream_load(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.gateway.streams", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout


def _gauge(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return float("nan")


def _print_table(title: str, headers: tuple[str, ...], rows: list[tuple[object, ...]]) -> None:
    cells = [list(headers), *[[str(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    print(f"\n{title}")
    for index, row in enumerate(cells):
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
        if index == 0:
            print("  ".join("-" * width for width in widths))
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
