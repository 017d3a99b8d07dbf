"""Pod and Deployment JSON, as the API server returns them, read into core observation facts."""

from typing import Any

import pytest
from noctaya.core.observation import BACKEND, DeploymentFacts, PodFacts, TierObservation
from noctaya.k8s.observe import deployment_facts, observe_tier_objects, pod_facts

LABELS = {
    "app.kubernetes.io/name": "llama",
    "app.kubernetes.io/managed-by": "noctaya",
    "serving.noctaya.io/llmservice": "llama",
    "serving.noctaya.io/runtime": "vllm-cuda",
}


def backend_pod(
    name: str = "llama-7d9c6b5f4-x2x8q",
    *,
    phase: str = "Running",
    serving: dict[str, Any] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    deletion_timestamp: str | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "team-a",
        "uid": "0d1b0a5e-5f1c-4c53-9a6e-2b1f3c0d9e77",
        "labels": LABELS,
        "creationTimestamp": "2025-03-01T10:00:00Z",
    }
    if deletion_timestamp is not None:
        metadata["deletionTimestamp"] = deletion_timestamp
    sidecar = {
        "name": "log-shipper",
        "ready": False,
        "restartCount": 9,
        "image": "fluent/fluent-bit:3.0",
        "imageID": "",
        "started": False,
        "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling"}},
        "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
    }
    statuses = [sidecar] if serving is None else [sidecar, {"name": "serving", **serving}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "serving", "image": "vllm/vllm-openai:v0.8.5"}]},
        "status": {
            "phase": phase,
            "conditions": conditions
            if conditions is not None
            else [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": None},
                {"type": "Initialized", "status": "True", "lastTransitionTime": None},
            ],
            "hostIP": "10.0.0.12",
            "podIP": "10.244.1.7",
            "startTime": "2025-03-01T10:00:01Z",
            "containerStatuses": statuses,
        },
    }


def serving_status(
    *,
    state: dict[str, Any],
    last_state: dict[str, Any] | None = None,
    ready: bool = False,
    restarts: int = 0,
) -> dict[str, Any]:
    return {
        "ready": ready,
        "restartCount": restarts,
        "image": "vllm/vllm-openai:v0.8.5",
        "imageID": "docker.io/vllm/vllm-openai@sha256:5c0e",
        "containerID": "containerd://8f1e",
        "started": "running" in state,
        "state": state,
        "lastState": last_state or {},
    }


RUNNING = {"running": {"startedAt": "2025-03-01T10:00:05Z"}}


def observe(deployment: dict[str, Any], pods: list[dict[str, Any]]) -> TierObservation:
    return observe_tier_objects(BACKEND, deployment, pods)


def backend_deployment(
    *, replicas: int | None = None, ready: int | None = None, progressing: dict[str, Any] | None
) -> dict[str, Any]:
    status: dict[str, Any] = {"observedGeneration": 2}
    if replicas is not None:
        status.update(replicas=replicas, updatedReplicas=replicas, unavailableReplicas=replicas)
    if ready is not None:
        status.update(readyReplicas=ready, availableReplicas=ready)
    available = {
        "type": "Available",
        "status": "False",
        "reason": "MinimumReplicasUnavailable",
        "message": "Deployment does not have minimum availability.",
        "lastUpdateTime": "2025-03-01T10:00:00Z",
        "lastTransitionTime": "2025-03-01T10:00:00Z",
    }
    status["conditions"] = [available] + ([progressing] if progressing else [])
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llama", "namespace": "team-a", "generation": 2},
        "spec": {"progressDeadlineSeconds": 600, "selector": {"matchLabels": LABELS}},
        "status": status,
    }


DEADLINE_EXCEEDED = {
    "type": "Progressing",
    "status": "False",
    "reason": "ProgressDeadlineExceeded",
    "message": 'ReplicaSet "llama-7d9c6b5f4" has timed out progressing.',
    "lastUpdateTime": "2025-03-01T10:10:00Z",
    "lastTransitionTime": "2025-03-01T10:10:00Z",
}
PROGRESSING = {
    "type": "Progressing",
    "status": "True",
    "reason": "ReplicaSetUpdated",
    "message": 'ReplicaSet "llama-7d9c6b5f4" is progressing.',
}


def test_image_pull_back_off_of_the_serving_container_is_read() -> None:
    pod = backend_pod(
        phase="Pending",
        serving=serving_status(
            state={
                "waiting": {
                    "reason": "ImagePullBackOff",
                    "message": 'Back-off pulling image "registry.invalid/vllm:nope"',
                }
            }
        ),
    )
    assert pod_facts(pod) == PodFacts(
        name="llama-7d9c6b5f4-x2x8q",
        phase="Pending",
        waiting_reason="ImagePullBackOff",
        waiting_message='Back-off pulling image "registry.invalid/vllm:nope"',
    )


def test_oom_kill_in_the_last_termination_is_read_next_to_the_current_state() -> None:
    pod = backend_pod(
        serving=serving_status(
            state={"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
            last_state={"terminated": {"reason": "OOMKilled", "exitCode": 137, "finishedAt": "x"}},
            restarts=3,
        )
    )
    facts = pod_facts(pod)
    assert (facts.waiting_reason, facts.last_terminated_reason, facts.restart_count) == (
        "CrashLoopBackOff",
        "OOMKilled",
        3,
    )
    assert facts.terminated_reason is None
    assert not facts.running


def test_current_termination_reason_is_read() -> None:
    pod = backend_pod(
        serving=serving_status(state={"terminated": {"reason": "OOMKilled", "exitCode": 137}})
    )
    assert pod_facts(pod).terminated_reason == "OOMKilled"


def test_running_and_ready_flags_come_from_the_serving_container() -> None:
    loading = pod_facts(backend_pod(serving=serving_status(state=RUNNING, ready=False)))
    serving = pod_facts(backend_pod(serving=serving_status(state=RUNNING, ready=True)))
    assert (loading.running, loading.ready) == (True, False)
    assert (serving.running, serving.ready) == (True, True)


def test_unschedulable_pod_reports_the_scheduling_reason() -> None:
    pod = backend_pod(
        phase="Pending",
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                "lastTransitionTime": "2025-03-01T10:00:00Z",
            }
        ],
    )
    del pod["status"]["containerStatuses"]
    facts = pod_facts(pod)
    assert facts.scheduled_false_reason == "Unschedulable"
    said = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    assert facts.scheduled_false_message == said
    assert facts.waiting_reason is None


def test_scheduled_pod_has_no_scheduling_reason() -> None:
    pod = backend_pod(serving=serving_status(state=RUNNING))
    pod["status"]["conditions"][0]["reason"] = "Scheduled"
    assert pod_facts(pod).scheduled_false_reason is None
    assert pod_facts(pod).scheduled_false_message is None


def test_other_containers_never_speak_for_the_serving_one() -> None:
    facts = pod_facts(backend_pod(serving=None))
    assert facts == PodFacts(name="llama-7d9c6b5f4-x2x8q", phase="Running")
    assert observe({"status": {}}, [backend_pod(serving=None)]).reason == "Starting"


def test_deletion_timestamp_marks_the_pod_terminating() -> None:
    pod = backend_pod(
        serving=serving_status(state={"waiting": {"reason": "ErrImagePull"}}),
        deletion_timestamp="2025-03-01T10:20:00Z",
    )
    assert pod_facts(pod).terminating


def test_deployment_counts_and_deadline_condition_are_read() -> None:
    deployment = backend_deployment(replicas=2, ready=1, progressing=DEADLINE_EXCEEDED)
    assert deployment_facts(deployment) == DeploymentFacts(
        replicas=2,
        ready_replicas=1,
        available_replicas=1,
        progressing_status="False",
        progressing_reason="ProgressDeadlineExceeded",
    )


def test_fresh_deployment_without_status_counts_read_as_zero() -> None:
    assert deployment_facts(backend_deployment(progressing=None)) == DeploymentFacts()
    assert deployment_facts({"metadata": {"name": "llama"}}) == DeploymentFacts()


def test_terminating_and_finished_pods_are_ignored_by_the_observation() -> None:
    pull_failure = serving_status(state={"waiting": {"reason": "ErrImagePull"}})
    pods = [
        backend_pod("old-1", serving=pull_failure, deletion_timestamp="2025-03-01T10:20:00Z"),
        backend_pod("old-2", phase="Failed", serving=pull_failure),
        backend_pod("old-3", phase="Succeeded", serving=pull_failure),
    ]
    observation = observe(backend_deployment(progressing=PROGRESSING), pods)
    assert (observation.reason, observation.active_pods) == ("Activating", 0)


def test_crash_looping_pod_beside_a_loading_one_degrades_the_backend() -> None:
    pods = [
        backend_pod("llama-a", serving=serving_status(state=RUNNING)),
        backend_pod(
            "llama-b",
            serving=serving_status(
                state={"waiting": {"reason": "CrashLoopBackOff"}},
                last_state={"terminated": {"reason": "Error", "exitCode": 1}},
                restarts=4,
            ),
        ),
    ]
    observation = observe(backend_deployment(replicas=2, ready=0, progressing=PROGRESSING), pods)
    assert (observation.reason, observation.degraded) == ("CrashLoopBackOff", True)
    assert observation.message.startswith('Backend Pod "llama-b" is in CrashLoopBackOff')
    assert (observation.replicas, observation.ready_replicas, observation.active_pods) == (2, 0, 2)


def test_progress_deadline_on_a_live_deployment_overrides_the_pods() -> None:
    pods = [backend_pod(serving=serving_status(state=RUNNING))]
    observation = observe(backend_deployment(replicas=1, progressing=DEADLINE_EXCEEDED), pods)
    assert (observation.reason, observation.degraded) == ("ProgressDeadlineExceeded", True)


@pytest.mark.parametrize(
    "broken",
    [
        {},
        {"metadata": None, "status": None},
        {"status": {"containerStatuses": "serving", "conditions": 7}},
        {"status": {"containerStatuses": [None, {"name": "serving", "state": []}]}},
        {"status": {"containerStatuses": [{"name": "serving", "restartCount": "2"}]}},
    ],
)
def test_partial_or_mistyped_pod_reads_as_absent_facts_instead_of_crashing(
    broken: dict[str, Any],
) -> None:
    assert pod_facts(broken) == PodFacts(name="")
