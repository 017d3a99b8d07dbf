"""What should an LLMService report? Phase, conditions and events from observations or a failure.

The backend decides the phase and the conditions as the contract has always had them; the
gateway in front of it can only take availability away: with no available gateway replica the
service is not `Ready`, and a gateway fault degrades it like a backend fault. KEDA's objection
to the ScaledObject turns `AutoscalingReady` false.

Everything here is pure: the caller supplies the previous status, the observation and `now`, so
the same inputs always give the same status, and an unchanged world yields a status equal to
the live one (no write, no event). Statuses are the API models, so they validate and serialise
exactly as the CRD declares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from noctaya.core.api import Condition, ConditionStatus, LLMServiceStatus, Phase
from noctaya.core.errors import NoctayaError
from noctaya.core.observation import (
    GATEWAY_UNAVAILABLE,
    SCALED_OBJECT_NOT_READY,
    ServiceObservation,
    TierObservation,
)
from noctaya.core.plan.identity import ServiceIdentity

CONDITION_READY = "Ready"
CONDITION_DEGRADED = "Degraded"
CONDITION_AUTOSCALING_READY = "AutoscalingReady"

TRUE = ConditionStatus.TRUE
FALSE = ConditionStatus.FALSE
# metav1.Condition's message bound: a longer error text (an API server dump) is cut, not refused.
_MESSAGE_LIMIT = 32768
_ConditionValue = tuple[ConditionStatus, str, str]  # (status, reason, message)
_AUTOSCALING_CONFIGURED: _ConditionValue = (
    TRUE,
    "ScaledObjectApplied",
    "KEDA External Push autoscaling is configured",
)


@dataclass(frozen=True)
class StatusEvent:
    """An event to record after a status write: `type` is `Warning` or `Normal`."""

    type: str
    reason: str
    action: str
    note: str


def phase_for(observation: ServiceObservation, scaling_min: int) -> Phase:
    """The backend's phase, but `Degraded` while a failing gateway leaves nothing to serve."""
    gateway, backend = observation.gateway, observation.backend
    if gateway.degraded and not gateway.serving:
        return Phase.DEGRADED
    if backend.ready_replicas > 0:
        return Phase.READY
    if backend.degraded:
        return Phase.DEGRADED
    if backend.replicas > 0 or backend.active_pods > 0:
        return Phase.LOADING
    if scaling_min == 0:
        return Phase.SCALED_TO_ZERO
    return Phase.PENDING


def failing_tier(observation: ServiceObservation) -> TierObservation | None:
    """The tier whose fault `Degraded` reports: the backend's first, as it always was."""
    for tier in (observation.backend, observation.gateway):
        if tier.degraded:
            return tier
    return None


def success_status(
    previous: LLMServiceStatus,
    observation: ServiceObservation,
    *,
    service: str,
    namespace: str,
    runtime: str,
    generation: int,
    scaling_min: int,
    now: str,
) -> LLMServiceStatus:
    """The status of a reconcile that applied everything and observed the serving path."""
    phase = phase_for(observation, scaling_min)
    identity = ServiceIdentity(service, namespace)
    keda = observation.autoscaling_failure
    conditions = _set_conditions(
        previous.conditions,
        generation,
        now,
        autoscaling=_AUTOSCALING_CONFIGURED
        if keda is None
        else (FALSE, SCALED_OBJECT_NOT_READY, keda),
        ready=_ready_condition(phase, observation, identity.gateway),
        degraded=_degraded_condition(phase, observation),
    )
    return LLMServiceStatus(
        phase=phase,
        resolved_runtime=runtime,
        replicas=observation.backend.ready_replicas,
        endpoint_url=identity.endpoint_url,
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
    conditions = _set_conditions(
        previous.conditions,
        generation,
        now,
        autoscaling=_AUTOSCALING_CONFIGURED if autoscaling_applied else failed,
        ready=failed,
        degraded=(TRUE, error.reason, error.message),
    )
    return previous.model_copy(update={"phase": Phase.DEGRADED, "conditions": conditions})


def find_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    return next((condition for condition in conditions if condition.type == type_), None)


def same_status(live: LLMServiceStatus, desired: LLMServiceStatus) -> bool:
    """Semantic equality: equal means do not write.

    Conditions form a map keyed by type, so their order does not matter; transition times
    compare as instants at metav1.Time's whole-second precision.
    """
    scalars = ("phase", "resolved_runtime", "replicas", "endpoint_url")
    return all(getattr(live, name) == getattr(desired, name) for name in scalars) and _by_type(
        live.conditions
    ) == _by_type(desired.conditions)


def decide_event(
    previous: Sequence[Condition], current: Sequence[Condition], *, gateway_failing: bool = False
) -> StatusEvent | None:
    """One Warning per new failure class, one Normal on recovery, nothing on repeats.

    A Warning's action says which tier failed (`gateway_failing`: the gateway, not the backend).
    """
    before = find_condition(previous, CONDITION_DEGRADED)
    after = find_condition(current, CONDITION_DEGRADED)
    before_reason = before.reason if before is not None and before.status == TRUE else None
    if after is not None and after.status == TRUE:
        if after.reason == before_reason:
            return None
        action = "ObserveGatewayFailure" if gateway_failing else "ObserveBackendFailure"
        return StatusEvent("Warning", after.reason, action, after.message)
    if before_reason is not None:
        return StatusEvent(
            "Normal", "BackendRecovered", "ObserveBackendRecovery", "Backend activation recovered"
        )
    return None


def _ready_condition(
    phase: Phase, observation: ServiceObservation, gateway: str
) -> _ConditionValue:
    if not observation.gateway.serving:
        message = f'Gateway Deployment "{gateway}" has no available replica: '
        return (FALSE, GATEWAY_UNAVAILABLE, message + observation.gateway.message)
    if phase is Phase.READY:
        return (TRUE, "Available", "Serving pods are ready")
    if phase is Phase.SCALED_TO_ZERO:
        return (FALSE, "ScaledToZero", "Backend is scaled to zero")
    if phase is Phase.PENDING:
        return (FALSE, "Pending", "Waiting for the backend Deployment")
    return (FALSE, observation.backend.reason, observation.backend.message)


def _degraded_condition(phase: Phase, observation: ServiceObservation) -> _ConditionValue:
    failing = failing_tier(observation)
    if failing is not None:
        return (TRUE, failing.reason, failing.message)
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
    *,
    autoscaling: _ConditionValue,
    ready: _ConditionValue,
    degraded: _ConditionValue,
) -> list[Condition]:
    """Kubernetes `SetStatusCondition` for our three types; other types are kept in place.

    The transition time moves only when a condition's status does.
    """
    instant = _instant(now)
    result = list(conditions)
    for type_, (status, reason, message) in (
        (CONDITION_AUTOSCALING_READY, autoscaling),
        (CONDITION_READY, ready),
        (CONDITION_DEGRADED, degraded),
    ):
        existing = find_condition(result, type_)
        updated = Condition(
            type=type_,
            status=status,
            observed_generation=generation,
            last_transition_time=(
                existing.last_transition_time
                if existing is not None and existing.status == status
                else instant
            ),
            reason=reason,
            message=message[:_MESSAGE_LIMIT],
        )
        if existing is None:
            result.append(updated)
        else:
            result[result.index(existing)] = updated
    return result


def _instant(now: str) -> datetime:
    """`now` as metav1.Time holds it: UTC, whole seconds."""
    try:
        instant = datetime.fromisoformat(now)
    except (TypeError, ValueError):
        raise ValueError(f"now: not an RFC 3339 time: {now!r}") from None
    if instant.tzinfo is None:
        raise ValueError(f"now: RFC 3339 time needs a UTC offset: {now!r}")
    return instant.astimezone(UTC).replace(microsecond=0)


def _by_type(conditions: Sequence[Condition]) -> dict[str, tuple[object, ...]]:
    return {
        condition.type: (
            condition.status,
            condition.observed_generation,
            condition.last_transition_time.replace(microsecond=0),
            condition.reason,
            condition.message,
        )
        for condition in conditions
    }
