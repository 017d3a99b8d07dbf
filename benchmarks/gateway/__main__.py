"""Run every gateway measurement in one go and print the tables.

    .venv/bin/python -m benchmarks.gateway [--seconds 5] [--hold N,...] [--compare REV] [--rounds 3]
    .venv/bin/python -m benchmarks.gateway --only memory [--hold 1000,10000] [--compare REV]
    .venv/bin/python -m benchmarks.gateway --profile [--seconds 10] [--compare REV]

Non-streaming: `wrk` posts a 60-byte chat completion at concurrency 1, 64 and 256, straight at the
engine stub, at bare hypercorn answering by itself (the ceiling of the mandated server) and through
the gateway (tokens=1, no token delay: the engine costs almost nothing, so the difference is the
gateway), both sending to a backend URL and following the engine as a pod through its EndpointSlice
on a test control plane, as the operator deploys it; `--compare REV` adds the gateway of another
revision, measured in turn with this tree's at every point, and `--rounds` repeats each point to
show the spread on a shared machine. The gateways report their event-loop lag and `gc` pauses per
point. The same load through bare reference proxies shows what the upstream client alone costs.
Streams: 20 tokens 10 ms apart, the added time to first token and the added gap between tokens.
Memory: each mode's idle footprint (RSS, import time, start-up time, on compiled bytecode,
`footprint`), and the gateway's RSS while holding cold keepalive streams (the backend never becomes
ready, so they live on heartbeats), with `--compare REV`'s row next to this tree's for each.

`--profile` measures nothing else: it runs the gateway under cProfile while wrk drives it at
c=64 (profiling only the measured seconds) and prints the top-20 flat profile by own time
(with `--compare`, that revision's first).
"""

from __future__ import annotations

import argparse
import contextlib
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

from benchmarks.gateway import followed, footprint, procs, revision, side_by_side, streams, wrk
from benchmarks.gateway.table import print_table

PATH = "/v1/chat/completions"
PROFILE_CONCURRENCY = 64
PROFILE_TOP = 20
HOLD_CPU_SECONDS = 5.0
IDLE_SETTLE_SECONDS = 1.0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway")
    parser.add_argument("--seconds", type=float, default=5.0, help="per wrk point")
    parser.add_argument("--concurrency", default="1,64,256")
    parser.add_argument("--streams", type=int, default=400)
    parser.add_argument("--stream-concurrency", type=int, default=16)
    parser.add_argument(
        "--hold", default="1000,10000", help="cold streams to hold (a comma list: one gateway each)"
    )
    parser.add_argument(
        "--prompt-bytes",
        type=int,
        default=0,
        help="each held stream's request carries a user message of this many bytes",
    )
    parser.add_argument(
        "--profile", action="store_true", help="only profile the gateway under wrk at c=64"
    )
    parser.add_argument("--compare", metavar="REV", help="also measure the gateway at REV")
    parser.add_argument("--rounds", type=int, default=1, help="measurements per point")
    parser.add_argument(
        "--only", choices=("throughput", "memory"), help="run one part of the benchmark"
    )
    args = parser.parse_args()
    if args.only != "memory" and not wrk.available():
        print("this benchmark drives load with wrk: apt-get install wrk", file=sys.stderr)
        return 1
    if args.profile:
        if args.compare is not None:
            with revision.pythonpath(args.compare) as path:
                print(_profile(args.seconds, f"at {revision.describe(args.compare)}", path))
        print(_profile(args.seconds, "this tree", os.environ.get("PYTHONPATH", "")))
        return 0
    streams.raise_open_files_limit()
    levels = [int(c) for c in args.concurrency.split(",")]
    if args.only != "memory":
        started = side_by_side.run(levels, args.seconds, args.rounds, args.compare)
        print_table(
            "Non-streaming chat completions (wrk, 60-byte body, keep-alive)",
            ("c", "target", "req/s", "p50 ms", "p99 ms", "added p50 ms", "ratio", "errors"),
            side_by_side.throughput_rows(started, levels),
        )
        print_table(
            "Where the tail comes from (gateways under the load above, per round)",
            ("c", "target", "loop lag p50/p99/max ms", "gc runs gen0/1/2", "gc ms", "gc max ms"),
            side_by_side.tail_rows(started, levels),
        )
    if args.only == "throughput":
        return 0
    if args.only == "memory":
        _print_memory(args)
        return 0
    print_table(
        "Upstream client choice (hypercorn+uvloop proxies, c=64; CPU = proxy process per request)",
        ("proxy", "req/s", "CPU us/req", "p50 ms", "p99 ms", "errors"),
        _client_choice(args.seconds),
    )
    print_table(
        f"Streams ({args.streams} x 20 tokens, 10 ms apart, {args.stream_concurrency} at once)",
        ("path", "TTFT p50 ms", "TTFT p99 ms", "gap mean ms", "gap p99 ms", "errors"),
        _streams(args.streams, args.stream_concurrency),
    )
    _print_memory(args)
    return 0


def _print_memory(args: argparse.Namespace) -> None:
    revisions = [("this tree", os.environ.get("PYTHONPATH", ""))]
    with contextlib.ExitStack() as stack:
        if args.compare is not None:
            path = stack.enter_context(revision.pythonpath(args.compare))
            revisions.insert(0, (f"at {revision.describe(args.compare)}", path))
        print_table(
            f"Idle footprint ({args.rounds} rounds, a fresh process each; bytecode compiled "
            "beforehand, as the image ships it)",
            ("gateway", "mode", "idle RSS MiB", "import ms", "start-up ms"),
            _footprint(revisions, args.rounds),
        )
        print_table(
            "Gateway memory",
            ("gateway", "state", "RSS MiB", "KiB per stream", "CPU % holding", "errors"),
            _memory(revisions, [int(count) for count in args.hold.split(",")], args.prompt_bytes),
        )


def _footprint(revisions: list[tuple[str, str]], rounds: int) -> list[tuple[object, ...]]:
    measured = {
        (mode, name): footprint.Figures() for mode in footprint.ENTRY for name, _ in revisions
    }
    pod = (followed.host_address(), procs.free_port())  # nothing listens: an idle gateway
    with footprint.compiled_bytecode() as bytecode, followed.pods(pod) as following:
        for _, path in revisions:
            footprint.warm(list(footprint.ENTRY), {**bytecode, "PYTHONPATH": path}, following)
        for _ in range(rounds):
            for mode in footprint.ENTRY:
                for name, path in revisions:
                    env = {**bytecode, "PYTHONPATH": path}
                    footprint.measure(mode, env, measured[(mode, name)], following)
    return footprint.rows(measured)


def _profile(seconds: float, name: str, pythonpath: str) -> str:
    """The gateway's flat profile (by own time) while wrk drives it at c=64; `pythonpath` picks
    the revision (empty: this tree)."""
    engine = procs.engine()
    with tempfile.TemporaryDirectory() as folder:
        stats_file = Path(folder) / "gateway.prof"
        command = [sys.executable, "-m", "benchmarks.gateway.profiled", str(stats_file)]
        gateway = procs.gateway(engine.url, command=command, PYTHONPATH=pythonpath)
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
        stats.strip_dirs().sort_stats(pstats.SortKey.TIME).print_stats(PROFILE_TOP)
    header = (
        f"Gateway ({name}) profile under wrk at c={PROFILE_CONCURRENCY} for {seconds:g}s "
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


def _memory(
    revisions: list[tuple[str, str]], holds: list[int], prompt: int
) -> list[tuple[object, ...]]:
    """Each state's row for every revision in turn: a before/after table."""
    measured = [_memory_of(name, holds, path, prompt) for name, path in revisions]
    return [row for rows in zip(*measured, strict=True) for row in rows]


def _memory_of(
    name: str, holds: list[int], pythonpath: str, prompt: int
) -> list[tuple[object, ...]]:
    """For each count in `holds` (each on a fresh gateway), RSS and CPU while holding that many
    cold keepalive streams, each request with a `prompt`-byte message."""
    rows: list[tuple[object, ...]] = []
    for count in holds:
        # A backend that never answers: every request is a cold keepalive stream.
        gateway = procs.gateway(
            f"http://127.0.0.1:{procs.free_port()}",
            PYTHONPATH=pythonpath,
            NOCTAYA_MAX_QUEUE=str(max(holds)),
        )
        try:
            time.sleep(IDLE_SETTLE_SECONDS)
            idle = gateway.rss_mib()
            with streams.holding(gateway.url, count, prompt) as (held, errors):
                pending = _gauge(gateway.url, "noctaya_gateway_pending")
                time.sleep(2)
                cpu = gateway.cpu_seconds()
                time.sleep(HOLD_CPU_SECONDS)
                busy = (gateway.cpu_seconds() - cpu) / HOLD_CPU_SECONDS
                rss = gateway.rss_mib()
            rows.append(
                (
                    name,
                    f"holding {held} cold streams{_prompt_label(prompt)} (pending={pending:.0f})",
                    f"{rss:.1f}",
                    f"{(rss - idle) * 1024 / max(held, 1):.1f}",
                    f"{busy:.0%}",
                    errors,
                )
            )
        finally:
            gateway.stop()
    return rows


def _prompt_label(prompt: int) -> str:
    return f" of {prompt:,}-byte prompts" if prompt else ""


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


if __name__ == "__main__":
    sys.exit(main())
