"""A service becomes its whole serving stack, every object owned by it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

pytestmark = pytest.mark.integration


def _owned_by(obj: object, uid: str) -> bool:
    refs = obj.metadata.owner_references or []  # type: ignore[attr-defined]
    return any(ref.uid == uid and ref.controller and ref.block_owner_deletion for ref in refs)


def test_single_gateway_service_renders_every_object_owned_by_the_service(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    resources.create(inference_runtime(runtime_name))
    created = resources.create(
        llmservice("qwen", {"runtime": {"name": runtime_name}, "cache": {"prewarm": True}}),
        namespace,
    )
    uid = created["metadata"]["uid"]

    reconciler.reconcile((namespace, "qwen"))

    apps = k8s_client.AppsV1Api(api_client)
    core = k8s_client.CoreV1Api(api_client)
    batch = k8s_client.BatchV1Api(api_client)
    backend = apps.read_namespaced_deployment("qwen", namespace)
    gateway = apps.read_namespaced_deployment("qwen-gateway", namespace)
    owned = [
        backend,
        gateway,
        core.read_namespaced_service("qwen", namespace),
        core.read_namespaced_service("qwen-backend", namespace),
        core.read_namespaced_service("qwen-scaler", namespace),
        core.read_namespaced_persistent_volume_claim("qwen-cache", namespace),
        batch.read_namespaced_job("qwen-prewarm", namespace),
    ]
    assert all(_owned_by(obj, uid) for obj in owned)
    scaled = resources.get("ScaledObject", "qwen", namespace)
    assert scaled["metadata"]["ownerReferences"][0]["uid"] == uid
    assert scaled["spec"]["triggers"][0]["metadata"] == {
        "scalerAddress": f"qwen-scaler.{namespace}.svc:9090",
        "metricName": "pending",
        "targetValue": "10",
    }
    assert backend.spec.template.spec.containers[0].name == "serving"
    assert gateway.spec.replicas == 1
    assert [p.name for p in gateway.spec.template.spec.containers[0].ports] == ["http", "grpc"]
    with pytest.raises(k8s_client.ApiException) as missing:
        apps.read_namespaced_deployment("qwen-scaler", namespace)
    assert missing.value.status == 404

    status = status_of("qwen", namespace)
    assert status["phase"] == "ScaledToZero"
    assert status["resolvedRuntime"] == runtime_name
    assert status["endpointURL"] == f"http://qwen.{namespace}.svc/v1"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["AutoscalingReady"]["reason"] == "ScaledObjectApplied"
    assert conditions["Ready"]["reason"] == "ScaledToZero"
    assert conditions["Degraded"]["reason"] == "Inactive"
    generation = resources.get("LLMService", "qwen", namespace)["metadata"]["generation"]
    assert all(c["observedGeneration"] == generation for c in conditions.values())


def test_unchanged_service_reconciles_without_writing(
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
) -> None:
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("idle", {"runtime": {"name": runtime_name}}), namespace)
    reconciler.reconcile((namespace, "idle"))
    before = resources.get("LLMService", "idle", namespace)["metadata"]["resourceVersion"]
    scaled_before = resources.get("ScaledObject", "idle", namespace)["metadata"]["resourceVersion"]

    reconciler.reconcile((namespace, "idle"))

    assert resources.get("LLMService", "idle", namespace)["metadata"]["resourceVersion"] == before
    scaled_after = resources.get("ScaledObject", "idle", namespace)["metadata"]["resourceVersion"]
    assert scaled_after == scaled_before
