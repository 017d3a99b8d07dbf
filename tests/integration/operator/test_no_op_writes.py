"""Reconciling an unchanged service sends no write at all, whatever the spec looks like; a
changed request is applied, including fields it no longer sets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.dynamic import DynamicClient
from noctaya.core.errors import NoctayaError
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import patch
from .failures import reconcile_failure

pytestmark = pytest.mark.integration

PROBE_WITH_ZEROS = {
    "httpGet": {"path": "/health", "port": "http", "httpHeaders": []},
    "initialDelaySeconds": 0,
    "timeoutSeconds": 0,
}
RUNTIME_AS_WRITTEN_BY_HAND = {
    "container": {
        "image": "vllm/vllm-openai:v0.10.0",
        "port": {},
        "env": [{"name": "EMPTY", "value": ""}, {"name": "MODEL", "value": "{{ .Model.Path }}"}],
    },
    "accelerator": {
        "resourceName": "nvidia.com/gpu",
        "tolerations": [{"key": "gpu", "operator": "Exists", "value": ""}],
    },
    "health": {"readiness": PROBE_WITH_ZEROS, "liveness": PROBE_WITH_ZEROS},
    "lifecycle": {"preStopDrain": True},
}
SPECS = {
    "defaults": {},
    "prewarm-shared": {"cache": {"strategy": "SharedPVC", "prewarm": True, "size": "1.5Gi"}},
    "oci-hostpath": {
        "model": {"source": {"uri": "oci://registry.example/models/q@sha256:" + "a" * 64}},
        "cache": {"strategy": "HostPath"},
    },
    "tls-auth-resources": {
        "scaling": {
            "externalScaler": {
                "tls": {"serverSecretName": "tls", "authenticationRef": {"name": "keda"}}
            }
        },
        "endpoint": {
            "authentication": {"secretRef": {"name": "keys", "key": "k"}},
            "resources": {"requests": {"cpu": "0.5", "memory": "1e9"}},
        },
        "resources": {"cpu": "1000m", "memory": "0.5Gi"},
    },
}


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every non-GET request the operator's DynamicClient sends, as `METHOD path`."""
    sent: list[str] = []
    request = DynamicClient.request

    def counting(self: DynamicClient, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        if method.lower() != "get":
            sent.append(f"{method.upper()} {path}")
        return request(self, method, path, *args, **kwargs)

    monkeypatch.setattr(DynamicClient, "request", counting)
    return sent


@pytest.mark.parametrize("changes", SPECS.values(), ids=SPECS.keys())
@pytest.mark.parametrize("gateways", [1, 2])
def test_second_reconcile_of_an_unchanged_service_sends_no_write(
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    make_reconciler: Callable[..., LLMServiceReconciler],
    writes: list[str],
    changes: Manifest,
    gateways: int,
) -> None:
    resources.create(inference_runtime(runtime_name, RUNTIME_AS_WRITTEN_BY_HAND))
    resources.create(
        llmservice("steady", {"runtime": {"name": runtime_name}, **changes}), namespace
    )
    reconciler = make_reconciler(gateway_replicas=gateways)
    reconciler.reconcile((namespace, "steady"))
    assert writes, "the first reconcile creates the stack"
    writes.clear()

    reconciler.reconcile((namespace, "steady"))

    assert writes == []


def test_dropping_authentication_removes_the_key_volume_from_the_gateway(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
) -> None:
    resources.create(inference_runtime(runtime_name))
    auth = {"authentication": {"secretRef": {"name": "keys", "key": "k"}}}
    resources.create(
        llmservice("keyed", {"runtime": {"name": runtime_name}, "endpoint": auth}), namespace
    )
    reconciler.reconcile((namespace, "keyed"))
    apps = k8s_client.AppsV1Api(api_client)
    pod = apps.read_namespaced_deployment("keyed-gateway", namespace).spec.template.spec
    assert [v.name for v in pod.volumes] == ["client-auth", "kubernetes-api"]

    patch(
        api_client,
        "serving.noctaya.io/v1alpha1",
        "LLMService",
        namespace,
        "keyed",
        {"spec": {"endpoint": {"authentication": None}}},
    )
    reconciler.reconcile((namespace, "keyed"))

    pod = apps.read_namespaced_deployment("keyed-gateway", namespace).spec.template.spec
    assert [v.name for v in pod.volumes] == ["kubernetes-api"]
    env = [e.name for e in pod.containers[0].env]
    assert "NOCTAYA_CLIENT_API_KEY_FILE" not in env


def test_services_whose_names_collide_do_not_take_each_others_objects(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    writes: list[str],
) -> None:
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("x", {"runtime": {"name": runtime_name}}), namespace)
    resources.create(llmservice("x-scaler", {"runtime": {"name": runtime_name}}), namespace)
    reconciler.reconcile((namespace, "x"))  # its scaler Service is named x-scaler

    error = reconcile_failure(reconciler, namespace, "x-scaler")  # its gateway Service too

    assert isinstance(error, NoctayaError)
    assert (error.reason, error.message) == (
        "ApplyGatewayService",
        f"resource {namespace}/x-scaler already exists and is not controlled by "
        "LLMService x-scaler",
    )
    writes.clear()
    reconciler.reconcile((namespace, "x"))
    assert writes == [], "the first owner keeps its Service untouched"
    owner = k8s_client.CoreV1Api(api_client).read_namespaced_service("x-scaler", namespace)
    assert owner.metadata.owner_references[0].name == "x"


def test_runtime_claiming_device_sharing_fails_as_not_implemented(
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
) -> None:
    sharing = {"accelerator": {"resourceName": "nvidia.com/gpu", "sharing": {"supported": True}}}
    resources.create(inference_runtime(runtime_name, sharing))
    resources.create(llmservice("shared", {"runtime": {"name": runtime_name}}), namespace)

    error = reconcile_failure(reconciler, namespace, "shared")

    assert error.reason == "Render"
    assert "accelerator.sharing.supported, which is not implemented" in error.message
