"""The serving lifecycle on the box, installed as users install it (images imported into the
node, `helm install`, the example applied): a cold stream wakes the backend 0 → 1 and it returns
to 0 with the contract's phases and conditions along the way, reject mode answers 503 and still
wakes, load above the target scales 1 → N, and deleting the service leaves nothing behind."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import dynamic
from support.custom_resources import CustomResources

from .serving import (
    SERVICE_NAME,
    backend_replicas,
    chat,
    condition,
    diagnosed,
    example,
    phases_seen,
    start_chat,
    status,
    stream_chat,
    wait_idle,
)
from .workloads import ready_replicas, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
SERVICE = SERVICE_NAME


def test_a_cold_stream_wakes_the_backend_and_it_scales_back_to_zero(
    api_client: k8s_client.ApiClient, namespace: str, installed: None, gpus: None
) -> None:
    with diagnosed(api_client, namespace):
        _, service = example()
        CustomResources(api_client).create(service, namespace)
        idle = wait_idle(api_client, namespace)
        assert condition(idle, "Ready") == ("False", "ScaledToZero")
        assert condition(idle, "AutoscalingReady")[0] == "True", idle
        assert idle["endpointURL"].endswith("/v1")
        assert backend_replicas(api_client, namespace, SERVICE) == 0

        with phases_seen(api_client, namespace, SERVICE) as phases:
            started = time.monotonic()
            lines = list(stream_chat(api_client, namespace, SERVICE))
            ready = _wait_phase(api_client, namespace, "Ready")
        assert phases[:3] == ["ScaledToZero", "Loading", "Ready"], phases
        heartbeats = [c for c in lines if c.line.startswith(b": heartbeat")]
        tokens = [c for c in lines if c.line.startswith(b"data: {")]
        arrivals = [(round(c.at - started, 2), c.line) for c in lines]
        assert heartbeats, arrivals
        assert tokens, arrivals
        assert heartbeats[0].at < tokens[0].at
        assert any(c.line == b"data: [DONE]" for c in lines)
        print(f"first token {tokens[0].at - started:.1f}s after the request")

        assert ready["replicas"] == 1
        assert condition(ready, "Ready")[0] == "True", ready
        assert backend_replicas(api_client, namespace, SERVICE) == 1

        wait_for(
            "the backend back to 0 after the stabilization window",
            lambda: backend_replicas(api_client, namespace, SERVICE) == 0,
            timeout=300,
        )
        wait_idle(api_client, namespace)


def test_reject_mode_answers_503_with_retry_after_while_cold_and_still_wakes(
    api_client: k8s_client.ApiClient, namespace: str, installed: None, gpus: None
) -> None:
    with diagnosed(api_client, namespace):
        _, service = example(endpoint={"coldStart": {"mode": "reject"}})
        CustomResources(api_client).create(service, namespace)
        wait_idle(api_client, namespace)

        rejected = chat(api_client, namespace, SERVICE)
        body = rejected.read()
        assert rejected.status == 503, body
        assert int(rejected.headers["Retry-After"]) > 0, dict(rejected.headers)

        wait_for(
            "the rejected request to wake the backend",
            lambda: backend_replicas(api_client, namespace, SERVICE) == 1,
        )
        _wait_phase(api_client, namespace, "Ready")

        # The gateway learns that the new pod is ready from its EndpointSlice, a moment after
        # the pod is Ready: until then it still rejects, and a client retries as told.
        def admitted() -> Any:
            response = chat(api_client, namespace, SERVICE)
            if response.status == 503 and int(response.headers.get("Retry-After", "0")) > 0:
                response.read()
                return None
            return response

        answered = wait_for("a retried request to be admitted", admitted, timeout=60)
        body = answered.read()
        assert answered.status == 200, body
        assert b"data: [DONE]" in body.splitlines(), body


def test_deleting_the_service_removes_every_object_it_owned_and_its_pods(
    api_client: k8s_client.ApiClient, namespace: str, installed: None, gpus: None
) -> None:
    with diagnosed(api_client, namespace):
        _, service = example()
        created = CustomResources(api_client).create(service, namespace)
        wait_idle(api_client, namespace)
        lines = [c.line for c in stream_chat(api_client, namespace, SERVICE)]
        assert b"data: [DONE]" in lines, lines
        owned = _owned(api_client, namespace, created["metadata"]["uid"])
        kinds = {kind for kind, _ in owned}
        assert {"Deployment", "Service", "ScaledObject"} <= kinds, owned
        assert _pods(api_client, namespace), "a gateway and a backend pod run before the delete"

        CustomResources(api_client).delete("LLMService", SERVICE, namespace)
        wait_for(
            "every owned object and pod gone",
            lambda: (
                not _owned(api_client, namespace, created["metadata"]["uid"])
                and not _pods(api_client, namespace)
            ),
            timeout=180,
        )


def _wait_phase(api_client: k8s_client.ApiClient, namespace: str, phase: str) -> dict[str, Any]:
    return wait_for(
        f"the service {phase}",
        lambda: (s := status(api_client, namespace, SERVICE)).get("phase") == phase and s,
        timeout=300,
    )


def _owned(api_client: k8s_client.ApiClient, namespace: str, uid: str) -> list[tuple[str, str]]:
    """(kind, name) of every object in `namespace` the LLMService `uid` owns."""
    client = dynamic.DynamicClient(api_client)  # type: ignore[no-untyped-call]
    found = []
    for api_version, kind in _OWNABLE:
        for item in (
            client.resources.get(api_version=api_version, kind=kind).get(namespace=namespace).items
        ):
            owners = item.metadata.get("ownerReferences") or []
            if any(owner["uid"] == uid for owner in owners):
                found.append((kind, item.metadata.name))
    return found


def _pods(api_client: k8s_client.ApiClient, namespace: str) -> list[str]:
    pods = k8s_client.CoreV1Api(api_client).list_namespaced_pod(namespace).items
    return [pod.metadata.name for pod in pods]


_OWNABLE = (
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "ServiceAccount"),
    ("v1", "PersistentVolumeClaim"),
    ("batch/v1", "Job"),
    ("policy/v1", "PodDisruptionBudget"),
    ("keda.sh/v1alpha1", "ScaledObject"),
)


def test_load_above_target_scales_one_to_n_through_the_hpa_and_back_to_zero(
    api_client: k8s_client.ApiClient, namespace: str, installed: None, gpus: None
) -> None:
    apps = k8s_client.AppsV1Api(api_client)
    with diagnosed(api_client, namespace):
        _, service = example()  # target 1, max 3
        CustomResources(api_client).create(service, namespace)
        wait_idle(api_client, namespace)
        # Long streams (500 s of tokens): each is one in-flight request until it is cut.
        streams = [start_chat(api_client, namespace, SERVICE, tokens=5000) for _ in range(3)]
        try:
            wait_for(
                "three streams answered", lambda: all(s.status or s.over.is_set() for s in streams)
            )
            assert [s.status for s in streams] == [200] * 3, [s.describe() for s in streams]

            def three_ready() -> bool:
                ended = [s.describe() for s in streams if s.over.is_set()]
                assert not ended, f"streams ended before three backends were ready: {ended}"
                return ready_replicas(apps, namespace, SERVICE) == 3

            wait_for("three ready backends for three requests at target 1", three_ready, 300)
            autoscaler = k8s_client.AutoscalingV2Api(api_client)
            (hpa,) = autoscaler.list_namespaced_horizontal_pod_autoscaler(namespace).items
            assert hpa.spec.scale_target_ref.name == SERVICE
        finally:
            for stream in streams:
                stream.cut()
        wait_for(
            "the backend back to 0 once the load ends",
            lambda: backend_replicas(api_client, namespace, SERVICE) == 0,
            timeout=300,
        )
