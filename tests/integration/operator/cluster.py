"""What operator scenarios read from the cluster: conditions, owners, events, backend pods.

There is no kubelet, scheduler or controller-manager: a scenario creates the Pods the
Deployment would have, and writes their status (and the Deployment's) itself through the
status subresources, as those components would.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client as k8s_client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

Manifest = dict[str, Any]
T = TypeVar("T")

WAIT = 30.0
"""Deadline for anything a running controller does; generous because the CPU is shared."""

MANAGED_BY = "app.kubernetes.io/managed-by"
LLMSERVICE_LABEL = "serving.noctaya.io/llmservice"
RUNTIME_LABEL = "serving.noctaya.io/runtime"
OWNER_API_VERSION = "serving.noctaya.io/v1alpha1"


def eventually(
    probe: Callable[[], T | None], what: str, timeout: float = WAIT, interval: float = 0.05
) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"waited {timeout:.0f}s for {what}; last saw {last!r}")


def conditions(status: Manifest) -> dict[str, Manifest]:
    return {c["type"]: c for c in status.get("conditions") or []}


def condition_values(status: Manifest) -> dict[str, tuple[str, str, str]]:
    """Each condition type as (status, reason, message): one comparable value per scenario."""
    return {t: (c["status"], c["reason"], c["message"]) for t, c in conditions(status).items()}


def controller_reference(obj: Manifest, service: Manifest) -> Manifest | None:
    """The object's owner reference to `service` if it is the exact §1.1 controller reference."""
    meta = service["metadata"]
    expected = {
        "apiVersion": OWNER_API_VERSION,
        "kind": "LLMService",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return expected if expected in refs else None


def dynamic(api_client: k8s_client.ApiClient) -> DynamicClient:
    return DynamicClient(api_client)  # type: ignore[no-untyped-call]


def read(api_client: k8s_client.ApiClient, api_version: str, kind: str, ns: str, name: str) -> Any:
    """One object as a plain dict (camelCase, as on the wire), or None when it does not exist."""
    client = dynamic(api_client)
    resource = client.resources.get(api_version=api_version, kind=kind)
    try:
        return client.get(resource, name=name, namespace=ns).to_dict()
    except NotFoundError:
        return None


WRITTEN_KINDS = (
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("policy/v1", "PodDisruptionBudget"),
    ("v1", "Secret"),
    ("v1", "PersistentVolumeClaim"),
    ("batch/v1", "Job"),
)
"""Every kind the operator writes in a service's namespace."""


def everything_in(api_client: k8s_client.ApiClient, namespace: str) -> list[Manifest]:
    """Every object of the kinds the operator writes, in the namespace, as wire dicts."""
    client = dynamic(api_client)
    found = []
    for api_version, kind in WRITTEN_KINDS:
        resource = client.resources.get(api_version=api_version, kind=kind)
        found += [item.to_dict() for item in client.get(resource, namespace=namespace).items]
    return found


def events(api_client: k8s_client.ApiClient, namespace: str) -> list[Manifest]:
    """events.k8s.io/v1 Events of the namespace, as (type, reason, action, note, regarding)."""
    listed = k8s_client.EventsV1Api(api_client).list_namespaced_event(namespace)
    return [
        {
            "type": e.type,
            "reason": e.reason,
            "action": e.action,
            "note": e.note,
            "reportingController": e.reporting_controller,
            "regarding": e.regarding.name if e.regarding else None,
        }
        for e in listed.items
    ]


def backend_pod(
    api_client: k8s_client.ApiClient, namespace: str, service: str, runtime: str, name: str
) -> str:
    """A Pod as the backend Deployment would create it: the backend pod labels of §1.1."""
    labels = {
        "app.kubernetes.io/name": service,
        MANAGED_BY: "noctaya",
        LLMSERVICE_LABEL: service,
        RUNTIME_LABEL: runtime,
    }
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "serving", "image": "vllm/vllm-openai:v0.10.0"}]},
    }
    k8s_client.CoreV1Api(api_client).create_namespaced_pod(namespace, body)
    return name


def set_pod_status(
    api_client: k8s_client.ApiClient, namespace: str, name: str, status: Manifest
) -> None:
    """Write a Pod's status as a kubelet would (status subresource, whole status replaced)."""
    core = k8s_client.CoreV1Api(api_client)
    pod = core.read_namespaced_pod(name, namespace)
    body = api_client.sanitize_for_serialization(pod)
    body["status"] = status
    core.replace_namespaced_pod_status(name, namespace, body)


def serving_status(
    *,
    phase: str = "Running",
    waiting: str | None = None,
    running: bool = False,
    ready: bool = False,
    restarts: int = 0,
    last_terminated: str | None = None,
    pod_conditions: list[Manifest] | None = None,
    container_started: bool = True,
) -> Manifest:
    """A Pod status whose `serving` container is in the given state (or not created yet)."""
    state: Manifest = {}
    if waiting is not None:
        state = {"waiting": {"reason": waiting}}
    elif running:
        state = {"running": {"startedAt": "2025-01-01T00:00:00Z"}}
    container: Manifest = {
        "name": "serving",
        "image": "vllm/vllm-openai:v0.10.0",
        "imageID": "",
        "ready": ready,
        "restartCount": restarts,
        "state": state,
    }
    if last_terminated is not None:
        container["lastState"] = {
            "terminated": {
                "reason": last_terminated,
                "exitCode": 137,
                "startedAt": "2025-01-01T00:00:00Z",
                "finishedAt": "2025-01-01T00:00:01Z",
            }
        }
    status: Manifest = {"phase": phase}
    if container_started:
        status["containerStatuses"] = [container]
    if pod_conditions is not None:
        status["conditions"] = pod_conditions
    return status


def set_deployment_status(
    api_client: k8s_client.ApiClient, namespace: str, name: str, status: Manifest
) -> None:
    """Write a Deployment's status as the deployment controller would."""
    apps = k8s_client.AppsV1Api(api_client)
    deployment = apps.read_namespaced_deployment(name, namespace)
    body = api_client.sanitize_for_serialization(deployment)
    body["status"] = status
    apps.replace_namespaced_deployment_status(name, namespace, body)
