"""Objects read back from the API server: fields of a newer CRD are ignored, never fatal.

A CRD upgrade (or a rollback that leaves a newer status behind) hands the operator fields its
models do not know. Users' manifests stay strict; what the API server returns is decoded
leniently, and a status this version cannot read at all is replaced rather than left to stop
the failure from being reported.
"""

from __future__ import annotations

from typing import Any

import pytest
from noctaya.core.api import (
    InvalidResource,
    Phase,
    parse_inferenceruntime,
    parse_llmservice,
    read_inferenceruntime,
    read_llmservice,
)
from noctaya.core.status import CONDITION_READY, failure_status, find_condition
from noctaya.k8s.status_writer import live_status
from support.manifests import inference_runtime, llmservice

NOW = "2026-01-02T03:04:05Z"
CONDITION = {
    "type": "Ready",
    "status": "False",
    "observedGeneration": 1,
    "lastTransitionTime": NOW,
    "reason": "ScaledToZero",
    "message": "Backend is scaled to zero",
    "severity": "Info",  # a newer condition field
}


def _service_from_a_newer_crd(changes: dict[str, Any] | None = None) -> dict[str, Any]:
    manifest = llmservice("svc", {"futureField": {"enabled": True}, **(changes or {})})
    manifest["metadata"] |= {"namespace": "ns", "uid": "u-1", "generation": 1}
    manifest["status"] = {"phase": "ScaledToZero", "futureStatus": "x", "conditions": [CONDITION]}
    return manifest


def test_a_service_with_fields_of_a_newer_crd_in_spec_and_status_is_read() -> None:
    service = read_llmservice(_service_from_a_newer_crd())

    assert service.status.phase is Phase.SCALED_TO_ZERO
    assert [condition.reason for condition in service.status.conditions] == ["ScaledToZero"]
    assert "futureField" not in service.spec.to_wire()


def test_the_same_fields_in_a_manifest_a_user_writes_are_still_errors() -> None:
    with pytest.raises(InvalidResource) as caught:
        parse_llmservice(_service_from_a_newer_crd())
    assert caught.value.problems == [
        "spec.futureField: unknown field",
        "status.conditions[0].severity: unknown field",
        "status.futureStatus: unknown field",
    ]


def test_a_runtime_read_back_ignores_new_fields_but_keeps_unknown_env_sources() -> None:
    env = [{"name": "TOKEN", "valueFrom": {"fileKeyRef": {"path": "p", "key": "k"}}}]
    manifest = inference_runtime(
        "rt", {"futureField": 1, "container": {"env": env, "futureContainerField": "x"}}
    )

    runtime = read_inferenceruntime(manifest)

    assert runtime.spec.to_wire()["container"]["env"] == env
    with pytest.raises(InvalidResource):
        parse_inferenceruntime(manifest)


def test_a_live_status_this_version_cannot_read_still_gets_the_failure_naming_the_field() -> None:
    live = _service_from_a_newer_crd({"scaling": {"min": 3, "max": 2}})
    live["status"]["replicas"] = "two"  # a status field whose type changed in a newer version
    with pytest.raises(InvalidResource) as caught:
        read_llmservice(live)

    status = failure_status(
        live_status(live), caught.value, generation=1, autoscaling_applied=False, now=NOW
    )

    ready = find_condition(status.conditions, CONDITION_READY)
    assert ready is not None
    assert ready.reason == "InvalidSpec"
    assert "spec.scaling.max: min must not exceed max" in ready.message
    assert "status.replicas: must be an integer" in ready.message
    assert status.phase is Phase.DEGRADED
