"""What is the serving path doing? Classify vendor-neutral pod and Deployment facts of each tier
(the backend, the gateway in front of it) and KEDA's verdict on the ScaledObject.

The classification is deliberately coarse and stable: users and alerts key on the reason
(`ImagePullFailed`, `OOMKilled`, ...), so each rule, message and priority is fixed, and a
gateway fault carries the same reason as the same fault of a backend, with a message that names
the gateway. The adapter that talks to the platform only translates its objects into `PodFacts`,
`DeploymentFacts` and `ScaledObjectFacts`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from noctaya.core.plan.pod_security import PodSecurity

IMAGE_PULL_FAILED = "ImagePullFailed"
CONTAINER_CONFIG_ERROR = "ContainerConfigError"
OOM_KILLED = "OOMKilled"
CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
CONTAINER_RESTARTING = "ContainerRestarting"
SCHEDULING_DELAYED = "SchedulingDelayed"
CACHE_NODE_UNAVAILABLE = "CacheNodeUnavailable"
MODEL_LOADING = "ModelLoading"
STARTING = "Starting"
PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
ACTIVATING = "Activating"
GATEWAY_UNAVAILABLE = "GatewayUnavailable"
SCALED_OBJECT_NOT_READY = "ScaledObjectNotReady"
POD_SECURITY_REJECTED = "PodSecurityRejected"

_IMAGE_PULL_WAITING_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "RegistryUnavailable"}
)
_CONFIG_WAITING_REASON = "CreateContainerConfigError"
_CREATING = "ContainerCreating"
_FINISHED_POD_PHASES = frozenset({"Succeeded", "Failed"})
_RESTARTS_BEFORE_DEGRADED = 2
# Earlier wins when several pods disagree; any reason not listed ranks last.
_PRIORITY = (
    IMAGE_PULL_FAILED,
    CONTAINER_CONFIG_ERROR,
    OOM_KILLED,
    CRASH_LOOP_BACK_OFF,
    CONTAINER_RESTARTING,
    CACHE_NODE_UNAVAILABLE,
    SCHEDULING_DELAYED,
    MODEL_LOADING,
)
_VOLUME_NODE_CONFLICTS = (
    "didn't match PersistentVolume's node affinity",  # as Kubernetes 1.37 says it
    "had volume node affinity conflict",  # as Kubernetes 1.29 says it
)
"""The scheduler's words for nodes a pod's bound volume may not be used on (VolumeBinding)."""
_NODE_UNAVAILABLE = ("node(s) were unschedulable", "node(s) had untolerated taint")
"""The scheduler's words for a node no pod may land on: cordoned, or tainted (not ready,
unreachable, out of service) against the pod's tolerations."""


@dataclass(frozen=True)
class Tier:
    """One tier of the serving path: how its messages name it, and which rules apply to it.

    `messages` maps each reason to its text, with `{pod}` and, for a configuration error, the
    kubelet's own words in `{detail}`. The running-but-not-ready pod is reported as
    `loading_reason` (the backend's model loads; a gateway is merely starting).
    """

    name: str
    messages: Mapping[str, str]
    loading_reason: str
    config_errors: bool
    """Whether a container the kubelet cannot assemble (a missing Secret or key, in a volume or
    in env) is a fault of its own. The backend reports such a pod as starting, as the
    contract has it; the gateway's only such inputs are Secrets the service names."""


BACKEND = Tier(
    name="Backend",
    messages={
        IMAGE_PULL_FAILED: "{pod} cannot pull its serving image; "
        "check the image and imagePullSecrets",
        OOM_KILLED: "{pod} was OOMKilled; inspect its memory limit and model runtime requirements",
        CRASH_LOOP_BACK_OFF: "{pod} is in CrashLoopBackOff; "
        "inspect its serving-container logs and configuration",
        CONTAINER_RESTARTING: "{pod} repeatedly restarted; "
        "inspect its serving-container logs and exit reason",
        SCHEDULING_DELAYED: "{pod} is unschedulable; inspect accelerator capacity, selectors, "
        "tolerations, and scheduler events",
        CACHE_NODE_UNAVAILABLE: "{pod} cannot be scheduled: its cache volume belongs to a node "
        "it cannot run on ({detail}); a NodeLocalPVC cache lives on one node: make that node "
        "schedulable again, or delete the cache claim to fetch the model again on another node",
        MODEL_LOADING: "{pod} is running while the model loads and readiness checks complete",
        STARTING: "{pod} is starting",
        PROGRESS_DEADLINE_EXCEEDED: "Backend Deployment exceeded its progress deadline; "
        "inspect its Pods and events",
        ACTIVATING: "Waiting for the backend Deployment to create a serving Pod",
        POD_SECURITY_REJECTED: "Pod Security admission rejects the backend Pods: {detail}",
    },
    loading_reason=MODEL_LOADING,
    config_errors=False,
)
GATEWAY = Tier(
    name="Gateway",
    messages={
        IMAGE_PULL_FAILED: "{pod} cannot pull its gateway image; "
        "check the operator's gateway image and the service's imagePullSecrets",
        CONTAINER_CONFIG_ERROR: "{pod} cannot start its gateway container: {detail}; "
        "create the Secret and key it names (spec.endpoint.authentication)",
        OOM_KILLED: "{pod} was OOMKilled; raise spec.endpoint.resources.limits.memory",
        CRASH_LOOP_BACK_OFF: "{pod} is in CrashLoopBackOff; "
        "inspect its gateway-container logs and configuration",
        CONTAINER_RESTARTING: "{pod} repeatedly restarted; "
        "inspect its gateway-container logs and exit reason",
        SCHEDULING_DELAYED: "{pod} is unschedulable; inspect node capacity, "
        "spec.endpoint.resources requests, and scheduler events",
        STARTING: "{pod} is starting",
        PROGRESS_DEADLINE_EXCEEDED: "Gateway Deployment exceeded its progress deadline; "
        "inspect its Pods and events",
        ACTIVATING: "Waiting for the gateway Deployment to create a gateway Pod",
        POD_SECURITY_REJECTED: "Pod Security admission rejects the gateway Pods: {detail}",
    },
    loading_reason=STARTING,
    config_errors=True,
)


@dataclass(frozen=True)
class PodFacts:
    """One pod as the classification needs it; container facts are its tier's container's."""

    name: str
    terminating: bool = False
    phase: str = "Pending"
    waiting_reason: str | None = None
    waiting_message: str | None = None
    terminated_reason: str | None = None
    last_terminated_reason: str | None = None
    restart_count: int = 0
    running: bool = False
    ready: bool = False
    scheduled_false_reason: str | None = None
    scheduled_false_message: str | None = None
    """The scheduler's account of why the pod fits no node, while it is unschedulable."""
    sandbox_ready: bool = False
    """The kubelet mounted the volumes and made the sandbox (PodReadyToStartContainers)."""
    mount_failure: str | None = None
    """The kubelet's last word on a volume it could not mount (a FailedMount event)."""

    @property
    def considered(self) -> bool:
        """Terminating and finished pods say nothing about whether the tier can serve."""
        return not self.terminating and self.phase not in _FINISHED_POD_PHASES

    @property
    def config_error(self) -> str | None:
        """Why the kubelet cannot assemble the container, while that keeps it from starting."""
        if self.waiting_reason == _CONFIG_WAITING_REASON:
            return self.waiting_message or _CONFIG_WAITING_REASON
        still_mounting = not (self.sandbox_ready or self.running)
        if still_mounting and self.waiting_reason in (None, _CREATING):
            return self.mount_failure
        return None


@dataclass(frozen=True)
class DeploymentFacts:
    """A tier's Deployment: replica counts and its `Progressing` condition, if any."""

    replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    progressing_status: str | None = None
    progressing_reason: str | None = None
    pod_security_rejection: str | None = None
    """The API server's words while Pod Security admission refuses the Deployment's pods."""

    @property
    def progress_deadline_exceeded(self) -> bool:
        return (
            self.progressing_status == "False"
            and self.progressing_reason == PROGRESS_DEADLINE_EXCEEDED
        )


@dataclass(frozen=True)
class ScaledObjectFacts:
    """KEDA's `Ready` condition on the service's ScaledObject, as KEDA wrote it."""

    name: str
    ready_status: str | None = None
    ready_reason: str | None = None
    ready_message: str | None = None


@dataclass(frozen=True)
class PodObservation:
    """The single most telling fact about one pod (or the Deployment as a whole)."""

    reason: str
    message: str
    degraded: bool

    @property
    def priority(self) -> int:
        return _PRIORITY.index(self.reason) if self.reason in _PRIORITY else len(_PRIORITY)


@dataclass(frozen=True)
class TierObservation:
    """What status computation needs from one tier: the winning observation and counts."""

    reason: str
    message: str
    degraded: bool
    replicas: int
    ready_replicas: int
    active_pods: int
    available_replicas: int = 0

    @property
    def serving(self) -> bool:
        """At least one replica is available: the tier can take requests."""
        return self.available_replicas > 0


@dataclass(frozen=True)
class ServiceObservation:
    """The whole serving path: backend, gateway, and KEDA's verdict on the ScaledObject."""

    backend: TierObservation
    gateway: TierObservation
    autoscaling_failure: str | None = None
    """KEDA's message when it reports the ScaledObject not ready; None otherwise."""


def classify_pod(pod: PodFacts, tier: Tier = BACKEND) -> PodObservation:
    """Apply the per-pod rules in order; the first that matches describes the pod."""

    def observed(reason: str, degraded: bool, detail: str = "") -> PodObservation:
        subject = f'{tier.name} Pod "{pod.name}"'
        return PodObservation(
            reason, tier.messages[reason].format(pod=subject, detail=detail), degraded
        )

    if pod.waiting_reason in _IMAGE_PULL_WAITING_REASONS:
        return observed(IMAGE_PULL_FAILED, degraded=True)
    if tier.config_errors and (detail := pod.config_error) is not None:
        return observed(CONTAINER_CONFIG_ERROR, degraded=True, detail=detail)
    if OOM_KILLED in (pod.terminated_reason, pod.last_terminated_reason):
        return observed(OOM_KILLED, degraded=True)
    if pod.waiting_reason == CRASH_LOOP_BACK_OFF:
        return observed(CRASH_LOOP_BACK_OFF, degraded=True)
    if pod.restart_count >= _RESTARTS_BEFORE_DEGRADED:
        return observed(CONTAINER_RESTARTING, degraded=True)
    if pod.scheduled_false_reason == "Unschedulable":
        said = pod.scheduled_false_message or ""
        if CACHE_NODE_UNAVAILABLE in tier.messages and _volume_node_unavailable(said):
            return observed(CACHE_NODE_UNAVAILABLE, degraded=True, detail=said.rstrip(". "))
        return observed(SCHEDULING_DELAYED, degraded=False)
    if pod.running and not pod.ready:
        return observed(tier.loading_reason, degraded=False)
    return observed(STARTING, degraded=False)


def _volume_node_unavailable(said: str) -> bool:
    """Whether the scheduler's account (`0/3 nodes are available: 1 node(s) were unschedulable,
    2 node(s) didn't match PersistentVolume's node affinity. preemption: ...`) says the pod's
    volume pins it to nodes that take no pods at all: every node either conflicts with the
    volume or is cordoned or tainted. A node short of capacity may make room, so that stays a
    delay."""
    _, _, counts = said.partition("nodes are available: ")
    findings = [
        finding.partition(" ")[2]
        for finding in counts.split(". preemption:")[0].rstrip(". ").split(", ")
    ]
    conflicts = [finding.endswith(_VOLUME_NODE_CONFLICTS) for finding in findings]
    return any(conflicts) and all(
        conflict or finding.startswith(_NODE_UNAVAILABLE)
        for conflict, finding in zip(conflicts, findings, strict=True)
    )


def observe_tier(
    tier: Tier,
    deployment: DeploymentFacts,
    pods: Iterable[PodFacts],
    security: PodSecurity | None = None,
) -> TierObservation:
    """Reduce a tier's Deployment and pods to one observation: pods refused by admission first,
    then the deadline, then the worst pod. `security` is the level the tier's pods meet, which
    a refusal's message names."""
    considered = [pod for pod in pods if pod.considered]
    winner = _winning_observation(tier, deployment, considered, security)
    return TierObservation(
        reason=winner.reason,
        message=winner.message,
        degraded=winner.degraded,
        replicas=deployment.replicas,
        ready_replicas=deployment.ready_replicas,
        active_pods=len(considered),
        available_replicas=deployment.available_replicas,
    )


def autoscaling_failure(scaled_object: ScaledObjectFacts | None) -> str | None:
    """KEDA's own account of a ScaledObject it reports not ready; None while it has no
    objection (ready, or not yet looked at)."""
    if scaled_object is None or scaled_object.ready_status != "False":
        return None
    because = f" ({scaled_object.ready_reason})" if scaled_object.ready_reason else ""
    said = scaled_object.ready_message or "no message"
    return f'KEDA reports ScaledObject "{scaled_object.name}" not ready{because}: {said}'


def pod_security_rejection(message: str, rejection: str, security: PodSecurity | None) -> str:
    """A tier's or a Job's `message` about pods Pod Security admission refused (`rejection`,
    the API server's words), with the label that admits them when their level is known."""
    detail = rejection.rstrip(". ")
    if security is not None:
        detail = f"{detail}; {security.admission_advice()}"
    return message.format(detail=detail)


def _winning_observation(
    tier: Tier,
    deployment: DeploymentFacts,
    considered: list[PodFacts],
    security: PodSecurity | None,
) -> PodObservation:
    if deployment.pod_security_rejection:
        message = pod_security_rejection(
            tier.messages[POD_SECURITY_REJECTED], deployment.pod_security_rejection, security
        )
        return PodObservation(POD_SECURITY_REJECTED, message, degraded=True)
    has_workload = deployment.replicas > 0 or deployment.ready_replicas > 0 or bool(considered)
    if has_workload and deployment.progress_deadline_exceeded:
        message = tier.messages[PROGRESS_DEADLINE_EXCEEDED]
        return PodObservation(PROGRESS_DEADLINE_EXCEEDED, message, degraded=True)
    if not considered:
        return PodObservation(ACTIVATING, tier.messages[ACTIVATING], degraded=False)
    return min(
        (classify_pod(pod, tier) for pod in considered),
        key=lambda observation: (observation.priority, observation.message),
    )
