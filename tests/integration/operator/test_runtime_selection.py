"""Which InferenceRuntime serves a service, and how a failed choice is reported."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import condition_values, read, runtimes
from .failures import before_autoscaling, reconcile_failure

pytestmark = pytest.mark.integration

AddRuntime = Callable[..., str]


@pytest.fixture
def add_runtime(
    api_client: k8s_client.ApiClient, resources: CustomResources, namespace: str
) -> Iterator[AddRuntime]:
    """Create InferenceRuntimes for one scenario, and only those: selection lists the cluster."""
    assert runtimes(api_client) == [], "vendor selection needs a cluster without other runtimes"
    created: list[str] = []

    def add(suffix: str, vendor: str, priority: int = 0) -> str:
        name = f"{namespace}-{suffix}"
        changes: Manifest = {"vendor": vendor, "priority": priority}
        if vendor == "ascend":
            changes["accelerator"] = {"resourceName": "huawei.com/Ascend910"}
        resources.create(inference_runtime(name, changes))
        created.append(name)
        return name

    yield add
    for name in created:
        with contextlib.suppress(ApiException):
            resources.delete("InferenceRuntime", name)


def test_vendor_fallback_selects_second_vendor_when_first_has_no_runtime(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    add_runtime: AddRuntime,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    add_runtime("low", "nvidia", priority=1)
    chosen = add_runtime("high", "nvidia", priority=5)
    selector = {"name": None, "selector": {"vendor": ["ascend", "nvidia"]}}
    resources.create(llmservice("fallback", {"runtime": selector}), namespace)

    reconciler.reconcile((namespace, "fallback"))

    status = status_of("fallback", namespace)
    assert status["resolvedRuntime"] == chosen
    assert status["phase"] == "ScaledToZero"
    backend = read(api_client, "apps/v1", "Deployment", namespace, "fallback")
    assert backend["metadata"]["labels"]["serving.noctaya.io/runtime"] == chosen


def test_vendor_order_beats_priority(
    resources: CustomResources,
    namespace: str,
    add_runtime: AddRuntime,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    preferred = add_runtime("ascend", "ascend", priority=0)
    add_runtime("nvidia", "nvidia", priority=100)
    selector = {"name": None, "selector": {"vendor": ["ascend", "nvidia"]}}
    resources.create(llmservice("ordered", {"runtime": selector}), namespace)

    reconciler.reconcile((namespace, "ordered"))

    assert status_of("ordered", namespace)["resolvedRuntime"] == preferred


def test_two_runtimes_at_the_top_priority_are_an_ambiguity_error_naming_both(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    add_runtime: AddRuntime,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    second = add_runtime("b", "nvidia", priority=7)
    first = add_runtime("a", "nvidia", priority=7)
    add_runtime("c", "nvidia", priority=3)
    selector = {"name": None, "selector": {"vendor": ["nvidia"]}}
    resources.create(llmservice("ambiguous", {"runtime": selector}), namespace)

    error = reconcile_failure(reconciler, namespace, "ambiguous")

    message = (
        f'multiple InferenceRuntimes match vendor "nvidia" at priority 7: [{first} {second}]; '
        "set spec.runtime.name"
    )
    assert (error.reason, error.message) == ("RuntimeResolution", message)
    status = status_of("ambiguous", namespace)
    assert status["phase"] == "Degraded"
    assert condition_values(status) == before_autoscaling("RuntimeResolution", message)
    assert "resolvedRuntime" not in status
    assert read(api_client, "keda.sh/v1alpha1", "ScaledObject", namespace, "ambiguous") is None


def test_no_runtime_of_any_selected_vendor_is_reported_with_the_vendor_list(
    resources: CustomResources,
    namespace: str,
    add_runtime: AddRuntime,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    selector = {"name": None, "selector": {"vendor": ["ascend", "nvidia"]}}
    resources.create(llmservice("nothing", {"runtime": selector}), namespace)

    error = reconcile_failure(reconciler, namespace, "nothing")

    message = "no InferenceRuntime matches vendors [ascend nvidia]"
    assert (error.reason, error.message) == ("RuntimeResolution", message)
    assert condition_values(status_of("nothing", namespace)) == before_autoscaling(
        "RuntimeResolution", message
    )


def test_runtime_pinned_by_name_wins_over_higher_priority_runtimes(
    resources: CustomResources,
    namespace: str,
    add_runtime: AddRuntime,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    pinned = add_runtime("pinned", "nvidia", priority=0)
    add_runtime("favourite", "nvidia", priority=50)
    resources.create(llmservice("pinned", {"runtime": {"name": pinned}}), namespace)

    reconciler.reconcile((namespace, "pinned"))

    assert status_of("pinned", namespace)["resolvedRuntime"] == pinned


def test_pinned_runtime_that_does_not_exist_fails_with_the_lookup_error(
    resources: CustomResources,
    namespace: str,
    add_runtime: AddRuntime,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    add_runtime("other", "nvidia")
    missing = f"{namespace}-missing"
    resources.create(llmservice("orphan", {"runtime": {"name": missing}}), namespace)

    error = reconcile_failure(reconciler, namespace, "orphan")

    message = (
        f'get InferenceRuntime "{missing}": '
        f'inferenceruntimes.serving.noctaya.io "{missing}" not found'
    )
    assert (error.reason, error.message) == ("RuntimeResolution", message)
    assert condition_values(status_of("orphan", namespace)) == before_autoscaling(
        "RuntimeResolution", message
    )
