"""Many token streams at once, straight from the engine stub and through each gateway, taking
turns in one run: what a chat user sees as stutter, and what the gateway spends on each token.

    .venv/bin/python -m benchmarks.gateway.token_streams [--compare REV] [--without CHANGE]
        [--rounds 3] [--streams 256] [--tokens 200] [--delay 5ms]

Each round opens `--streams` chat completion streams at once (one connection each) against the
engine directly, then through the gateway of `--compare REV` and this tree's with one change to
the server undone (`--without CHANGE`, the ledger's figure) when asked, then through this
tree's gateway; the engine stub writes `--tokens` tokens per stream, `--delay` apart. Per target
and round: tokens per second (all tokens over the wall time from the first request to the last
stream's end), the gap between a stream's successive tokens as the client sees them (p50, p99,
max), the gap p99 added over the direct path of the same round, the gateway's CPU seconds per
10,000 relayed tokens, and the load generator's own CPU share (near 100 % it, not the target,
sets the pace), the CPU the rest of the machine used meanwhile ("others", in cores: what else
ran on it, which no figure here can subtract), and the time to first token (p50 and max: a
stream that starts late shortens the time all streams run at once, so it also moves tokens/s).
The gateways run observed (`observed`): the event loop's lag and the collector's runs and
pauses during each round say where a gap came from.

The load generator is a raw asyncio client on uvloop that only counts `data: {` lines as they
arrive, so that as little as possible of the machine's two cores goes to measuring.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from noctaya.gateway.process import running as process

from benchmarks.gateway import procs, revision, streams
from benchmarks.gateway.table import print_table

TOKEN = b"data: {"
WARMUP_STREAMS = 64


@dataclass
class Target:
    name: str
    process: procs.Process
    stats_file: Path | None = None  # gateways only
    reports: list[dict[str, Any]] = field(default_factory=list)

    def measure(self, count: int, ours: list[procs.Process]) -> dict[str, Any]:
        if self.stats_file is not None:
            self.stats_file.unlink(missing_ok=True)
            os.kill(self.process.popen.pid, signal.SIGUSR1)
        cpu = self.process.cpu_seconds()
        machine, mine = _busy_cores(), sum(p.cpu_seconds() for p in ours) + _children_cpu()
        began = time.monotonic()
        report = _client(self.process.url, count)
        report["cpu_s"] = self.process.cpu_seconds() - cpu
        wall = time.monotonic() - began
        busy = _busy_cores() - machine
        mine = sum(p.cpu_seconds() for p in ours) + _children_cpu() - mine
        # What else ran on the machine meanwhile, in cores: all busy time less this
        # benchmark's processes (engine, gateways, load generator).
        report["others"] = max(0.0, busy - mine) / wall
        if self.stats_file is not None:
            os.kill(self.process.popen.pid, signal.SIGUSR2)
            deadline = time.monotonic() + 30
            while not self.stats_file.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} wrote no observations")
                time.sleep(0.05)
            report["observed"] = json.loads(self.stats_file.read_text())
        self.reports.append(report)
        return report


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway.token_streams")
    parser.add_argument("--streams", type=int, default=256, help="streams open at once")
    parser.add_argument("--tokens", type=int, default=200, help="tokens per stream")
    parser.add_argument("--delay", default="5ms", help="between an engine's tokens")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", metavar="REV", help="also measure the gateway at REV")
    parser.add_argument(
        "--without",
        metavar="CHANGE",
        help="also measure this tree's gateway with one change to the server undone "
        "(benchmarks.gateway.without)",
    )
    args = parser.parse_args()
    streams.raise_open_files_limit()
    load = os.getloadavg()
    with _targets(args.compare, args.without, args.tokens, args.delay) as targets:
        ours = [target.process for target in targets]
        for target in targets:
            target.measure(WARMUP_STREAMS, ours)
            target.reports.clear()
        for _ in range(args.rounds):
            for target in targets:
                target.measure(args.streams, ours)
    after = os.getloadavg()
    print_table(
        f"{args.streams} streams at once x {args.tokens} tokens, {args.delay} apart "
        f"({args.rounds} rounds in turn; load average {load[0]:.2f} before, {after[0]:.2f} after)",
        (
            "target",
            "round",
            "tokens/s",
            "gap p50 ms",
            "gap p99 ms",
            "gap max ms",
            "added p99 ms",
            "CPU s/10k tok",
            "TTFT p50/max ms",
            "client CPU",
            "others",
            "errors",
        ),
        _rows(targets, args.rounds),
    )
    print_table(
        "Where the gaps come from (gateways, per round)",
        ("target", "round", "loop lag p50/p99/max ms", "gc runs gen0/1/2", "gc ms", "gc max ms"),
        _observed_rows(targets),
    )
    print_table("Medians over the rounds", _SUMMARY_HEADERS, _summary(targets))
    return 0


@contextlib.contextmanager
def _targets(
    compare: str | None, without: str | None, tokens: int, delay: str
) -> Iterator[list[Target]]:
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
        engine = procs.engine(STUB_TOKEN_COUNT=str(tokens), STUB_TOKEN_DELAY=delay)
        stack.callback(engine.stop)
        targets = [Target("direct", engine)]
        here = os.environ.get("PYTHONPATH", "")
        gateways = [("gateway", here, "")]
        if without is not None:
            gateways.insert(0, (f"gateway without {without}", here, without))
        if compare is not None:
            path = stack.enter_context(revision.pythonpath(compare))
            gateways.insert(0, (f"gateway {revision.describe(compare)}", path, ""))
        command = [sys.executable, "-m", "benchmarks.gateway.observed"]
        for index, (name, path, undone) in enumerate(gateways):
            stats = Path(folder) / f"observed-{index}.json"
            gateway = procs.gateway(
                engine.url,
                command=[*command, str(stats)],
                PYTHONPATH=path,
                BENCH_WITHOUT=undone,
            )
            stack.callback(gateway.stop)
            targets.append(Target(name, gateway, stats))
        yield targets


def _rows(targets: list[Target], rounds: int) -> list[tuple[object, ...]]:
    direct = targets[0]
    rows: list[tuple[object, ...]] = []
    for index in range(rounds):
        for target in targets:
            report = target.reports[index]
            added = ""
            cpu = ""
            if target is not direct:
                added = f"{report['gap_p99_ms'] - direct.reports[index]['gap_p99_ms']:.1f}"
                cpu = f"{report['cpu_s'] / report['tokens'] * 1e4:.3f}"
            rows.append(
                (
                    target.name,
                    index + 1,
                    f"{report['tokens_per_s']:,.0f}",
                    f"{report['gap_p50_ms']:.2f}",
                    f"{report['gap_p99_ms']:.1f}",
                    f"{report['gap_max_ms']:.1f}",
                    added,
                    cpu,
                    f"{report['ttft_p50_ms']:.0f} / {report['ttft_max_ms']:.0f}",
                    f"{report['client_cpu']:.0%}",
                    f"{report['others']:.2f}",
                    report["errors"],
                )
            )
    return rows


def _observed_rows(targets: list[Target]) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for target in targets:
        for index, report in enumerate(target.reports):
            if "observed" not in report:
                continue
            lag, collector = report["observed"]["lag_ms"], report["observed"]["gc"]
            rows.append(
                (
                    target.name,
                    index + 1,
                    f"{lag['p50']:.2f} / {lag['p99']:.2f} / {lag['max']:.1f}",
                    " / ".join(str(n) for n in collector["collections"]),
                    f"{collector['pause_total_ms']:.0f}",
                    f"{collector['pause_max_ms']:.1f}",
                )
            )
    return rows


_SUMMARY_HEADERS = ("target", "tokens/s", "gap p99 ms", "added p99 ms", "CPU s/10k tok", "ratio")


def _summary(targets: list[Target]) -> list[tuple[object, ...]]:
    direct, *gateways = targets
    rows: list[tuple[object, ...]] = []
    first_cpu = None
    for target in targets:
        reports = target.reports
        added = cpu = ratio = ""
        if target is not direct:
            added_values = [
                r["gap_p99_ms"] - d["gap_p99_ms"]
                for r, d in zip(reports, direct.reports, strict=True)
            ]
            added = f"{statistics.median(added_values):.1f}"
            cpu_value = statistics.median(r["cpu_s"] / r["tokens"] * 1e4 for r in reports)
            cpu = f"{cpu_value:.3f}"
            if first_cpu is None:
                first_cpu = cpu_value
            elif len(gateways) > 1:
                ratio = f"CPU {cpu_value / first_cpu:.2f}x of {gateways[0].name}"
        rows.append(
            (
                target.name,
                f"{statistics.median(r['tokens_per_s'] for r in reports):,.0f}",
                f"{statistics.median(r['gap_p99_ms'] for r in reports):.1f}",
                added,
                cpu,
                ratio,
            )
        )
    return rows


def _busy_cores() -> float:
    """Seconds the machine's CPUs have been busy, all of them added up (/proc/stat)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    """CPU seconds of the load generators that have ended so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _client(url: str, count: int) -> dict[str, Any]:
    output = subprocess.run(
        [sys.executable, "-m", "benchmarks.gateway.token_streams", "--client", url, str(count)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    return dict(json.loads(output))


# The load generator (its own process).


class _Stream(asyncio.Protocol):
    """One chat completion stream: the arrival time of each token, the end of the response."""

    def __init__(self, request: bytes, done: asyncio.Future[None]) -> None:
        self.request = request
        self.done = done
        self.arrivals: list[float] = []
        self.tail = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        data = self.tail + data
        self.arrivals.extend([now] * data.count(TOKEN))
        self.tail = data[-(len(TOKEN) - 1) :]  # a marker split across reads counts once
        if data.endswith(b"\r\n0\r\n\r\n"):  # the chunked body's last chunk
            assert self.transport is not None
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _measure(url: str, count: int) -> dict[str, Any]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    body = json.dumps(streams.BODY).encode()
    request = (
        f"POST {streams.PATH} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    loop = asyncio.get_running_loop()
    cpu = time.process_time()
    started = time.perf_counter()

    async def one() -> _Stream:
        done: asyncio.Future[None] = loop.create_future()
        stream = _Stream(request, done)
        await loop.create_connection(lambda: stream, host, int(port))
        await asyncio.wait_for(done, 120)
        return stream

    results = await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    good = [r for r in results if isinstance(r, _Stream) and r.arrivals]
    gaps = sorted(
        (b - a) * 1e3 for s in good for a, b in zip(s.arrivals, s.arrivals[1:], strict=False)
    )
    tokens = sum(len(s.arrivals) for s in good)
    firsts = sorted((s.arrivals[0] - started) * 1e3 for s in good)
    return {
        "tokens": tokens,
        "tokens_per_s": tokens / wall,
        "gap_p50_ms": statistics.median(gaps),
        "gap_p99_ms": gaps[int(len(gaps) * 0.99) - 1],
        "gap_max_ms": gaps[-1],
        "client_cpu": cpu / wall,
        "ttft_p50_ms": statistics.median(firsts),
        "ttft_max_ms": firsts[-1],
        "errors": count - len(good),
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["--client"]:
        print(json.dumps(process.run(_measure(sys.argv[2], int(sys.argv[3])))))
    else:
        sys.exit(main())
