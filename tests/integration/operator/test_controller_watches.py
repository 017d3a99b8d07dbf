"""A running operator (§1.10): what it watches wakes the right services, and a broken service
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
    read,
    serving_status,
    set_pod_status,
)
from .conftest import RunningController

pytestmark = pytest.mark.integration

StartController = Callable[..., RunningController]


def reconciled(resources: CustomResources, namespace: str, name: str) -> Any:
    """The service's status once the operator wrote one, else None."""
    return resources.get("LLMService", name, namespace).get("status") or None


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
    others = k8s_client.CustomObjectsApi(api_client).list_cluster_custom_object(
        "serving.noctaya.io", "v1alpha1", "inferenceruntimes"
    )["items"]
    assert others == [], "vendor selection needs a cluster without other runtimes"
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("pinned", {"runtime": {"name": runtime_name}}), namespace)
    by_vendor = {"name": None, "selector": {"vendor": ["nvidia"]}}
    resources.create(llmservice("selected", {"runtime": by_vendor}), namespace)
    start_controller().wait_reconciling()
    for name in ("pinned", "selected"):
        eventually(
            lambda name=name: (
                serving_image(api_client, namespace, name) == "vllm/vllm-openai:v0.10.0"
            ),
            f"{name} to be rendered with the first image",
        )

    k8s_client.CustomObjectsApi(api_client).patch_cluster_custom_object(
        "serving.noctaya.io",
        "v1alpha1",
        "inferenceruntimes",
        runtime_name,
        {"spec": {"container": {"image": "vllm/vllm-openai:v0.11.0"}}},
    )

    for name in ("pinned", "selected"):
        eventually(
            lambda name=name: (
                serving_image(api_client, namespace, name) == "vllm/vllm-openai:v0.11.0"
            ),
            f"{name} to be re-rendered with the edited image",
        )


def test_backend_pod_change_wakes_its_service(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: StartController,
) -> None:
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("watched", {"runtime": {"name": runtime_name}}), namespace)
    start_controller().wait_reconciling()
    eventually(lambda: reconciled(resources, namespace, "watched"), "a first status")

    pod = backend_pod(api_client, namespace, "watched", runtime_name, "watched-abc")
    set_pod_status(api_client, namespace, pod, serving_status(waiting="ErrImagePull"))

    def degraded() -> Any:
        status = reconciled(resources, namespace, "watched") or {}
        return condition_values(status).get("Degraded", (None, None))[1] == "ImagePullFailed"

    eventually(degraded, "the pod's image pull failure to reach the service status")


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
