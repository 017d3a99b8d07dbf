"""How the operator's own configuration shows up on services: a vendor plugin that is not
installed, and gateway settings it cannot render.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client
from noctaya.core.errors import NoctayaError
from noctaya.core.plugins import VendorRegistry
from noctaya.k8s.controller import cluster_reconciler
from noctaya.k8s.reader import ApiReader
from noctaya.k8s.reconciler import LLMServiceReconciler, OperatorSettings
from noctaya.k8s.runtime.resources import ResourceResolver
from noctaya.vendor_nvidia import NvidiaAdapter
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import condition_values, read
from .conftest import GATEWAY_IMAGE
from .failures import before_autoscaling, reconcile_failure

pytestmark = pytest.mark.integration


def reconciler_with(
    api_client: k8s_client.ApiClient, vendors: VendorRegistry, settings: OperatorSettings
) -> LLMServiceReconciler:
    resolver = ResourceResolver(api_client)
    return cluster_reconciler(resolver, ApiReader(resolver), vendors, settings)


def fails_before_any_write(
    api_client: k8s_client.ApiClient,
    reconciler: LLMServiceReconciler,
    namespace: str,
    status_of: Callable[[str, str], Manifest],
) -> NoctayaError:
    error = reconcile_failure(reconciler, namespace, "svc")
    assert condition_values(status_of("svc", namespace)) == before_autoscaling(
        error.reason, error.message
    )
    assert read(api_client, "keda.sh/v1alpha1", "ScaledObject", namespace, "svc") is None
    return error


def test_runtime_of_a_vendor_without_an_installed_adapter_is_unsupported(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    status_of: Callable[[str, str], Manifest],
) -> None:
    ascend = {"vendor": "ascend", "accelerator": {"resourceName": "huawei.com/Ascend910"}}
    resources.create(inference_runtime(runtime_name, ascend))
    resources.create(llmservice("svc", {"runtime": {"name": runtime_name}}), namespace)
    nvidia_only = reconciler_with(
        api_client, VendorRegistry([NvidiaAdapter()]), OperatorSettings(gateway_image=GATEWAY_IMAGE)
    )

    error = fails_before_any_write(api_client, nvidia_only, namespace, status_of)

    assert error.reason == "UnsupportedVendor"
    assert error.message.startswith('no backend adapter registered for vendor "ascend"')


@pytest.mark.parametrize(
    ("image", "replicas", "message"),
    [
        pytest.param("", 1, "gateway image is required", id="no-image"),
        pytest.param(
            GATEWAY_IMAGE,
            2**31,
            "gateway replicas must fit in a Kubernetes int32 field",
            id="replicas-beyond-int32",
        ),
    ],
)
def test_gateway_settings_the_operator_cannot_render_fail_as_gateway_config(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    vendors: VendorRegistry,
    status_of: Callable[[str, str], Manifest],
    image: str,
    replicas: int,
    message: str,
) -> None:
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("svc", {"runtime": {"name": runtime_name}}), namespace)
    misconfigured = reconciler_with(
        api_client, vendors, OperatorSettings(gateway_image=image, gateway_replicas=replicas)
    )

    error = fails_before_any_write(api_client, misconfigured, namespace, status_of)

    assert (error.reason, error.message) == ("GatewayConfig", message)
