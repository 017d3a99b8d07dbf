"""The real KEDA ScaledObject schema accepts the object the controller renders."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from support.custom_resources import CustomResources, Manifest
from support.envtest.api_errors import api_status

pytestmark = [pytest.mark.integration, pytest.mark.kubernetes_matrix]


def _scaled_object(
    service: str, namespace: str, *, minimum: int = 0, maximum: int = 3, tls: bool = False
) -> Manifest:
    trigger: dict[str, Any] = {
        "type": "external-push",
        "metadata": {
            "scalerAddress": f"{service}-scaler.{namespace}.svc:9090",
            "metricName": "pending",
            "targetValue": "10",
        },
    }
    if tls:
        trigger["authenticationRef"] = {
            "name": "scaler-client-tls",
            "kind": "ClusterTriggerAuthentication",
        }
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {
            "name": service,
            "labels": {
                "app.kubernetes.io/name": service,
                "app.kubernetes.io/managed-by": "noctaya",
                "serving.noctaya.io/llmservice": service,
            },
        },
        "spec": {
            "scaleTargetRef": {"name": service},
            "minReplicaCount": minimum,
            "maxReplicaCount": maximum,
            "pollingInterval": 5,
            "cooldownPeriod": 300,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}}
                }
            },
            "triggers": [trigger],
        },
    }


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "mtls-authenticationRef"])
def test_rendered_scaled_object_is_accepted_and_stored_unchanged(
    resources: CustomResources, namespace: str, tls: bool
) -> None:
    manifest = _scaled_object("qwen3-8b", namespace, tls=tls)
    resources.create(manifest, namespace)
    stored = resources.get("ScaledObject", "qwen3-8b", namespace)
    assert stored["spec"] == manifest["spec"]
    assert stored["metadata"]["labels"] == manifest["metadata"]["labels"]


def test_keda_schema_is_live_and_rejects_min_above_max(
    resources: CustomResources, namespace: str
) -> None:
    with pytest.raises(ApiException) as rejected:
        resources.create(
            _scaled_object("qwen3-8b", namespace, minimum=3, maximum=2), namespace, dry_run=True
        )
    assert rejected.value.status == 422
    assert (
        "minReplicaCount must be less than or equal to maxReplicaCount"
        in (api_status(rejected.value)["message"])
    )
