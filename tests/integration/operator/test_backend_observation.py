"""What the backend is doing becomes phase, conditions and events.

The scenario plays kubelet and deployment controller: it creates the backend Pods and writes
their status, and the Deployment's, through the status subresources.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import (
    backend_pod,
    condition_values,
    create,
    events,
    serving_status,
    set_deployment_status,
    set_gateway_available,
    set_pod_status,
)

pytestmark = pytest.mark.integration

SVC = "chat"
POD = "chat-7d9f-abcde"
UNSCHEDULABLE = [
    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
]
PROGRESS_DEADLINE = [
    {
        "type": "Progressing",
        "status": "False",
        "reason": "ProgressDeadlineExceeded",
        "message": 'ReplicaSet "chat-7d9f" has timed out progressing.',
    }
]
MESSAGES = {
    "ImagePullFailed": 'Backend Pod "{pod}" cannot pull its serving image; '
    "check the image and imagePullSecrets",
    "OOMKilled": 'Backend Pod "{pod}" was OOMKilled; '
    "inspect its memory limit and model runtime requirements",
    "CrashLoopBackOff": 'Backend Pod "{pod}" is in CrashLoopBackOff; '
    "inspect its serving-container logs and configuration",
    "ContainerRestarting": 'Backend Pod "{pod}" repeatedly restarted; '
    "inspect its serving-container logs and exit reason",
    "SchedulingDelayed": 'Backend Pod "{pod}" is unschedulable; '
    "inspect accelerator capacity, selectors, tolerations, and scheduler events",
    "ModelLoading": 'Backend Pod "{pod}" is running while the model loads '
    "and readiness checks complete",
    "Starting": 'Backend Pod "{pod}" is starting',
    "ProgressDeadlineExceeded": "Backend Deployment exceeded its progress deadline; "
    "inspect its Pods and events",
    "Activating": "Waiting for the backend Deployment to create a serving Pod",
}
PROGRESSING = (
    "False",
    "Progressing",
    "Backend activation is progressing without an observed failure",
)
HEALTHY = ("False", "Healthy", "No backend activation failure is observed")
AVAILABLE = ("True", "Available", "Serving pods are ready")


def message(reason: str, pod: str = POD) -> str:
    return MESSAGES[reason].format(pod=pod)


@dataclass
class Backend:
    """One reconciled service whose backend the scenario drives."""

    api_client: k8s_client.ApiClient
    namespace: str
    runtime: str
    reconciler: LLMServiceReconciler
    read_status: Callable[[], Manifest]
    pods: list[str] = field(default_factory=list)

    def pod(self, status: Manifest, name: str = POD) -> None:
        if name not in self.pods:
            backend_pod(self.api_client, self.namespace, SVC, self.runtime, name)
            self.pods.append(name)
        set_pod_status(self.api_client, self.namespace, name, status)

    def deployment(self, **status: object) -> None:
        set_deployment_status(self.api_client, self.namespace, SVC, dict(status))

    def reconcile(self) -> Manifest:
        self.reconciler.reconcile((self.namespace, SVC))
        return self.read_status()

    def events(self) -> list[Manifest]:
        return events(self.api_client, self.namespace)


@pytest.fixture
def backend(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> Backend:
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"strategy": "None"}}
    resources.create(llmservice(SVC, changes), namespace)
    reconciler.reconcile((namespace, SVC))
    set_gateway_available(api_client, namespace, SVC)
    return Backend(
        api_client, namespace, runtime_name, reconciler, lambda: status_of(SVC, namespace)
    )


def failing(reason: str) -> dict[str, tuple[str, str, str]]:
    text = message(reason)
    return {"Ready": ("False", reason, text), "Degraded": ("True", reason, text)}


def progressing(reason: str) -> dict[str, tuple[str, str, str]]:
    return {"Ready": ("False", reason, message(reason)), "Degraded": PROGRESSING}


@pytest.mark.parametrize(
    ("pod_status", "phase", "expected"),
    [
        pytest.param(
            serving_status(phase="Pending", waiting="ImagePullBackOff"),
            "Degraded",
            failing("ImagePullFailed"),
            id="image-pull-failure",
        ),
        pytest.param(
            serving_status(waiting="CrashLoopBackOff", restarts=1, last_terminated="OOMKilled"),
            "Degraded",
            failing("OOMKilled"),
            id="oom-killed",
        ),
        pytest.param(
            serving_status(waiting="CrashLoopBackOff", restarts=1, last_terminated="Error"),
            "Degraded",
            failing("CrashLoopBackOff"),
            id="crash-loop",
        ),
        pytest.param(
            serving_status(running=True, restarts=2),
            "Degraded",
            failing("ContainerRestarting"),
            id="repeated-restarts",
        ),
        pytest.param(
            serving_status(phase="Pending", container_started=False, pod_conditions=UNSCHEDULABLE),
            "Loading",
            progressing("SchedulingDelayed"),
            id="unschedulable",
        ),
        pytest.param(
            serving_status(running=True, ready=False),
            "Loading",
            progressing("ModelLoading"),
            id="model-loading",
        ),
        pytest.param(
            serving_status(phase="Pending", waiting="ContainerCreating"),
            "Loading",
            progressing("Starting"),
            id="starting",
        ),
    ],
)
def test_backend_pod_state_maps_to_phase_and_conditions(
    backend: Backend,
    pod_status: Manifest,
    phase: str,
    expected: dict[str, tuple[str, str, str]],
) -> None:
    backend.pod(pod_status)

    status = backend.reconcile()

    assert status["phase"] == phase
    assert status["replicas"] == 0
    conditions = condition_values(status)
    assert conditions["AutoscalingReady"][:2] == ("True", "ScaledObjectApplied")
    assert {t: conditions[t] for t in ("Ready", "Degraded")} == expected


def test_deployment_scaling_up_without_pods_is_activating(backend: Backend) -> None:
    backend.deployment(replicas=1)

    status = backend.reconcile()

    assert status["phase"] == "Loading"
    assert condition_values(status)["Ready"] == ("False", "Activating", message("Activating"))
    assert condition_values(status)["Degraded"] == PROGRESSING


def test_progress_deadline_exceeded_degrades_the_service_over_its_loading_pod(
    backend: Backend,
) -> None:
    backend.pod(serving_status(running=True, ready=False))
    backend.deployment(replicas=1, unavailableReplicas=1, conditions=PROGRESS_DEADLINE)

    status = backend.reconcile()

    assert status["phase"] == "Degraded"
    assert {t: v for t, v in condition_values(status).items() if t != "AutoscalingReady"} == (
        failing("ProgressDeadlineExceeded")
    )


def test_ready_pod_serves_while_a_second_pod_crash_loops_degraded(backend: Backend) -> None:
    backend.pod(serving_status(running=True, ready=True))
    backend.pod(serving_status(waiting="CrashLoopBackOff", restarts=1), name="chat-7d9f-zzzzz")
    backend.deployment(replicas=2, readyReplicas=1, availableReplicas=1)

    status = backend.reconcile()

    assert status["phase"] == "Ready"
    assert status["replicas"] == 1
    conditions = condition_values(status)
    assert conditions["Ready"] == AVAILABLE
    reason = "CrashLoopBackOff"
    assert conditions["Degraded"] == ("True", reason, message(reason, "chat-7d9f-zzzzz"))


def test_progress_deadline_of_a_deployment_scaled_to_zero_is_history(backend: Backend) -> None:
    backend.deployment(replicas=0, conditions=PROGRESS_DEADLINE)

    status = backend.reconcile()

    assert status["phase"] == "ScaledToZero"
    assert condition_values(status)["Degraded"][:2] == ("False", "Inactive")


def test_finished_terminating_foreign_and_prewarm_pods_say_nothing_about_the_backend(
    backend: Backend, api_client: k8s_client.ApiClient
) -> None:
    backend.pod(serving_status(phase="Failed", waiting="ErrImagePull"), name="chat-finished")
    core = k8s_client.CoreV1Api(api_client)
    backend.pod(serving_status(waiting="CrashLoopBackOff", restarts=9), name="chat-leaving")
    core.patch_namespaced_pod(
        "chat-leaving", backend.namespace, {"metadata": {"finalizers": ["example.com/hold"]}}
    )
    core.delete_namespaced_pod("chat-leaving", backend.namespace)
    other_runtime = "chat-other-runtime"
    backend_pod(api_client, backend.namespace, SVC, "another-runtime", other_runtime)
    pull_failure = serving_status(waiting="ErrImagePull")
    set_pod_status(api_client, backend.namespace, other_runtime, pull_failure)
    create(
        api_client,
        backend.namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "chat-prewarm-xyz",
                "labels": {
                    "app.kubernetes.io/name": SVC,
                    "app.kubernetes.io/managed-by": "noctaya",
                    "serving.noctaya.io/llmservice": SVC,
                },
            },
            "spec": {"containers": [{"name": "serving", "image": "busybox"}]},
        },
    )
    set_pod_status(api_client, backend.namespace, "chat-prewarm-xyz", pull_failure)

    status = backend.reconcile()

    assert status["phase"] == "ScaledToZero"
    assert condition_values(status)["Degraded"][:2] == ("False", "Inactive")


def test_a_new_failure_emits_one_warning_and_recovery_one_backend_recovered_event(
    backend: Backend, resources: CustomResources
) -> None:
    backend.pod(serving_status(phase="Pending", waiting="ErrImagePull"))

    backend.reconcile()
    written = resources.get("LLMService", SVC, backend.namespace)["metadata"]["resourceVersion"]
    backend.reconcile()
    backend.reconcile()

    pull_failure = {
        "type": "Warning",
        "reason": "ImagePullFailed",
        "action": "ObserveBackendFailure",
        "note": message("ImagePullFailed"),
        "reportingController": "llmservice-controller",
        "regarding": SVC,
    }
    assert backend.events() == [pull_failure]
    unchanged = resources.get("LLMService", SVC, backend.namespace)["metadata"]["resourceVersion"]
    assert unchanged == written, "a repeated observation must not write status"

    backend.pod(serving_status(waiting="CrashLoopBackOff", restarts=1, last_terminated="OOMKilled"))
    backend.reconcile()
    backend.reconcile()

    oom = {**pull_failure, "reason": "OOMKilled", "note": message("OOMKilled")}
    assert sorted(backend.events(), key=lambda e: e["reason"]) == [pull_failure, oom]

    backend.pod(serving_status(running=True, ready=True, restarts=1))
    backend.deployment(replicas=1, readyReplicas=1, availableReplicas=1)
    status = backend.reconcile()
    backend.reconcile()

    assert status["phase"] == "Ready"
    assert condition_values(status)["Degraded"] == HEALTHY
    recovered = [e for e in backend.events() if e["type"] == "Normal"]
    assert recovered == [
        {
            "type": "Normal",
            "reason": "BackendRecovered",
            "action": "ObserveBackendRecovery",
            "note": "Backend activation recovered",
            "reportingController": "llmservice-controller",
            "regarding": SVC,
        }
    ]
    assert len(backend.events()) == 3
