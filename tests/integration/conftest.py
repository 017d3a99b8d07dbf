"""Fixtures for tests against the real API server (the plugin is support.control_plane)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import NotFoundException
from support.custom_resources import CustomResources


@pytest.fixture
def resources(api_client: k8s_client.ApiClient) -> CustomResources:
    return CustomResources(api_client)


@pytest.fixture
def runtime_name(resources: CustomResources, namespace: str) -> Iterator[str]:
    """A cluster-wide unique InferenceRuntime name; the object is deleted after the test."""
    name = f"{namespace}-runtime"
    yield name
    with contextlib.suppress(NotFoundException):
        resources.delete("InferenceRuntime", name)
