"""The level each planned pod states, why it meets no stricter one, and what a service reports
when Pod Security admission refuses its pods. tests/integration/test_pod_security_levels.py holds
every statement to the API server's own admission."""

from __future__ import annotations

from typing import Any

import pytest
from noctaya.core.observation import (
    BACKEND,
    GATEWAY,
    POD_SECURITY_REJECTED,
    DeploymentFacts,
    PodFacts,
    observe_tier,
)
from noctaya.core.plan.pod_security import RESTRICTED, Level, PodSecurity
from noctaya.core.plan.serving import ServingPlan
from support.plans import serving_plan

REFUSAL = (
    'pods "chat-6d8f9-x2x8q" is forbidden: violates PodSecurity "baseline:latest": '
    'hostPath volumes (volume "model-cache")'
)
HOST_CACHE = PodSecurity(
    Level.PRIVILEGED, 'hostPath volume "model-cache" (the HostPath cache), which baseline forbids'
)


def test_a_prewarm_job_on_a_claim_meets_restricted() -> None:
    planned = serving_plan({"cache": {"strategy": "SharedPVC", "prewarm": True}})
    assert planned.prewarm is not None
    assert planned.prewarm.pod_security == RESTRICTED


def test_a_host_folder_cache_makes_backend_and_prewarm_privileged_naming_the_volume() -> None:
    planned = serving_plan({"cache": {"strategy": "HostPath", "prewarm": True}})
    assert planned.backend.pod_security == HOST_CACHE
    assert planned.prewarm is not None
    assert planned.prewarm.pod_security == HOST_CACHE


def test_a_vendors_host_paths_make_the_backend_privileged_naming_each() -> None:
    security = serving_plan(runtime={"vendor": "ascend"}).backend.pod_security
    assert security.level is Level.PRIVILEGED
    assert security.because == (
        'hostPath volumes "ascend-driver", "npu-smi", "dcmi", "ascend-install-info", '
        "which baseline forbids"
    )


@pytest.mark.parametrize(
    "probe",
    [
        {"httpGet": {"port": "http", "path": "/health", "host": "10.0.0.9"}},
        {"tcpSocket": {"port": 8000, "host": "10.0.0.9"}},
    ],
)
def test_a_probe_that_names_a_host_makes_the_backend_privileged(probe: dict[str, Any]) -> None:
    security = serving_plan(runtime={"health": {"liveness": probe}}).backend.pod_security
    assert security.level is Level.PRIVILEGED
    assert "names a host" in security.because


def test_a_refusal_by_admission_degrades_the_tier_with_the_label_that_admits_its_pods() -> None:
    refused = DeploymentFacts(replicas=1, pod_security_rejection=REFUSAL)
    observed = observe_tier(BACKEND, refused, [], HOST_CACHE)
    assert (observed.reason, observed.degraded) == (POD_SECURITY_REJECTED, True)
    assert observed.message == (
        f"Pod Security admission rejects the backend Pods: {REFUSAL}; they meet the "
        '"privileged" level (hostPath volume "model-cache" (the HostPath cache), which baseline '
        "forbids): label the namespace pod-security.kubernetes.io/enforce=privileged to admit them"
    )


def test_the_refusal_outranks_the_deadline_and_older_pods_and_names_the_gateway() -> None:
    refused = DeploymentFacts(
        replicas=2,
        progressing_status="False",
        progressing_reason="ProgressDeadlineExceeded",
        pod_security_rejection=REFUSAL,
    )
    pods = [PodFacts("chat-gateway-0", waiting_reason="ErrImagePull")]
    observed = observe_tier(GATEWAY, refused, pods)
    assert observed.reason == POD_SECURITY_REJECTED
    assert observed.message == f"Pod Security admission rejects the gateway Pods: {REFUSAL}"


RESTRICTED_CONTEXT = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "runAsGroup": 1001,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def with_context(context: dict[str, Any], **service: Any) -> ServingPlan:
    return serving_plan(service, {"container": {"securityContext": context}})


def test_a_runtime_context_that_meets_restricted_opts_the_backend_in() -> None:
    backend = with_context(RESTRICTED_CONTEXT).backend
    assert backend.pod_security == RESTRICTED
    assert backend.security_context is not None
    assert backend.security_context.to_wire() == RESTRICTED_CONTEXT
    assert backend.pod_security_context is not None
    assert backend.pod_security_context.run_as_non_root is True
    assert backend.pod_security_context.fs_group == 1001
    seccomp = backend.pod_security_context.seccomp_profile
    assert seccomp is not None
    assert seccomp.to_wire() == {"type": "RuntimeDefault"}


def test_a_user_other_than_root_stands_for_run_as_non_root() -> None:
    context = {key: value for key, value in RESTRICTED_CONTEXT.items() if key != "runAsNonRoot"}
    backend = with_context(context).backend
    assert backend.pod_security == RESTRICTED
    assert backend.pod_security_context is not None
    assert backend.pod_security_context.run_as_non_root is True


@pytest.mark.parametrize(
    ("changes", "gaps"),
    [
        (
            {"allowPrivilegeEscalation": True, "capabilities": {"add": ["CHOWN"]}},
            "allowPrivilegeEscalation is not false, capabilities.drop does not hold ALL, "
            "capabilities.add holds more than NET_BIND_SERVICE",
        ),
        ({"runAsUser": 0}, "runAsUser is 0"),
        ({"runAsNonRoot": False}, "runAsNonRoot is false"),
        ({"runAsNonRoot": None, "runAsUser": None}, "neither runAsNonRoot nor runAsUser is set"),
        ({"seccompProfile": None}, "seccompProfile is not set"),
    ],
)
def test_a_runtime_context_short_of_restricted_keeps_baseline_and_says_what_is_missing(
    changes: dict[str, Any], gaps: str
) -> None:
    context = {
        key: value for key, value in {**RESTRICTED_CONTEXT, **changes}.items() if value is not None
    }
    assert with_context(context).backend.pod_security == PodSecurity(
        Level.BASELINE, f'the spec.container.securityContext of InferenceRuntime "rt": {gaps}'
    )


def test_a_root_context_derives_nothing_for_the_pod_but_its_seccomp_profile() -> None:
    backend = with_context({"runAsUser": 0, "runAsGroup": 0}).backend
    assert backend.pod_security_context is None
    seccomp_only = with_context({"seccompProfile": {"type": "RuntimeDefault"}}).backend
    assert seccomp_only.pod_security_context is not None
    assert seccomp_only.pod_security_context.run_as_non_root is False
    assert seccomp_only.pod_security_context.fs_group is None


def test_without_a_context_the_backend_meets_baseline_naming_the_runtime() -> None:
    assert serving_plan().backend.pod_security == PodSecurity(
        Level.BASELINE, 'InferenceRuntime "rt" sets no spec.container.securityContext'
    )


def test_a_host_folder_outweighs_a_restricted_context() -> None:
    planned = with_context(RESTRICTED_CONTEXT, cache={"strategy": "HostPath"})
    assert planned.backend.pod_security == HOST_CACHE
