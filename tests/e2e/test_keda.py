"""KEDA in the box scales a Deployment 0 → 1 → N → 0 from an external-push scaler served by a
pod: activation from the scaler's stream, N through the HPA and KEDA's metrics API server,
and back to zero after the cooldown."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s_client
from support.cluster import layout
from support.custom_resources import CustomResources

from .pods import routed
from .workloads import GRPC_PORT, agent_deployment, agent_service, create, ready_replicas, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_external_push_scales_zero_to_one_to_n_to_zero(
    api_client: k8s_client.ApiClient, namespace: str
) -> None:
    apps = k8s_client.AppsV1Api(api_client)
    create(api_client, agent_deployment("scaler"), namespace)
    create(api_client, agent_service("scaler"), namespace)
    create(api_client, agent_deployment("worker", replicas=0), namespace)
    wait_for("the scaler pod Ready", lambda: ready_replicas(apps, namespace, "scaler") == 1)
    # KEDA dials the Service, and `_set_metric` goes through the API server's proxy of it,
    # which answers 503 until the EndpointSlice controller lists the Ready pod.
    wait_for(
        "the scaler Service routing to its pod",
        lambda: routed(api_client, namespace, "scaler") or None,
    )
    address = f"scaler.{namespace}.svc.{layout.CLUSTER_DOMAIN}:{GRPC_PORT}"
    CustomResources(api_client).create(_scaled_object("worker", address), namespace)
    wait_for("the ScaledObject Ready", lambda: _scaled_object_ready(api_client, namespace))

    def replicas() -> int:
        return int(apps.read_namespaced_deployment("worker", namespace).spec.replicas or 0)

    assert replicas() == 0
    _set_metric(api_client, namespace, 1)
    wait_for("0 → 1 on activation", lambda: ready_replicas(apps, namespace, "worker") == 1)
    _set_metric(api_client, namespace, 3)
    wait_for("1 → 3 through the HPA", lambda: ready_replicas(apps, namespace, "worker") == 3)
    _set_metric(api_client, namespace, 0)
    wait_for("3 → 0 after the cooldown", lambda: replicas() == 0)


def _scaled_object(target: str, address: str) -> dict[str, object]:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": target},
        "spec": {
            "scaleTargetRef": {"name": target},
            "minReplicaCount": 0,
            "maxReplicaCount": 4,
            "pollingInterval": 1,
            "cooldownPeriod": 5,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleUp": {"stabilizationWindowSeconds": 0},
                        "scaleDown": {"stabilizationWindowSeconds": 0},
                    }
                }
            },
            "triggers": [{"type": "external-push", "metadata": {"scalerAddress": address}}],
        },
    }


def _scaled_object_ready(api_client: k8s_client.ApiClient, namespace: str) -> bool:
    scaled = CustomResources(api_client).get("ScaledObject", "worker", namespace)
    conditions = scaled.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _set_metric(api_client: k8s_client.ApiClient, namespace: str, value: int) -> None:
    """PUT /metric on the scaler pod, through the API server's Service proxy."""
    request = api_client.param_serialize(
        "PUT",
        "/api/v1/namespaces/{namespace}/services/{name}/proxy/metric",
        path_params={"namespace": namespace, "name": "scaler:http"},
        query_params=[("value", str(value))],
        auth_settings=["BearerToken"],
    )
    response = api_client.call_api(*request)
    response.read()
    assert response.status == 200, response.data
