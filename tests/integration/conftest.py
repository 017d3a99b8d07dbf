"""Fixtures for tests against the real API server (the plugin is support.control_plane)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import NotFoundException
from noctaya.k8s.runtime import Manager, ObjectKey
from support.custom_resources import CustomResources

from .runtime_harness import RunningManager

StartManager = Callable[[Manager, Callable[[ObjectKey], None]], RunningManager]


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


@pytest.fixture
def core(api_client: k8s_client.ApiClient) -> k8s_client.CoreV1Api:
    return k8s_client.CoreV1Api(api_client)


@pytest.fixture
def running() -> Iterator[StartManager]:
    """Starts managers on threads; stops whatever a test left running."""
    started: list[RunningManager] = []

    def start(manager: Manager, reconcile: Callable[[ObjectKey], None]) -> RunningManager:
        runner = RunningManager(manager, reconcile).start()
        started.append(runner)
        return runner

    yield start
    for runner in started:
        if not runner.finished.is_set():
            runner.stop()
