"""Objects are applied in a fixed order (ScaledObject, demand Secret, cache PVC, prewarm Job,
backend, gateway, scaler); the API server's rejection of one stops the rest, is reported with
that step's reason and the server's own words, and keeps AutoscalingReady True because the
ScaledObject is already in place.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import condition_values, read
from .failures import reconcile_failure

pytestmark = pytest.mark.integration


def test_backend_deployment_rejected_by_the_api_server_stops_the_apply_at_that_step(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    token = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "no spaces"}}}
    resources.create(inference_runtime(runtime_name, {"container": {"env": [token]}}))
    resources.create(llmservice("rejected", {"runtime": {"name": runtime_name}}), namespace)

    error = reconcile_failure(reconciler, namespace, "rejected")

    assert error.reason == "ApplyDeployment"
    assert error.message.startswith(
        'Deployment.apps "rejected" is invalid: '
        "spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.key: "
        'Invalid value: "no spaces"'
    )
    conditions = condition_values(status_of("rejected", namespace))
    assert conditions["AutoscalingReady"][:2] == ("True", "ScaledObjectApplied")
    assert conditions["Degraded"] == ("True", "ApplyDeployment", error.message)

    def exists(api_version: str, kind: str, name: str) -> bool:
        return read(api_client, api_version, kind, namespace, name) is not None

    applied_before = [
        exists("keda.sh/v1alpha1", "ScaledObject", "rejected"),
        exists("v1", "PersistentVolumeClaim", "rejected-cache"),
    ]
    never_reached = [
        exists("apps/v1", "Deployment", "rejected"),
        exists("v1", "Service", "rejected-backend"),
        exists("apps/v1", "Deployment", "rejected-gateway"),
        exists("v1", "Service", "rejected"),
        exists("v1", "Service", "rejected-scaler"),
    ]
    assert applied_before == [True, True]
    assert never_reached == [False] * 5
