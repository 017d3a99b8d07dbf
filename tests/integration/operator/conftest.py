"""Fixtures for operator scenarios: a reconciler on the real API server, driven key by key, and
running controllers (the real Manager in a thread) for scenarios about watches and leadership.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from noctaya.core.plugins import VendorRegistry
from noctaya.k8s.controller import build_controller, cluster_reconciler
from noctaya.k8s.lost_cache import LookAgain, looked_at_by_caller
from noctaya.k8s.reader import ApiReader
from noctaya.k8s.reconciler import LLMServiceReconciler, OperatorSettings
from noctaya.k8s.runtime import InformerTiming, LeaderElectionConfig, Manager, ManagerOptions
from noctaya.k8s.runtime.resources import ResourceResolver
from support.custom_resources import CustomResources, Manifest
from support.operator_process import operator_account_kubeconfig

from .cluster import WAIT, eventually

GATEWAY_IMAGE = "ghcr.io/noctaya/noctaya-gateway:test"
FAST_INFORMERS = InformerTiming(retry_initial=0.05, retry_max=0.5, absent_kind_retry=0.5)


@pytest.fixture(scope="session")
def vendors() -> VendorRegistry:
    return VendorRegistry.discover()


@pytest.fixture
def make_reconciler(
    api_client: k8s_client.ApiClient, vendors: VendorRegistry
) -> Callable[..., LLMServiceReconciler]:
    def make(
        gateway_replicas: int = 1,
        client: k8s_client.ApiClient | None = None,
        look_again: LookAgain = looked_at_by_caller,
    ) -> LLMServiceReconciler:
        """A reconciler with the admin's credentials, or with `client`'s, reading the API
        server itself; `look_again` hears when it asks to be run again later."""
        resolver = ResourceResolver(client or api_client)
        return cluster_reconciler(
            resolver,
            ApiReader(resolver),
            vendors,
            OperatorSettings(gateway_image=GATEWAY_IMAGE, gateway_replicas=gateway_replicas),
            look_again=look_again,
        )

    return make


@pytest.fixture
def reconciler(make_reconciler: Callable[..., LLMServiceReconciler]) -> LLMServiceReconciler:
    return make_reconciler()


@pytest.fixture
def operator_reconciler(
    api_client: k8s_client.ApiClient,
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
    make_reconciler: Callable[..., LLMServiceReconciler],
) -> Iterator[LLMServiceReconciler]:
    """A reconciler holding only the operator's generated RBAC."""
    path, cleanup = operator_account_kubeconfig(
        api_client, kubeconfig, namespace, tmp_path / "operator.kubeconfig"
    )
    client = k8s_config.new_client_from_config(config_file=str(path))  # type: ignore[no-untyped-call]
    yield make_reconciler(client=client)
    client.close()
    cleanup()


@pytest.fixture
def status_of(resources: CustomResources) -> Callable[[str, str], Manifest]:
    def read(name: str, namespace: str) -> Manifest:
        return dict(resources.get("LLMService", name, namespace).get("status") or {})

    return read


@pytest.fixture
def namespace(namespace: str, api_client: k8s_client.ApiClient) -> Iterator[str]:
    """The support fixture's namespace, emptied of LLMServices afterwards: namespaces never
    finish terminating here (no controller-manager), and a later scenario's controller must not
    keep reconciling the services of finished ones.
    """
    yield namespace
    with contextlib.suppress(ApiException):
        k8s_client.CustomObjectsApi(api_client).delete_collection_namespaced_custom_object(
            "serving.noctaya.io", "v1alpha1", namespace, "llmservices"
        )


@dataclass
class RunningController:
    """One operator replica: the real Manager and reconciler, running on a thread."""

    manager: Manager
    reconciler: LLMServiceReconciler
    thread: threading.Thread
    failures: list[BaseException] = field(default_factory=list)

    def stop(self) -> None:
        self.manager.stop()
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the controller did not stop"

    def wait_reconciling(self) -> None:
        eventually(self.manager.reconciling.is_set, "the controller to start reconciling")


@pytest.fixture
def start_controller(
    api_client: k8s_client.ApiClient, vendors: VendorRegistry
) -> Iterator[Callable[..., RunningController]]:
    """Start operator replicas; every one still running is stopped after the test."""
    started: list[RunningController] = []

    def start(
        *,
        gateway_replicas: int = 1,
        leader_election: LeaderElectionConfig | None = None,
        retry_delay: float = 0.05,
        client: k8s_client.ApiClient | None = None,
    ) -> RunningController:
        """`retry_delay` is the first backoff after a failed reconcile; make it long to show
        that a watch, not a retry, brought a service back. `client`: the credentials it runs
        with, the admin's by default."""
        options = ManagerOptions(
            workers=2,
            leader_election=leader_election,
            health_probe_address="0",
            informer_timing=FAST_INFORMERS,
            retry_base_delay=retry_delay,
            retry_max_delay=max(1.0, retry_delay),
            shutdown_timeout=WAIT,
        )
        settings = OperatorSettings(gateway_image=GATEWAY_IMAGE, gateway_replicas=gateway_replicas)
        manager, reconciler = build_controller(client or api_client, settings, options, vendors)
        running = RunningController(manager, reconciler, threading.Thread())

        def run() -> None:
            try:
                manager.run(reconciler.reconcile, handle_signals=False)
            except BaseException as error:  # reported by the test that expects a clean run
                logging.getLogger(__name__).exception("controller stopped with an error")
                running.failures.append(error)

        running.thread = threading.Thread(target=run, name="operator under test", daemon=True)
        running.thread.start()
        started.append(running)
        return running

    yield start
    for running in started:
        if running.thread.is_alive():
            running.stop()
