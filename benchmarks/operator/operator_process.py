"""The measured operator, in a process of its own so that its CPU time and peak RSS are its own.

    python operator_process.py KUBECONFIG METRICS_PORT [--workers N] --resync 120 [--profile FILE]

Wires the controller exactly as `noctaya-operator` does (through `build_controller`), with an
informer resync period the benchmark chooses, and serves on 127.0.0.1:METRICS_PORT the
controller's metrics (reconciles, queue depth) plus the requests its client sent, by verb and
resource, as `benchmark_client_requests_total`. Runs until SIGTERM. With `--profile`, cProfile
covers every thread from start to SIGTERM and the merged stats go to FILE.

Only imports `noctaya.*` APIs that are stable across commits, so the benchmark can run an
earlier commit's operator with PYTHONPATH pointing at that commit's sources.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent))

from api_requests import RequestCounter
from kubernetes import config as k8s_config
from noctaya.k8s.controller import build_controller
from noctaya.k8s.operator.metrics import ControllerMetrics
from noctaya.k8s.reconciler import OperatorSettings
from noctaya.k8s.runtime import InformerTiming, ManagerOptions
from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

CLIENT_REQUESTS = "benchmark_client_requests"


class ClientRequests(Collector):
    """The operator client's request counts as a metric, read at each scrape."""

    def __init__(self, counter: RequestCounter) -> None:
        self._counter = counter

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            CLIENT_REQUESTS, "Requests the operator's client sent", labels=("verb", "resource")
        )
        for (verb, resource), n in self._counter.snapshot().items():
            family.add_metric((verb, resource), n)
        yield family


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kubeconfig")
    parser.add_argument("metrics_port", type=int)
    parser.add_argument("--workers", type=int, help="default: the operator's own default")
    parser.add_argument("--resync", type=float, default=120.0)
    parser.add_argument("--profile", help="write cProfile stats here")
    args = parser.parse_args()

    api_client = k8s_config.new_client_from_config(args.kubeconfig, persist_config=False)
    manager, reconciler = build_controller(
        api_client,
        OperatorSettings("ghcr.io/noctaya/noctaya-gateway:bench"),
        ManagerOptions(
            health_probe_address="0",
            informer_timing=InformerTiming(resync_period=args.resync),
            **({} if args.workers is None else {"workers": args.workers}),
        ),
    )
    metrics = ControllerMetrics()
    metrics.observe_manager(manager)
    metrics.registry.register(ClientRequests(RequestCounter(manager.api_client)))
    start_http_server(args.metrics_port, "127.0.0.1", registry=metrics.registry)

    def stop(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=manager.stop, name="stop").start()

    signal.signal(signal.SIGTERM, stop)
    profilers = _profile_threads() if args.profile else []
    manager.run(metrics.instrument(reconciler.reconcile), handle_signals=False)
    if profilers:
        stats = pstats.Stats(*profilers)  # the workers and informers have ended by now
        stats.dump_stats(args.profile + ".part")
        Path(args.profile + ".part").rename(args.profile)
    return 0


def _profile_threads() -> list[cProfile.Profile]:
    """A profiler in this thread and in each thread started later (workers, informers): one
    cProfile.Profile must not be shared between threads, so each gets its own."""
    profilers: list[cProfile.Profile] = []

    def start(*_: object) -> None:
        profiler = cProfile.Profile()
        profilers.append(profiler)
        profiler.enable()  # replaces this hook for the calling thread

    threading.setprofile(start)
    start()
    return profilers


if __name__ == "__main__":
    sys.exit(main())
