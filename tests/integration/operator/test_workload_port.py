"""The reconciler drives a service's workloads only through the core's `WorkloadOrchestrator`
port: with an in-memory orchestrator in place of the cluster's, a new service is applied with
its plan and observed, what the orchestrator observes becomes the status, an orchestrator's
failure becomes the conditions, and a deleted service is removed. The service, its status and
its events are real; no workload object is written to the namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from kubernetes import client as k8s_client
from noctaya.core.api import read_llmservice
from noctaya.core.errors import NoctayaError
from noctaya.core.observation import (
    BACKEND,
    GATEWAY,
    DeploymentFacts,
    PodFacts,
    ServiceObservation,
    observe_tier,
)
from noctaya.core.plan.identity import ServiceIdentity
from noctaya.core.plan.serving import ServingPlan
from noctaya.core.plugins import VendorRegistry
from noctaya.core.ports import FailedAfterAutoscaling, WorkloadOrchestrator
from noctaya.k8s.planning import ServicePlanner
from noctaya.k8s.reader import ApiReader
from noctaya.k8s.reconciler import LLMServiceReconciler, OperatorSettings
from noctaya.k8s.runtime.resources import ResourceResolver
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import condition_values, everything_in
from .conftest import GATEWAY_IMAGE
from .failures import after_autoscaling, before_autoscaling, reconcile_failure

pytestmark = pytest.mark.integration

SETTINGS = OperatorSettings(gateway_image=GATEWAY_IMAGE)


def serving(name: str) -> tuple[DeploymentFacts, list[PodFacts]]:
    """One replica whose pod runs and is ready."""
    pod = PodFacts(name=name, phase="Running", running=True, ready=True)
    return DeploymentFacts(replicas=1, ready_replicas=1, available_replicas=1), [pod]


SERVING = ServiceObservation(
    backend=observe_tier(BACKEND, *serving("engine-0")),
    gateway=observe_tier(GATEWAY, *serving("gateway-0")),
)


@dataclass
class InMemoryWorkloads:
    """Records what it is asked; observes `observation`; fails `apply` with `apply_failure`,
    `observe` with `observe_failure`."""

    observation: ServiceObservation = SERVING
    apply_failure: NoctayaError | None = None
    observe_failure: NoctayaError | None = None
    asked: list[tuple[str, ServingPlan | ServiceIdentity]] = field(default_factory=list)

    def apply(self, plan: ServingPlan) -> None:
        self.asked.append(("apply", plan))
        if self.apply_failure is not None:
            raise self.apply_failure

    def observe(self, plan: ServingPlan) -> ServiceObservation:
        self.asked.append(("observe", plan))
        if self.observe_failure is not None:
            raise self.observe_failure
        return self.observation

    def remove(self, service: ServiceIdentity) -> None:
        self.asked.append(("remove", service))


@pytest.fixture
def planner(api_client: k8s_client.ApiClient, vendors: VendorRegistry) -> ServicePlanner:
    return ServicePlanner(ApiReader(ResourceResolver(api_client)), vendors, SETTINGS)


@pytest.fixture
def driving(
    api_client: k8s_client.ApiClient, planner: ServicePlanner
) -> Callable[[WorkloadOrchestrator], LLMServiceReconciler]:
    """A reconciler on the real API server whose workloads are `workloads`."""

    def make(workloads: WorkloadOrchestrator) -> LLMServiceReconciler:
        resolver = ResourceResolver(api_client)
        return LLMServiceReconciler(resolver, ApiReader(resolver), planner, workloads)

    return make


def test_a_new_service_is_applied_with_its_plan_and_reported_as_observed(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    planner: ServicePlanner,
    driving: Callable[[WorkloadOrchestrator], LLMServiceReconciler],
    status_of: Callable[[str, str], Manifest],
) -> None:
    resources.create(inference_runtime(runtime_name))
    resources.create(
        llmservice("fresh", {"runtime": {"name": runtime_name}, "scaling": {"max": 3}}), namespace
    )
    workloads = InMemoryWorkloads()

    driving(workloads).reconcile((namespace, "fresh"))

    plan = planner.plan(read_llmservice(resources.get("LLMService", "fresh", namespace)))
    assert plan.service == ServiceIdentity(name="fresh", namespace=namespace)
    assert plan.runtime == runtime_name
    assert plan.autoscaling.max_replicas == 3
    assert workloads.asked == [("apply", plan), ("observe", plan)]
    status = status_of("fresh", namespace)
    assert (status["phase"], status["replicas"], status["resolvedRuntime"]) == (
        "Ready",
        1,
        runtime_name,
    )
    assert everything_in(api_client, namespace) == []


def test_a_deleted_service_is_removed_and_nothing_else_is_asked(
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    driving: Callable[[WorkloadOrchestrator], LLMServiceReconciler],
) -> None:
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("gone", {"runtime": {"name": runtime_name}}), namespace)
    resources.delete("LLMService", "gone", namespace)
    workloads = InMemoryWorkloads()

    driving(workloads).reconcile((namespace, "gone"))

    assert workloads.asked == [("remove", ServiceIdentity(name="gone", namespace=namespace))]


@pytest.mark.parametrize(
    ("failures", "asked", "conditions"),
    [
        pytest.param(
            {"apply_failure": NoctayaError("AutoscalingUnavailable", "none here")},
            ["apply"],
            before_autoscaling("AutoscalingUnavailable", "none here"),
            id="apply-refused",
        ),
        pytest.param(
            {"apply_failure": FailedAfterAutoscaling("ApplyDeployment", "backend refused")},
            ["apply"],
            after_autoscaling("ApplyDeployment", "backend refused"),
            id="apply-failed-after-autoscaling",
        ),
        pytest.param(
            {"observe_failure": NoctayaError("PrewarmFailed", "fetch refused")},
            ["apply", "observe"],
            after_autoscaling("PrewarmFailed", "fetch refused"),
            id="observe-failed",
        ),
    ],
)
def test_an_orchestrator_failure_becomes_the_conditions(
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    driving: Callable[[WorkloadOrchestrator], LLMServiceReconciler],
    status_of: Callable[[str, str], Manifest],
    failures: dict[str, NoctayaError],
    asked: list[str],
    conditions: dict[str, tuple[str, str, str]],
) -> None:
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("failing", {"runtime": {"name": runtime_name}}), namespace)
    workloads = InMemoryWorkloads(**failures)  # type: ignore[arg-type]

    error = reconcile_failure(driving(workloads), namespace, "failing")

    assert error in failures.values()
    assert [verb for verb, _ in workloads.asked] == asked
    assert condition_values(status_of("failing", namespace)) == conditions


def test_an_invalid_plan_never_reaches_the_orchestrator(
    resources: CustomResources,
    namespace: str,
    driving: Callable[[WorkloadOrchestrator], LLMServiceReconciler],
    status_of: Callable[[str, str], Manifest],
) -> None:
    resources.create(llmservice("orphan", {"runtime": {"name": "no-such-runtime"}}), namespace)
    workloads = InMemoryWorkloads()

    error = reconcile_failure(driving(workloads), namespace, "orphan")

    assert error.reason == "RuntimeResolution"
    assert workloads.asked == []
    assert condition_values(status_of("orphan", namespace)) == before_autoscaling(
        error.reason, error.message
    )
