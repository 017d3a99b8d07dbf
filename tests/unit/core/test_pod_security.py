"""The level each planned pod states, why it meets no stricter one, and what a service reports
when Pod Security admission refuses its pods. tests/integration/test_pod_security_levels.py holds
every statement to the API server's own admission."""

from __future__ import annotations

from typing import Any

import pytest
from noctaya.core.api import parse_inferenceruntime, parse_llmservice
from noctaya.core.model_source import resolve_model_spec
from noctaya.core.observation import (
    BACKEND,
    GATEWAY,
    POD_SECURITY_REJECTED,
    DeploymentFacts,
    PodFacts,
    observe_tier,
)
from noctaya.core.plan.pod_security import RESTRICTED, Level, PodSecurity
from noctaya.core.plan.serving import ServingPlan, plan_serving
from noctaya.core.plugins import VendorRegistry
from support.manifests import inference_runtime, llmservice

REFUSAL = (
    'pods "chat-6d8f9-x2x8q" is forbidden: violates PodSecurity "baseline:latest": '
    'hostPath volumes (volume "model-cache")'
)
HOST_CACHE = PodSecurity(
    Level.PRIVILEGED, 'hostPath volume "model-cache" (the HostPath cache), which baseline forbids'
)


def plan(
    service: dict[str, Any] | None = None, runtime: dict[str, Any] | None = None
) -> ServingPlan:
    llm = parse_llmservice(llmservice("chat", {"runtime": {"name": "rt"}, **(service or {})}))
    llm.metadata.namespace = "tenant"
    rt = parse_inferenceruntime(inference_runtime("rt", runtime or {}))
    adapter = VendorRegistry.discover().adapter(rt.spec.vendor)
    model = resolve_model_spec(llm.spec.model)
    return plan_serving(llm, rt, adapter, model, gateway_image="noctaya:test", gateway_replicas=1)


def test_a_backend_meets_baseline_as_its_image_runs() -> None:
    assert plan().backend.pod_security == PodSecurity(
        Level.BASELINE, "the serving container runs with its image's own user and privileges"
    )


def test_a_prewarm_job_on_a_claim_meets_restricted() -> None:
    planned = plan({"cache": {"strategy": "SharedPVC", "prewarm": True}})
    assert planned.prewarm is not None
    assert planned.prewarm.pod_security == RESTRICTED


def test_a_host_folder_cache_makes_backend_and_prewarm_privileged_naming_the_volume() -> None:
    planned = plan({"cache": {"strategy": "HostPath", "prewarm": True}})
    assert planned.backend.pod_security == HOST_CACHE
    assert planned.prewarm is not None
    assert planned.prewarm.pod_security == HOST_CACHE


def test_a_vendors_host_paths_make_the_backend_privileged_naming_each() -> None:
    security = plan(runtime={"vendor": "ascend"}).backend.pod_security
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
    security = plan(runtime={"health": {"liveness": probe}}).backend.pod_security
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
