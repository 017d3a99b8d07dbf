"""Pods that the namespace's Pod Security admission refuses: the service says so, quoting the
API server, with the level its pods meet and the namespace label that admits them.

The scenario plays the controllers that meet the refusal: the deployment controller's
ReplicaFailure condition (copied from the ReplicaSet's FailedCreate) on the backend Deployment,
and the Job controller's FailedCreate event on the prewarm Job, as each records it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import (
    component_event,
    condition_values,
    events,
    eventually,
    read,
    reconciled,
    replace_status,
    set_deployment_status,
    set_gateway_available,
)
from .conftest import RunningController
from .failures import after_autoscaling, reconcile_failure

pytestmark = pytest.mark.integration

SVC = "chat"
HOST_CACHE = {"cache": {"strategy": "HostPath", "prewarm": True}, "scaling": {"min": 1}}
ADVICE = (
    'they meet the "privileged" level (hostPath volume "model-cache" (the HostPath cache), '
    "which baseline forbids): label the namespace pod-security.kubernetes.io/enforce=privileged "
    "to admit them"
)


def refusal(pod: str) -> str:
    return (
        f'pods "{pod}" is forbidden: violates PodSecurity "baseline:latest": '
        'hostPath volumes (volume "model-cache")'
    )


def job_controller_event(api_client: k8s_client.ApiClient, namespace: str, job: Manifest) -> None:
    """The Job controller's Warning about a pod it could not create."""
    message = f"Error creating: {refusal(job['metadata']['name'] + '-x2x8q')}"
    source = {"component": "job-controller"}
    component_event(api_client, namespace, job, "FailedCreate", message, source)


@pytest.fixture
def host_cache_service(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
) -> Callable[[], Manifest]:
    """A service on a host folder cache, reconciled once; returns its next reconcile's status."""
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice(SVC, {"runtime": {"name": runtime_name}, **HOST_CACHE}), namespace)
    reconciler.reconcile((namespace, SVC))
    set_gateway_available(api_client, namespace, SVC)

    def reconcile() -> Manifest:
        reconciler.reconcile((namespace, SVC))
        return dict(resources.get("LLMService", SVC, namespace)["status"])

    return reconcile


def test_backend_pods_refused_by_admission_degrade_the_service_with_the_label_that_admits_them(
    api_client: k8s_client.ApiClient, namespace: str, host_cache_service: Callable[[], Manifest]
) -> None:
    job = read(api_client, "batch/v1", "Job", namespace, f"{SVC}-prewarm")
    replace_status(api_client, "batch/v1", "Job", namespace, job["metadata"]["name"], {"active": 1})
    failure = {
        "type": "ReplicaFailure",
        "status": "True",
        "reason": "FailedCreate",
        "message": refusal("chat-6d8f9c7b5-x2x8q"),
    }
    set_deployment_status(api_client, namespace, SVC, {"replicas": 0, "conditions": [failure]})

    status = host_cache_service()

    message = (
        "Pod Security admission rejects the backend Pods: "
        f"{refusal('chat-6d8f9c7b5-x2x8q')}; {ADVICE}"
    )
    assert status["phase"] == "Degraded"
    assert condition_values(status)["Degraded"] == ("True", "PodSecurityRejected", message)
    assert condition_values(status)["Ready"] == ("False", "PodSecurityRejected", message)
    warnings = [
        (e["reason"], e["note"]) for e in events(api_client, namespace) if e["type"] == "Warning"
    ]
    assert warnings == [("PodSecurityRejected", message)]

    # The namespace admits the pods: the ReplicaSet creates one and drops its failure.
    set_deployment_status(api_client, namespace, SVC, {"replicas": 1})

    assert condition_values(host_cache_service())["Degraded"][:2] == ("False", "Progressing")


def test_prewarm_pods_refused_by_admission_stop_the_service_naming_the_job(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    reconciler: LLMServiceReconciler,
    host_cache_service: Callable[[], Manifest],
) -> None:
    job = read(api_client, "batch/v1", "Job", namespace, f"{SVC}-prewarm")
    job_controller_event(api_client, namespace, job)

    error = reconcile_failure(reconciler, namespace, SVC)

    message = (
        f"Pod Security admission rejects the pods of prewarm Job {SVC}-prewarm: "
        f"Error creating: {refusal('chat-prewarm-x2x8q')}; {ADVICE}"
    )
    assert (error.reason, error.message) == ("PodSecurityRejected", message)
    status = resources.get("LLMService", SVC, namespace)["status"]
    assert status["phase"] == "Degraded"
    assert condition_values(status) == after_autoscaling("PodSecurityRejected", message)

    # Admitted at last: the Job has a pod, and the refusal is history.
    replace_status(api_client, "batch/v1", "Job", namespace, f"{SVC}-prewarm", {"active": 1})

    assert condition_values(host_cache_service())["Degraded"][0] == "False"


def test_the_job_controllers_refusal_wakes_the_service(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    start_controller: Callable[..., RunningController],
) -> None:
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice(SVC, {"runtime": {"name": runtime_name}, **HOST_CACHE}), namespace)
    start_controller(retry_delay=300).wait_reconciling()
    eventually(lambda: reconciled(resources, namespace, SVC), "a first status")
    job = read(api_client, "batch/v1", "Job", namespace, f"{SVC}-prewarm")

    job_controller_event(api_client, namespace, job)

    eventually(
        lambda: (
            condition_values(resources.get("LLMService", SVC, namespace)["status"])["Degraded"][1]
            == "PodSecurityRejected"
        ),
        "the Job controller's FailedCreate event to reach the service status",
    )
