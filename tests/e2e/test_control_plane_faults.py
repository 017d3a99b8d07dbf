"""The control plane and the container runtime fail under a request, on the box: KEDA stops
before a cold request and starts while it is held; containerd restarts under a stream of
requests to a ready backend; kube-apiserver restarts while a cold request is held. Every request
is answered, and the service settles as it was.

Requests go to the gateway Service from inside the box, as an in-cluster client sends them: not
through the API server, which one of these tests stops, and whose service proxy was seen to cut
about one streamed answer in 25 after its first chunk on a healthy service (none of 120 sent
from inside the box were). The tests share one service (each brings it to the state it starts
from); a failing test prints the timeline, its actions beside what the cluster did.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import dynamic
from support.cluster import Cluster, layout
from support.custom_resources import CustomResources

from .conftest import GPUS
from .pods import (
    SERVICE_NAME,
    live_pods,
    one_ready_backend,
    rolled_out,
    settled_gateways,
)
from .serving import (
    Exchange,
    backend_replicas,
    condition,
    diagnosed,
    example,
    gateway_metric,
    start_chat_in_box,
    status,
    wait_idle,
)
from .timeline import Timeline
from .workloads import advertise_gpus, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
SERVICE = SERVICE_NAME
KEDA = ("keda", "keda-operator")
STREAMS = "noctaya_gateway_scaler_streams"
OPERATOR_EVENTS = "llmservice-controller"


@dataclass
class Served:
    """The example service in a namespace of its own, with the namespace's timeline."""

    api_client: k8s_client.ApiClient
    namespace: str
    timeline: Timeline

    @contextlib.contextmanager
    def explained(self) -> Iterator[None]:
        with self.timeline.printed_on_failure(), diagnosed(self.api_client, self.namespace):
            yield

    def held(self, exchange: Exchange, heartbeats: int) -> bool:
        """`exchange` is still waiting, with at least `heartbeats` heartbeats; an answer that
        came already fails at once."""
        assert not exchange.over.is_set(), f"answered while cold: {exchange.describe()}"
        return exchange.heartbeats >= heartbeats

    def chat(self) -> Exchange:
        """A streamed chat completion to the gateway Service, from inside the box."""
        service = k8s_client.CoreV1Api(self.api_client).read_namespaced_service(
            SERVICE, self.namespace
        )
        return start_chat_in_box((service.spec.cluster_ip, 80), SERVICE)

    def answered(self, exchange: Exchange, timeout: float = 150.0) -> None:
        wait_for("the held request's answer", exchange.over.is_set, timeout=timeout)
        self.timeline.note(f"answered: {exchange.describe()}")
        assert exchange.completed, exchange.describe()


@pytest.fixture(scope="module")
def served(api_client: k8s_client.ApiClient, installed: None) -> Iterator[Served]:
    """The example service in a namespace of the module's, GPUs advertised meanwhile."""
    core = k8s_client.CoreV1Api(api_client)
    namespace = f"control-plane-faults-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        advertise_gpus(core, GPUS)
        _, service = example()
        CustomResources(api_client).create(service, namespace)
        with Timeline(api_client, namespace) as timeline:
            yield Served(api_client, namespace, timeline)
    finally:
        try:
            core.delete_namespace(namespace)
        finally:  # the node's status is the cluster's, seen by every later test
            advertise_gpus(core, None)


def test_keda_restarted_around_a_held_cold_request_still_wakes_the_backend(
    served: Served,
) -> None:
    """KEDA is stopped before the request comes and started while it is held: the gateway's
    push stream is reconnected by the new KEDA, which learns of the demand and scales up."""
    apps = k8s_client.AppsV1Api(served.api_client)
    with served.explained(), _keda_restored(served.api_client, apps):
        wait_idle(served.api_client, served.namespace)
        gateway = str(settled_gateways(served.api_client, served.namespace, 1)[0].metadata.name)

        def streams() -> float | None:
            return gateway_metric(served.api_client, served.namespace, gateway, STREAMS)

        wait_for("KEDA's push stream", lambda: (streams() or 0) >= 1)
        _scale(apps, KEDA, 0)
        served.timeline.note("KEDA scaled to 0")
        wait_for(
            "KEDA's pod gone",
            lambda: not live_pods(served.api_client, "keda", "app=keda-operator"),
            timeout=120,
        )
        wait_for("the push stream to end", lambda: streams() == 0)

        exchange = served.chat()
        served.timeline.note("cold request sent")
        wait_for("the request held for 3 heartbeats", lambda: served.held(exchange, 3))
        assert backend_replicas(served.api_client, served.namespace, SERVICE) == 0

        _scale(apps, KEDA, 1)
        served.timeline.note("KEDA scaled to 1")
        served.answered(exchange)
        assert backend_replicas(served.api_client, served.namespace, SERVICE) >= 1
        # KEDA also polls the scaler: the demand may have reached it that way a moment before
        # its new pod has the push stream open again.
        wait_for("KEDA's new pod holding a push stream", lambda: (streams() or 0) >= 1, 60)


def test_containerd_restarted_under_requests_to_a_ready_backend_loses_none(
    served: Served, cluster: Cluster
) -> None:
    """Containers outlive their runtime's restart: the backend keeps serving while containerd is
    down (on the backend's node) and after it is back, and every request sent meanwhile is
    answered, by the backend or with a retry the client is told of."""
    core = k8s_client.CoreV1Api(served.api_client)
    with served.explained():
        settled_gateways(served.api_client, served.namespace, 1)
        first = served.chat()
        served.answered(first)
        backend = one_ready_backend(served.api_client, served.namespace)
        node = cluster.node(backend.spec.node_name)

        stop = threading.Event()
        sent: list[Exchange] = []

        def keep_sending() -> None:
            while not stop.is_set():
                exchange = served.chat()
                sent.append(exchange)
                exchange.over.wait(60)
                served.timeline.note(f"request {len(sent)}: {exchange.describe()}")
                stop.wait(0.2)

        sender = threading.Thread(target=keep_sending, daemon=True)
        sender.start()
        try:
            wait_for("requests answered before the restart", lambda: len(sent) >= 3)
            cluster.stop_component("containerd", node=node)
            stopped = served.timeline.note(f"containerd stopped on {node.name}")
            wait_for(
                "requests answered while containerd is down",
                lambda: _sent_since(sent, stopped) >= 3,
            )
            cluster.start_component("containerd", node=node)
            started = served.timeline.note(f"containerd started again on {node.name}")
            wait_for("requests answered after the restart", lambda: _sent_since(sent, started) >= 3)
        finally:
            stop.set()
            sender.join(90)
        for exchange in sent:
            assert exchange.over.is_set(), f"never answered: {exchange.describe()}"
            assert exchange.completed or exchange.retryable, exchange.describe()
        assert sum(e.completed for e in sent) >= len(sent) // 2, [e.describe() for e in sent]

        after = core.read_namespaced_pod(backend.metadata.name, served.namespace)
        assert after.metadata.uid == backend.metadata.uid, "the backend pod was replaced"
        assert _restarts(after) == _restarts(backend), "the serving container restarted"
        settled = wait_for(
            "the service Ready with Degraded=False",
            lambda: (
                (found := status(served.api_client, served.namespace, SERVICE)).get("phase")
                == "Ready"
                and condition(found, "Degraded")[0] == "False"
                and found
            ),
        )
        assert condition(settled, "Ready")[0] == "True", settled


def test_kube_apiserver_restarted_under_a_held_cold_request_loses_nothing(
    served: Served, cluster: Cluster
) -> None:
    """The request goes to the gateway Service from inside the box while the API server is
    away; the gateway needs none, so it holds the request (its heartbeats go on) and answers it
    once the API server is back and the backend could start. The operator then catches up:
    nothing it owns is made again, and its status reports the ready backend."""
    core = k8s_client.CoreV1Api(served.api_client)
    with served.explained():
        idle = wait_idle(served.api_client, served.namespace)
        owned_before = _owned(served.api_client, served.namespace)
        cluster_ip = core.read_namespaced_service(SERVICE, served.namespace).spec.cluster_ip
        warnings_before = _operator_events(served.timeline)

        # Stopped first: KEDA cannot scale the backend without it, so the request stays cold
        # (the gateway, following the pods, would answer a backend already starting without
        # any API server).
        cluster.stop_component("kube-apiserver", node=layout.CONTROL_PLANE)
        stopped = served.timeline.note("kube-apiserver stopped")
        try:
            exchange = start_chat_in_box((cluster_ip, 80), SERVICE)
            served.timeline.note("cold request sent from inside the box")
            wait_for("heartbeats with no API server", lambda: served.held(exchange, 3))
        finally:  # whatever happened, the tests after this one need their API server
            cluster.start_component("kube-apiserver", node=layout.CONTROL_PLANE)
            served.timeline.note(
                f"kube-apiserver started again ({time.monotonic() - stopped:.1f}s)"
            )

        served.answered(exchange)
        ready = wait_for(
            "the operator to report the woken backend",
            lambda: (
                (found := status(served.api_client, served.namespace, SERVICE)).get("phase")
                == "Ready"
                and found
            ),
            timeout=180,
        )
        assert condition(ready, "Ready")[0] == "True", ready
        assert _generation(ready) == _generation(idle), "the operator reconciled the same spec"
        assert _owned(served.api_client, served.namespace) == owned_before
        assert _operator_events(served.timeline) == warnings_before, "no status event repeated"


@contextlib.contextmanager
def _keda_restored(api_client: k8s_client.ApiClient, apps: k8s_client.AppsV1Api) -> Iterator[None]:
    try:
        yield
    finally:
        _scale(apps, KEDA, 1)
        wait_for("KEDA's operator available again", lambda: rolled_out(api_client, *KEDA, 1), 180)


def _scale(apps: k8s_client.AppsV1Api, deployment: tuple[str, str], replicas: int) -> None:
    namespace, name = deployment
    apps.patch_namespaced_deployment_scale(name, namespace, {"spec": {"replicas": replicas}})


def _restarts(pod: Any) -> int:
    return sum(c.restart_count for c in pod.status.container_statuses or [])


def _sent_since(sent: list[Exchange], since: float) -> int:
    return sum(1 for e in sent if e.over.is_set() and e.started >= since)


def _generation(found: dict[str, Any]) -> Any:
    return {c["type"]: c.get("observedGeneration") for c in found.get("conditions") or []}


_OWNABLE = (
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "Secret"),
    ("v1", "PersistentVolumeClaim"),
    ("batch/v1", "Job"),
    ("policy/v1", "PodDisruptionBudget"),
    ("keda.sh/v1alpha1", "ScaledObject"),
)


def _owned(api_client: k8s_client.ApiClient, namespace: str) -> set[tuple[str, str, str]]:
    """(kind, name, uid) of every object in `namespace` an LLMService controls."""
    client = dynamic.DynamicClient(api_client)  # type: ignore[no-untyped-call]
    found = set()
    for api_version, kind in _OWNABLE:
        resource = client.resources.get(api_version=api_version, kind=kind)
        for item in resource.get(namespace=namespace).items:
            owners = item.metadata.get("ownerReferences") or []
            if any(owner["kind"] == "LLMService" for owner in owners):
                found.add((kind, item.metadata.name, item.metadata.uid))
    return found


def _operator_events(timeline: Timeline) -> list[tuple[str, str]]:
    return [
        (str(e.obj.get("type")), str(e.obj.get("reason")))
        for e in timeline.entries()
        if e.kind == "Event" and e.obj.get("reportingComponent") == OPERATOR_EVENTS
    ]
