"""Failure classification: each pod rule, the priority between pods, the deadline; the
backend's exactly as the contract has it, the gateway's with the same reasons and its own
words, and KEDA's verdict on the ScaledObject."""

from collections.abc import Iterable

import pytest
from noctaya.core.observation import (
    BACKEND,
    GATEWAY,
    DeploymentFacts,
    PodFacts,
    PodObservation,
    ScaledObjectFacts,
    TierObservation,
    autoscaling_failure,
    classify_pod,
    observe_tier,
)

NO_DEPLOYMENT_ACTIVITY = DeploymentFacts()
SECRET_MISSING = 'MountVolume.SetUp failed for volume "client-auth" : secret "key" not found'


def observe_backend(deployment: DeploymentFacts, pods: Iterable[PodFacts]) -> TierObservation:
    return observe_tier(BACKEND, deployment, pods)


DEADLINE_EXCEEDED = DeploymentFacts(
    replicas=1, progressing_status="False", progressing_reason="ProgressDeadlineExceeded"
)
DEADLINE_MESSAGE = "Backend Deployment exceeded its progress deadline; inspect its Pods and events"
IMAGE_PULL_MESSAGE = (
    'Backend Pod "llama-0" cannot pull its serving image; check the image and imagePullSecrets'
)


@pytest.mark.parametrize(
    "waiting_reason",
    ["ErrImagePull", "ImagePullBackOff", "InvalidImageName", "RegistryUnavailable"],
)
def test_every_image_pull_waiting_reason_is_an_image_pull_failure(waiting_reason: str) -> None:
    observation = classify_pod(PodFacts("llama-0", waiting_reason=waiting_reason))
    assert (observation.reason, observation.message, observation.degraded) == (
        "ImagePullFailed",
        IMAGE_PULL_MESSAGE,
        True,
    )


@pytest.mark.parametrize(
    "pod",
    [
        PodFacts("llama-0", terminated_reason="OOMKilled"),
        PodFacts("llama-0", last_terminated_reason="OOMKilled", running=True, restart_count=5),
        PodFacts("llama-0", waiting_reason="CrashLoopBackOff", last_terminated_reason="OOMKilled"),
    ],
    ids=["current-termination", "last-termination", "beats-crash-loop"],
)
def test_oom_kill_in_current_or_last_termination_is_reported_as_oom(pod: PodFacts) -> None:
    observation = classify_pod(pod)
    assert observation.reason == "OOMKilled"
    assert observation.message == (
        'Backend Pod "llama-0" was OOMKilled; '
        "inspect its memory limit and model runtime requirements"
    )
    assert observation.degraded


def test_image_pull_failure_wins_over_an_earlier_oom_kill_of_the_same_pod() -> None:
    pod = PodFacts("llama-0", waiting_reason="ImagePullBackOff", last_terminated_reason="OOMKilled")
    assert classify_pod(pod).reason == "ImagePullFailed"


def test_crash_loop_is_reported_before_the_restart_count() -> None:
    observation = classify_pod(
        PodFacts(
            "llama-0",
            waiting_reason="CrashLoopBackOff",
            restart_count=7,
            last_terminated_reason="Error",
        )
    )
    assert (observation.reason, observation.degraded) == ("CrashLoopBackOff", True)
    assert observation.message == (
        'Backend Pod "llama-0" is in CrashLoopBackOff; '
        "inspect its serving-container logs and configuration"
    )


@pytest.mark.parametrize(("restarts", "reason"), [(1, "ModelLoading"), (2, "ContainerRestarting")])
def test_two_restarts_make_a_running_pod_degraded_one_does_not(restarts: int, reason: str) -> None:
    observation = classify_pod(PodFacts("llama-0", running=True, restart_count=restarts))
    assert observation.reason == reason
    assert observation.degraded is (reason == "ContainerRestarting")


def test_repeated_restart_message_points_at_logs_and_exit_reason() -> None:
    observation = classify_pod(PodFacts("llama-0", restart_count=2))
    assert observation.message == (
        'Backend Pod "llama-0" repeatedly restarted; '
        "inspect its serving-container logs and exit reason"
    )


def test_unschedulable_pod_is_a_scheduling_delay_not_a_failure() -> None:
    observation = classify_pod(PodFacts("llama-0", scheduled_false_reason="Unschedulable"))
    assert (observation.reason, observation.degraded) == ("SchedulingDelayed", False)
    assert observation.message == (
        'Backend Pod "llama-0" is unschedulable; inspect accelerator capacity, selectors, '
        "tolerations, and scheduler events"
    )


VOLUME_CONFLICT = (
    "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, "
    "2 node(s) didn't match PersistentVolume's node affinity. preemption: 0/3 nodes are "
    "available: 3 Preemption is not helpful for scheduling."
)


def test_a_pod_whose_volume_is_on_a_node_it_cannot_use_names_the_cache_and_its_recovery() -> None:
    pod = PodFacts(
        "llama-0", scheduled_false_reason="Unschedulable", scheduled_false_message=VOLUME_CONFLICT
    )
    observation = classify_pod(pod)
    assert (observation.reason, observation.degraded) == ("CacheNodeUnavailable", True)
    assert observation.message == (
        'Backend Pod "llama-0" cannot be scheduled: its cache volume belongs to a node it cannot '
        f"run on ({VOLUME_CONFLICT.rstrip('.')}); a NodeLocalPVC cache lives on one node: make "
        "that node schedulable again, or delete the cache claim to fetch the model again on "
        "another node"
    )
    assert classify_pod(pod, GATEWAY).reason == "SchedulingDelayed"  # gateways have no cache


@pytest.mark.parametrize(
    "said",
    [
        "0/3 nodes are available: 1 node(s) were unschedulable, "
        "2 node(s) didn't match PersistentVolume's node affinity.",
        "0/3 nodes are available: 1 node(s) had untolerated taint "
        "{node.kubernetes.io/unreachable: }, 2 node(s) didn't match PersistentVolume's node "
        "affinity. preemption: 0/3 nodes are available: 3 Preemption is not helpful for "
        "scheduling.",
        "0/2 nodes are available: 2 node(s) didn't match PersistentVolume's node affinity. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        "0/3 nodes are available: 1 node(s) were unschedulable, "
        "2 node(s) had volume node affinity conflict.",
    ],
    ids=["cordoned", "unreachable", "node-gone", "kubernetes-1.29-words"],
)
def test_a_volume_pinned_to_a_node_that_takes_no_pods_is_cache_node_unavailable(said: str) -> None:
    pod = PodFacts("llama-0", scheduled_false_reason="Unschedulable", scheduled_false_message=said)
    assert classify_pod(pod).reason == "CacheNodeUnavailable"


@pytest.mark.parametrize(
    "said",
    [
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        "0/3 nodes are available: 1 node(s) didn't match PersistentVolume's node affinity, "
        "2 Insufficient nvidia.com/gpu.",
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu.",
    ],
    ids=["no-volume", "volume-node-full", "cordoned-without-volume"],
)
def test_an_unschedulable_pod_whose_volume_node_may_make_room_is_a_scheduling_delay(
    said: str,
) -> None:
    pod = PodFacts("llama-0", scheduled_false_reason="Unschedulable", scheduled_false_message=said)
    assert classify_pod(pod).reason == "SchedulingDelayed"


def test_scheduling_false_for_another_reason_is_just_starting() -> None:
    observation = classify_pod(PodFacts("llama-0", scheduled_false_reason="SchedulerError"))
    assert observation.reason == "Starting"


def test_running_but_not_ready_pod_is_loading_its_model() -> None:
    observation = classify_pod(PodFacts("llama-0", running=True, ready=False))
    assert (observation.reason, observation.degraded) == ("ModelLoading", False)
    assert observation.message == (
        'Backend Pod "llama-0" is running while the model loads and readiness checks complete'
    )


@pytest.mark.parametrize(
    "pod",
    [
        PodFacts("llama-0"),
        PodFacts("llama-0", waiting_reason="ContainerCreating"),
        PodFacts("llama-0", running=True, ready=True),
    ],
    ids=["no-container-status", "container-creating", "running-and-ready"],
)
def test_anything_else_is_starting(pod: PodFacts) -> None:
    observation = classify_pod(pod)
    assert observation == classify_pod(PodFacts("llama-0"))
    assert (observation.reason, observation.message, observation.degraded) == (
        "Starting",
        'Backend Pod "llama-0" is starting',
        False,
    )


def test_no_pods_means_waiting_for_the_deployment_to_create_one() -> None:
    assert observe_backend(NO_DEPLOYMENT_ACTIVITY, []) == TierObservation(
        reason="Activating",
        message="Waiting for the backend Deployment to create a serving Pod",
        degraded=False,
        replicas=0,
        ready_replicas=0,
        active_pods=0,
    )


@pytest.mark.parametrize(
    "ignored",
    [
        PodFacts("old-0", terminating=True, waiting_reason="ImagePullBackOff"),
        PodFacts("old-0", phase="Failed", terminated_reason="OOMKilled"),
        PodFacts("old-0", phase="Succeeded", restart_count=9),
    ],
    ids=["terminating", "failed", "succeeded"],
)
def test_terminating_and_finished_pods_are_ignored(ignored: PodFacts) -> None:
    observation = observe_backend(NO_DEPLOYMENT_ACTIVITY, [ignored])
    assert (observation.reason, observation.active_pods) == ("Activating", 0)
    beside_loading = observe_backend(
        NO_DEPLOYMENT_ACTIVITY, [ignored, PodFacts("new-0", phase="Running", running=True)]
    )
    assert (beside_loading.reason, beside_loading.active_pods) == ("ModelLoading", 1)


def test_the_highest_priority_failure_among_pods_wins() -> None:
    pods = [
        PodFacts("a-loading", running=True),
        PodFacts("b-unschedulable", scheduled_false_reason="Unschedulable"),
        PodFacts(
            "b-cache-elsewhere",
            scheduled_false_reason="Unschedulable",
            scheduled_false_message=VOLUME_CONFLICT,
        ),
        PodFacts("c-restarting", restart_count=3),
        PodFacts("d-crashing", waiting_reason="CrashLoopBackOff"),
        PodFacts("e-oom", terminated_reason="OOMKilled"),
        PodFacts("f-pull", waiting_reason="ErrImagePull"),
        PodFacts("g-starting"),
    ]
    expected = [
        "ImagePullFailed",
        "OOMKilled",
        "CrashLoopBackOff",
        "ContainerRestarting",
        "CacheNodeUnavailable",
        "SchedulingDelayed",
        "ModelLoading",
        "Starting",
    ]
    winners = []
    while pods:
        winner = observe_backend(NO_DEPLOYMENT_ACTIVITY, pods)
        winners.append(winner.reason)
        pods = [pod for pod in pods if classify_pod(pod).reason != winner.reason]
    assert winners == expected


def test_equal_priority_is_broken_by_the_message_in_ascending_order() -> None:
    pods = [
        PodFacts("llama-b", waiting_reason="ErrImagePull"),
        PodFacts("llama-a", waiting_reason="ImagePullBackOff"),
        PodFacts("llama-c", waiting_reason="InvalidImageName"),
    ]
    observation = observe_backend(NO_DEPLOYMENT_ACTIVITY, pods)
    assert observation.message.startswith('Backend Pod "llama-a"')
    assert observation.active_pods == 3


def test_a_failure_on_one_pod_shows_even_when_another_serves() -> None:
    deployment = DeploymentFacts(replicas=2, ready_replicas=1)
    pods = [
        PodFacts("llama-0", phase="Running", running=True, ready=True),
        PodFacts("llama-1", waiting_reason="CrashLoopBackOff"),
    ]
    observation = observe_backend(deployment, pods)
    assert (observation.reason, observation.degraded) == ("CrashLoopBackOff", True)
    assert (observation.replicas, observation.ready_replicas, observation.active_pods) == (2, 1, 2)


def test_progress_deadline_overrides_every_pod_observation() -> None:
    pods = [PodFacts("llama-0", waiting_reason="ErrImagePull")]
    observation = observe_backend(DEADLINE_EXCEEDED, pods)
    assert (observation.reason, observation.message, observation.degraded) == (
        "ProgressDeadlineExceeded",
        DEADLINE_MESSAGE,
        True,
    )


@pytest.mark.parametrize(
    ("deployment", "pods"),
    [
        (DeploymentFacts(replicas=1), []),
        (DeploymentFacts(ready_replicas=1), []),
        (DeploymentFacts(), [PodFacts("llama-0")]),
    ],
    ids=["replicas", "ready-replicas", "considered-pod"],
)
def test_progress_deadline_counts_once_the_backend_has_any_workload(
    deployment: DeploymentFacts, pods: list[PodFacts]
) -> None:
    exceeded = DeploymentFacts(
        replicas=deployment.replicas,
        ready_replicas=deployment.ready_replicas,
        progressing_status="False",
        progressing_reason="ProgressDeadlineExceeded",
    )
    assert observe_backend(exceeded, pods).reason == "ProgressDeadlineExceeded"


def test_stale_progress_deadline_on_a_scaled_to_zero_deployment_is_ignored() -> None:
    exceeded_at_zero = DeploymentFacts(
        progressing_status="False", progressing_reason="ProgressDeadlineExceeded"
    )
    terminating = PodFacts("llama-0", terminating=True)
    observation = observe_backend(exceeded_at_zero, [terminating])
    assert (observation.reason, observation.degraded) == ("Activating", False)


@pytest.mark.parametrize(
    ("status", "reason"),
    [("True", "ProgressDeadlineExceeded"), ("False", "ReplicaSetUpdated"), (None, None)],
)
def test_progressing_condition_other_than_deadline_exceeded_does_not_degrade(
    status: str | None, reason: str | None
) -> None:
    deployment = DeploymentFacts(replicas=1, progressing_status=status, progressing_reason=reason)
    observation = observe_backend(deployment, [PodFacts("llama-0", running=True)])
    assert (observation.reason, observation.degraded) == ("ModelLoading", False)


@pytest.mark.parametrize(
    ("pod", "reason", "message"),
    [
        (
            PodFacts("gw-0", waiting_reason="ImagePullBackOff"),
            "ImagePullFailed",
            'Gateway Pod "gw-0" cannot pull its gateway image; '
            "check the operator's gateway image and the service's imagePullSecrets",
        ),
        (
            PodFacts("gw-0", waiting_reason="CrashLoopBackOff", last_terminated_reason="OOMKilled"),
            "OOMKilled",
            'Gateway Pod "gw-0" was OOMKilled; raise spec.endpoint.resources.limits.memory',
        ),
        (
            PodFacts("gw-0", waiting_reason="CrashLoopBackOff", restart_count=3),
            "CrashLoopBackOff",
            'Gateway Pod "gw-0" is in CrashLoopBackOff; '
            "inspect its gateway-container logs and configuration",
        ),
        (
            PodFacts("gw-0", running=True, restart_count=2),
            "ContainerRestarting",
            'Gateway Pod "gw-0" repeatedly restarted; '
            "inspect its gateway-container logs and exit reason",
        ),
        (
            PodFacts(
                "gw-0",
                waiting_reason="CreateContainerConfigError",
                waiting_message='secret "key" not found',
            ),
            "ContainerConfigError",
            'Gateway Pod "gw-0" cannot start its gateway container: secret "key" not found; '
            "create the Secret and key it names (spec.endpoint.authentication)",
        ),
        (
            PodFacts("gw-0", waiting_reason="ContainerCreating", mount_failure=SECRET_MISSING),
            "ContainerConfigError",
            f'Gateway Pod "gw-0" cannot start its gateway container: {SECRET_MISSING}; '
            "create the Secret and key it names (spec.endpoint.authentication)",
        ),
    ],
)
def test_gateway_faults_carry_the_backends_reasons_and_name_the_gateway(
    pod: PodFacts, reason: str, message: str
) -> None:
    assert classify_pod(pod, GATEWAY) == PodObservation(reason, message, degraded=True)


@pytest.mark.parametrize(
    "pod",
    [
        PodFacts(
            "gw-0",
            waiting_reason="ContainerCreating",
            mount_failure=SECRET_MISSING,
            sandbox_ready=True,
        ),
        PodFacts("gw-0", running=True, mount_failure=SECRET_MISSING),
        PodFacts("gw-0", waiting_reason="CrashLoopBackOff", mount_failure=SECRET_MISSING),
    ],
)
def test_a_mount_failure_counts_only_while_it_keeps_the_container_from_starting(
    pod: PodFacts,
) -> None:
    assert classify_pod(pod, GATEWAY).reason != "ContainerConfigError"


def test_the_backend_reports_a_container_it_cannot_assemble_as_starting_as_before() -> None:
    for pod in (
        PodFacts("llama-0", waiting_reason="CreateContainerConfigError", waiting_message="no"),
        PodFacts("llama-0", waiting_reason="ContainerCreating", mount_failure=SECRET_MISSING),
    ):
        assert classify_pod(pod) == classify_pod(PodFacts("llama-0"))


def test_a_gateway_running_but_not_ready_is_starting_and_no_pod_is_activating() -> None:
    running = classify_pod(PodFacts("gw-0", running=True), GATEWAY)
    assert (running.reason, running.message, running.degraded) == (
        "Starting",
        'Gateway Pod "gw-0" is starting',
        False,
    )
    none = observe_tier(GATEWAY, DeploymentFacts(replicas=1), [])
    assert (none.reason, none.message, none.serving) == (
        "Activating",
        "Waiting for the gateway Deployment to create a gateway Pod",
        False,
    )


def test_a_gateway_with_an_available_replica_serves_beside_a_failing_one() -> None:
    deployment = DeploymentFacts(replicas=2, ready_replicas=1, available_replicas=1)
    pods = [
        PodFacts("gw-a", phase="Running", running=True, ready=True),
        PodFacts("gw-b", waiting_reason="ErrImagePull"),
    ]
    observation = observe_tier(GATEWAY, deployment, pods)
    assert (observation.serving, observation.degraded, observation.reason) == (
        True,
        True,
        "ImagePullFailed",
    )


def test_the_gateway_deadline_names_the_gateway() -> None:
    observation = observe_tier(GATEWAY, DEADLINE_EXCEEDED, [PodFacts("gw-0")])
    assert (observation.reason, observation.message) == (
        "ProgressDeadlineExceeded",
        "Gateway Deployment exceeded its progress deadline; inspect its Pods and events",
    )


@pytest.mark.parametrize(
    ("facts", "failure"),
    [
        (None, None),
        (ScaledObjectFacts("llama"), None),
        (ScaledObjectFacts("llama", "Unknown", "ScaledObjectCheckFailed", "starting"), None),
        (ScaledObjectFacts("llama", "True", "ScaledObjectReady", "fine"), None),
        (
            ScaledObjectFacts(
                "llama",
                "False",
                "ScaledObjectCheckFailed",
                "ScaledObject doesn't have correct triggers specification",
            ),
            'KEDA reports ScaledObject "llama" not ready (ScaledObjectCheckFailed): '
            "ScaledObject doesn't have correct triggers specification",
        ),
        (
            ScaledObjectFacts("llama", "False"),
            'KEDA reports ScaledObject "llama" not ready: no message',
        ),
    ],
)
def test_only_kedas_ready_false_is_an_autoscaling_failure_quoted_whole(
    facts: ScaledObjectFacts | None, failure: str | None
) -> None:
    assert autoscaling_failure(facts) == failure
