"""The generated CRDs on the real API server: installed, defaulting, and reserved fields kept."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s_client
from support.custom_resources import CustomResources
from support.envtest.crds import established
from support.manifests import inference_runtime, llmservice

pytestmark = [pytest.mark.integration, pytest.mark.kubernetes_matrix]


@pytest.mark.parametrize(
    ("crd", "scope"),
    [
        ("llmservices.serving.noctaya.io", "Namespaced"),
        ("inferenceruntimes.serving.noctaya.io", "Cluster"),
    ],
)
def test_generated_crd_is_established_with_its_scope_and_status_subresource(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    crd: str,
    scope: str,
) -> None:
    assert established(api_client, crd), f"{crd} is not Established (see config/crd/bases)"
    definition = resources.get("CustomResourceDefinition", crd)
    assert definition["spec"]["scope"] == scope
    (served,) = definition["spec"]["versions"]
    assert served["name"] == "v1alpha1"
    assert served["subresources"] == {"status": {}}


def test_minimal_llmservice_reads_back_with_every_contract_default(
    resources: CustomResources, namespace: str
) -> None:
    resources.create(llmservice("qwen3-8b"), namespace)
    stored = resources.get("LLMService", "qwen3-8b", namespace)
    assert stored["spec"] == {
        "model": {"source": {"uri": "hf://Qwen/Qwen3-8B"}},
        "runtime": {"name": "vllm-nvidia"},
        "resources": {"accelerators": 1},
        "scaling": {
            "min": 0,
            "max": 1,
            "metric": "queueDepth",
            "target": 10,
            "activationTimeout": "5m",
            "scaleDownStabilization": "5m",
            "drainTimeout": "2m",
        },
        "cache": {"strategy": "NodeLocalPVC", "prewarm": False},
        "endpoint": {
            "openAICompatible": True,
            "maxQueue": 100,
            "coldStart": {"mode": "keepalive", "heartbeatInterval": "10s"},
        },
    }


def test_minimal_inference_runtime_reads_back_with_its_defaults(
    resources: CustomResources, runtime_name: str
) -> None:
    resources.create(inference_runtime(runtime_name))
    spec = resources.get("InferenceRuntime", runtime_name)["spec"]
    assert spec["family"] == "vllm"
    assert spec["priority"] == 0
    assert spec["container"]["port"] == {"name": "http", "containerPort": 8000}


def test_runtime_metrics_and_lifecycle_defaults_fill_in_when_set(
    resources: CustomResources, runtime_name: str
) -> None:
    resources.create(
        inference_runtime(
            runtime_name,
            {"metrics": {"queueDepth": "vllm:num_requests_waiting"}, "lifecycle": {}},
        ),
    )
    spec = resources.get("InferenceRuntime", runtime_name)["spec"]
    assert spec["metrics"] == {
        "path": "/metrics",
        "port": "http",
        "queueDepth": "vllm:num_requests_waiting",
    }
    assert spec["lifecycle"] == {"preStopDrain": False}


@pytest.mark.parametrize(
    ("changes", "path", "value"),
    [
        pytest.param(
            {"model": {"source": None, "catalogRef": "qwen3-8b"}},
            ["model", "catalogRef"],
            "qwen3-8b",
            id="model.catalogRef",
        ),
        pytest.param(
            {"resources": {"fraction": {"memory": "20Gi", "cores": "500m"}}},
            ["resources", "fraction"],
            {"memory": "20Gi", "cores": "500m"},
            id="resources.fraction",
        ),
        pytest.param(
            {"scaling": {"metric": "kvCacheUtil"}},
            ["scaling", "metric"],
            "kvCacheUtil",
            id="scaling.metric-kvCacheUtil",
        ),
        pytest.param(
            {"cache": {"strategy": "BakedImage"}},
            ["cache", "strategy"],
            "BakedImage",
            id="cache.strategy-BakedImage",
        ),
    ],
)
def test_reserved_llmservice_field_is_accepted_and_stored_for_the_controller_to_report(
    resources: CustomResources,
    namespace: str,
    changes: dict[str, Any],
    path: list[str],
    value: Any,
) -> None:
    resources.create(llmservice("reserved", changes), namespace)
    stored: Any = resources.get("LLMService", "reserved", namespace)["spec"]
    for key in path:
        stored = stored[key]
    assert stored == value


def test_reserved_accelerator_sharing_is_accepted_and_stored(
    resources: CustomResources, runtime_name: str
) -> None:
    resources.create(
        inference_runtime(runtime_name, {"accelerator": {"sharing": {"supported": True}}}),
    )
    spec = resources.get("InferenceRuntime", runtime_name)["spec"]
    assert spec["accelerator"]["sharing"] == {"supported": True}
