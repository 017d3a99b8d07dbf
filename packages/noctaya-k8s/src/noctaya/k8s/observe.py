"""Translate the serving path's objects (API JSON, camelCase) into core observation facts: the
backend's and the gateway's Deployment and Pods, the kubelet's FailedMount events about those
Pods, the Job controller's FailedCreate events, and KEDA's ScaledObject.

Only the container status of each tier's own container (`serving`, `gateway`) is read:
sidecars and init containers must not make a healthy tier look broken. Which pods count (not
terminating, not finished) is the core's decision; this module reports those facts faithfully.
Missing or mistyped fields read as absent so a partial object never crashes the controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from noctaya.core.model_source import redact_credentials
from noctaya.core.observation import (
    BACKEND,
    GATEWAY,
    DeploymentFacts,
    PodFacts,
    ScaledObjectFacts,
    ServiceObservation,
    Tier,
    TierObservation,
    autoscaling_failure,
    observe_tier,
)
from noctaya.core.plan.pod_security import PodSecurity
from noctaya.k8s.render.labels import MANAGED_BY, MANAGER

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
SERVING_CONTAINER = "serving"
GATEWAY_CONTAINER = "gateway"
FAILED_MOUNT = "FailedMount"
MOUNT_EVENTS = f"regarding.kind=Pod,reason={FAILED_MOUNT}"
"""The field selector of the kubelet's events the operator reads: a volume it cannot mount."""
_MOUNT_CAUSE = "MountVolume."
"""How the kubelet's per-attempt note begins; its periodic summary only lists the volumes."""
FAILED_CREATE = "FailedCreate"
JOB_CREATE_EVENTS = f"regarding.kind=Job,reason={FAILED_CREATE}"
"""The field selector of the Job controller's events the operator reads: a pod it cannot create."""
_CONTAINERS = {BACKEND.name: SERVING_CONTAINER, GATEWAY.name: GATEWAY_CONTAINER}
_POD_SECURITY_VIOLATION = "violates PodSecurity "
"""How Pod Security admission words a refusal (`violates PodSecurity "restricted:latest": …`)."""


def pod_facts(
    pod: Mapping[str, Any], container: str = SERVING_CONTAINER, mount_failure: str | None = None
) -> PodFacts:
    metadata = _mapping(pod.get("metadata"))
    status = _mapping(pod.get("status"))
    observed = next(
        (
            entry
            for entry in map(_mapping, _list(status.get("containerStatuses")))
            if entry.get("name") == container
        ),
        {},
    )
    state = _mapping(observed.get("state"))
    waiting = _mapping(state.get("waiting"))
    last_state = _mapping(observed.get("lastState"))
    scheduled = _condition(status, "PodScheduled")
    return PodFacts(
        name=_string(metadata.get("name")) or "",
        terminating=metadata.get("deletionTimestamp") is not None,
        phase=_string(status.get("phase")) or "Pending",
        waiting_reason=_string(waiting.get("reason")),
        waiting_message=_string(waiting.get("message")),
        terminated_reason=_string(_mapping(state.get("terminated")).get("reason")),
        last_terminated_reason=_string(_mapping(last_state.get("terminated")).get("reason")),
        restart_count=_integer(observed.get("restartCount")),
        running=isinstance(state.get("running"), Mapping),
        ready=observed.get("ready") is True,
        scheduled_false_reason=(
            _string(scheduled.get("reason")) if scheduled.get("status") == "False" else None
        ),
        scheduled_false_message=(
            _string(scheduled.get("message")) if scheduled.get("status") == "False" else None
        ),
        sandbox_ready=_condition(status, "PodReadyToStartContainers").get("status") == "True",
        mount_failure=mount_failure,
    )


def deployment_facts(deployment: Mapping[str, Any]) -> DeploymentFacts:
    """The Deployment's counts and conditions; its ReplicaFailure condition (the ReplicaSet's
    FailedCreate, copied by the deployment controller) when admission refuses its pods."""
    status = _mapping(deployment.get("status"))
    progressing = _condition(status, "Progressing")
    failure = _condition(status, "ReplicaFailure")
    refused = failure.get("status") == "True" and failure.get("reason") == FAILED_CREATE
    return DeploymentFacts(
        replicas=_integer(status.get("replicas")),
        ready_replicas=_integer(status.get("readyReplicas")),
        available_replicas=_integer(status.get("availableReplicas")),
        progressing_status=_string(progressing.get("status")),
        progressing_reason=_string(progressing.get("reason")),
        pod_security_rejection=_pod_security_refusal(failure.get("message")) if refused else None,
    )


def job_pod_security_rejection(
    job: Mapping[str, Any], events: Iterable[Mapping[str, Any]]
) -> str | None:
    """The Job controller's newest word on a pod of `job` that Pod Security admission refused,
    while the Job has no pod at all (once one is created, older refusals are history)."""
    status = _mapping(job.get("status"))
    if any(_integer(status.get(count)) for count in ("active", "succeeded", "failed")):
        return None
    metadata = _mapping(job.get("metadata"))
    newest: tuple[datetime, str] | None = None
    for event in events:
        regarding = _mapping(event.get("regarding"))
        if (
            event.get("reason") != FAILED_CREATE
            or regarding.get("kind") != "Job"
            or regarding.get("name") != metadata.get("name")
            or (regarding.get("uid") and regarding.get("uid") != metadata.get("uid"))
        ):
            continue
        refusal = _pod_security_refusal(event.get("note"))
        if refusal is not None and (newest is None or _event_time(event) > newest[0]):
            newest = (_event_time(event), refusal)
    return newest[1] if newest is not None else None


def scaled_object_facts(scaled_object: Mapping[str, Any]) -> ScaledObjectFacts:
    ready = _condition(_mapping(scaled_object.get("status")), "Ready")
    return ScaledObjectFacts(
        name=_string(_mapping(scaled_object.get("metadata")).get("name")) or "",
        ready_status=_string(ready.get("status")),
        ready_reason=_string(ready.get("reason")),
        ready_message=_string(ready.get("message")),
    )


def mount_failures(events: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Pod UID → the kubelet's newest note on a volume it could not mount for that pod,
    preferring a note that says why (`MountVolume.SetUp failed … secret "x" not found`)."""
    newest: dict[str, tuple[bool, datetime, str]] = {}
    for event in events:
        regarding = _mapping(event.get("regarding"))
        uid, note = _string(regarding.get("uid")), _string(event.get("note"))
        if event.get("reason") != FAILED_MOUNT or regarding.get("kind") != "Pod" or not uid:
            continue
        rank = (bool(note and note.startswith(_MOUNT_CAUSE)), _event_time(event), note or "")
        if uid not in newest or rank > newest[uid]:
            newest[uid] = rank
    return {uid: note for uid, (_, _, note) in newest.items() if note}


def job_failure(job: Mapping[str, Any] | None) -> str | None:
    """The message of a Job's `Failed=True` condition (possibly empty); None while it has not
    failed."""
    failed = _condition(_mapping(_mapping(job).get("status")), "Failed")
    return str(failed.get("message") or "") if failed.get("status") == "True" else None


def job_pod_selector(job: str) -> str:
    """A Job's pods, as the Job controller labels them, among those the operator watches."""
    return f"{MANAGED_BY}={MANAGER},{JOB_NAME_LABEL}={job}"


def termination_message(pods: Iterable[Mapping[str, Any]], container: str) -> str | None:
    """What `container` said when it last ended, in whichever pod it ended last: the kubelet's
    termination message (the file the container wrote, such as a fetcher's failure line).

    It goes into the service's status, which more people read than the Job's pods, so it is
    redacted here too whatever the container did: the operator holds no token to look for,
    but the userinfo of a URL and the credential of an Authorization header have a shape, and
    one line without control characters cannot forge more."""
    said: list[tuple[str, str]] = []
    for pod in pods:
        for entry in map(_mapping, _list(_mapping(pod.get("status")).get("containerStatuses"))):
            if entry.get("name") != container:
                continue
            for state in (entry.get("state"), entry.get("lastState")):
                ended = _mapping(_mapping(state).get("terminated"))
                if message := _string(ended.get("message")):
                    finished = str(ended.get("finishedAt") or "")
                    said.append((finished, redact_credentials(message.strip())))
    return max(said)[1] if said else None


def observe_tier_objects(
    tier: Tier,
    deployment: Mapping[str, Any] | None,
    pods: Iterable[Mapping[str, Any]],
    failures: Mapping[str, str] | None = None,
    security: PodSecurity | None = None,
) -> TierObservation:
    """The core observation of one tier's Deployment (None: not there) and its listed pods,
    with the mount failures (pod UID → note) the kubelet reported for them and the Pod Security
    level the tier's pods meet."""
    container, failures = _CONTAINERS[tier.name], failures or {}
    facts = [pod_facts(pod, container, failures.get(_uid(pod))) for pod in pods]
    return observe_tier(tier, deployment_facts(deployment or {}), facts, security)


def observe_service(
    *,
    backend: Mapping[str, Any] | None,
    backend_pods: Iterable[Mapping[str, Any]],
    gateway: Mapping[str, Any] | None,
    gateway_pods: Iterable[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]],
    scaled_object: Mapping[str, Any] | None,
    backend_security: PodSecurity | None = None,
    gateway_security: PodSecurity | None = None,
) -> ServiceObservation:
    """The whole serving path as the core sees it; the tiers' Pod Security levels, if known,
    explain a refusal by admission."""
    failures = mount_failures(events)
    return ServiceObservation(
        backend=observe_tier_objects(BACKEND, backend, backend_pods, security=backend_security),
        gateway=observe_tier_objects(GATEWAY, gateway, gateway_pods, failures, gateway_security),
        autoscaling_failure=autoscaling_failure(
            scaled_object_facts(scaled_object) if scaled_object is not None else None
        ),
    )


def _event_time(event: Mapping[str, Any]) -> datetime:
    """When the event was last seen, whichever field its recorder filled in."""
    series = _mapping(event.get("series"))
    metadata = _mapping(event.get("metadata"))
    for text in (
        series.get("lastObservedTime"),
        event.get("deprecatedLastTimestamp"),
        event.get("eventTime"),
        metadata.get("creationTimestamp"),
    ):
        if isinstance(text, str) and text:
            try:
                return datetime.fromisoformat(text)
            except ValueError:
                continue
    return datetime.min.replace(tzinfo=UTC)


def _pod_security_refusal(message: Any) -> str | None:
    """A pod creation error that Pod Security admission caused, as the API server worded it."""
    text = _string(message)
    return text if text is not None and _POD_SECURITY_VIOLATION in text else None


def _uid(obj: Mapping[str, Any]) -> str:
    return _string(_mapping(obj.get("metadata")).get("uid")) or ""


def _condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any]:
    return next(
        (
            condition
            for condition in map(_mapping, _list(status.get("conditions")))
            if condition.get("type") == type_
        ),
        {},
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _integer(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
