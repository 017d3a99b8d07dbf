"""What should an LLMService report? Phase, conditions and events from observations or a failure.

Everything here is pure: the caller supplies the previous status, the observation and `now`, so
the same inputs always give the same status, and an unchanged world yields a status equal to
the live one (no write, no event). Values convert to and from the camelCase wire shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

from noctaya.core.errors import NoctayaError
from noctaya.core.observation import BackendObservation

CONDITION_READY = "Ready"
CONDITION_DEGRADED = "Degraded"
CONDITION_AUTOSCALING_READY = "AutoscalingReady"
TRUE = "True"
FALSE = "False"
_CONDITION_STATUSES = frozenset({TRUE, FALSE, "Unknown"})


class Phase(StrEnum):
    PENDING = "Pending"
    LOADING = "Loading"
    READY = "Ready"
    SCALED_TO_ZERO = "ScaledToZero"
    DEGRADED = "Degraded"


@dataclass(frozen=True)
class Condition:
    """A metav1.Condition; `last_transition_time` is RFC 3339 UTC with seconds precision."""

    type: str
    status: str
    reason: str
    message: str
    observed_generation: int = 0
    last_transition_time: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "status": self.status,
            "observedGeneration": self.observed_generation,
            "lastTransitionTime": self.last_transition_time,
            "reason": self.reason,
            "message": self.message,
        }

    @classmethod
    def from_wire(cls, data: Any, path: str = "condition") -> Condition:
        """Read a condition, naming the offending field if the input is malformed."""
        fields = _mapping(data, path)
        status = _require(fields.get("status"), str, f"{path}.status")
        if status not in _CONDITION_STATUSES:
            raise ValueError(f"{path}.status: must be True, False or Unknown, got {status!r}")
        return cls(
            type=_require(fields.get("type"), str, f"{path}.type"),
            status=status,
            reason=_require(fields.get("reason", ""), str, f"{path}.reason"),
            message=_require(fields.get("message", ""), str, f"{path}.message"),
            observed_generation=_require(
                fields.get("observedGeneration", 0), int, f"{path}.observedGeneration"
            ),
            last_transition_time=canonical_time(
                _require(fields.get("lastTransitionTime"), str, f"{path}.lastTransitionTime"),
                f"{path}.lastTransitionTime",
            ),
        )


@dataclass(frozen=True)
class LLMServiceStatus:
    """The LLMService `.status`; `None` fields are absent on the wire."""

    phase: Phase | None = None
    resolved_runtime: str | None = None
    replicas: int | None = None
    endpoint_url: str | None = None
    conditions: tuple[Condition, ...] = ()

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {}
        if self.phase is not None:
            wire["phase"] = self.phase.value
        if self.resolved_runtime is not None:
            wire["resolvedRuntime"] = self.resolved_runtime
        if self.replicas is not None:
            wire["replicas"] = self.replicas
        if self.endpoint_url is not None:
            wire["endpointURL"] = self.endpoint_url
        if self.conditions:
            wire["conditions"] = [condition.to_wire() for condition in self.conditions]
        return wire

    @classmethod
    def from_wire(cls, data: Any) -> LLMServiceStatus:
        """Read a live `.status` (absent → empty status), naming the field on malformed input."""
        if data is None:
            return cls()
        fields = _mapping(data, "status")
        phase = _optional(fields.get("phase"), str, "status.phase")
        if phase is not None and phase not in Phase.__members__.values():
            raise ValueError(f"status.phase: unknown phase {phase!r}")
        conditions = _optional(fields.get("conditions"), list, "status.conditions") or []
        return cls(
            phase=Phase(phase) if phase is not None else None,
            resolved_runtime=_optional(
                fields.get("resolvedRuntime"), str, "status.resolvedRuntime"
            ),
            replicas=_optional(fields.get("replicas"), int, "status.replicas"),
            endpoint_url=_optional(fields.get("endpointURL"), str, "status.endpointURL"),
            conditions=tuple(
                Condition.from_wire(item, f"status.conditions[{index}]")
                for index, item in enumerate(conditions)
            ),
        )


@dataclass(frozen=True)
class StatusEvent:
    """An event to record after a status write: `type` is `Warning` or `Normal`."""

    type: str
    reason: str
    action: str
    note: str


def endpoint_url(service: str, namespace: str) -> str:
    """The in-cluster OpenAI-compatible base URL of the gateway Service."""
    return f"http://{service}.{namespace}.svc/v1"


def phase_for(observation: BackendObservation, scaling_min: int) -> Phase:
    if observation.ready_replicas > 0:
        return Phase.READY
    if observation.degraded:
        return Phase.DEGRADED
    if observation.replicas > 0 or observation.active_pods > 0:
        return Phase.LOADING
    if scaling_min == 0:
        return Phase.SCALED_TO_ZERO
    return Phase.PENDING


def success_status(
    previous: LLMServiceStatus,
    observation: BackendObservation,
    *,
    service: str,
    namespace: str,
    runtime: str,
    generation: int,
    scaling_min: int,
    now: str,
) -> LLMServiceStatus:
    """The status of a reconcile that applied everything and observed the backend."""
    phase = phase_for(observation, scaling_min)
    ready = _ready_condition(phase, observation)
    degraded = _degraded_condition(phase, observation)
    conditions = _set_conditions(
        previous.conditions, generation, now, _AUTOSCALING_CONFIGURED, ready, degraded
    )
    return LLMServiceStatus(
        phase=phase,
        resolved_runtime=runtime,
        replicas=observation.ready_replicas,
        endpoint_url=endpoint_url(service, namespace),
        conditions=conditions,
    )


def failure_status(
    previous: LLMServiceStatus,
    error: NoctayaError,
    *,
    generation: int,
    autoscaling_applied: bool,
    now: str,
) -> LLMServiceStatus:
    """The status of a reconcile that stopped at `error`; runtime, replicas and URL are kept."""
    failed = (FALSE, error.reason, error.message)
    autoscaling = _AUTOSCALING_CONFIGURED if autoscaling_applied else failed
    conditions = _set_conditions(
        previous.conditions,
        generation,
        now,
        autoscaling,
        failed,
        (TRUE, error.reason, error.message),
    )
    return replace(previous, phase=Phase.DEGRADED, conditions=conditions)


def set_condition(
    conditions: Sequence[Condition], desired: Condition, now: str
) -> tuple[Condition, ...]:
    """Kubernetes `SetStatusCondition`: the transition time moves only when the status does."""
    existing = find_condition(conditions, desired.type)
    if existing is not None and existing.status == desired.status:
        transition = existing.last_transition_time
    else:
        transition = canonical_time(now, "now")
    updated = replace(desired, last_transition_time=transition)
    if existing is None:
        return (*conditions, updated)
    return tuple(updated if item.type == desired.type else item for item in conditions)


def find_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    return next((condition for condition in conditions if condition.type == type_), None)


def same_status(live: Any, desired: LLMServiceStatus) -> bool:
    """Semantic equality of a live wire `.status` and the desired one: equal means do not write.

    Conditions form a map keyed by type, so their order does not matter; times compare as instants.
    """
    current = LLMServiceStatus.from_wire(live)
    return replace(current, conditions=()) == replace(desired, conditions=()) and _by_type(
        current.conditions
    ) == _by_type(desired.conditions)


def decide_event(previous: Sequence[Condition], current: Sequence[Condition]) -> StatusEvent | None:
    """One Warning per new failure class, one Normal on recovery, nothing on repeats."""
    before = find_condition(previous, CONDITION_DEGRADED)
    after = find_condition(current, CONDITION_DEGRADED)
    was_degraded = before is not None and before.status == TRUE
    if after is not None and after.status == TRUE:
        if was_degraded and before is not None and before.reason == after.reason:
            return None
        return StatusEvent("Warning", after.reason, "ObserveBackendFailure", after.message)
    if was_degraded:
        return StatusEvent(
            "Normal", "BackendRecovered", "ObserveBackendRecovery", "Backend activation recovered"
        )
    return None


def canonical_time(text: str, field: str) -> str:
    """Normalise an RFC 3339 instant to metav1.Time's wire form (UTC, whole seconds, `Z`)."""
    try:
        instant = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{field}: not an RFC 3339 time: {text!r}") from None
    if instant.tzinfo is None:
        raise ValueError(f"{field}: RFC 3339 time needs a UTC offset: {text!r}")
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_ConditionValue = tuple[str, str, str]  # (status, reason, message)
_AUTOSCALING_CONFIGURED: _ConditionValue = (
    TRUE,
    "ScaledObjectApplied",
    "KEDA External Push autoscaling is configured",
)


def _ready_condition(phase: Phase, observation: BackendObservation) -> _ConditionValue:
    if phase is Phase.READY:
        return (TRUE, "Available", "Serving pods are ready")
    if phase is Phase.SCALED_TO_ZERO:
        return (FALSE, "ScaledToZero", "Backend is scaled to zero")
    if phase is Phase.PENDING:
        return (FALSE, "Pending", "Waiting for the backend Deployment")
    return (FALSE, observation.reason, observation.message)


def _degraded_condition(phase: Phase, observation: BackendObservation) -> _ConditionValue:
    if observation.degraded:
        return (TRUE, observation.reason, observation.message)
    if phase is Phase.SCALED_TO_ZERO:
        return (
            FALSE,
            "Inactive",
            "Backend is scaled to zero and has no observed activation failure",
        )
    if phase is Phase.READY:
        return (FALSE, "Healthy", "No backend activation failure is observed")
    return (FALSE, "Progressing", "Backend activation is progressing without an observed failure")


def _set_conditions(
    conditions: Sequence[Condition],
    generation: int,
    now: str,
    autoscaling: _ConditionValue,
    ready: _ConditionValue,
    degraded: _ConditionValue,
) -> tuple[Condition, ...]:
    result = tuple(conditions)
    for type_, (status, reason, message) in (
        (CONDITION_AUTOSCALING_READY, autoscaling),
        (CONDITION_READY, ready),
        (CONDITION_DEGRADED, degraded),
    ):
        result = set_condition(result, Condition(type_, status, reason, message, generation), now)
    return result


def _by_type(conditions: Sequence[Condition]) -> dict[str, Condition]:
    return {condition.type: condition for condition in conditions}


_T = TypeVar("_T", str, int, list[Any])
_KIND_NAMES: dict[type, str] = {str: "a string", int: "an integer", list: "a list"}


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{path}: expected an object")
    return value


def _require(value: Any, kind: type[_T], path: str) -> _T:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{path}: expected {_KIND_NAMES[kind]}")
    return value


def _optional(value: Any, kind: type[_T], path: str) -> _T | None:
    return None if value is None else _require(value, kind, path)
