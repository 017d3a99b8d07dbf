"""Cold start on the box, broken down: request arrival → KEDA scales the backend to 1 → pod
Running → engine ready → its Service endpoint ready → the Service routes to it (a connection
from the node to its cluster IP succeeds, once kube-proxy has rewritten the rules) → first
token, p50 over N wakes, through the gateway (the External Push activation path) and with the
backend scaled by hand, two ways: the request sent through the Service once the pod is ready
("by hand"), and sent from the gateway pod's own network namespace straight to the pod's
address the moment the pod watch says it is ready ("at the pod": what a client that watches
its backend's pods could do at best). What the gateway adds is the last step: how long after
the engine was ready its first token arrived, compared with the by-hand paths' (each wake's
own difference, so the pods' varying start times do not blur it).

Needs root, the box built (`make cluster`), the images (`make images`) and helm
(`bash hack/build-helm.sh`); takes the box's lock (an e2e run holding it is waited for), brings
the box up, and down at the end:

    .venv/bin/python benchmarks/e2e/cold_start.py --wakes 10
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from e2e.serving import (  # noqa: E402
    SERVICE_NAME,
    chat_lines_in_box,
    diagnosed,
    example,
    install,
    proxy_metric,
    stream_chat,
    wait_idle,
)
from e2e.workloads import advertise_gpus  # noqa: E402
from helm.chart import Helm, locate_helm  # noqa: E402
from images.conftest import IMAGES, archive  # noqa: E402
from kubernetes import client as k8s_client  # noqa: E402
from kubernetes import watch  # noqa: E402
from support.cluster import Cluster  # noqa: E402
from support.cluster.host import netns_path  # noqa: E402
from support.custom_resources import CustomResources  # noqa: E402
from urllib3.exceptions import ProtocolError  # noqa: E402

NAMESPACE = "cold-start"
STEPS = (
    "scaled to 1",
    "pod Running",
    "engine ready",
    "endpoint ready",
    "routed",
    "gateway saw ready",
    "first token",
)
GATEWAY_METRICS = f"/api/v1/namespaces/{NAMESPACE}/services/{SERVICE_NAME}:http/proxy/metrics"
WAIT_SUM = "noctaya_gateway_activation_wait_seconds_sum"
ROUTE_PROBE_SECONDS = 0.02
"""How often the node tries a connection to the backend's cluster IP (each waits 0.1 s)."""
CLONE_NEWNET = 0x40000000
LOCK = Path(tempfile.gettempdir()) / "noctaya-box.lock"
"""The box is one per host: the e2e suite and this benchmark take turns on it."""


@dataclass
class Wake:
    """Seconds after the request (or the hand scaling) at which each step was seen."""

    started: float
    seen: dict[str, float] = field(default_factory=dict)
    address: tuple[str, int] | None = None
    """The backend pod's address and engine port, once it is ready."""

    def mark(self, step: str) -> None:
        self.seen.setdefault(step, time.monotonic() - self.started)


def observe(api_client: k8s_client.ApiClient, wake: Wake, stop: threading.Event) -> None:
    """Marks the backend's steps from watch events as they arrive."""
    apps, core = k8s_client.AppsV1Api(api_client), k8s_client.CoreV1Api(api_client)

    def deployment() -> None:
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        for event in stream.stream(
            apps.list_namespaced_deployment,
            NAMESPACE,
            field_selector=f"metadata.name={SERVICE_NAME}",
            timeout_seconds=120,
        ):
            if (event["object"].spec.replicas or 0) >= 1:
                wake.mark("scaled to 1")
            if stop.is_set() or "scaled to 1" in wake.seen:
                stream.stop()

    def pods() -> None:
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        for event in stream.stream(
            core.list_namespaced_pod,
            NAMESPACE,
            label_selector=f"app.kubernetes.io/name={SERVICE_NAME}",
            timeout_seconds=120,
        ):
            pod = event["object"]
            if pod.metadata.deletion_timestamp:
                continue
            if pod.status.phase == "Running":
                wake.mark("pod Running")
            conditions = pod.status.conditions or []
            if any(c.type == "Ready" and c.status == "True" for c in conditions):
                wake.address = (pod.status.pod_ip, pod.spec.containers[0].ports[0].container_port)
                wake.mark("engine ready")
            if stop.is_set() or "engine ready" in wake.seen:
                stream.stop()

    def retried(part: Callable[[], None], last_step: str) -> Callable[[], None]:
        """A watch the API server cuts is opened again until its last step is seen."""

        def run() -> None:
            while not stop.is_set() and last_step not in wake.seen:
                with contextlib.suppress(ProtocolError):
                    part()

        return run

    parts = (retried(deployment, "scaled to 1"), retried(pods, "engine ready"))
    threads = [threading.Thread(target=part, daemon=True) for part in parts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def observe_endpoint(api_client: k8s_client.ApiClient, wake: Wake, stop: threading.Event) -> None:
    """Marks when the backend Service first lists a ready endpoint (what kube-proxy then routes
    to)."""
    discovery = k8s_client.DiscoveryV1Api(api_client)
    while not stop.is_set() and "endpoint ready" not in wake.seen:
        with contextlib.suppress(ProtocolError):
            stream = watch.Watch()  # type: ignore[no-untyped-call]
            for event in stream.stream(
                discovery.list_namespaced_endpoint_slice,
                NAMESPACE,
                label_selector=f"kubernetes.io/service-name={SERVICE_NAME}-backend",
                timeout_seconds=120,
            ):
                endpoints = event["object"].endpoints or []
                if event["type"] != "DELETED" and any(
                    endpoint.conditions and endpoint.conditions.ready for endpoint in endpoints
                ):
                    wake.mark("endpoint ready")
                if stop.is_set() or "endpoint ready" in wake.seen:
                    stream.stop()


def observe_route(cluster_ip: str, wake: Wake, stop: threading.Event) -> None:
    """Marks when a connection from the node (this thread joins the box's network namespace)
    to the backend's cluster IP first succeeds: kube-proxy routes the Service to the pod."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open(netns_path()) as namespace:
        if libc.setns(namespace.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns into the box's network namespace")
    while not stop.is_set() and "routed" not in wake.seen:
        try:
            socket.create_connection((cluster_ip, 80), timeout=0.1).close()
        except OSError:
            time.sleep(ROUTE_PROBE_SECONDS)
        else:
            wake.mark("routed")


def watching(
    api_client: k8s_client.ApiClient, wake: Wake, stop: threading.Event
) -> threading.Thread:
    """The endpoint and route steps, each in a thread of its own, so that the by-hand request
    waits only for the pod, as its client would; the returned thread ends with both."""
    service = k8s_client.CoreV1Api(api_client).read_namespaced_service(
        f"{SERVICE_NAME}-backend", NAMESPACE
    )
    threads = [
        threading.Thread(target=observe_endpoint, args=(api_client, wake, stop), daemon=True),
        threading.Thread(
            target=observe_route, args=(service.spec.cluster_ip, wake, stop), daemon=True
        ),
    ]
    for thread in threads:
        thread.start()

    def join() -> None:
        for thread in threads:
            thread.join()

    joiner = threading.Thread(target=join, daemon=True)
    joiner.start()
    return joiner


def wake_through_gateway(api_client: k8s_client.ApiClient) -> Wake:
    """The gateway's own account of the wait (its activation-wait histogram's sum grows by it)
    places the moment it saw the backend ready, counted from the request's sending."""
    wake = Wake(time.monotonic())
    stop = threading.Event()
    endpoint = watching(api_client, wake, stop)
    watcher = threading.Thread(target=observe, args=(api_client, wake, stop), daemon=True)
    watcher.start()
    waited = proxy_metric(api_client, GATEWAY_METRICS, WAIT_SUM) or 0.0
    sent = time.monotonic()
    for chunk in stream_chat(api_client, NAMESPACE, SERVICE_NAME):
        if chunk.line.startswith(b"data: {"):
            wake.seen.setdefault("first token", chunk.at - wake.started)
    stop.set()
    watcher.join()
    endpoint.join()
    now_waited = proxy_metric(api_client, GATEWAY_METRICS, WAIT_SUM)
    if now_waited is not None:
        wake.seen["gateway saw ready"] = sent - wake.started + now_waited - waited
    return wake


def wake_by_hand(api_client: k8s_client.ApiClient) -> Wake:
    """Scales the Deployment to 1 directly (KEDA paused), sends the request to the gateway
    Service from the node's network namespace once the engine is ready, and scales back to 0."""
    return scaled_by_hand(
        api_client,
        lambda wake: ((c.at, c.line) for c in stream_chat(api_client, NAMESPACE, SERVICE_NAME)),
    )


def wake_at_the_pod(api_client: k8s_client.ApiClient) -> Wake:
    """As `wake_by_hand`, but the request goes, the moment the pod watch says the engine is
    ready, from the gateway pod's network namespace to the pod's address: no Service, no
    kube-proxy on the way."""
    netns = gateway_netns()

    def at_the_pod(wake: Wake) -> Iterator[tuple[float, bytes]]:
        assert wake.address is not None, wake.seen
        for line in chat_lines_in_box(wake.address, SERVICE_NAME, netns=netns):
            yield time.monotonic(), line

    return scaled_by_hand(api_client, at_the_pod)


def scaled_by_hand(
    api_client: k8s_client.ApiClient, send: Callable[[Wake], Iterator[tuple[float, bytes]]]
) -> Wake:
    """Scales the Deployment to 1, has `send` make the request once the engine is ready (the
    lines of its answer with their arrival times), and scales back to 0."""
    apps = k8s_client.AppsV1Api(api_client)
    wake = Wake(time.monotonic())
    stop = threading.Event()
    endpoint = watching(api_client, wake, stop)
    watcher = threading.Thread(target=observe, args=(api_client, wake, stop), daemon=True)
    watcher.start()
    apps.patch_namespaced_deployment_scale(SERVICE_NAME, NAMESPACE, {"spec": {"replicas": 1}})
    watcher.join()
    for at, line in send(wake):
        if line.startswith(b"data: {"):
            wake.seen.setdefault("first token", at - wake.started)
    stop.set()
    endpoint.join()
    apps.patch_namespaced_deployment_scale(SERVICE_NAME, NAMESPACE, {"spec": {"replicas": 0}})
    return wake


def gateway_netns() -> Path:
    """The network namespace of the service's gateway pod, through its process on this host."""
    (pid,) = image_processes("noctaya-gateway")  # one gateway replica: no aggregator either
    return Path(f"/proc/{pid}/ns/net")


def image_processes(program: str) -> list[int]:
    """The pids of the image's `program` running in the box (as the host sees them)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            command = (entry / "cmdline").read_bytes().split(b"\0")
            if any(part.endswith(f"/opt/noctaya/bin/{program}".encode()) for part in command):
                found.append(int(entry.name))
    return found


def pause_keda(api_client: k8s_client.ApiClient) -> None:
    """KEDA leaves the backend's replicas alone from now on (the hand path owns them)."""
    k8s_client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
        "keda.sh", "v1alpha1", NAMESPACE, "scaledobjects", SERVICE_NAME,
        {"metadata": {"annotations": {"autoscaling.keda.sh/paused": "true"}}},
    )  # fmt: skip


def table(title: str, wakes: list[Wake]) -> str:
    lines = [f"{title} (p50 over {len(wakes)} wakes, seconds from the start)"]
    for step in STEPS:
        values = [w.seen[step] for w in wakes if step in w.seen]
        p50 = f"{statistics.median(values):6.2f}" if values else "     -"
        lines.append(f"  {step:<14} {p50}   seen in {len(values)}/{len(wakes)}")
    return "\n".join(lines)


def after_ready(wakes: list[Wake], step: str) -> list[float]:
    """Each wake's seconds from its engine being ready to `step`."""
    return [
        w.seen[step] - w.seen["engine ready"]
        for w in wakes
        if {step, "engine ready"} <= w.seen.keys()
    ]


def increments(results: dict[str, list[Wake]]) -> str:
    """What follows readiness, per wake: where the paths differ by what the gateway does."""
    lines = ["After the engine was ready (each wake's own difference, seconds)"]
    lines.append(
        f"  {'':<20} {'endpoint p50':>12} {'routed p50':>10} {'gateway saw p50':>15} "
        f"{'first token p50':>16} {'min':>6} {'max':>6}"
    )
    for title, wakes in results.items():
        endpoint, routed = after_ready(wakes, "endpoint ready"), after_ready(wakes, "routed")
        saw, token = after_ready(wakes, "gateway saw ready"), after_ready(wakes, "first token")
        lines.append(
            f"  {title:<20} {_p50(endpoint):>12} {_p50(routed):>10} {_p50(saw):>15} "
            f"{_p50(token):>16} {min(token, default=float('nan')):6.2f} "
            f"{max(token, default=float('nan')):6.2f}"
        )
    gateway = after_ready(results["through the gateway"], "first token")
    for title in ("by hand", "at the pod"):
        other = after_ready(results.get(title, []), "first token")
        if gateway and other:
            added = statistics.median(gateway) - statistics.median(other)
            worst = max(gateway) - min(other)
            lines.append(
                f"  first token through the gateway after the {title} path: p50 {added:+.2f} s, "
                f"max {max(gateway) - statistics.median(other):+.2f} s (worst pair {worst:+.2f})"
            )
    return "\n".join(lines)


def _p50(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wakes", type=int, default=10, help="wakes per path (default 10)")
    options = parser.parse_args()
    archives = [archive(image) for image in IMAGES]
    missing = [str(path) for path in archives if not path.exists()]
    if missing:
        sys.exit(f"image archives missing ({', '.join(missing)}): run `make images` first")
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        measure(archives, options.wakes)


def measure(archives: list[Path], count: int) -> None:
    box = Cluster()
    box.down()  # what a killed run left is not part of the box
    try:
        box.up()
        api_client = box.api_client
        with tempfile.TemporaryDirectory() as home:
            install(box, archives, Helm(locate_helm(), Path(home)))
        advertise_gpus(k8s_client.CoreV1Api(api_client), "1")
        runtime, service = example(scaling={"scaleDownStabilization": "1s"})
        for variable in runtime["spec"]["container"]["env"]:
            if variable["name"] == "STUB_STARTUP_DELAY":
                variable["value"] = "0s"
        resources = CustomResources(api_client)
        resources.create(runtime)
        k8s_client.CoreV1Api(api_client).create_namespace({"metadata": {"name": NAMESPACE}})
        resources.create(service, NAMESPACE)
        results = {}
        with diagnosed(api_client, NAMESPACE):
            wait_idle(api_client, NAMESPACE)
            print(deployed_footprint(), flush=True)
            for title, wake, prepare in (
                ("through the gateway", wake_through_gateway, None),
                ("by hand", wake_by_hand, pause_keda),
                ("at the pod", wake_at_the_pod, None),
            ):
                if prepare is not None:
                    wait_idle(api_client, NAMESPACE)  # KEDA pauses at the replicas it has: 0
                    prepare(api_client)
                wakes = []
                for _ in range(count):
                    wait_idle(api_client, NAMESPACE)
                    wakes.append(wake(api_client))
                    seen = " ".join(f"{k}={v:.2f}" for k, v in wakes[-1].seen.items())
                    print(title, seen, flush=True)
                results[title] = wakes
        for title, wakes in results.items():
            print(table(title, wakes))
        print(increments(results))
    finally:
        box.down()


def deployed_footprint() -> str:
    """The resident memory of the image's processes in the box, the service idle: its
    gateway and the operator's replicas (as the host sees them)."""
    found: dict[str, list[float]] = {"noctaya-gateway": [], "noctaya-operator": []}
    for program, sizes in found.items():
        for pid in image_processes(program):
            with contextlib.suppress(OSError):
                status = Path(f"/proc/{pid}/status").read_text()
                kib = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
                sizes.append(int(kib.split()[1]) / 1024)
    return "Idle RSS as deployed (the image's processes in the box, MiB): " + ", ".join(
        f"{program} {' / '.join(f'{size:.1f}' for size in sorted(sizes)) or '-'}"
        for program, sizes in found.items()
    )


if __name__ == "__main__":
    main()
