"""The rest of the serving path becomes phase, conditions and events: the gateway in front of the
backend, with the backend's reasons and its own words, and KEDA's verdict on the ScaledObject.

The scenario plays kubelet, deployment controller and KEDA: it creates the gateway Pod, writes
its status, the Deployments' and the ScaledObject's through their status subresources, and
records the kubelet's FailedMount event as the kubelet records it (a core/v1 Event).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import (
    condition_values,
    events,
    gateway_pod,
    kubelet_event,
    replace_status,
    serving_status,
    set_deployment_status,
    set_gateway_available,
    set_pod_status,
)

pytestmark = pytest.mark.integration

SVC = "chat"
POD = "chat-gateway-5c8f7d9b6-q7k2m"
GATEWAY = f'Gateway Deployment "{SVC}-gateway" has no available replica: '
MOUNT_FAILURE = 'MountVolume.SetUp failed for volume "client-auth" : secret "chat-key" not found'
CONFIG_ADVICE = "create the Secret and key it names (spec.endpoint.authentication)"
SCALED_TO_ZERO = ("False", "ScaledToZero", "Backend is scaled to zero")
INACTIVE = ("False", "Inactive", "Backend is scaled to zero and has no observed activation failure")
AUTOSCALING_OK = ("True", "ScaledObjectApplied", "KEDA External Push autoscaling is configured")


@dataclass
class ServingPath:
    """One reconciled service whose gateway, backend and ScaledObject the scenario drives."""

    api_client: k8s_client.ApiClient
    namespace: str
    reconciler: LLMServiceReconciler
    read_status: Callable[[], Manifest]

    def gateway_pod(self, status: Manifest) -> Manifest:
        pod = gateway_pod(self.api_client, self.namespace, SVC, POD)
        set_pod_status(self.api_client, self.namespace, POD, status)
        set_deployment_status(self.api_client, self.namespace, f"{SVC}-gateway", {"replicas": 1})
        return pod

    def reconcile(self) -> Manifest:
        self.reconciler.reconcile((self.namespace, SVC))
        return self.read_status()

    def warnings(self) -> list[tuple[str, str, str]]:
        return [
            (e["reason"], e["action"], e["note"])
            for e in events(self.api_client, self.namespace)
            if e["type"] == "Warning"
        ]


@pytest.fixture
def serving_path(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> ServingPath:
    resources.create(inference_runtime(runtime_name))
    authentication = {"secretRef": {"name": "chat-key", "key": "token"}}
    changes = {
        "runtime": {"name": runtime_name},
        "cache": {"strategy": "None"},
        "endpoint": {"authentication": authentication},
    }
    resources.create(llmservice(SVC, changes), namespace)
    reconciler.reconcile((namespace, SVC))
    return ServingPath(api_client, namespace, reconciler, lambda: status_of(SVC, namespace))


def gateway_status(**state: object) -> Manifest:
    return serving_status(container_name="gateway", phase="Pending", **state)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pod_status", "reason", "message"),
    [
        pytest.param(
            gateway_status(waiting="ErrImagePull"),
            "ImagePullFailed",
            f'Gateway Pod "{POD}" cannot pull its gateway image; '
            "check the operator's gateway image and the service's imagePullSecrets",
            id="image-pull",
        ),
        pytest.param(
            gateway_status(
                waiting="CreateContainerConfigError", waiting_message='secret "chat-key" not found'
            ),
            "ContainerConfigError",
            f'Gateway Pod "{POD}" cannot start its gateway container: '
            f'secret "chat-key" not found; {CONFIG_ADVICE}',
            id="config-error",
        ),
        pytest.param(
            gateway_status(waiting="CrashLoopBackOff", restarts=3, last_terminated="OOMKilled"),
            "OOMKilled",
            f'Gateway Pod "{POD}" was OOMKilled; raise spec.endpoint.resources.limits.memory',
            id="oom",
        ),
        pytest.param(
            gateway_status(waiting="CrashLoopBackOff", restarts=3, last_terminated="Error"),
            "CrashLoopBackOff",
            f'Gateway Pod "{POD}" is in CrashLoopBackOff; '
            "inspect its gateway-container logs and configuration",
            id="crash-loop",
        ),
    ],
)
def test_a_gateway_fault_degrades_the_service_with_the_backends_reason_naming_the_gateway(
    serving_path: ServingPath, pod_status: Manifest, reason: str, message: str
) -> None:
    serving_path.gateway_pod(pod_status)

    status = serving_path.reconcile()

    assert status["phase"] == "Degraded"
    assert condition_values(status) == {
        "AutoscalingReady": AUTOSCALING_OK,
        "Ready": ("False", "GatewayUnavailable", GATEWAY + message),
        "Degraded": ("True", reason, message),
    }
    assert serving_path.warnings() == [(reason, "ObserveGatewayFailure", message)]


def test_a_missing_api_key_secret_is_reported_in_the_kubelets_words_and_its_creation_recovers(
    serving_path: ServingPath,
) -> None:
    """The kubelet says why a Secret volume cannot be mounted only in a FailedMount event; the
    pod's own status shows a container still being created."""
    pod = serving_path.gateway_pod(gateway_status(waiting="ContainerCreating"))
    kubelet_event(serving_path.api_client, serving_path.namespace, pod, "FailedMount", "x")
    kubelet_event(
        serving_path.api_client, serving_path.namespace, pod, "FailedMount", MOUNT_FAILURE
    )

    failing = serving_path.reconcile()

    message = f'Gateway Pod "{POD}" cannot start its gateway container: {MOUNT_FAILURE}; '
    message += CONFIG_ADVICE
    assert failing["phase"] == "Degraded"
    assert condition_values(failing)["Degraded"] == ("True", "ContainerConfigError", message)
    assert condition_values(failing)["Ready"] == ("False", "GatewayUnavailable", GATEWAY + message)

    # The Secret is created: the kubelet mounts it, starts the gateway, and it becomes ready.
    ready = gateway_status(running=True, ready=True)
    ready["phase"] = "Running"
    ready["conditions"] = [{"type": "PodReadyToStartContainers", "status": "True"}]
    set_pod_status(serving_path.api_client, serving_path.namespace, POD, ready)
    set_gateway_available(serving_path.api_client, serving_path.namespace, SVC)

    recovered = serving_path.reconcile()

    assert recovered["phase"] == "ScaledToZero"
    assert condition_values(recovered) == {
        "AutoscalingReady": AUTOSCALING_OK,
        "Ready": SCALED_TO_ZERO,
        "Degraded": INACTIVE,
    }
    recoveries = [
        e["reason"]
        for e in events(serving_path.api_client, serving_path.namespace)
        if e["type"] == "Normal"
    ]
    assert recoveries == ["BackendRecovered"]


def test_a_mount_failure_the_kubelet_got_past_is_history(serving_path: ServingPath) -> None:
    pod = serving_path.gateway_pod(gateway_status(waiting="ContainerCreating"))
    kubelet_event(
        serving_path.api_client, serving_path.namespace, pod, "FailedMount", MOUNT_FAILURE
    )
    started = gateway_status(waiting="ContainerCreating")
    started["conditions"] = [{"type": "PodReadyToStartContainers", "status": "True"}]
    set_pod_status(serving_path.api_client, serving_path.namespace, POD, started)

    status = serving_path.reconcile()

    assert condition_values(status)["Degraded"][:2] == ("False", "Inactive")
    assert condition_values(status)["Ready"] == (
        "False",
        "GatewayUnavailable",
        f'{GATEWAY}Gateway Pod "{POD}" is starting',
    )


def test_ready_backends_behind_an_unavailable_gateway_serve_nobody(
    serving_path: ServingPath,
) -> None:
    set_deployment_status(
        serving_path.api_client, serving_path.namespace, SVC, {"replicas": 1, "readyReplicas": 1}
    )
    serving_path.gateway_pod(gateway_status(running=True, ready=False))

    status = serving_path.reconcile()

    assert (status["phase"], status["replicas"]) == ("Ready", 1)
    assert condition_values(status)["Ready"] == (
        "False",
        "GatewayUnavailable",
        f'{GATEWAY}Gateway Pod "{POD}" is starting',
    )
    assert condition_values(status)["Degraded"][:2] == ("False", "Healthy")

    set_gateway_available(serving_path.api_client, serving_path.namespace, SVC)
    assert condition_values(serving_path.reconcile())["Ready"] == (
        "True",
        "Available",
        "Serving pods are ready",
    )


def test_kedas_verdict_on_the_scaled_object_is_autoscaling_ready(
    serving_path: ServingPath,
) -> None:
    set_gateway_available(serving_path.api_client, serving_path.namespace, SVC)

    def keda_says(status: str, reason: str, message: str) -> Manifest:
        ready = {"type": "Ready", "status": status, "reason": reason, "message": message}
        replace_status(
            serving_path.api_client,
            "keda.sh/v1alpha1",
            "ScaledObject",
            serving_path.namespace,
            SVC,
            {"conditions": [ready, {"type": "Active", "status": "False"}]},
        )
        return serving_path.reconcile()

    refused = keda_says("False", "ScaledObjectCheckFailed", "no triggers defined")
    assert condition_values(refused)["AutoscalingReady"] == (
        "False",
        "ScaledObjectNotReady",
        f'KEDA reports ScaledObject "{SVC}" not ready (ScaledObjectCheckFailed): '
        "no triggers defined",
    )
    assert refused["phase"] == "ScaledToZero"
    assert condition_values(refused)["Ready"] == SCALED_TO_ZERO

    accepted = keda_says("True", "ScaledObjectReady", "ScaledObject is defined correctly")
    assert condition_values(accepted)["AutoscalingReady"] == AUTOSCALING_OK
