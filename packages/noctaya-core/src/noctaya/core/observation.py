"""What is the backend doing? Classify vendor-neutral pod and Deployment facts into one observation.

The classification is deliberately coarse and stable: users and alerts key on the reason
(`ImagePullFailed`, `OOMKilled`, ...), so each rule, message and priority is fixed. The adapter
that talks to the platform only translates its objects into `PodFacts` and `DeploymentFacts`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

IMAGE_PULL_FAILED = "ImagePullFailed"
OOM_KILLED = "OOMKilled"
CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
CONTAINER_RESTARTING = "ContainerRestarting"
SCHEDULING_DELAYED = "SchedulingDelayed"
MODEL_LOADING = "ModelLoading"
STARTING = "Starting"
PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
ACTIVATING = "Activating"

_IMAGE_PULL_WAITING_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "RegistryUnavailable"}
)
_FINISHED_POD_PHASES = frozenset({"Succeeded", "Failed"})
_RESTARTS_BEFORE_DEGRADED = 2
# Lower wins when several pods disagree; any reason not listed ranks last.
_PRIORITY = {
    IMAGE_PULL_FAILED: 0,
    OOM_KILLED: 1,
    CRASH_LOOP_BACK_OFF: 2,
    CONTAINER_RESTARTING: 3,
    SCHEDULING_DELAYED: 4,
    MODEL_LOADING: 5,
}
_LOWEST_PRIORITY = 6


@dataclass(frozen=True)
class PodFacts:
    """One backend pod as the classification needs it; container facts are the `serving` one's."""

    name: str
    terminating: bool = False
    phase: str = "Pending"
    waiting_reason: str | None = None
    terminated_reason: str | None = None
    last_terminated_reason: str | None = None
    restart_count: int = 0
    running: bool = False
    ready: bool = False
    scheduled_false_reason: str | None = None

    @property
    def considered(self) -> bool:
        """Terminating and finished pods say nothing about whether the backend can activate."""
        return not self.terminating and self.phase not in _FINISHED_POD_PHASES


@dataclass(frozen=True)
class DeploymentFacts:
    """The backend Deployment's replica counts and its `Progressing` condition, if any."""

    replicas: int = 0
    ready_replicas: int = 0
    progressing_status: str | None = None
    progressing_reason: str | None = None

    @property
    def progress_deadline_exceeded(self) -> bool:
        return (
            self.progressing_status == "False"
            and self.progressing_reason == PROGRESS_DEADLINE_EXCEEDED
        )


@dataclass(frozen=True)
class PodObservation:
    """The single most telling fact about one pod (or the Deployment as a whole)."""

    reason: str
    message: str
    degraded: bool

    @property
    def priority(self) -> int:
        return _PRIORITY.get(self.reason, _LOWEST_PRIORITY)


@dataclass(frozen=True)
class BackendObservation:
    """Everything status computation needs from the backend: the winning observation and counts."""

    reason: str
    message: str
    degraded: bool
    replicas: int
    ready_replicas: int
    active_pods: int


def classify_pod(pod: PodFacts) -> PodObservation:
    """Apply the per-pod rules in order; the first that matches describes the pod."""
    subject = f'Backend Pod "{pod.name}"'
    if pod.waiting_reason in _IMAGE_PULL_WAITING_REASONS:
        return PodObservation(
            IMAGE_PULL_FAILED,
            f"{subject} cannot pull its serving image; check the image and imagePullSecrets",
            degraded=True,
        )
    if OOM_KILLED in (pod.terminated_reason, pod.last_terminated_reason):
        return PodObservation(
            OOM_KILLED,
            f"{subject} was OOMKilled; inspect its memory limit and model runtime requirements",
            degraded=True,
        )
    if pod.waiting_reason == CRASH_LOOP_BACK_OFF:
        return PodObservation(
            CRASH_LOOP_BACK_OFF,
            f"{subject} is in CrashLoopBackOff; "
            "inspect its serving-container logs and configuration",
            degraded=True,
        )
    if pod.restart_count >= _RESTARTS_BEFORE_DEGRADED:
        return PodObservation(
            CONTAINER_RESTARTING,
            f"{subject} repeatedly restarted; inspect its serving-container logs and exit reason",
            degraded=True,
        )
    if pod.scheduled_false_reason == "Unschedulable":
        return PodObservation(
            SCHEDULING_DELAYED,
            f"{subject} is unschedulable; inspect accelerator capacity, selectors, "
            "tolerations, and scheduler events",
            degraded=False,
        )
    if pod.running and not pod.ready:
        return PodObservation(
            MODEL_LOADING,
            f"{subject} is running while the model loads and readiness checks complete",
            degraded=False,
        )
    return PodObservation(STARTING, f"{subject} is starting", degraded=False)


def observe_backend(deployment: DeploymentFacts, pods: Iterable[PodFacts]) -> BackendObservation:
    """Reduce the Deployment and its pods to one observation: deadline first, then worst pod."""
    considered = [pod for pod in pods if pod.considered]
    winner = _winning_observation(deployment, considered)
    return BackendObservation(
        reason=winner.reason,
        message=winner.message,
        degraded=winner.degraded,
        replicas=deployment.replicas,
        ready_replicas=deployment.ready_replicas,
        active_pods=len(considered),
    )


def _winning_observation(deployment: DeploymentFacts, considered: list[PodFacts]) -> PodObservation:
    has_workload = deployment.replicas > 0 or deployment.ready_replicas > 0 or bool(considered)
    if has_workload and deployment.progress_deadline_exceeded:
        return PodObservation(
            PROGRESS_DEADLINE_EXCEEDED,
            "Backend Deployment exceeded its progress deadline; inspect its Pods and events",
            degraded=True,
        )
    if not considered:
        return PodObservation(
            ACTIVATING, "Waiting for the backend Deployment to create a serving Pod", degraded=False
        )
    return min(
        (classify_pod(pod) for pod in considered),
        key=lambda observation: (observation.priority, observation.message),
    )
