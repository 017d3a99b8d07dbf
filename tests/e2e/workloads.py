"""Manifests of the box's test workload (box-agent in the box image) and waits on their state."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from kubernetes import client as k8s_client
from kubernetes import utils
from support.cluster import layout
from support.cluster.components import BOX_IMAGE

HTTP_PORT = 8080
GRPC_PORT = 9090
GPU = "nvidia.com/gpu"
_POLL_SECONDS = 0.5
_Value = TypeVar("_Value")


def container(name: str, command: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": BOX_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        **extra,
    }


def agent_deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    """box-agent serving HTTP and the external scaler, Ready once it answers HTTP."""
    labels = {"app": name}
    serve = container(
        "agent",
        ["/box-agent", "serve"],
        ports=[
            {"name": "http", "containerPort": HTTP_PORT},
            {"name": "grpc", "containerPort": GRPC_PORT},
        ],
        readinessProbe={"httpGet": {"path": "/", "port": HTTP_PORT}, "periodSeconds": 1},
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [serve], "terminationGracePeriodSeconds": 1},
            },
        },
    }


def agent_service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {
            "selector": {"app": name},
            "ports": [
                {"name": "http", "port": 80, "targetPort": HTTP_PORT},
                {"name": "grpc", "port": GRPC_PORT, "targetPort": GRPC_PORT},
            ],
        },
    }


def shell_pod(name: str, script: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [container(name, ["sh", "-c", script])],
            "terminationGracePeriodSeconds": 1,
            **spec,
        },
    }


def create(api_client: k8s_client.ApiClient, manifest: dict[str, Any], namespace: str) -> None:
    """Creates a built-in object from its manifest, as `kubectl create -f` would."""
    utils.create_from_dict(api_client, manifest, namespace=namespace)  # type: ignore[no-untyped-call]


def wait_for(what: str, probe: Callable[[], _Value | None], timeout: float = 120.0) -> _Value:
    """Polls `probe` until it returns something other than None or False (then returns it);
    fails naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(_POLL_SECONDS)


def pod_phase(core: k8s_client.CoreV1Api, namespace: str, name: str) -> str:
    return str(core.read_namespaced_pod(name, namespace).status.phase)


def advertise_gpus(
    core: k8s_client.CoreV1Api, count: str | None, node: str = layout.CONTROL_PLANE.name
) -> None:
    """Advertises `count` GPUs in a node's status, as a device plugin would (None: none); on
    the control plane's node unless told otherwise, so backends land where the tests that stop
    that node's components expect them."""
    advertise(core, GPU, count, node)


def advertise(
    core: k8s_client.CoreV1Api,
    resource: str,
    count: str | None,
    node: str = layout.CONTROL_PLANE.name,
) -> None:
    """Advertises `count` of an extended resource in a node's status (None: none)."""
    core.patch_node_status(
        node, {"status": {"capacity": {resource: count}, "allocatable": {resource: count}}}
    )


@contextlib.contextmanager
def cordoned(core: k8s_client.CoreV1Api, node: str) -> Iterator[None]:
    """No new pod lands on `node` while the block runs, as `kubectl cordon` does."""
    core.patch_node(node, {"spec": {"unschedulable": True}})
    try:
        yield
    finally:
        core.patch_node(node, {"spec": {"unschedulable": None}})


def ready_replicas(apps: k8s_client.AppsV1Api, namespace: str, name: str) -> int:
    status = apps.read_namespaced_deployment(name, namespace).status
    return int(status.ready_replicas or 0) if status else 0


def node_back(core: k8s_client.CoreV1Api, name: str) -> bool:
    """Ready, and the node controller's taints of its absence taken away: they would keep the
    next tests' pods off it."""
    try:
        node = core.read_node(name)
    except k8s_client.ApiException as error:
        if error.status == 404:  # deleted, not registered again yet
            return False
        raise
    conditions = node.status.conditions or []
    taints = {taint.key for taint in node.spec.taints or []}
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    return ready and not taints & {"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"}
