"""Operator benchmark on a real kube-apiserver: convergence time, requests per reconcile, and the
writes of an idle resync (which must be zero: a no-op reconcile writes nothing).

    .venv/bin/python benchmarks/operator/run.py [--services 100 --runtimes 5 --namespaces 10]
    .venv/bin/python benchmarks/operator/run.py --scale 1000 [--compare REV] [--workers N]
    .venv/bin/python benchmarks/operator/run.py --scale 1000 --profile

`--scale 1000` is 1,000 services over 20 namespaces with 10 runtimes. `--compare REV` runs the
same scenario first with the operator of commit REV (checked out with `git worktree` into a
temporary folder and put first on PYTHONPATH), then with this tree's, and prints both side by
side. `--profile` prints the operator's top functions by own time (cProfile, every thread).

Starts etcd + kube-apiserver from the test control plane (`make control-plane` builds them), runs
the controller in a process of its own wired as `noctaya-operator` wires it (so that its CPU
seconds and peak RSS are measured alone), with an informer resync period so that one full resync
happens while the cluster is idle, then:

1. creates the runtimes and the services (round-robin over namespaces; half pin a runtime by
   name, half select the vendor), and times until every service has its whole one-gateway stack
   (ScaledObject, backend and gateway Deployments, three Services) and a status phase;
2. waits until the controller is quiet, then idles through the resync and waits until quiet again.

Requests are counted in the API server's `apiserver_request_total` (minus its own loopback
requests and this script's) and, as a cross-check, at the controller's client. There is no
kubelet: no Pods exist, so every service settles at ScaledToZero. Each run gets a fresh
control plane.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from api_requests import Key, RequestCounter, ServerCounts  # noqa: E402
from kubernetes import client as k8s  # noqa: E402
from noctaya.k8s import kinds  # noqa: E402
from noctaya.k8s.controller import MANAGED  # noqa: E402
from noctaya.k8s.runtime import Informer, ResourceResolver, WatchTarget  # noqa: E402
from operator_child import OperatorChild  # noqa: E402
from report import PhaseResult, flat_profile, print_breakdown, print_table  # noqa: E402
from support.control_plane import PROJECT_CRDS  # noqa: E402
from support.custom_resources import CustomResources  # noqa: E402
from support.envtest import ControlPlane, install_crds, locate_binaries  # noqa: E402
from support.envtest.crds import crd_manifests  # noqa: E402
from support.envtest.keda_crds import locate_keda_crds  # noqa: E402
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
OPERATOR_POLL = 0.5  # scraping the operator costs it CPU: not more often than this
SCALES = {1000: (1000, 10, 20)}  # --scale N: (services, runtimes, namespaces)
PROFILE_TOP = 25


def _operator_only(counts: Counter[Key]) -> Counter[Key]:
    """Requests on the resources the controller uses; watches are counted only when they end
    on the server side, so they are left out of both sides."""
    return Counter(
        {k: v for k, v in counts.items() if k[1] in OPERATOR_RESOURCES and k[0] != "WATCH"}
    )


def _wait(condition: Callable[[], bool], timeout: float, what: str, poll: float = 0.1) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise SystemExit(f"gave up after {timeout:.0f}s waiting for {what}")
        time.sleep(poll)
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

    def __init__(self, plane: ControlPlane, own: RequestCounter, operator: OperatorChild) -> None:
        self._plane, self._own, self._operator = plane, own, operator
        self.started = time.monotonic()
        self.cpu = operator.cpu_seconds()
        self.server = ServerCounts.read(plane.api_client)
        self.own = own.snapshot()
        scrape = operator.scrape()
        self.client, self.reconciles = scrape.client, scrape.reconciles

    def end(self, name: str) -> PhaseResult:
        seconds = time.monotonic() - self.started
        scrape = self._operator.scrape()
        server = ServerCounts.read(self._plane.api_client)
        # Less this script's own requests (the services it created, its observer's lists).
        own = _operator_only(self._own.snapshot() - self.own)
        storage = server.storage_since(self.server)
        return PhaseResult(
            name=name,
            seconds=seconds,
            reconciles=int(scrape.reconciles - self.reconciles),
            server=_operator_only(server.requests_since(self.server)) - own,
            client=_operator_only(scrape.client - self.client),
            storage=Counter({k: n for k, n in storage.items() if k[1] in OPERATOR_RESOURCES}),
            cpu_seconds=self._operator.cpu_seconds() - self.cpu,
        )


def _quiet(operator: OperatorChild) -> Callable[[], bool]:
    """True once no reconcile ran for QUIET_SECONDS and nothing waits in the queue."""
    last = {"count": -1.0, "since": time.monotonic()}

    def check() -> bool:
        scrape = operator.scrape()
        if scrape.reconciles != last["count"] or scrape.queue:
            last["count"], last["since"] = scrape.reconciles, time.monotonic()
            return False
        return time.monotonic() - last["since"] >= QUIET_SECONDS

    return check


@dataclass
class Run:
    """One operator's run of the whole scenario."""

    label: str
    converge: PhaseResult
    idle: PhaseResult
    latencies: list[float]  # each service's create to ready, sorted
    all_ready: float  # first create to every service ready
    all_created: float  # first create to the last (this script's own pace)
    peak_rss_mib: float
    reconcile_errors: float
    profile: str  # the flat profile, when asked for


def _print_run(run: Run, args: argparse.Namespace) -> None:
    print(
        f"\nOperator benchmark ({run.label}): {args.runtimes} runtimes, {args.services} services "
        f"over {args.namespaces} namespaces, {args.workers or 'default'} workers, resync every "
        f"{args.resync:.0f}s"
    )
    print_table([run.converge, run.idle])
    for result in (run.converge, run.idle):
        print_breakdown(result)
    latencies = run.latencies
    print(
        f"\nservice ready after its create: p50 {statistics.median(latencies):.1f}s, "
        f"p95 {latencies[int(0.95 * (len(latencies) - 1))]:.1f}s, max {latencies[-1]:.1f}s"
    )
    print(
        f"every service ready {run.all_ready:.1f}s after the first create "
        f"(the last was created at {run.all_created:.1f}s)"
    )
    print(f"reconcile errors: {run.reconcile_errors:.0f}")
    print(f"operator peak RSS: {run.peak_rss_mib:.1f} MiB")
    verdict = "PASS" if run.idle.writes == 0 else "FAIL"
    print(f"write requests while idle through a resync: {run.idle.writes} (must be 0): {verdict}")
    if run.profile:
        print(f"\noperator profile ({run.label}), convergence and resync, by own time:")
        print(run.profile)


def _print_comparison(runs: list[Run]) -> None:
    rows: list[tuple[str, Callable[[Run], str]]] = [
        ("every service created (s)", lambda r: f"{r.all_created:.1f}"),
        ("every service ready (s)", lambda r: f"{r.all_ready:.1f}"),
        ("converge + settle (s)", lambda r: f"{r.converge.seconds:.1f}"),
        ("operator CPU, converge (s)", lambda r: f"{r.converge.cpu_seconds:.1f}"),
        ("operator CPU, idle + resync (s)", lambda r: f"{r.idle.cpu_seconds:.1f}"),
        ("operator peak RSS (MiB)", lambda r: f"{r.peak_rss_mib:.1f}"),
        ("requests per reconcile, converge", lambda r: _per_reconcile(r.converge)),
        ("requests per reconcile, resync", lambda r: _per_reconcile(r.idle)),
        ("writes while idle through a resync", lambda r: str(r.idle.writes)),
    ]
    cells = [["", *(run.label for run in runs)]]
    cells += [[name, *(cell(run) for run in runs)] for name, cell in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    print("\nSide by side")
    for name, *values in cells:
        cells_out = [v.rjust(w) for v, w in zip(values, widths[1:], strict=True)]
        print("  ".join([name.ljust(widths[0]), *cells_out]))


def _per_reconcile(result: PhaseResult) -> str:
    return f"{result.requests / result.reconciles:.1f}" if result.reconciles else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=100)
    parser.add_argument("--runtimes", type=int, default=5)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--scale", type=int, choices=sorted(SCALES), help="a preset scenario")
    parser.add_argument(
        "--workers", type=int, help="concurrent reconciles (default: each operator's own default)"
    )
    parser.add_argument("--resync", type=float, default=120.0, help="informer resync period (s)")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--compare", metavar="REV", help="first run the operator of commit REV")
    parser.add_argument("--profile", action="store_true", help="print the operator's profile")
    args = parser.parse_args()
    if args.scale:
        args.services, args.runtimes, args.namespaces = SCALES[args.scale]

    runs = []
    with tempfile.TemporaryDirectory() as folder:
        if args.compare:
            tree = Path(folder) / "compare"
            git = ["git", "-C", str(REPO)]
            subprocess.run([*git, "worktree", "add", "--detach", str(tree), args.compare],
                           check=True, capture_output=True)  # fmt: skip
            try:
                sources = sorted((tree / "packages").glob("*/src"))
                runs.append(_on_fresh_plane(args, args.compare, sources, Path(folder)))
            finally:
                subprocess.run([*git, "worktree", "remove", "--force", str(tree)], check=True)
        runs.append(_on_fresh_plane(args, "this tree", [], Path(folder)))
    for run in runs:
        _print_run(run, args)
    if len(runs) > 1:
        _print_comparison(runs)
    return 0 if all(run.idle.writes == 0 for run in runs) else 1


def _on_fresh_plane(args: argparse.Namespace, label: str, sources: list[Path], folder: Path) -> Run:
    plane = ControlPlane(locate_binaries())
    plane.start()
    try:
        keda = locate_keda_crds()
        install_crds(plane.api_client, crd_manifests([PROJECT_CRDS, keda]))
        return _run(plane, args, label, sources, folder)
    finally:
        plane.stop()


def _run(
    plane: ControlPlane, args: argparse.Namespace, label: str, sources: list[Path], folder: Path
) -> Run:
    admin = plane.api_client
    core, resources = k8s.CoreV1Api(admin), CustomResources(admin)
    namespaces = [f"bench-{n}" for n in range(args.namespaces)]
    for name in namespaces:
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))

    own = RequestCounter(admin)
    observer = Observer(admin)
    observer.start()
    profile = folder / f"operator-{len(list(folder.glob('*.prof')))}.prof" if args.profile else None
    operator = OperatorChild(
        plane.kubeconfig, workers=args.workers, resync=args.resync, pythonpath=sources,
        profile=profile,
    )  # fmt: skip
    try:
        quiet = _quiet(operator)
        phase = Phase(plane, own, operator)
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
        all_created = time.monotonic() - phase.started
        _wait(lambda: observer.count_ready() == args.services, args.timeout, "convergence")
        all_ready = time.monotonic() - phase.started
        latencies = sorted(observer.ready_at[key] - at for key, at in created.items())
        _wait(quiet, args.timeout, "the controller to settle", OPERATOR_POLL)
        converge = phase.end("create, settle")

        phase = Phase(plane, own, operator)
        baseline = operator.scrape().reconciles
        _wait(
            lambda: operator.scrape().reconciles >= baseline + args.services,
            args.resync + args.timeout,
            "the resync to reconcile every service",
            OPERATOR_POLL,
        )
        _wait(quiet, args.timeout, "the controller to settle after the resync", OPERATOR_POLL)
        idle = phase.end("idle + resync")
        peak_rss, errors = operator.peak_rss_mib(), operator.scrape().errors
    finally:
        operator.stop()
        observer.stop()
    return Run(
        label, converge, idle, latencies, all_ready, all_created, peak_rss, errors, _top(profile)
    )


def _top(profile: Path | None) -> str:
    return flat_profile(str(profile), PROFILE_TOP) if profile is not None else ""


if __name__ == "__main__":
    sys.exit(main())
