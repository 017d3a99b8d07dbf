"""Fixtures for operator scenarios: a reconciler on the real API server, driven key by key."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client
from noctaya.core.plugins import VendorRegistry
from noctaya.k8s.reconciler import LLMServiceReconciler, OperatorSettings
from noctaya.k8s.runtime.resources import ResourceResolver
from support.custom_resources import CustomResources, Manifest

GATEWAY_IMAGE = "ghcr.io/noctaya/noctaya-gateway:test"


@pytest.fixture(scope="session")
def vendors() -> VendorRegistry:
    return VendorRegistry.discover()


@pytest.fixture
def make_reconciler(
    api_client: k8s_client.ApiClient, vendors: VendorRegistry
) -> Callable[..., LLMServiceReconciler]:
    def make(gateway_replicas: int = 1) -> LLMServiceReconciler:
        return LLMServiceReconciler(
            ResourceResolver(api_client),
            vendors,
            OperatorSettings(gateway_image=GATEWAY_IMAGE, gateway_replicas=gateway_replicas),
        )

    return make


@pytest.fixture
def reconciler(make_reconciler: Callable[..., LLMServiceReconciler]) -> LLMServiceReconciler:
    return make_reconciler()


@pytest.fixture
def status_of(resources: CustomResources) -> Callable[[str, str], Manifest]:
    def read(name: str, namespace: str) -> Manifest:
        return dict(resources.get("LLMService", name, namespace).get("status") or {})

    return read
