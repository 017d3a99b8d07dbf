"""Non-streaming load through every contender in one run, taking turns at each point: the engine
stub directly, bare hypercorn answering by itself (the ceiling of the mandated server), the same
with the gateway's changes to hypercorn (the ceiling of the server as the gateway runs it), the
gateway of another revision when asked, and this tree's gateway. The gateways run observed
(`observed`), so each point also says how late the event loop ran and what `gc` paused."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.gateway import followed, procs, revision, wrk

PATH = "/v1/chat/completions"


@dataclass
class Contender:
    name: str
    process: procs.Process
    stats_file: Path | None = None  # observed gateways only
    results: dict[int, list[wrk.Result]] = field(default_factory=dict)
    observed: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    def measure(self, concurrency: int, seconds: float) -> None:
        if self.stats_file is not None:
            self.stats_file.unlink(missing_ok=True)
            os.kill(self.process.popen.pid, signal.SIGUSR1)
        result = wrk.run(self.process.url + PATH, concurrency, seconds)
        self.results.setdefault(concurrency, []).append(result)
        if self.stats_file is not None:
            os.kill(self.process.popen.pid, signal.SIGUSR2)
            deadline = time.monotonic() + 30
            while not self.stats_file.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} wrote no observations")
                time.sleep(0.05)
            report = json.loads(self.stats_file.read_text())
            self.observed.setdefault(concurrency, []).append(report)


@contextlib.contextmanager
def contenders(compare: str | None) -> Iterator[list[Contender]]:
    """Started: direct, ceiling, patched ceiling, [gateway at `compare`], gateway (this tree),
    and this tree's gateway following the engine as a pod (`followed`), as the operator deploys
    it. The engine listens on the machine's own address, which an EndpointSlice can name."""
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
        engine = procs.engine(host=followed.host_address())
        stack.callback(engine.stop)
        address = urlsplit(engine.url)
        following = stack.enter_context(followed.pods((address.hostname or "", address.port or 0)))
        started = [
            Contender("direct", engine),
            Contender("bare hypercorn", procs.reference_proxy("none", engine.url)),
            Contender(
                "gateway's hypercorn",
                procs.reference_proxy("none", engine.url, gateway_server=True),
            ),
        ]
        for contender in started[1:]:
            stack.callback(contender.process.stop)
        command = [sys.executable, "-m", "benchmarks.gateway.observed"]
        ours = os.environ.get("PYTHONPATH", "")
        gateways = [("gateway", ours, {}), (followed.MODE, ours, following)]
        if compare is not None:
            path = stack.enter_context(revision.pythonpath(compare))
            gateways.insert(0, (f"gateway {revision.describe(compare)}", path, {}))
        for index, (name, path, env) in enumerate(gateways):
            stats = Path(folder) / f"observed-{index}.json"
            gateway = procs.gateway(
                engine.url, command=[*command, str(stats)], PYTHONPATH=path, **env
            )
            stack.callback(gateway.stop)
            started.append(Contender(name, gateway, stats))
        yield started


def run(levels: list[int], seconds: float, rounds: int, compare: str | None) -> list[Contender]:
    with contenders(compare) as started:
        for concurrency in levels:
            for contender in started:  # steady state: connections open, pools filled
                wrk.run(contender.process.url + PATH, concurrency, 1)
            for _ in range(rounds):
                for contender in started:
                    contender.measure(concurrency, seconds)
    return started


def throughput_rows(started: list[Contender], levels: list[int]) -> list[tuple[object, ...]]:
    direct, ceiling, patched, *gateways = started
    *before, ours, following = gateways  # before: the gateway at --compare, if asked
    rows: list[tuple[object, ...]] = []
    for c in levels:
        for contender in started:
            results = contender.results[c]
            rps = [r.rps for r in results]
            ratio = ""
            if contender in gateways:
                ratio = f"{_median(rps) / _median(_rps(ceiling, c)):.0%} of ceiling"
                if contender in (ours, following):
                    ratio += f", {_median(rps) / _median(_rps(patched, c)):.0%} of its server"
                    if before:
                        ratio += f", {_median(rps) / _median(_rps(before[0], c)):.2f}x before"
            added = ""
            if contender not in (direct, ceiling, patched):
                added = f"{_median([r.p50_ms for r in results]) - _p50(direct, c):.2f}"
            rows.append(
                (
                    c,
                    contender.name,
                    _span(rps, "{:,.0f}"),
                    _span([r.p50_ms for r in results], "{:.2f}"),
                    _span([r.p99_ms for r in results], "{:.2f}"),
                    added,
                    ratio,
                    sum(r.errors for r in results),
                )
            )
    return rows


def tail_rows(started: list[Contender], levels: list[int]) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for c in levels:
        for contender in started:
            for report in contender.observed.get(c, []):
                lag, collector = report["lag_ms"], report["gc"]
                rows.append(
                    (
                        c,
                        contender.name,
                        f"{lag['p50']:.2f} / {lag['p99']:.2f} / {lag['max']:.1f}",
                        " / ".join(str(n) for n in collector["collections"]),
                        f"{collector['pause_total_ms']:.0f}",
                        f"{collector['pause_max_ms']:.1f}",
                    )
                )
    return rows


def _rps(contender: Contender, c: int) -> list[float]:
    return [r.rps for r in contender.results[c]]


def _p50(contender: Contender, c: int) -> float:
    return _median([r.p50_ms for r in contender.results[c]])


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _span(values: list[float], form: str) -> str:
    """One value, or the range of the rounds (median in brackets)."""
    if len(values) == 1:
        return form.format(values[0])
    low, mid, high = min(values), _median(values), max(values)
    return f"{form.format(low)}-{form.format(high)} ({form.format(mid)})"
