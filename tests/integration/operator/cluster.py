"""What operator scenarios read from the cluster: conditions, owners, events, backend pods.

There is no kubelet, scheduler or controller-manager: a scenario creates the Pods the
Deployment would have, and writes their status (and the Deployment's) itself through the
status subresources, as those components would.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from kubernetes import client as k8s_client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError
from noctaya.k8s.events import REPORTING_CONTROLLER
from support.custom_resources import CustomResources

Manifest = dict[str, Any]
T = TypeVar("T")

WAIT = 30.0
"""Deadline for anything a running controller does; generous because the CPU is shared."""

MANAGED_BY = "app.kubernetes.io/managed-by"
LLMSERVICE_LABEL = "serving.noctaya.io/llmservice"
RUNTIME_LABEL = "serving.noctaya.io/runtime"
GATEWAY_LABEL = "serving.noctaya.io/gateway"
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
    """The object's owner reference to `service` if it is exactly the controller reference Noctaya
    sets (controller and blockOwnerDeletion true)."""
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


def _resource(client: DynamicClient, api_version: str, kind: str) -> Any:
    return client.resources.get(api_version=api_version, kind=kind)


def read(
    api_client: k8s_client.ApiClient, api_version: str, kind: str, ns: str | None, name: str
) -> Any:
    """One object as a plain dict (camelCase, as on the wire), or None when it does not exist."""
    client = dynamic(api_client)
    try:
        found = client.get(  # type: ignore[no-untyped-call]
            _resource(client, api_version, kind), name=name, namespace=ns
        )
    except NotFoundError:
        return None
    return found.to_dict()


def create(api_client: k8s_client.ApiClient, namespace: str | None, obj: Manifest) -> Manifest:
    """Create any object from its wire dict (apiVersion and kind say where it goes)."""
    client = dynamic(api_client)
    resource = _resource(client, obj["apiVersion"], obj["kind"])
    created = client.create(resource, body=obj, namespace=namespace)  # type: ignore[no-untyped-call]
    return dict(created.to_dict())


def patch(
    api_client: k8s_client.ApiClient,
    api_version: str,
    kind: str,
    namespace: str | None,
    name: str,
    changes: Manifest,
    *,
    field_manager: str | None = None,
) -> Manifest:
    """A JSON merge patch, as `kubectl patch --type=merge` (or a hand edit) sends it."""
    client = dynamic(api_client)
    patched = client.patch(  # type: ignore[no-untyped-call]
        _resource(client, api_version, kind),
        body=changes,
        name=name,
        namespace=namespace,
        content_type="application/merge-patch+json",
        field_manager=field_manager,
    )
    return dict(patched.to_dict())


def replace_status(
    api_client: k8s_client.ApiClient,
    api_version: str,
    kind: str,
    namespace: str,
    name: str,
    status: Manifest,
) -> None:
    """Replace an object's whole status through its status subresource, as its controller
    (kubelet, deployment or job controller) would."""
    obj = read(api_client, api_version, kind, namespace, name)
    assert obj is not None, f"{kind} {namespace}/{name} does not exist"
    obj["status"] = status
    client = dynamic(api_client)
    resource = _resource(client, api_version, kind).subresources["status"]
    client.replace(resource, body=obj, namespace=namespace)  # type: ignore[no-untyped-call]


def runtimes(api_client: k8s_client.ApiClient) -> list[Manifest]:
    """Every InferenceRuntime in the cluster (runtime selection looks at all of them)."""
    client = dynamic(api_client)
    resource = _resource(client, "serving.noctaya.io/v1alpha1", "InferenceRuntime")
    return [item.to_dict() for item in client.get(resource).items]  # type: ignore[no-untyped-call]


WRITTEN_KINDS = (
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("policy/v1", "PodDisruptionBudget"),
    ("v1", "Secret"),
    ("v1", "PersistentVolumeClaim"),
    ("batch/v1", "Job"),
)
"""Every kind the operator writes in a service's namespace, but the gateway's endpoint reader."""
ENDPOINT_READER_DIR = "/var/run/noctaya/kubernetes"
ENDPOINT_READER_VOLUME = {
    "name": "kubernetes-api",
    "projected": {
        "defaultMode": 0o440,
        "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
        ],
    },
}
"""The projected token of a service's endpoint reader and the cluster's CA, in its gateway pod."""
ENDPOINT_READER_MOUNT = {
    "name": "kubernetes-api",
    "mountPath": ENDPOINT_READER_DIR,
    "readOnly": True,
}


def endpoint_reader_env(namespace: str, service: str) -> list[tuple[str, str]]:
    """The gateway's env entries that follow the backend's EndpointSlices, in their order."""
    return [
        ("NOCTAYA_BACKEND_ENDPOINTS", f"{namespace}/{service}-backend"),
        ("NOCTAYA_KUBERNETES_TOKEN_FILE", f"{ENDPOINT_READER_DIR}/token"),
        ("NOCTAYA_KUBERNETES_CA_FILE", f"{ENDPOINT_READER_DIR}/ca.crt"),
    ]


ENDPOINT_READER_KINDS = (
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
)


def everything_in(
    api_client: k8s_client.ApiClient,
    namespace: str,
    kinds: tuple[tuple[str, str], ...] = WRITTEN_KINDS,
) -> list[Manifest]:
    """Every object of the kinds the operator writes, in the namespace, as wire dicts."""
    client = dynamic(api_client)
    found = []
    for api_version, kind in kinds:
        listed = client.get(  # type: ignore[no-untyped-call]
            _resource(client, api_version, kind), namespace=namespace
        )
        found += [item.to_dict() for item in listed.items]
    return found


def reconciled(resources: CustomResources, namespace: str, name: str) -> Any:
    """The service's status once the operator wrote one, else None."""
    return resources.get("LLMService", name, namespace).get("status") or None


def events(api_client: k8s_client.ApiClient, namespace: str) -> list[Manifest]:
    """The operator's events.k8s.io/v1 Events in the namespace, as (type, reason, action, note,
    regarding). Read as plain JSON: a kubelet's event has no `eventTime` in this API version,
    which the typed client refuses. The API server records its own beside them (its Service
    cluster-IP repair loop reports `ClusterIPNotAllocated` when it runs between an allocation
    and its Service's write); those say nothing about the operator.
    """
    client = dynamic(api_client)
    resource = _resource(client, "events.k8s.io/v1", "Event")
    listed = client.get(resource, namespace=namespace).to_dict()  # type: ignore[no-untyped-call]
    return [
        {
            "type": e.get("type"),
            "reason": e.get("reason"),
            "action": e.get("action"),
            "note": e.get("note"),
            "reportingController": e.get("reportingController"),
            "regarding": (e.get("regarding") or {}).get("name"),
        }
        for e in listed["items"]
        if e.get("reportingController") == REPORTING_CONTROLLER
    ]


def backend_pod(
    api_client: k8s_client.ApiClient, namespace: str, service: str, runtime: str, name: str
) -> str:
    """A Pod as the backend Deployment would create it, with the backend pods' labels."""
    labels = {LLMSERVICE_LABEL: service, RUNTIME_LABEL: runtime}
    _pod(api_client, namespace, name, service, labels, "serving", "vllm/vllm-openai:v0.10.0")
    return name


def gateway_pod(
    api_client: k8s_client.ApiClient, namespace: str, service: str, name: str
) -> Manifest:
    """A Pod as the gateway Deployment would create it, with the gateway pods' labels."""
    labels = {GATEWAY_LABEL: service}
    image = "ghcr.io/noctaya/noctaya:test"
    return _pod(api_client, namespace, name, f"{service}-gateway", labels, "gateway", image)


def _pod(
    api_client: k8s_client.ApiClient,
    namespace: str,
    name: str,
    app: str,
    labels: dict[str, str],
    container: str,
    image: str,
) -> Manifest:
    body: Manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/name": app, MANAGED_BY: "noctaya", **labels},
        },
        "spec": {"containers": [{"name": container, "image": image}]},
    }
    return create(api_client, namespace, body)


def kubelet_event(
    api_client: k8s_client.ApiClient, namespace: str, pod: Manifest, reason: str, message: str
) -> None:
    """A Warning about `pod`, recorded as the kubelet records one (a core/v1 Event)."""
    source = {"component": "kubelet", "host": "node-1"}
    component_event(api_client, namespace, pod, reason, message, source)


def component_event(
    api_client: k8s_client.ApiClient,
    namespace: str,
    regarding: Manifest,
    reason: str,
    message: str,
    source: Manifest,
) -> None:
    """A Warning about `regarding`, recorded as Kubernetes' own components record one (a core/v1
    Event, which the events.k8s.io API shows too)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = regarding["metadata"]
    body: Manifest = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}."},
        "involvedObject": {
            "apiVersion": regarding["apiVersion"],
            "kind": regarding["kind"],
            "name": meta["name"],
            "namespace": namespace,
            "uid": meta["uid"],
        },
        "reason": reason,
        "message": message,
        "type": "Warning",
        "source": source,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    create(api_client, namespace, body)


def set_pod_status(
    api_client: k8s_client.ApiClient, namespace: str, name: str, status: Manifest
) -> None:
    replace_status(api_client, "v1", "Pod", namespace, name, status)


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
    container_name: str = "serving",
    waiting_message: str | None = None,
) -> Manifest:
    """A Pod status whose `serving` (or other) container is in the given state (or not created
    yet)."""
    state: Manifest = {}
    if waiting is not None:
        state = {"waiting": {"reason": waiting}}
        if waiting_message is not None:
            state["waiting"]["message"] = waiting_message
    elif running:
        state = {"running": {"startedAt": "2025-01-01T00:00:00Z"}}
    container: Manifest = {
        "name": container_name,
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
    replace_status(api_client, "apps/v1", "Deployment", namespace, name, status)


def set_gateway_available(api_client: k8s_client.ApiClient, namespace: str, service: str) -> None:
    """The gateway Deployment with one available replica, as the deployment controller reports
    it once its pod is ready: without one, a service is never Ready."""
    status = {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}
    set_deployment_status(api_client, namespace, f"{service}-gateway", status)
