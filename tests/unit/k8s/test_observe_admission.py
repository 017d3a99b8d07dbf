"""Pods Pod Security admission refuses, as the controllers report them: a Deployment's
ReplicaFailure condition (copied from its ReplicaSet) and the Job controller's FailedCreate
events."""

from __future__ import annotations

from typing import Any

import pytest
from noctaya.k8s.observe import deployment_facts, job_pod_security_rejection

REFUSAL = (
    'pods "chat-prewarm-x2x8q" is forbidden: violates PodSecurity "restricted:latest": '
    "allowPrivilegeEscalation != false"
)
JOB = {"metadata": {"name": "chat-prewarm", "uid": "job-uid"}, "status": {}}


def replica_failure(reason: str, message: str, status: str = "True") -> dict[str, Any]:
    condition = {"type": "ReplicaFailure", "status": status, "reason": reason, "message": message}
    return {"status": {"replicas": 0, "conditions": [condition]}}


def job_event(note: str, at: str, *, name: str = "chat-prewarm", uid: str = "job-uid") -> Any:
    return {
        "reason": "FailedCreate",
        "note": note,
        "regarding": {"kind": "Job", "name": name, "uid": uid},
        "deprecatedLastTimestamp": at,
    }


def test_a_deployment_whose_pods_admission_refuses_carries_the_refusal() -> None:
    facts = deployment_facts(replica_failure("FailedCreate", REFUSAL))
    assert facts.pod_security_rejection == REFUSAL


@pytest.mark.parametrize(
    "deployment",
    [
        replica_failure("FailedCreate", 'pods "x" is forbidden: exceeded quota: compute'),
        replica_failure("FailedCreate", REFUSAL, status="False"),
        replica_failure("FailedDelete", REFUSAL),
        {"status": {}},
    ],
    ids=["quota", "condition-false", "failed-delete", "no-condition"],
)
def test_other_replica_failures_are_not_a_pod_security_refusal(deployment: Any) -> None:
    assert deployment_facts(deployment).pod_security_rejection is None


def test_the_newest_refusal_of_the_job_is_reported() -> None:
    events = [
        job_event(f"Error creating: {REFUSAL} (newest)", "2025-03-01T10:05:00Z"),
        job_event(f"Error creating: {REFUSAL} (oldest)", "2025-03-01T10:00:00Z"),
        job_event("Error creating: pods is forbidden: exceeded quota", "2025-03-01T10:09:00Z"),
    ]
    assert job_pod_security_rejection(JOB, events) == f"Error creating: {REFUSAL} (newest)"


@pytest.mark.parametrize("count", ["active", "succeeded", "failed"])
def test_a_job_that_has_a_pod_is_past_its_refusals(count: str) -> None:
    job = {**JOB, "status": {count: 1}}
    events = [job_event(f"Error creating: {REFUSAL}", "2025-03-01T10:00:00Z")]
    assert job_pod_security_rejection(job, events) is None


def test_refusals_of_another_job_or_of_an_earlier_job_of_that_name_are_ignored() -> None:
    events = [
        job_event(f"Error creating: {REFUSAL}", "2025-03-01T10:00:00Z", name="other-prewarm"),
        job_event(f"Error creating: {REFUSAL}", "2025-03-01T10:00:00Z", uid="deleted-job-uid"),
    ]
    assert job_pod_security_rejection(JOB, events) is None
