"""Deleting an LLMService leaves no owned object once garbage collection runs (acceptance).

There is no garbage collector here (no controller-manager), so the scenario asserts what the
collector acts on: every object the operator wrote in the namespace carries a controller
owner reference to the service's uid with blockOwnerDeletion, and the service itself has no
finalizer that could keep it (and so its objects) alive.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources
from support.manifests import inference_runtime, llmservice

from .cluster import ENDPOINT_READER_KINDS, WRITTEN_KINDS, controller_reference, everything_in

pytestmark = pytest.mark.integration


def test_every_object_written_for_a_service_is_collectable_with_it(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    make_reconciler: Callable[..., LLMServiceReconciler],
) -> None:
    resources.create(inference_runtime(runtime_name))
    service = resources.create(
        llmservice("collected", {"runtime": {"name": runtime_name}, "cache": {"prewarm": True}}),
        namespace,
    )

    make_reconciler(gateway_replicas=2).reconcile((namespace, "collected"))

    written = everything_in(api_client, namespace, WRITTEN_KINDS + ENDPOINT_READER_KINDS)
    names = sorted(f"{obj['kind']}/{obj['metadata']['name']}" for obj in written)
    assert names == [
        "Deployment/collected",
        "Deployment/collected-gateway",
        "Deployment/collected-scaler",
        "Job/collected-prewarm",
        "PersistentVolumeClaim/collected-cache",
        "PodDisruptionBudget/collected-gateway",
        "Role/collected-endpoint-reader",
        "RoleBinding/collected-endpoint-reader",
        "ScaledObject/collected",
        "Secret/collected-demand-auth",
        "Service/collected",
        "Service/collected-backend",
        "Service/collected-scaler",
        "ServiceAccount/collected-endpoint-reader",
    ]
    orphans = [
        f"{obj['kind']}/{obj['metadata']['name']}"
        for obj in written
        if not controller_reference(obj, service) or len(obj["metadata"]["ownerReferences"]) != 1
    ]
    assert orphans == []
    live = resources.get("LLMService", "collected", namespace)
    assert not live["metadata"].get("finalizers")
