"""Reserved and unsupported fields fail with a condition naming the field, before anything is
written (the whole stack is rendered before anything is applied); the operator never crashes
on them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice, merged

from .cluster import condition_values, read
from .failures import before_autoscaling, reconcile_failure

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("changes", "reason", "message"),
    [
        pytest.param(
            {"model": {"source": None, "catalogRef": "qwen3-8b"}},
            "ModelResolution",
            "model.catalogRef resolution is not implemented yet; set model.source.uri",
            id="catalogRef",
        ),
        pytest.param(
            {"resources": {"fraction": {"memory": "10Gi"}}},
            "Render",
            'resources.fraction is not supported in v0; runtime "{runtime}" serves whole '
            "devices, set resources.accelerators instead",
            id="resources.fraction",
        ),
        pytest.param(
            {"scaling": {"metric": "kvCacheUtil"}},
            "ScaledObject",
            "scaling.metric kvCacheUtil needs the runtime's spec.metrics.kvCacheUtil; "
            'InferenceRuntime "{runtime}" names no KV-cache gauge',
            id="kvCacheUtil-without-gauge",
        ),
        pytest.param(
            {"cache": {"strategy": "BakedImage"}},
            "Render",
            'cache strategy "BakedImage" is not supported yet',
            id="BakedImage",
        ),
        pytest.param(
            {"model": {"source": {"uri": "s3://bucket/qwen"}}},
            "ModelResolution",
            'model uri scheme "s3" is not supported yet '
            "(use hf://, modelscope://, oci://, or pvc://)",
            id="s3-scheme",
        ),
        pytest.param(
            {"runtime": {"argsOverride": ["--x={{ .Nope }}"]}},
            "Render",
            'template: {arg}:1:7: executing "{arg}" at <.Nope>: map has no entry for key "Nope"',
            id="template-error",
        ),
    ],
)
def test_unsupported_field_fails_with_a_condition_naming_it_and_writes_nothing(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
    changes: Manifest,
    reason: str,
    message: str,
) -> None:
    resources.create(inference_runtime(runtime_name))
    spec = merged({"runtime": {"name": runtime_name}}, changes)
    resources.create(llmservice("reserved", spec), namespace)

    error = reconcile_failure(reconciler, namespace, "reserved")

    assert error.reason == reason
    arg = "LLMService spec.runtime.argsOverride[0]"
    assert error.message == message.format(runtime=runtime_name, arg=arg)
    status = status_of("reserved", namespace)
    assert status["phase"] == "Degraded"
    assert condition_values(status) == before_autoscaling(reason, error.message)
    assert read(api_client, "keda.sh/v1alpha1", "ScaledObject", namespace, "reserved") is None
    assert read(api_client, "apps/v1", "Deployment", namespace, "reserved") is None
