"""Hand edits of the fields Noctaya sets are reverted on the next reconcile (server-side apply
with forced ownership); the backend replica count belongs to the autoscaler and stays.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import patch, read

pytestmark = pytest.mark.integration


@pytest.fixture
def reconciled(
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    make_reconciler: Callable[..., LLMServiceReconciler],
) -> LLMServiceReconciler:
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("held", {"runtime": {"name": runtime_name}}), namespace)
    several = make_reconciler(gateway_replicas=2)
    several.reconcile((namespace, "held"))
    return several


def test_hand_edits_of_operator_fields_are_reverted(
    api_client: k8s_client.ApiClient,
    namespace: str,
    reconciled: LLMServiceReconciler,
) -> None:
    relabel = {"metadata": {"labels": {"app.kubernetes.io/name": "x"}}}
    hand_edits: list[tuple[str, str, str, Manifest]] = [
        ("policy/v1", "PodDisruptionBudget", "held-gateway", {"spec": {"minAvailable": 2}}),
        ("apps/v1", "Deployment", "held-gateway", {"spec": {"replicas": 7}}),
        (
            "apps/v1",
            "Deployment",
            "held-scaler",
            {"spec": {"template": {"spec": {"automountServiceAccountToken": True}}}},
        ),
        ("v1", "Service", "held-backend", relabel),
        (
            "keda.sh/v1alpha1",
            "ScaledObject",
            "held",
            {"spec": {"maxReplicaCount": 9, "cooldownPeriod": 1}},
        ),
    ]
    for api_version, kind, name, changes in hand_edits:
        patch(api_client, api_version, kind, namespace, name, changes, field_manager="kubectl-edit")

    reconciled.reconcile((namespace, "held"))

    def live(api_version: str, kind: str, name: str) -> Manifest:
        return dict(read(api_client, api_version, kind, namespace, name))

    assert live("policy/v1", "PodDisruptionBudget", "held-gateway")["spec"]["minAvailable"] == 1
    assert live("apps/v1", "Deployment", "held-gateway")["spec"]["replicas"] == 2
    aggregator = live("apps/v1", "Deployment", "held-scaler")["spec"]["template"]["spec"]
    assert aggregator["automountServiceAccountToken"] is False
    labels = live("v1", "Service", "held-backend")["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "held"
    scaled = live("keda.sh/v1alpha1", "ScaledObject", "held")["spec"]
    assert (scaled["maxReplicaCount"], scaled["cooldownPeriod"]) == (1, 300)


def test_backend_replicas_set_by_the_autoscaler_are_left_alone(
    api_client: k8s_client.ApiClient,
    namespace: str,
    reconciled: LLMServiceReconciler,
) -> None:
    apps = k8s_client.AppsV1Api(api_client)
    apps.patch_namespaced_deployment_scale(
        "held", namespace, {"spec": {"replicas": 3}}, field_manager="keda-operator"
    )

    reconciled.reconcile((namespace, "held"))

    assert read(api_client, "apps/v1", "Deployment", namespace, "held")["spec"]["replicas"] == 3
