"""LLMService status: phase and conditions from observations or failures, no-op writes, events."""

from dataclasses import replace
from datetime import datetime

import pytest
from noctaya.core.api import Condition, ConditionStatus, LLMServiceStatus, Phase
from noctaya.core.errors import NoctayaError
from noctaya.core.observation import ServiceObservation, TierObservation
from noctaya.core.status import (
    StatusEvent,
    decide_event,
    failure_status,
    find_condition,
    phase_for,
    same_status,
    success_status,
)

T0 = "2025-03-01T10:00:00Z"
T1 = "2025-03-01T10:05:00Z"
T2 = "2025-03-01T10:09:00Z"
AUTOSCALING_OK = ("True", "ScaledObjectApplied", "KEDA External Push autoscaling is configured")
PULL_FAILURE = TierObservation(
    reason="ImagePullFailed",
    message='Backend Pod "llama-0" cannot pull its serving image; '
    "check the image and imagePullSecrets",
    degraded=True,
    replicas=1,
    ready_replicas=0,
    active_pods=1,
)
LOADING = TierObservation(
    reason="ModelLoading",
    message='Backend Pod "llama-0" is running while the model loads and readiness checks complete',
    degraded=False,
    replicas=1,
    ready_replicas=0,
    active_pods=1,
)
SERVING = TierObservation(
    reason="Starting",
    message='Backend Pod "llama-0" is starting',
    degraded=False,
    replicas=2,
    ready_replicas=2,
    active_pods=2,
)
IDLE = TierObservation(
    reason="Activating",
    message="Waiting for the backend Deployment to create a serving Pod",
    degraded=False,
    replicas=0,
    ready_replicas=0,
    active_pods=0,
)
GATEWAY_SERVING = TierObservation(
    reason="Starting",
    message='Gateway Pod "llama-gateway-0" is starting',
    degraded=False,
    replicas=1,
    ready_replicas=1,
    active_pods=1,
    available_replicas=1,
)
GATEWAY_STARTING = replace(GATEWAY_SERVING, ready_replicas=0, available_replicas=0)
SECRET_MISSING = (
    'Gateway Pod "llama-gateway-0" cannot start its gateway container: '
    'MountVolume.SetUp failed for volume "client-auth" : secret "key" not found; '
    "create the Secret and key it names (spec.endpoint.authentication)"
)
GATEWAY_FAILING = replace(
    GATEWAY_STARTING, reason="ContainerConfigError", message=SECRET_MISSING, degraded=True
)


def serving_path(
    backend: TierObservation,
    gateway: TierObservation = GATEWAY_SERVING,
    autoscaling_failure: str | None = None,
) -> ServiceObservation:
    return ServiceObservation(backend, gateway, autoscaling_failure)


def reconcile(
    observation: TierObservation | ServiceObservation,
    previous: LLMServiceStatus | None = None,
    *,
    now: str = T0,
    scaling_min: int = 0,
    generation: int = 3,
) -> LLMServiceStatus:
    if isinstance(observation, TierObservation):
        observation = serving_path(observation)
    return success_status(
        previous or LLMServiceStatus(),
        observation,
        service="llama",
        namespace="team-a",
        runtime="vllm-cuda",
        generation=generation,
        scaling_min=scaling_min,
        now=now,
    )


def condition(status: LLMServiceStatus, type_: str) -> Condition:
    found = find_condition(status.conditions, type_)
    assert found is not None, f"missing condition {type_}"
    return found


def summary(status: LLMServiceStatus, type_: str) -> tuple[str, str, str]:
    found = condition(status, type_)
    return (found.status.value, found.reason, found.message)


def through_the_api(status: LLMServiceStatus) -> LLMServiceStatus:
    """The status as the next reconcile reads it back from the API server."""
    return LLMServiceStatus.model_validate(status.to_wire())


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_ready_backend_reports_ready_available_and_healthy() -> None:
    status = reconcile(SERVING)
    assert status.to_wire() == {
        "phase": "Ready",
        "resolvedRuntime": "vllm-cuda",
        "replicas": 2,
        "endpointURL": "http://llama.team-a.svc/v1",
        "conditions": [
            {
                "type": "AutoscalingReady",
                "status": "True",
                "observedGeneration": 3,
                "lastTransitionTime": T0,
                "reason": "ScaledObjectApplied",
                "message": "KEDA External Push autoscaling is configured",
            },
            {
                "type": "Ready",
                "status": "True",
                "observedGeneration": 3,
                "lastTransitionTime": T0,
                "reason": "Available",
                "message": "Serving pods are ready",
            },
            {
                "type": "Degraded",
                "status": "False",
                "observedGeneration": 3,
                "lastTransitionTime": T0,
                "reason": "Healthy",
                "message": "No backend activation failure is observed",
            },
        ],
    }


def test_degraded_is_true_while_phase_stays_ready_when_one_pod_fails() -> None:
    one_ready_one_failing = TierObservation(
        reason=PULL_FAILURE.reason,
        message=PULL_FAILURE.message,
        degraded=True,
        replicas=2,
        ready_replicas=1,
        active_pods=2,
    )
    status = reconcile(one_ready_one_failing)
    assert status.phase is Phase.READY
    assert status.replicas == 1
    assert summary(status, "Ready") == ("True", "Available", "Serving pods are ready")
    assert summary(status, "Degraded") == ("True", "ImagePullFailed", PULL_FAILURE.message)


def test_failing_backend_without_ready_pods_is_degraded_with_the_observed_reason() -> None:
    status = reconcile(PULL_FAILURE)
    assert status.phase is Phase.DEGRADED
    assert summary(status, "Ready") == ("False", "ImagePullFailed", PULL_FAILURE.message)
    assert summary(status, "Degraded") == ("True", "ImagePullFailed", PULL_FAILURE.message)
    assert summary(status, "AutoscalingReady") == AUTOSCALING_OK


@pytest.mark.parametrize(
    ("replicas", "active_pods"), [(1, 0), (0, 1)], ids=["deployment-replicas", "active-pod"]
)
def test_backend_with_replicas_or_active_pods_is_loading(replicas: int, active_pods: int) -> None:
    observation = TierObservation(
        reason=LOADING.reason,
        message=LOADING.message,
        degraded=False,
        replicas=replicas,
        ready_replicas=0,
        active_pods=active_pods,
    )
    status = reconcile(observation, scaling_min=1)
    assert status.phase is Phase.LOADING
    assert status.replicas == 0
    assert summary(status, "Ready") == ("False", "ModelLoading", LOADING.message)
    assert summary(status, "Degraded") == (
        "False",
        "Progressing",
        "Backend activation is progressing without an observed failure",
    )


def test_idle_backend_with_min_zero_is_scaled_to_zero() -> None:
    status = reconcile(IDLE, scaling_min=0)
    assert status.phase is Phase.SCALED_TO_ZERO
    assert summary(status, "Ready") == ("False", "ScaledToZero", "Backend is scaled to zero")
    assert summary(status, "Degraded") == (
        "False",
        "Inactive",
        "Backend is scaled to zero and has no observed activation failure",
    )


def test_idle_backend_with_a_minimum_is_pending() -> None:
    status = reconcile(IDLE, scaling_min=1)
    assert status.phase is Phase.PENDING
    assert summary(status, "Ready") == ("False", "Pending", "Waiting for the backend Deployment")
    assert summary(status, "Degraded")[:2] == ("False", "Progressing")


@pytest.mark.parametrize(
    ("observation", "scaling_min", "phase"),
    [
        (SERVING, 1, Phase.READY),
        (PULL_FAILURE, 0, Phase.DEGRADED),
        (LOADING, 0, Phase.LOADING),
        (IDLE, 0, Phase.SCALED_TO_ZERO),
        (IDLE, 2, Phase.PENDING),
    ],
)
def test_phase_is_the_first_matching_rule(
    observation: TierObservation, scaling_min: int, phase: Phase
) -> None:
    assert phase_for(serving_path(observation), scaling_min) is phase


def test_every_condition_carries_the_reconciled_generation() -> None:
    status = reconcile(LOADING, reconcile(SERVING, generation=1), generation=7, now=T1)
    assert [c.observed_generation for c in status.conditions] == [7, 7, 7]


def test_transition_time_moves_only_when_the_condition_status_changes() -> None:
    loading = reconcile(LOADING, now=T0)
    failing = reconcile(PULL_FAILURE, through_the_api(loading), now=T1)
    ready = condition(failing, "Ready")
    assert (ready.reason, ready.last_transition_time) == ("ImagePullFailed", at(T0))
    degraded = condition(failing, "Degraded")
    assert (degraded.status, degraded.last_transition_time) == (ConditionStatus.TRUE, at(T1))
    assert condition(failing, "AutoscalingReady").last_transition_time == at(T0)


def test_unchanged_world_recomputes_an_equal_status_that_needs_no_write() -> None:
    first = reconcile(PULL_FAILURE, now=T0)
    live = through_the_api(first)
    again = reconcile(PULL_FAILURE, live, now=T2)
    assert again.to_wire() == first.to_wire()
    assert same_status(live, again)


def test_changed_status_is_not_the_same_and_must_be_written() -> None:
    live = through_the_api(reconcile(LOADING, now=T0))
    assert not same_status(live, reconcile(SERVING, live, now=T1))
    assert not same_status(LLMServiceStatus(), reconcile(LOADING))


def test_same_status_ignores_condition_order_and_time_spelling() -> None:
    desired = reconcile(SERVING)
    wire = desired.to_wire()
    wire["conditions"].reverse()
    for item in wire["conditions"]:
        item["lastTransitionTime"] = "2025-03-01T12:00:00.400+02:00"
    assert same_status(LLMServiceStatus.model_validate(wire), desired)


@pytest.mark.parametrize(
    ("field", "value"),
    [("message", "edited"), ("observedGeneration", 2), ("lastTransitionTime", T1)],
)
def test_same_status_sees_any_condition_field_change(field: str, value: object) -> None:
    desired = reconcile(SERVING)
    wire = desired.to_wire()
    wire["conditions"][1][field] = value
    assert not same_status(LLMServiceStatus.model_validate(wire), desired)


@pytest.mark.parametrize(
    ("field", "value"),
    [("phase", "Loading"), ("resolvedRuntime", "vllm-rocm"), ("replicas", 1), ("endpointURL", "x")],
)
def test_same_status_sees_any_top_level_field_change(field: str, value: object) -> None:
    desired = reconcile(SERVING)
    wire = desired.to_wire()
    wire[field] = value
    assert not same_status(LLMServiceStatus.model_validate(wire), desired)


def test_conditions_owned_by_others_are_kept_in_place() -> None:
    foreign = Condition(
        type="ExternalCheck",
        status=ConditionStatus.TRUE,
        observed_generation=1,
        last_transition_time=at(T0),
        reason="Fine",
        message="checked elsewhere",
    )
    status = reconcile(SERVING, LLMServiceStatus(conditions=[foreign]), now=T1)
    assert [c.type for c in status.conditions] == [
        "ExternalCheck",
        "AutoscalingReady",
        "Ready",
        "Degraded",
    ]
    assert status.conditions[0] == foreign


def test_previous_status_is_never_mutated() -> None:
    previous = through_the_api(reconcile(LOADING, now=T0))
    snapshot = previous.to_wire()
    reconcile(SERVING, previous, now=T1, generation=9)
    failure_status(
        previous,
        NoctayaError("Render", "boom"),
        generation=9,
        autoscaling_applied=True,
        now=T1,
    )
    assert previous.to_wire() == snapshot


def test_failure_before_autoscaling_marks_every_condition_with_the_failure() -> None:
    previous = through_the_api(reconcile(SERVING, now=T0))
    error = NoctayaError("RuntimeResolution", 'InferenceRuntime "vllm-cuda" not found')
    status = failure_status(previous, error, generation=4, autoscaling_applied=False, now=T1)
    failed = ("False", "RuntimeResolution", 'InferenceRuntime "vllm-cuda" not found')
    assert status.phase is Phase.DEGRADED
    assert summary(status, "AutoscalingReady") == failed
    assert summary(status, "Ready") == failed
    assert summary(status, "Degraded") == ("True", *failed[1:])
    assert [c.observed_generation for c in status.conditions] == [4, 4, 4]
    assert all(c.last_transition_time == at(T1) for c in status.conditions)


def test_failure_after_autoscaling_keeps_autoscaling_ready_and_the_other_fields() -> None:
    previous = through_the_api(reconcile(SERVING, now=T0))
    error = NoctayaError("ApplyDeployment", "deployments.apps is forbidden")
    status = failure_status(previous, error, generation=3, autoscaling_applied=True, now=T1)
    assert condition(status, "AutoscalingReady") == condition(previous, "AutoscalingReady")
    assert summary(status, "Ready") == ("False", "ApplyDeployment", error.message)
    assert summary(status, "Degraded") == ("True", "ApplyDeployment", error.message)
    assert (status.resolved_runtime, status.replicas, status.endpoint_url) == (
        "vllm-cuda",
        2,
        "http://llama.team-a.svc/v1",
    )


def test_first_failure_leaves_the_unknown_fields_absent() -> None:
    error = NoctayaError("AutoscalingUnavailable", "KEDA ScaledObject CRD is required ...")
    status = failure_status(
        LLMServiceStatus(), error, generation=1, autoscaling_applied=False, now=T0
    )
    wire = status.to_wire()
    assert set(wire) == {"phase", "conditions"}
    assert wire["phase"] == "Degraded"


def test_huge_error_text_is_cut_to_the_condition_message_bound() -> None:
    error = NoctayaError("ApplyDeployment", "x" * 40_000)
    status = failure_status(
        LLMServiceStatus(), error, generation=1, autoscaling_applied=False, now=T0
    )
    assert {len(c.message) for c in status.conditions} == {32768}


def test_repeated_failure_is_the_same_status() -> None:
    error = NoctayaError("ModelResolution", 'unsupported model source scheme "ftp"')
    first = through_the_api(
        failure_status(LLMServiceStatus(), error, generation=1, autoscaling_applied=False, now=T0)
    )
    again = failure_status(first, error, generation=1, autoscaling_applied=False, now=T1)
    assert same_status(first, again)


def test_now_is_normalised_to_utc_seconds() -> None:
    status = reconcile(SERVING, now="2025-03-01T12:00:00.987654+02:00")
    assert {item["lastTransitionTime"] for item in status.to_wire()["conditions"]} == {T0}


@pytest.mark.parametrize("now", ["yesterday", "2025-03-01T10:00:00"])
def test_invalid_now_is_rejected_by_name(now: str) -> None:
    with pytest.raises(ValueError, match=r"^now: "):
        reconcile(SERVING, now=now)


WARNING_PULL = StatusEvent(
    "Warning", "ImagePullFailed", "ObserveBackendFailure", PULL_FAILURE.message
)
RECOVERED = StatusEvent(
    "Normal", "BackendRecovered", "ObserveBackendRecovery", "Backend activation recovered"
)


def test_new_failure_emits_one_warning_named_after_the_failure() -> None:
    loading = reconcile(LOADING)
    failing = reconcile(PULL_FAILURE, loading, now=T1)
    assert decide_event(loading.conditions, failing.conditions) == WARNING_PULL
    assert decide_event((), failing.conditions) == WARNING_PULL


def test_the_same_failure_observed_again_emits_nothing() -> None:
    failing = reconcile(PULL_FAILURE)
    again = reconcile(PULL_FAILURE, failing, now=T1)
    assert decide_event(failing.conditions, again.conditions) is None


def test_same_failure_class_on_another_pod_emits_nothing() -> None:
    failing = reconcile(PULL_FAILURE)
    other_pod = TierObservation(
        reason="ImagePullFailed",
        message='Backend Pod "llama-1" cannot pull its serving image; '
        "check the image and imagePullSecrets",
        degraded=True,
        replicas=1,
        ready_replicas=0,
        active_pods=1,
    )
    assert decide_event(failing.conditions, reconcile(other_pod, failing).conditions) is None


def test_a_different_failure_class_emits_a_new_warning() -> None:
    failing = reconcile(PULL_FAILURE)
    oom = TierObservation(
        reason="OOMKilled",
        message='Backend Pod "llama-0" was OOMKilled; '
        "inspect its memory limit and model runtime requirements",
        degraded=True,
        replicas=1,
        ready_replicas=0,
        active_pods=1,
    )
    assert decide_event(failing.conditions, reconcile(oom, failing, now=T1).conditions) == (
        StatusEvent("Warning", "OOMKilled", "ObserveBackendFailure", oom.message)
    )


def test_recovery_emits_one_backend_recovered_and_healthy_repeats_emit_nothing() -> None:
    history = [PULL_FAILURE, SERVING, SERVING, LOADING, IDLE]
    status = LLMServiceStatus()
    events = []
    for step, observation in enumerate(history):
        following = reconcile(observation, status, now=f"2025-03-01T10:0{step}:00Z")
        events.append(decide_event(status.conditions, following.conditions))
        status = through_the_api(following)
    assert events == [WARNING_PULL, RECOVERED, None, None, None]


def test_recovery_from_a_reconcile_failure_is_announced_too() -> None:
    error = NoctayaError("RuntimeResolution", "no InferenceRuntime matches vendors [nvidia]")
    failed = failure_status(
        LLMServiceStatus(), error, generation=1, autoscaling_applied=False, now=T0
    )
    assert decide_event(failed.conditions, reconcile(SERVING, failed).conditions) == RECOVERED


def test_no_available_gateway_replica_makes_the_service_unready_whatever_the_backend() -> None:
    for backend, phase in ((SERVING, Phase.READY), (IDLE, Phase.SCALED_TO_ZERO)):
        status = reconcile(serving_path(backend, GATEWAY_STARTING))
        assert status.phase is phase
        assert summary(status, "Ready") == (
            "False",
            "GatewayUnavailable",
            'Gateway Deployment "llama-gateway" has no available replica: '
            'Gateway Pod "llama-gateway-0" is starting',
        )
        assert summary(status, "Degraded")[0] == "False"


def test_a_failing_gateway_with_nothing_to_serve_degrades_the_service_with_its_reason() -> None:
    for backend in (SERVING, IDLE, LOADING):
        status = reconcile(serving_path(backend, GATEWAY_FAILING))
        assert status.phase is Phase.DEGRADED
        assert summary(status, "Degraded") == ("True", "ContainerConfigError", SECRET_MISSING)
        assert summary(status, "Ready") == (
            "False",
            "GatewayUnavailable",
            f'Gateway Deployment "llama-gateway" has no available replica: {SECRET_MISSING}',
        )
        assert summary(status, "AutoscalingReady") == AUTOSCALING_OK


def test_a_failing_gateway_beside_an_available_one_degrades_without_taking_ready_away() -> None:
    gateway = replace(GATEWAY_FAILING, replicas=2, ready_replicas=1, available_replicas=1)
    status = reconcile(serving_path(SERVING, gateway))
    assert status.phase is Phase.READY
    assert summary(status, "Ready") == ("True", "Available", "Serving pods are ready")
    assert summary(status, "Degraded") == ("True", "ContainerConfigError", SECRET_MISSING)


def test_a_failing_backend_is_reported_before_a_failing_gateway() -> None:
    status = reconcile(serving_path(PULL_FAILURE, GATEWAY_FAILING))
    assert summary(status, "Degraded") == ("True", "ImagePullFailed", PULL_FAILURE.message)


def test_a_gateway_failure_is_a_warning_of_its_own_and_its_end_a_recovery() -> None:
    idle = reconcile(IDLE)
    failing = reconcile(serving_path(IDLE, GATEWAY_FAILING), idle, now=T1)
    assert decide_event(idle.conditions, failing.conditions, gateway_failing=True) == (
        StatusEvent("Warning", "ContainerConfigError", "ObserveGatewayFailure", SECRET_MISSING)
    )
    recovered = reconcile(IDLE, failing, now=T2)
    assert decide_event(failing.conditions, recovered.conditions) == RECOVERED
    assert summary(recovered, "Ready") == ("False", "ScaledToZero", "Backend is scaled to zero")


def test_kedas_objection_turns_autoscaling_ready_false_with_its_words() -> None:
    keda = 'KEDA reports ScaledObject "llama" not ready (ScaledObjectCheckFailed): bad trigger'
    status = reconcile(serving_path(IDLE, autoscaling_failure=keda))
    assert summary(status, "AutoscalingReady") == ("False", "ScaledObjectNotReady", keda)
    assert status.phase is Phase.SCALED_TO_ZERO
    fixed = reconcile(IDLE, status, now=T1)
    assert summary(fixed, "AutoscalingReady") == AUTOSCALING_OK
