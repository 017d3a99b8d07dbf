"""Operator benchmark on a real kube-apiserver: convergence time, requests per reconcile, and the
writes of an idle resync (which must be zero: a no-op reconcile writes nothing).

    .venv/bin/python benchmarks/operator/run.py [--services 100 --runtimes 5 --namespaces 10]

Starts etcd + kube-apiserver from the test control plane (`make control-plane` builds them), runs
the controller in this process exactly as `noctaya-operator` wires it, with an informer resync
period so that one full resync happens while the cluster is idle, then:

1. creates the runtimes and the services (round-robin over namespaces; half pin a runtime by
   name, half select the vendor), and times until every service has its whole one-gateway stack
   (ScaledObject, backend and gateway Deployments, three Services) and a status phase;
2. waits until the controller is quiet, then idles through the resync and waits until quiet again.

Requests are counted in the API server's `apiserver_request_total` (minus its own loopback
requests and this script's) and, as a cross-check, at the controller's client. There is no
kubelet: no Pods exist, so every service settles at ScaledToZero.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from api_requests import Key, RequestCounter, ServerCounts  # noqa: E402
from kubernetes import client as k8s  # noqa: E402
from noctaya.k8s import kinds  # noqa: E402
from noctaya.k8s.controller import MANAGED, build_controller  # noqa: E402
from noctaya.k8s.operator.metrics import ControllerMetrics  # noqa: E402
from noctaya.k8s.reconciler import OperatorSettings  # noqa: E402
from noctaya.k8s.runtime import (  # noqa: E402
    Informer,
    InformerTiming,
    ManagerOptions,
    ResourceResolver,
    WatchTarget,
)
from report import PhaseResult, print_breakdown, print_table  # noqa: E402
from support.control_plane import CRD_FOLDERS  # noqa: E402
from support.custom_resources import CustomResources  # noqa: E402
from support.envtest import ControlPlane, control_plane, install_crds, locate_binaries  # noqa: E402
from support.envtest.crds import crd_manifests  # noqa: E402
from support.manifests import inference_runtime, llmservice  # noqa: E402

OPERATOR_RESOURCES = frozenset(
    {
        "llmservices",
        "llmservices/status",
        "inferenceruntimes",
        "scaledobjects",
        "deployments",
        "services",
        "persistentvolumeclaims",
        "secrets",
        "jobs",
        "poddisruptionbudgets",
        "pods",
        "events",
    }
)
QUIET_SECONDS = 3.0


def _operator_only(counts: Counter[Key]) -> Counter[Key]:
    """Requests on the resources the controller uses; watches are counted only when they end
    on the server side, so they are left out of both sides."""
    return Counter(
        {k: v for k, v in counts.items() if k[1] in OPERATOR_RESOURCES and k[0] != "WATCH"}
    )


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise SystemExit(f"gave up after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)
    return time.monotonic() - started


class Observer:
    """This script's own view of the cluster: informers (one list + one watch per kind)."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        resolver = ResourceResolver(api_client)
        self._informers = {
            kind.kind: Informer(resolver, WatchTarget(kind, label_selector=selector))
            for kind, selector in (
                (kinds.LLMSERVICE, None),
                (kinds.DEPLOYMENT, MANAGED),
                (kinds.SERVICE, MANAGED),
                (kinds.SCALED_OBJECT, MANAGED),
            )
        }
        self.ready_at: dict[tuple[str, str], float] = {}

    def start(self) -> None:
        for informer in self._informers.values():
            informer.start()
        for informer in self._informers.values():
            informer.wait_synced(60)

    def stop(self) -> None:
        for informer in self._informers.values():
            informer.stop()

    def _names(self, kind: str) -> set[tuple[str, str]]:
        return {
            (o["metadata"]["namespace"], o["metadata"]["name"])
            for o in self._informers[kind].store.list()
        }

    def count_ready(self) -> int:
        """Services with a status phase and every object of their stack; remembers when."""
        deployments, services = self._names("Deployment"), self._names("Service")
        scaled = self._names("ScaledObject")
        now = time.monotonic()
        for service in self._informers["LLMService"].store.list():
            ns, name = service["metadata"]["namespace"], service["metadata"]["name"]
            if (ns, name) in self.ready_at or not (service.get("status") or {}).get("phase"):
                continue
            stack = {(ns, name), (ns, f"{name}-gateway")} <= deployments and {
                (ns, name),
                (ns, f"{name}-backend"),
                (ns, f"{name}-scaler"),
            } <= services
            if stack and (ns, name) in scaled:
                self.ready_at[(ns, name)] = now
        return len(self.ready_at)


class Phase:
    """Counters at the start of a phase; `end` returns what happened during it."""

    def __init__(
        self, plane: ControlPlane, counters: dict[str, RequestCounter], metrics: ControllerMetrics
    ) -> None:
        self._plane, self._counters, self._metrics = plane, counters, metrics
        self.started = time.monotonic()
        self.server = ServerCounts.read(plane.api_client)
        self.client = {name: c.snapshot() for name, c in counters.items()}
        self.reconciles = _reconciles(metrics)

    def end(self, name: str) -> PhaseResult:
        seconds = time.monotonic() - self.started
        client = {n: c.snapshot() - self.client[n] for n, c in self._counters.items()}
        server = ServerCounts.read(self._plane.api_client)
        # Less this script's own requests (the services it created, its observer's lists).
        own = _operator_only(client["benchmark"])
        storage = server.storage_since(self.server)
        return PhaseResult(
            name=name,
            seconds=seconds,
            reconciles=int(_reconciles(self._metrics) - self.reconciles),
            server=_operator_only(server.requests_since(self.server)) - own,
            client=_operator_only(client["operator"]),
            storage=Counter({k: n for k, n in storage.items() if k[1] in OPERATOR_RESOURCES}),
        )


def _reconciles(metrics: ControllerMetrics) -> float:
    return metrics.reconciles("success") + metrics.reconciles("error")


def _quiet(metrics: ControllerMetrics, queue_length: Callable[[], int]) -> Callable[[], bool]:
    """True once no reconcile ran for QUIET_SECONDS and nothing waits in the queue."""
    last = {"count": -1.0, "since": time.monotonic()}

    def check() -> bool:
        count = _reconciles(metrics)
        if count != last["count"] or queue_length():
            last["count"], last["since"] = count, time.monotonic()
            return False
        return time.monotonic() - last["since"] >= QUIET_SECONDS

    return check


def _print(results: list[PhaseResult], args: argparse.Namespace, latencies: list[float]) -> None:
    print(
        f"\nOperator benchmark: {args.runtimes} runtimes, {args.services} services over "
        f"{args.namespaces} namespaces, {args.workers} workers, resync every {args.resync:.0f}s"
    )
    print_table(results)
    for result in results:
        print_breakdown(result)
    print(
        f"\nservice ready after its create: p50 {statistics.median(latencies):.1f}s, "
        f"p95 {latencies[int(0.95 * (len(latencies) - 1))]:.1f}s, max {latencies[-1]:.1f}s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=100)
    parser.add_argument("--runtimes", type=int, default=5)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--resync", type=float, default=120.0, help="informer resync period (s)")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()

    # Three Services per LLMService: the test control plane's /24 holds only 84 services' worth.
    control_plane.SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/16"
    plane = ControlPlane(locate_binaries())
    plane.start()
    try:
        install_crds(plane.api_client, crd_manifests(CRD_FOLDERS))
        return _run(plane, args)
    finally:
        plane.stop()


def _run(plane: ControlPlane, args: argparse.Namespace) -> int:
    admin = plane.api_client
    core, resources = k8s.CoreV1Api(admin), CustomResources(admin)
    namespaces = [f"bench-{n}" for n in range(args.namespaces)]
    for name in namespaces:
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))

    manager, reconciler = build_controller(
        admin,
        OperatorSettings("ghcr.io/noctaya/noctaya-gateway:bench"),
        ManagerOptions(
            workers=args.workers,
            health_probe_address="0",
            informer_timing=InformerTiming(resync_period=args.resync),
        ),
    )
    metrics = ControllerMetrics()
    counters = {"operator": RequestCounter(manager.api_client), "benchmark": RequestCounter(admin)}
    observer = Observer(admin)
    observer.start()
    controller = threading.Thread(
        target=manager.run, args=(metrics.instrument(reconciler.reconcile),),
        kwargs={"handle_signals": False}, name="controller",
    )  # fmt: skip
    controller.start()
    try:
        _wait(manager.reconciling.is_set, 120, "the controller to start")
        quiet = _quiet(metrics, lambda: len(manager.queue))
        results = []

        phase = Phase(plane, counters, metrics)
        for n in range(args.runtimes):
            resources.create(inference_runtime(f"bench-rt-{n}", {"priority": n}))
        created: dict[tuple[str, str], float] = {}
        for n in range(args.services):
            ns, name = namespaces[n % len(namespaces)], f"svc-{n}"
            selection = (
                {"name": f"bench-rt-{n % args.runtimes}"}
                if n % 2 == 0
                else {"name": None, "selector": {"vendor": ["nvidia"]}}
            )
            resources.create(llmservice(name, {"runtime": selection}), ns)
            created[(ns, name)] = time.monotonic()
        _wait(lambda: observer.count_ready() == args.services, args.timeout, "convergence")
        all_ready = time.monotonic() - phase.started
        latencies = sorted(observer.ready_at[key] - at for key, at in created.items())
        _wait(quiet, args.timeout, "the controller to settle")
        converge = phase.end("create, settle")

        phase = Phase(plane, counters, metrics)
        baseline = _reconciles(metrics)
        _wait(
            lambda: _reconciles(metrics) >= baseline + args.services,
            args.resync + args.timeout,
            "the resync to reconcile every service",
        )
        _wait(quiet, args.timeout, "the controller to settle after the resync")
        idle = phase.end("idle + resync")
        results += [converge, idle]
    finally:
        manager.stop()
        controller.join(60)
        observer.stop()

    _print(results, args, latencies)
    print(f"every service ready {all_ready:.1f}s after the first create")
    print(f"reconcile errors: {metrics.reconciles('error'):.0f}")
    verdict = "PASS" if idle.writes == 0 else "FAIL"
    print(f"write requests while idle through a resync: {idle.writes} (must be 0): {verdict}")
    return 0 if idle.writes == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
