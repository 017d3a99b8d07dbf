"""Translate backend Pod and Deployment objects (API JSON, camelCase) into core observation facts.

Only the container status named `serving` is read: sidecars and init containers must not make
a healthy backend look broken. Which pods count (not terminating, not finished) is the core's
decision; this module reports those facts faithfully. Missing or mistyped fields read as absent
so a partial object never crashes the controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from noctaya.core.observation import BackendObservation, DeploymentFacts, PodFacts, observe_backend

SERVING_CONTAINER = "serving"


def pod_facts(pod: Mapping[str, Any]) -> PodFacts:
    metadata = _mapping(pod.get("metadata"))
    status = _mapping(pod.get("status"))
    serving = next(
        (
            container
            for container in map(_mapping, _list(status.get("containerStatuses")))
            if container.get("name") == SERVING_CONTAINER
        ),
        {},
    )
    state = _mapping(serving.get("state"))
    last_state = _mapping(serving.get("lastState"))
    scheduled = _condition(status, "PodScheduled")
    return PodFacts(
        name=_string(metadata.get("name")) or "",
        terminating=metadata.get("deletionTimestamp") is not None,
        phase=_string(status.get("phase")) or "Pending",
        waiting_reason=_string(_mapping(state.get("waiting")).get("reason")),
        terminated_reason=_string(_mapping(state.get("terminated")).get("reason")),
        last_terminated_reason=_string(_mapping(last_state.get("terminated")).get("reason")),
        restart_count=_integer(serving.get("restartCount")),
        running=isinstance(state.get("running"), Mapping),
        ready=serving.get("ready") is True,
        scheduled_false_reason=(
            _string(scheduled.get("reason")) if scheduled.get("status") == "False" else None
        ),
    )


def deployment_facts(deployment: Mapping[str, Any]) -> DeploymentFacts:
    status = _mapping(deployment.get("status"))
    progressing = _condition(status, "Progressing")
    return DeploymentFacts(
        replicas=_integer(status.get("replicas")),
        ready_replicas=_integer(status.get("readyReplicas")),
        progressing_status=_string(progressing.get("status")),
        progressing_reason=_string(progressing.get("reason")),
    )


def observe(deployment: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> BackendObservation:
    """The core observation of a backend Deployment and its listed pods."""
    return observe_backend(deployment_facts(deployment), [pod_facts(pod) for pod in pods])


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
