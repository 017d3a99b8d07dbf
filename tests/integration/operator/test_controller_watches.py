"""A running operator: what it watches wakes the right services, and a broken service
never holds up the healthy ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s_client
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import (
    backend_pod,
    condition_values,
    eventually,
    gateway_pod,
    kubelet_event,
    patch,
    read,
    reconciled,
    replace_status,
    runtimes,
    serving_status,
    set_pod_status,
)
from .conftest import RunningController

pytestmark = pytest.mark.integration

StartController = Callable[..., RunningController]


def serving_one_service(
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: StartController,
    name: str,
) -> None:
    """A runtime, one service pinned to it, and a running operator that has reconciled it."""
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice(name, {"runtime": {"name": runtime_name}}), namespace)
    start_controller().wait_reconciling()
    eventually(lambda: reconciled(resources, namespace, name), "a first status")


def serving_image(api_client: k8s_client.ApiClient, namespace: str, name: str) -> str | None:
    deployment = read(api_client, "apps/v1", "Deployment", namespace, name)
    if deployment is None:
        return None
    return str(deployment["spec"]["template"]["spec"]["containers"][0]["image"])


def test_runtime_edit_re_renders_every_service_that_pins_it_or_selects_its_vendor(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: StartController,
) -> None:
    assert runtimes(api_client) == [], "vendor selection needs a cluster without other runtimes"
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("pinned", {"runtime": {"name": runtime_name}}), namespace)
    by_vendor = {"name": None, "selector": {"vendor": ["nvidia"]}}
    resources.create(llmservice("selected", {"runtime": by_vendor}), namespace)
    start_controller().wait_reconciling()

    def images() -> list[str | None]:
        return [serving_image(api_client, namespace, name) for name in ("pinned", "selected")]

    eventually(lambda: images() == ["vllm/vllm-openai:v0.10.0"] * 2, "both to be rendered")

    edit = {"spec": {"container": {"image": "vllm/vllm-openai:v0.11.0"}}}
    patch(api_client, "serving.noctaya.io/v1alpha1", "InferenceRuntime", None, runtime_name, edit)

    eventually(lambda: images() == ["vllm/vllm-openai:v0.11.0"] * 2, "both to be re-rendered")


def degraded_by(resources: CustomResources, namespace: str, name: str) -> str | None:
    status = reconciled(resources, namespace, name) or {}
    degraded = condition_values(status).get("Degraded")
    return degraded[1] if degraded and degraded[0] == "True" else None


def test_runtime_created_after_its_service_brings_the_service_up(
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: StartController,
) -> None:
    resources.create(llmservice("early", {"runtime": {"name": runtime_name}}), namespace)
    start_controller(retry_delay=300.0).wait_reconciling()  # no retry can explain recovery
    eventually(
        lambda: degraded_by(resources, namespace, "early") == "RuntimeResolution",
        "the service to report its missing runtime",
    )

    resources.create(inference_runtime(runtime_name))

    status = eventually(
        lambda: (
            degraded_by(resources, namespace, "early") is None
            and reconciled(resources, namespace, "early")
        ),
        "the runtime's creation to reconcile the service",
    )
    assert status["resolvedRuntime"] == runtime_name
    assert status["phase"] == "ScaledToZero"


def test_deleted_runtime_degrades_the_services_that_pin_it(
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: StartController,
) -> None:
    serving_one_service(resources, namespace, runtime_name, start_controller, "bereft")

    resources.delete("InferenceRuntime", runtime_name)

    eventually(
        lambda: degraded_by(resources, namespace, "bereft") == "RuntimeResolution",
        "the runtime's deletion to degrade the service",
    )
    message = condition_values(reconciled(resources, namespace, "bereft"))["Degraded"][2]
    assert message == (
        f'get InferenceRuntime "{runtime_name}": '
        f'inferenceruntimes.serving.noctaya.io "{runtime_name}" not found'
    )


def test_backend_pod_change_wakes_its_service(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: StartController,
) -> None:
    serving_one_service(resources, namespace, runtime_name, start_controller, "watched")

    pod = backend_pod(api_client, namespace, "watched", runtime_name, "watched-abc")
    set_pod_status(api_client, namespace, pod, serving_status(waiting="ErrImagePull"))

    eventually(
        lambda: degraded_by(resources, namespace, "watched") == "ImagePullFailed",
        "the pod's image pull failure to reach the service status",
    )


def test_gateway_pod_change_and_the_kubelets_mount_failure_wake_its_service(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: StartController,
) -> None:
    serving_one_service(resources, namespace, runtime_name, start_controller, "fronted")

    pod = gateway_pod(api_client, namespace, "fronted", "fronted-gateway-abc")
    pulling = serving_status(container_name="gateway", phase="Pending", waiting="ErrImagePull")
    set_pod_status(api_client, namespace, pod["metadata"]["name"], pulling)
    eventually(
        lambda: degraded_by(resources, namespace, "fronted") == "ImagePullFailed",
        "the gateway pod's image pull failure to reach the service status",
    )

    creating = serving_status(
        container_name="gateway", phase="Pending", waiting="ContainerCreating"
    )
    set_pod_status(api_client, namespace, pod["metadata"]["name"], creating)
    eventually(
        lambda: degraded_by(resources, namespace, "fronted") is None,
        "the image pulled, the gateway pod starting",
    )
    note = 'MountVolume.SetUp failed for volume "client-auth" : secret "k" not found'
    kubelet_event(api_client, namespace, pod, "FailedMount", note)
    eventually(
        lambda: degraded_by(resources, namespace, "fronted") == "ContainerConfigError",
        "the kubelet's FailedMount event to reach the service status",
    )


def test_kedas_readiness_verdict_wakes_its_service(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: StartController,
) -> None:
    serving_one_service(resources, namespace, runtime_name, start_controller, "scaled")

    def autoscaling() -> tuple[str, str, str]:
        status = reconciled(resources, namespace, "scaled") or {}
        return condition_values(status)["AutoscalingReady"]

    ready = {"type": "Ready", "status": "False", "reason": "ScaledObjectCheckFailed"}
    status = {"conditions": [{**ready, "message": "no triggers"}]}
    replace_status(api_client, "keda.sh/v1alpha1", "ScaledObject", namespace, "scaled", status)
    eventually(
        lambda: autoscaling()[:2] == ("False", "ScaledObjectNotReady"),
        "KEDA's verdict to reach AutoscalingReady",
    )


def test_deleted_owned_object_is_restored(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: StartController,
) -> None:
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("restored", {"runtime": {"name": runtime_name}}), namespace)
    start_controller().wait_reconciling()
    first = eventually(
        lambda: read(api_client, "v1", "Service", namespace, "restored-backend"),
        "the backend Service",
    )

    k8s_client.CoreV1Api(api_client).delete_namespaced_service("restored-backend", namespace)

    def recreated() -> Any:
        again = read(api_client, "v1", "Service", namespace, "restored-backend")
        return again and again["metadata"]["uid"] != first["metadata"]["uid"]

    eventually(recreated, "the deleted backend Service to be applied again")


def test_hand_edit_of_the_scaled_object_spec_is_reverted_by_the_running_operator(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: StartController,
) -> None:
    serving_one_service(resources, namespace, runtime_name, start_controller, "steady")

    edit = {"spec": {"maxReplicaCount": 9}}
    edited = patch(api_client, "keda.sh/v1alpha1", "ScaledObject", namespace, "steady", edit)

    def reverted() -> bool:
        live = resources.get("ScaledObject", "steady", namespace)
        newer = int(live["metadata"]["generation"]) > int(edited["metadata"]["generation"])
        return newer and live["spec"]["maxReplicaCount"] == 1

    eventually(reverted, "the ScaledObject spec edit to be reverted")


def test_one_broken_service_among_ten_healthy_ones_leaves_the_ten_reconciled(
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: StartController,
) -> None:
    resources.create(inference_runtime(runtime_name))
    broken = {"runtime": {"name": runtime_name}, "model": {"source": None, "catalogRef": "x"}}
    resources.create(llmservice("broken", broken), namespace)
    healthy = [f"healthy-{n}" for n in range(10)]
    for name in healthy:
        changes = {"runtime": {"name": runtime_name}, "cache": {"strategy": "None"}}
        resources.create(llmservice(name, changes), namespace)
    controller = start_controller()
    controller.wait_reconciling()

    def all_ready_able() -> list[Manifest] | None:
        statuses = [reconciled(resources, namespace, name) or {} for name in healthy]
        return statuses if all(s.get("phase") == "ScaledToZero" for s in statuses) else None

    statuses = eventually(all_ready_able, "ten healthy services to be reconciled", timeout=60)
    assert all(condition_values(s)["Degraded"][:2] == ("False", "Inactive") for s in statuses)
    broken_status = eventually(
        lambda: reconciled(resources, namespace, "broken"), "the broken service's status"
    )
    assert condition_values(broken_status)["Degraded"] == (
        "True",
        "ModelResolution",
        "model.catalogRef resolution is not implemented yet; set model.source.uri",
    )
    assert controller.thread.is_alive()
    assert controller.failures == []
