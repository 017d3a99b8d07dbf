"""What each of the gateway's changes to hypercorn, h2, h11 and asyncio gains, measured against
the same gateway with that one change undone (`benchmarks.gateway.without`), in one run.

    .venv/bin/python -m benchmarks.gateway.patches [--rounds 3] [--seconds 5] [--hold 2000]
        [--only throughput|memory] [--changes name,...]

Throughput: `wrk` posts the 60-byte chat completion at c=64 and c=256 through each gateway in
turn (the engine stub answers at once), round after round, so that every contender sees the
same moments of a shared machine; the table prints each contender's range over the rounds and
the median's ratio to the gateway with every change, and the gateway process's CPU time per
request, which a busy machine disturbs far less than requests per second. Memory: each
contender, started afresh in every round, holds `--hold` cold keepalive streams; the table
prints the RSS each stream adds. A change whose ratio sits inside the spread of the rounds
gains nothing measurable here. The request's receive channel cannot be undone in a running
gateway (the app learns of disconnects from it): its table weighs, in this process, what it
keeps per request against what hypercorn's asyncio.Queue and the task the app would need to
wait in it for a disconnect keep.
(The change to HTTP/2 sends is measured on the ExternalScaler's pushes, in
`benchmarks/scaler/activation_latency.py --without h2-immediate-send`.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field

from noctaya.gateway.server.patches.receive_queue import ReceiveQueue

from benchmarks.gateway import procs, streams, wrk
from benchmarks.gateway.table import print_table
from benchmarks.gateway.without import ENVIRONMENT, UNDO

PATH = "/v1/chat/completions"
THROUGHPUT = ("connection-lifetime", "body-frames")
MEMORY = ("slim-events", "task-names")
EVERY_CHANGE = "every change"
SETTLE_SECONDS = 1.0


@dataclass
class Contender:
    without: str  # "" for the gateway with every change
    rps: dict[int, list[float]] = field(default_factory=dict)
    p99: dict[int, list[float]] = field(default_factory=dict)
    cpu_us: dict[int, list[float]] = field(default_factory=dict)
    per_stream_kib: list[float] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"without {self.without}" if self.without else EVERY_CHANGE


def gateway(backend: str, without: str, **env: str) -> procs.Process:
    command = [sys.executable, "-m", "benchmarks.gateway.without"]
    return procs.gateway(backend, command=command, **{ENVIRONMENT: without, **env})


@contextlib.contextmanager
def started(contenders: list[Contender], backend: str) -> Iterator[list[procs.Process]]:
    processes: list[procs.Process] = []
    try:
        for contender in contenders:
            processes.append(gateway(backend, contender.without))
        yield processes
    finally:
        for process in processes:
            process.stop()


def throughput(contenders: list[Contender], levels: list[int], seconds: float, rounds: int) -> None:
    engine = procs.engine()
    try:
        with started(contenders, engine.url) as processes:
            for c in levels:
                for process in processes:
                    wrk.run(process.url + PATH, c, 1)  # connections open, pools filled
                for _ in range(rounds):
                    for contender, process in zip(contenders, processes, strict=True):
                        cpu = process.cpu_seconds()
                        result = wrk.run(process.url + PATH, c, seconds)
                        if result.errors:
                            raise RuntimeError(f"{contender.name}: {result.errors} errors")
                        used = process.cpu_seconds() - cpu
                        contender.rps.setdefault(c, []).append(result.rps)
                        contender.p99.setdefault(c, []).append(result.p99_ms)
                        contender.cpu_us.setdefault(c, []).append(
                            used / (result.rps * seconds) * 1e6
                        )
    finally:
        engine.stop()


def memory(contenders: list[Contender], hold: int, rounds: int) -> None:
    for _ in range(rounds):
        for contender in contenders:
            contender.per_stream_kib.append(_per_stream_kib(contender.without, hold))


def _per_stream_kib(without: str, count: int) -> float:
    # A backend that never answers: every request is a cold keepalive stream.
    process = gateway(
        f"http://127.0.0.1:{procs.free_port()}", without, NOCTAYA_MAX_QUEUE=str(count)
    )
    try:
        time.sleep(SETTLE_SECONDS)
        idle = process.rss_mib()
        with streams.holding(process.url, count) as (held, errors):
            if errors:
                raise RuntimeError(f"without {without or 'nothing'}: {errors} errors holding")
            time.sleep(2)
            return (process.rss_mib() - idle) * 1024 / held
    finally:
        process.stop()


async def _channels_kept(hypercorns: bool, count: int) -> float:
    """Traced bytes each of `count` request channels keeps once its body was read."""
    message = {"type": "http.request", "body": b"", "more_body": False}
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept: list[object] = []
        for _ in range(count):
            if hypercorns:
                queue: asyncio.Queue[dict[str, object]] = asyncio.Queue(10)
                await queue.put(message)
                await queue.get()
                kept += [queue, asyncio.ensure_future(queue.get())]  # the disconnect's waiter
            else:
                channel = ReceiveQueue(10)
                await channel.put(message)  # type: ignore[arg-type]
                await channel.get()
                channel.on_disconnect(lambda: None)
                kept.append(channel)
        await asyncio.sleep(0)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    for each in kept:
        if isinstance(each, asyncio.Future):
            each.cancel()
    await asyncio.sleep(0)
    return used / count


def channel_rows(rounds: int, count: int = 2000) -> list[tuple[object, ...]]:
    kept: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for hypercorns in (True, False):
            kept[hypercorns].append(asyncio.run(_channels_kept(hypercorns, count)))
    return [
        ("asyncio.Queue, and a task waiting in it", _span(kept[True], "{:,.0f}")),
        ("ReceiveQueue, told of the disconnect", _span(kept[False], "{:,.0f}")),
    ]


def throughput_rows(contenders: list[Contender], levels: list[int]) -> list[tuple[object, ...]]:
    base = contenders[0]
    rows: list[tuple[object, ...]] = []
    for c in levels:
        for contender in contenders:
            rps, p99, cpu = contender.rps[c], contender.p99[c], contender.cpu_us[c]
            ratio = statistics.median(rps) / statistics.median(base.rps[c])
            cpu_ratio = statistics.median(cpu) / statistics.median(base.cpu_us[c])
            rows.append(
                (
                    c,
                    contender.name,
                    _span(rps, "{:,.0f}"),
                    "" if contender is base else f"{ratio:.3f}",
                    _span(p99, "{:.2f}"),
                    _span(cpu, "{:.0f}"),
                    "" if contender is base else f"{cpu_ratio:.3f}",
                )
            )
    return rows


def memory_rows(contenders: list[Contender]) -> list[tuple[object, ...]]:
    base = statistics.median(contenders[0].per_stream_kib)
    return [
        (
            contender.name,
            _span(contender.per_stream_kib, "{:.2f}"),
            ""
            if contender is contenders[0]
            else f"{statistics.median(contender.per_stream_kib) - base:+.2f}",
        )
        for contender in contenders
    ]


def _span(values: list[float], form: str) -> str:
    if len(values) == 1:
        return form.format(values[0])
    return (
        f"{form.format(min(values))}-{form.format(max(values))} "
        f"({form.format(statistics.median(values))})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway.patches")
    parser.add_argument("--seconds", type=float, default=5.0, help="per wrk point")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="64,256")
    parser.add_argument("--hold", type=int, default=2000, help="cold streams per memory point")
    parser.add_argument("--only", choices=("throughput", "memory"))
    parser.add_argument("--changes", help="only these (comma list; default: every one)")
    args = parser.parse_args()
    chosen = set(args.changes.split(",")) if args.changes else set(UNDO)
    unknown = chosen - set(UNDO)
    if unknown:
        parser.error(f"unknown change(s): {', '.join(sorted(unknown))}")
    levels = [int(c) for c in args.concurrency.split(",")]
    streams.raise_open_files_limit()
    if args.only != "memory":
        if not wrk.available():
            print("this benchmark drives load with wrk: apt-get install wrk", file=sys.stderr)
            return 1
        contenders = [Contender("")] + [Contender(n) for n in THROUGHPUT if n in chosen]
        throughput(contenders, levels, args.seconds, args.rounds)
        print_table(
            f"Throughput with and without each change ({args.rounds} rounds of {args.seconds:g}s"
            f" per contender and point, taken in turn)",
            ("c", "gateway", "req/s", "ratio", "p99 ms", "CPU us/req", "CPU ratio"),
            throughput_rows(contenders, levels),
        )
    if args.only != "throughput":
        contenders = [Contender("")] + [Contender(n) for n in MEMORY if n in chosen]
        print_table(
            "What a request's receive channel keeps once its body is read (traced bytes)",
            ("channel", "bytes per request"),
            channel_rows(args.rounds),
        )
        memory(contenders, args.hold, args.rounds)
        print_table(
            f"RSS per held cold stream with and without each change ({args.hold:,} streams, "
            f"{args.rounds} rounds, a fresh gateway each)",
            ("gateway", "KiB per stream", "difference"),
            memory_rows(contenders),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
