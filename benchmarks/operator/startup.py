"""The operator's start-up and idle cost, as `noctaya-operator` runs from the chart (metrics off,
its probes on), on a real kube-apiserver holding N services already converged: the time from
exec to `/readyz` answering, the time to import its entry module, and its RSS once idle.

    .venv/bin/python benchmarks/operator/startup.py [--services 100] [--rounds 3] [--compare REV]

A first operator (of this tree) converges the services; then each revision's operator is
started afresh in every round (rounds alternate the revisions), on bytecode compiled beforehand
into a cache of this run's own (as the image ships it), and is idle once its CPU time has not
grown for `QUIET_SECONDS`. Leader election is off, so `ready` is the process's own start-up.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubernetes import client as k8s  # noqa: E402
from run import Observer  # noqa: E402
from support.control_plane import PROJECT_CRDS  # noqa: E402
from support.custom_resources import CustomResources  # noqa: E402
from support.envtest import ControlPlane, install_crds, locate_binaries  # noqa: E402
from support.envtest.crds import crd_manifests  # noqa: E402
from support.envtest.keda_crds import locate_keda_crds  # noqa: E402
from support.manifests import inference_runtime, llmservice  # noqa: E402

from benchmarks.gateway import revision  # noqa: E402
from benchmarks.gateway.footprint import compiled_bytecode  # noqa: E402
from benchmarks.gateway.procs import Process, free_port  # noqa: E402
from benchmarks.gateway.table import print_table  # noqa: E402

BIN = Path(sys.executable).parent
QUIET_SECONDS = 3.0
IDLE_TIMEOUT = 180.0
POLL_SECONDS = 0.005


@dataclass
class Figures:
    ready_ms: list[float] = field(default_factory=list)
    import_ms: list[float] = field(default_factory=list)
    idle_mib: list[float] = field(default_factory=list)
    peak_mib: list[float] = field(default_factory=list)


@contextlib.contextmanager
def operator(kubeconfig: Path, env: dict[str, str]) -> Iterator[tuple[Process, str]]:
    port = free_port()
    command = [
        str(BIN / "noctaya-operator"),
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=false",
        f"--health-probe-bind-address=127.0.0.1:{port}",
        "--metrics-bind-address=0",
        "--gateway-image=ghcr.io/noctaya/noctaya:bench",
    ]
    popen = subprocess.Popen(
        command,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    process = Process(popen, f"http://127.0.0.1:{port}/readyz")
    try:
        yield process, process.url
    finally:
        process.stop()


def measure(kubeconfig: Path, env: dict[str, str], figures: Figures) -> None:
    figures.import_ms.append(_import_ms(env))
    started = time.perf_counter()
    with operator(kubeconfig, env) as (process, url):
        _until_ready(process, url)
        figures.ready_ms.append((time.perf_counter() - started) * 1e3)
        _until_idle(process)
        figures.idle_mib.append(process.rss_mib())
        figures.peak_mib.append(_peak_mib(process))


def _until_ready(process: Process, url: str) -> None:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            if process.popen.poll() is not None:
                raise RuntimeError(f"the operator exited with {process.popen.returncode}") from None
            time.sleep(POLL_SECONDS)


def _until_idle(process: Process) -> None:
    """Until its CPU time has not grown for QUIET_SECONDS (its caches synced, the services'
    no-op reconciles done)."""
    deadline = time.monotonic() + IDLE_TIMEOUT
    last, since = process.cpu_seconds(), time.monotonic()
    while time.monotonic() - since < QUIET_SECONDS:
        if time.monotonic() > deadline:
            raise RuntimeError("the operator did not settle")
        time.sleep(0.5)
        now = process.cpu_seconds()
        if now != last:
            last, since = now, time.monotonic()


def _peak_mib(process: Process) -> float:
    for line in Path(f"/proc/{process.popen.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def _import_ms(env: dict[str, str]) -> float:
    code = (
        "import time; t = time.perf_counter(); import noctaya.k8s.operator.main; "
        "print((time.perf_counter() - t) * 1e3)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return float(result.stdout)


def populate(plane: ControlPlane, services: int, runtimes: int, namespaces: int) -> Observer:
    admin = plane.api_client
    core, resources = k8s.CoreV1Api(admin), CustomResources(admin)
    names = [f"bench-{n}" for n in range(namespaces)]
    for name in names:
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    for n in range(runtimes):
        resources.create(inference_runtime(f"bench-rt-{n}", {"priority": n}))
    for n in range(services):
        selection = {"name": f"bench-rt-{n % runtimes}"}
        resources.create(llmservice(f"svc-{n}", {"runtime": selection}), names[n % namespaces])
    observer = Observer(admin)
    observer.start()
    return observer


def _span(values: list[float], form: str) -> str:
    if len(values) == 1:
        return form.format(values[0])
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{form.format(low)}-{form.format(high)} ({form.format(mid)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--services", type=int, default=100)
    parser.add_argument("--runtimes", type=int, default=5)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", metavar="REV", help="also measure the operator at REV")
    args = parser.parse_args()
    plane = ControlPlane(locate_binaries())
    plane.start()
    with contextlib.ExitStack() as stack:
        stack.callback(plane.stop)
        install_crds(plane.api_client, crd_manifests([PROJECT_CRDS, locate_keda_crds()]))
        revisions = [("this tree", os.environ.get("PYTHONPATH", ""))]
        if args.compare is not None:
            path = stack.enter_context(revision.pythonpath(args.compare))
            revisions.insert(0, (revision.describe(args.compare), path))
        bytecode = stack.enter_context(compiled_bytecode())
        observer = populate(plane, args.services, args.runtimes, args.namespaces)
        stack.callback(observer.stop)
        with operator(plane.kubeconfig, bytecode) as (process, url):
            _until_ready(process, url)
            deadline = time.monotonic() + IDLE_TIMEOUT
            while observer.count_ready() < args.services:
                if time.monotonic() > deadline:
                    raise SystemExit("the services did not converge")
                time.sleep(0.2)
        for _, path in revisions:  # compiles each revision's bytecode into the cache
            measure(plane.kubeconfig, {**bytecode, "PYTHONPATH": path}, Figures())
        figures = {name: Figures() for name, _ in revisions}
        for _ in range(args.rounds):
            for name, path in revisions:
                measure(plane.kubeconfig, {**bytecode, "PYTHONPATH": path}, figures[name])
    print_table(
        f"Operator start-up and idle RSS with {args.services} services converged "
        f"({args.rounds} rounds, a fresh process each; bytecode compiled beforehand)",
        ("operator", "exec -> /readyz ms", "import ms", "idle RSS MiB", "peak RSS MiB"),
        [
            (
                name,
                _span(f.ready_ms, "{:.0f}"),
                _span(f.import_ms, "{:.0f}"),
                _span(f.idle_mib, "{:.1f}"),
                _span(f.peak_mib, "{:.1f}"),
            )
            for name, f in figures.items()
        ],
    )
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
