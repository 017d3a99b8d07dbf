"""Without KEDA's ScaledObject CRD a service reports AutoscalingUnavailable and creates nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.envtest import install_crds
from support.envtest.crds import crd_manifests
from support.manifests import inference_runtime, llmservice

from .cluster import (
    ENDPOINT_READER_KINDS,
    WRITTEN_KINDS,
    condition_values,
    events,
    eventually,
    everything_in,
    read,
)
from .failures import before_autoscaling, reconcile_failure

pytestmark = pytest.mark.integration

SCALED_OBJECTS = "scaledobjects.keda.sh"
PREFIX = "KEDA ScaledObject CRD is required before deploying an LLMService: "


def _gone(api_client: k8s_client.ApiClient) -> bool:
    crd = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
    return read(api_client, *crd, None, SCALED_OBJECTS) is None


@contextlib.contextmanager
def keda_crd_deleted(
    api_client: k8s_client.ApiClient, resources: CustomResources, keda_crds: Path
) -> Iterator[None]:
    """The ScaledObject CRD deleted for a while, then restored and Established again: every
    other scenario needs it.
    """
    manifests = [
        (path, doc)
        for path, doc in crd_manifests([keda_crds])
        if doc["metadata"]["name"] == SCALED_OBJECTS
    ]
    assert manifests, f"no {SCALED_OBJECTS} manifest in {keda_crds}"
    resources.delete("CustomResourceDefinition", SCALED_OBJECTS)
    try:
        eventually(lambda: _gone(api_client), f"{SCALED_OBJECTS} to be deleted")
        yield
    finally:
        eventually(lambda: _gone(api_client), f"{SCALED_OBJECTS} to be gone before restoring it")
        install_crds(api_client, manifests)


def _objects_in(api_client: k8s_client.ApiClient, namespace: str) -> list[str]:
    """Every object the operator could have written in the namespace (events too), as kind/name;
    the ScaledObject kind itself is gone."""
    kinds = tuple(k for k in WRITTEN_KINDS + ENDPOINT_READER_KINDS if k[1] != "ScaledObject")
    objects = everything_in(api_client, namespace, kinds)
    written = [f"{o['kind']}/{o['metadata']['name']}" for o in objects]
    return written + [f"Event/{e['reason']}" for e in events(api_client, namespace)]


def test_missing_keda_crd_reports_autoscaling_unavailable_and_creates_nothing_else(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    keda_crds: Path,
    namespace: str,
    runtime_name: str,
    make_reconciler: Callable[..., LLMServiceReconciler],
    status_of: Callable[[str, str], Manifest],
) -> None:
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"prewarm": True}}
    resources.create(llmservice("nokeda", changes), namespace)
    key = (namespace, "nokeda")

    with keda_crd_deleted(api_client, resources, keda_crds):
        error = reconcile_failure(make_reconciler(gateway_replicas=2), *key)

        assert error.reason == "AutoscalingUnavailable"
        assert error.message.startswith(PREFIX)
        assert len(error.message) > len(PREFIX)
        status = status_of("nokeda", namespace)
        assert status["phase"] == "Degraded"
        failed = before_autoscaling("AutoscalingUnavailable", error.message)
        assert condition_values(status) == failed
        assert _objects_in(api_client, namespace) == []

    make_reconciler(gateway_replicas=2).reconcile(key)  # KEDA is back: the stack follows

    status = status_of("nokeda", namespace)
    assert condition_values(status)["AutoscalingReady"][:2] == ("True", "ScaledObjectApplied")
    assert resources.get("ScaledObject", "nokeda", namespace)["spec"]["scaleTargetRef"] == {
        "name": "nokeda"
    }


def test_keda_crd_removed_under_a_running_operator_is_reported_as_autoscaling_unavailable(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    keda_crds: Path,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    """The operator's discovery still lists ScaledObject: the apply's 404 tells the truth."""
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("lost", {"runtime": {"name": runtime_name}}), namespace)
    reconciler.reconcile((namespace, "lost"))

    with keda_crd_deleted(api_client, resources, keda_crds):
        error = reconcile_failure(reconciler, namespace, "lost")

        assert error.reason == "AutoscalingUnavailable"
        assert error.message.startswith(PREFIX)
        autoscaling = condition_values(status_of("lost", namespace))["AutoscalingReady"]
        assert autoscaling == ("False", "AutoscalingUnavailable", error.message)
