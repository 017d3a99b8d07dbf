"""Availability on the box, with Noctaya installed as users install it: an API key rotated in its
Secret takes effect in the running gateway; the operator's standby takes over when the leader's
pod is deleted and reconciles a change made meanwhile within one Lease duration; with two
gateways (`gateway.replicas=2`, the demand aggregator) cold demand on either one wakes the
backend, and killing one loses no admitted request that was still waiting for the backend."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
from helm.chart import DEFAULT_NAMESPACE, Helm
from kubernetes import client as k8s_client
from support.cluster import Cluster
from support.custom_resources import CustomResources

from .conftest import GPUS
from .pods import (
    GATEWAY_PODS,
    SERVICE_NAME,
    live_pods,
    ready_gateways,
    settled_gateways,
)
from .serving import (
    OPERATOR,
    Exchange,
    Reply,
    backend_replicas,
    chat_body,
    diagnosed,
    example,
    forwarded,
    gateway_metric,
    leader,
    operator_pods,
    pod_of,
    scaler_metric,
    start_chat,
    status,
    stream_chat,
    upgrade,
    wait_idle,
)
from .workloads import advertise_gpus, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
SERVICE = SERVICE_NAME
KEY_SECRET = "demo-api-key"
MEMBERS = "noctaya_scaler_gateway_members"
PENDING = "noctaya_gateway_pending"
DRAIN_SECONDS = 30  # the gateway pod's terminationGracePeriodSeconds bounds its drain


def test_a_key_rotated_in_its_secret_takes_effect_without_restarting_the_gateway(
    api_client: k8s_client.ApiClient, namespace: str, installed: None, gpus: None
) -> None:
    core = k8s_client.CoreV1Api(api_client)
    old, new = secrets.token_hex(16), secrets.token_hex(16)
    with diagnosed(api_client, namespace):
        secret = {"metadata": {"name": KEY_SECRET}, "stringData": {"token": old}}
        core.create_namespaced_secret(namespace, secret)
        reference = {"secretRef": {"name": KEY_SECRET, "key": "token"}}
        _, service = example(endpoint={"authentication": reference})
        CustomResources(api_client).create(service, namespace)
        (gateway,) = settled_gateways(api_client, namespace, 1)
        name = gateway.metadata.name

        def answer(key: str | None, whole: bool = False) -> Reply:
            body = chat_body(SERVICE)
            return forwarded(api_client, namespace, name, key=key, body=body, head_only=not whole)

        assert answer(None).status == 401
        assert answer(new).status == 401
        served = answer(old, whole=True)
        assert served.status == 200, served
        assert b"data: [DONE]" in served.body, served

        core.patch_namespaced_secret(KEY_SECRET, namespace, {"stringData": {"token": new}})
        rotated = time.monotonic()
        wait_for("the old key refused", lambda: answer(old).status == 401, timeout=120)
        print(f"the rotation took effect {time.monotonic() - rotated:.1f}s after the change")
        served = answer(new, whole=True)
        assert served.status == 200, served
        assert b"data: [DONE]" in served.body, served
        refused = answer(old)
        assert refused.status == 401, refused
        assert refused.headers["www-authenticate"].lower().startswith("bearer"), refused

        # Every gateway pod, Ready or not: a replacement still starting is one too.
        after = live_pods(api_client, namespace, GATEWAY_PODS)
        assert [pod.metadata.uid for pod in after] == [gateway.metadata.uid], "it was replaced"
        assert _restarts(after[0]) == _restarts(gateway), "the gateway container restarted"


def test_the_standby_takes_over_from_a_deleted_leader_and_reconciles_a_change_in_one_lease(
    api_client: k8s_client.ApiClient, namespace: str, installed: None
) -> None:
    apps = k8s_client.AppsV1Api(api_client)
    resources = CustomResources(api_client)
    with diagnosed(api_client, namespace):
        assert apps.read_namespaced_deployment(OPERATOR, DEFAULT_NAMESPACE).spec.replicas == 2
        wait_for("a leader and a standby", lambda: _standby(api_client), timeout=180)
        _, service = example()
        created = resources.create(service, namespace)
        wait_for("the service reconciled", lambda: _reconciled(api_client, namespace, created))
        # The holder and its standby from one read of the Lease, so the standby is not the
        # holder itself should the Lease have changed hands between two reads.
        holder, standby = wait_for("a leader and a standby", lambda: _standby(api_client))
        lease_seconds = leader(api_client)[1]
        assert lease_seconds > 0, (holder, lease_seconds)

        k8s_client.CoreV1Api(api_client).delete_namespaced_pod(pod_of(holder), DEFAULT_NAMESPACE)
        deleted = time.monotonic()
        # The leader stops reconciling before it lets go of the Lease: a change made from now
        # on can only be reconciled by its successor.
        wait_for(
            "the deleted leader to let go of the Lease",
            lambda: leader(api_client)[0] != holder,
            timeout=lease_seconds,
        )
        changed = time.monotonic()
        patched = k8s_client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
            "serving.noctaya.io", "v1alpha1", namespace, "llmservices", SERVICE,
            {"spec": {"scaling": {"max": 2}}},
        )  # fmt: skip
        wait_for(
            "the change reconciled by the new leader",
            lambda: _reconciled(api_client, namespace, patched),
            timeout=2 * lease_seconds,  # fails below, with the time it took, past one Lease
        )
        took = time.monotonic() - changed
        successor = leader(api_client)[0]
        print(
            f"Lease {lease_seconds}s: let go {changed - deleted:.1f}s after the delete, "
            f"the change reconciled {took:.1f}s after it was made"
        )
        assert pod_of(successor) == standby, (holder, successor, standby)
        assert took <= lease_seconds, f"reconciled after {took:.1f}s"
        wait_for("a new standby", lambda: _standby(api_client), timeout=180)


@pytest.fixture(scope="module")
def two_gateways(cluster: Cluster, installed: None, helm: Helm) -> Iterator[None]:
    """The chart's `gateway.replicas=2` for this module's later tests, back to 1 after."""
    upgrade(cluster, helm, "gateway.replicas=2")
    yield
    upgrade(cluster, helm, "gateway.replicas=1")


def test_cold_demand_on_either_gateway_wakes_the_backend(
    api_client: k8s_client.ApiClient, namespace: str, two_gateways: None, gpus: None
) -> None:
    with diagnosed(api_client, namespace):
        _, service = example()
        CustomResources(api_client).create(service, namespace)
        pods = _two_gateways_reporting(api_client, namespace)
        for woken, pod in enumerate(pods, start=1):
            wait_idle(api_client, namespace)
            lines = [chunk.line for chunk in stream_chat(api_client, namespace, SERVICE, pod=pod)]
            heartbeat = lines.index(b": heartbeat")
            token = next(i for i, line in enumerate(lines) if line.startswith(b"data: {"))
            assert heartbeat < token, lines
            assert b"data: [DONE]" in lines, lines
            assert backend_replicas(api_client, namespace, SERVICE) == 1
            # This gateway's demand, and no other's, took the backend out of zero.
            activations = [
                gateway_metric(
                    api_client, namespace, each, "noctaya_gateway_activation_events_total"
                )
                for each in pods
            ]
            assert activations == [1.0] * woken + [0.0] * (len(pods) - woken), activations


def test_killing_a_gateway_loses_no_admitted_request(
    cluster: Cluster, api_client: k8s_client.ApiClient, namespace: str, two_gateways: None
) -> None:
    """Without GPUs the backend cannot start, so every request is held cold. The killed
    gateway drains: its held requests are answered "retry" (503 with Retry-After, or the error
    event ending a stream already answered 200) before it exits, never cut; their retries, and
    the requests held by the other gateway, are served once the backend can start. All of it
    within the service's 2 min activation timeout, which would answer the held requests too."""
    core = k8s_client.CoreV1Api(api_client)
    _no_gpus(core, cluster)
    try:
        with diagnosed(api_client, namespace):
            _, service = example()
            CustomResources(api_client).create(service, namespace)
            killed, survivor = _two_gateways_reporting(api_client, namespace)
            wait_idle(api_client, namespace)
            held = {
                pod: [
                    start_chat(api_client, namespace, SERVICE, pod=pod, stream=stream)
                    for stream in (True, True, False)
                ]
                for pod in (killed, survivor)
            }
            for pod, exchanges in held.items():
                wait_for(
                    f"{pod} holding {len(exchanges)} cold requests",
                    lambda pod=pod, exchanges=exchanges: _holding(
                        api_client, namespace, [pod], exchanges
                    ),
                )
            wait_for(
                "the held demand activating the backend",
                lambda: backend_replicas(api_client, namespace, SERVICE) >= 1,
            )

            core.delete_namespaced_pod(killed, namespace)
            wait_for(
                "the killed gateway's requests answered",
                lambda: all(e.over.is_set() for e in held[killed]),
                timeout=DRAIN_SECONDS,
            )
            for exchange in held[killed]:
                assert exchange.retryable, exchange.describe()
            assert not any(e.over.is_set() for e in held[survivor]), "the survivor let go"
            # The retries go where the Service sends them once it has settled: to the survivor,
            # or the pod replacing the killed one. They are sent to those pods by name, as the
            # Service would still route one to the draining pod for a moment (until kube-proxy
            # has read that its EndpointSlice says it is not ready), and the draining pod
            # answers "retry" again at once.
            live = [str(pod.metadata.name) for pod in ready_gateways(api_client, namespace)]
            assert killed not in live, live
            retries = [
                start_chat(api_client, namespace, SERVICE, pod=live[i % len(live)], stream=e.stream)
                for i, e in enumerate(held[killed])
            ]
            waiting = held[survivor] + retries
            wait_for(
                "the gateways holding the survivor's requests and the retries",
                lambda: _holding(
                    api_client,
                    namespace,
                    [str(pod.metadata.name) for pod in ready_gateways(api_client, namespace)],
                    waiting,
                ),
            )
            advertise_gpus(core, GPUS)
            wait_for(
                "every held request answered",
                lambda: all(e.over.is_set() for e in waiting),
                timeout=180,
            )
            for exchange in waiting:
                assert exchange.completed, exchange.describe()
    finally:
        _no_gpus(core, cluster)


def _restarts(pod: k8s_client.V1Pod) -> int:
    return sum(c.restart_count for c in pod.status.container_statuses or [])


def _standby(api_client: k8s_client.ApiClient) -> tuple[str, str] | None:
    """(the Lease's holder identity, the Ready operator pod that does not hold it), when there
    is a Ready holder and such a standby; else None."""
    identity = leader(api_client)[0]
    holder = pod_of(identity)
    ready = {
        pod.metadata.name
        for pod in operator_pods(api_client)
        if any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
    }
    others = sorted(ready - {holder})
    return (identity, others[0]) if holder in ready and others else None


def _reconciled(api_client: k8s_client.ApiClient, namespace: str, written: dict[str, Any]) -> bool:
    """The operator has acted on this generation of the service: its Ready condition says so
    and the ScaledObject carries its maximum."""
    generation = written["metadata"]["generation"]
    conditions = status(api_client, namespace, SERVICE).get("conditions") or []
    ready = [c for c in conditions if c["type"] == "Ready"]
    if not ready or ready[0].get("observedGeneration") != generation:
        return False
    scaled = CustomResources(api_client).get("ScaledObject", SERVICE, namespace)
    return bool(scaled["spec"]["maxReplicaCount"] == written["spec"]["scaling"]["max"])


def _two_gateways_reporting(api_client: k8s_client.ApiClient, namespace: str) -> list[str]:
    """The names of the service's two Ready gateways, once the aggregator counts both."""
    pods = settled_gateways(api_client, namespace, 2)
    wait_for(
        "the aggregator counting both gateways",
        lambda: scaler_metric(api_client, namespace, SERVICE, MEMBERS) == 2,
    )
    return [str(pod.metadata.name) for pod in pods]


def _holding(
    api_client: k8s_client.ApiClient, namespace: str, pods: list[str], exchanges: list[Exchange]
) -> bool:
    """`pods` hold these requests cold: none answered yet but the streams' 200 and heartbeat,
    and their count of admitted requests is theirs. An answer already given fails at once."""
    for exchange in exchanges:
        assert not exchange.over.is_set(), f"answered while cold: {exchange.describe()}"
    if any(e.stream and not e.heartbeats for e in exchanges):
        return False
    pending = [gateway_metric(api_client, namespace, pod, PENDING) for pod in pods]
    return None not in pending and sum(p or 0 for p in pending) == len(exchanges)


def _no_gpus(core: k8s_client.CoreV1Api, cluster: Cluster) -> None:
    """No node advertises GPUs, so no backend can start wherever the scheduler would put it:
    the other tests advertise them on one node only, but what one of them left on another
    would start the backend there."""
    for node in cluster.nodes:
        advertise_gpus(core, None, node.name)
