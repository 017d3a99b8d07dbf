"""Create-once objects (§1.7): a changed cache request or a stranger's object fails loudly, and a
failed prewarm Job stops the service (§1.3 step 7).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import condition_values, create, events, patch, read, replace_status
from .failures import after_autoscaling, reconcile_failure

pytestmark = pytest.mark.integration

LLMSERVICES = "serving.noctaya.io/v1alpha1"


def edit_spec(api_client: k8s_client.ApiClient, namespace: str, name: str, spec: Manifest) -> int:
    """Merge-patch the service's spec as a user would; returns the new generation."""
    patched = patch(api_client, LLMSERVICES, "LLMService", namespace, name, {"spec": spec})
    return int(patched["metadata"]["generation"])


def test_changed_cache_size_fails_on_the_immutable_pvc_until_it_is_deleted(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"size": "20Gi"}}
    resources.create(llmservice("cached", changes), namespace)
    reconciler.reconcile((namespace, "cached"))
    generation = edit_spec(api_client, namespace, "cached", {"cache": {"size": "30Gi"}})

    error = reconcile_failure(reconciler, namespace, "cached")

    message = (
        f"immutable resource {namespace}/cached-cache differs from the requested cache "
        "configuration; delete it explicitly before reconciling the change"
    )
    assert (error.reason, error.message) == ("ApplyCachePVC", message)
    status = status_of("cached", namespace)
    assert status["phase"] == "Degraded"
    assert condition_values(status) == after_autoscaling("ApplyCachePVC", message)
    assert all(c["observedGeneration"] == generation for c in status["conditions"])
    pvc = read(api_client, "v1", "PersistentVolumeClaim", namespace, "cached-cache")
    assert pvc["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert events(api_client, namespace) == [], "the failure path records no events"

    core = k8s_client.CoreV1Api(api_client)
    core.delete_namespaced_persistent_volume_claim("cached-cache", namespace)
    # No controller-manager: play the pvc-protection controller that lets the claim go.
    core.patch_namespaced_persistent_volume_claim(
        "cached-cache", namespace, {"metadata": {"finalizers": None}}
    )
    reconciler.reconcile((namespace, "cached"))

    pvc = read(api_client, "v1", "PersistentVolumeClaim", namespace, "cached-cache")
    assert pvc["spec"]["resources"]["requests"]["storage"] == "30Gi"
    assert condition_values(status_of("cached", namespace))["Degraded"][:2] == ("False", "Inactive")


def test_changed_model_fails_on_the_immutable_prewarm_job(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"prewarm": True}}
    resources.create(llmservice("warm", changes), namespace)
    reconciler.reconcile((namespace, "warm"))
    edit_spec(api_client, namespace, "warm", {"model": {"source": {"uri": "hf://Qwen/Qwen3-4B"}}})

    error = reconcile_failure(reconciler, namespace, "warm")

    message = (
        f"immutable resource {namespace}/warm-prewarm differs from the requested cache "
        "configuration; delete it explicitly before reconciling the change"
    )
    assert (error.reason, error.message) == ("ApplyPrewarmJob", message)
    assert condition_values(status_of("warm", namespace)) == after_autoscaling(
        "ApplyPrewarmJob", message
    )


def test_cache_pvc_of_the_same_name_not_controlled_by_the_service_is_never_adopted(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    create(
        api_client,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "taken-cache"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("taken", {"runtime": {"name": runtime_name}}), namespace)

    error = reconcile_failure(reconciler, namespace, "taken")

    message = (
        f"resource {namespace}/taken-cache already exists and is not controlled by LLMService taken"
    )
    assert (error.reason, error.message) == ("ApplyCachePVC", message)
    assert condition_values(status_of("taken", namespace)) == after_autoscaling(
        "ApplyCachePVC", message
    )
    pvc = read(api_client, "v1", "PersistentVolumeClaim", namespace, "taken-cache")
    assert "ownerReferences" not in pvc["metadata"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert read(api_client, "apps/v1", "Deployment", namespace, "taken") is None


def test_failed_prewarm_job_stops_the_service_with_prewarm_failed(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"prewarm": True}}
    resources.create(llmservice("doomed", changes), namespace)
    reconciler.reconcile((namespace, "doomed"))
    now = "2025-01-01T00:00:00Z"
    reason = {"reason": "BackoffLimitExceeded", "lastProbeTime": now, "lastTransitionTime": now}
    message = "Job has reached the specified backoff limit"
    failed = {
        "startTime": now,
        "failed": 5,
        "conditions": [
            {"type": "FailureTarget", "status": "True", "message": message, **reason},
            {"type": "Failed", "status": "True", "message": message, **reason},
        ],
    }
    replace_status(api_client, "batch/v1", "Job", namespace, "doomed-prewarm", failed)

    error = reconcile_failure(reconciler, namespace, "doomed")

    message = "prewarm Job doomed-prewarm failed: Job has reached the specified backoff limit"
    assert (error.reason, error.message) == ("PrewarmFailed", message)
    status = status_of("doomed", namespace)
    assert status["phase"] == "Degraded"
    assert condition_values(status) == after_autoscaling("PrewarmFailed", message)
