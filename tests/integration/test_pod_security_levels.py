"""Every pod Noctaya renders meets the Pod Security level its plan states, and no stricter one.

The judge is the API server's own Pod Security admission: each rendered pod template is created
(dry run) in a namespace that enforces the stated level, which must admit it, and in one that
enforces the next stricter level, which must refuse it. The services vary what decides a level:
the cache (claim, shared with prewarm, host folder), the model source (hub, OCI with registry
credentials, claim), the vendor (Ascend's host paths), a probe that names a host, several
gateways (the aggregator), the drain hook, and the runtime's security context (restricted
contexts, with the prewarm init container, and one that runs as root).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s_client
from noctaya.core.plan.pod_security import RESTRICTED, Level, PodSecurity
from noctaya.core.plan.serving import ServingPlan
from noctaya.k8s.render.serving import render_serving
from support.plans import serving_plan
from support.pod_security import admission_refusal, enforcing_namespaces

pytestmark = pytest.mark.integration

STRICTER = {Level.PRIVILEGED: Level.BASELINE, Level.BASELINE: Level.RESTRICTED}
OCI_DIGEST = "sha256:" + "ab" * 32
PROBE_WITH_HOST = {"httpGet": {"path": "/health", "port": "http", "host": "10.1.2.3"}}
RESTRICTED_CONTEXT = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "runAsGroup": 1000,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
USER_ONLY_CONTEXT = {k: v for k, v in RESTRICTED_CONTEXT.items() if k != "runAsNonRoot"}
ROOT_CONTEXT = {**USER_ONLY_CONTEXT, "runAsUser": 0}

# (service changes, runtime changes, gateway replicas) per case.
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], int]] = {
    "hub model on a claim": ({}, {}, 1),
    "shared claim filled by prewarm": (
        {"cache": {"strategy": "SharedPVC", "prewarm": True}},
        {},
        1,
    ),
    "OCI model with registry credentials": (
        {
            "model": {
                "source": {
                    "uri": f"oci://registry.example/models/qwen@{OCI_DIGEST}",
                    "secretRef": {"name": "registry-auth"},
                }
            }
        },
        {},
        1,
    ),
    "host folder cache filled by prewarm": (
        {"cache": {"strategy": "HostPath", "prewarm": True}},
        {},
        1,
    ),
    "claim model, no cache": (
        {"model": {"source": {"uri": "pvc://weights/qwen"}}, "cache": {"strategy": "None"}},
        {},
        1,
    ),
    "Ascend host paths": ({}, {"vendor": "ascend"}, 1),
    "probe that names a host": ({}, {"health": {"readiness": PROBE_WITH_HOST}}, 1),
    "runtime that opts into restricted, shared claim filled by prewarm": (
        {"cache": {"strategy": "SharedPVC", "prewarm": True}},
        {"container": {"securityContext": RESTRICTED_CONTEXT}},
        1,
    ),
    "runtime that opts into restricted by its user alone": (
        {},
        {"container": {"securityContext": USER_ONLY_CONTEXT}},
        1,
    ),
    "runtime whose context runs as root": (
        {},
        {"container": {"securityContext": ROOT_CONTEXT}},
        1,
    ),
    "runtime that opts into restricted, on a host folder": (
        {"cache": {"strategy": "HostPath"}},
        {"container": {"securityContext": RESTRICTED_CONTEXT}},
        1,
    ),
    "several gateways and a drain hook": (
        {"scaling": {"drainTimeout": "20s"}},
        {"lifecycle": {"preStopDrain": True}},
        3,
    ),
}


@dataclass(frozen=True)
class RenderedPod:
    name: str
    spec: dict[str, Any]
    security: PodSecurity


def rendered_pods(plan: ServingPlan) -> list[RenderedPod]:
    """Each pod template of the rendered service, with the level the plan states for it."""
    rendered = render_serving(plan)
    stated = [
        (rendered.deployment, plan.backend.pod_security),
        (rendered.gateway_deployment, RESTRICTED),
        (rendered.aggregator, RESTRICTED),
        (rendered.prewarm_job, plan.prewarm.pod_security if plan.prewarm else None),
    ]
    return [
        RenderedPod(obj["metadata"]["name"], obj["spec"]["template"]["spec"], security)
        for obj, security in stated
        if obj is not None and security is not None
    ]


def plan_of(case: str) -> ServingPlan:
    service, runtime, gateway_replicas = CASES[case]
    return serving_plan(service, runtime, gateway_replicas=gateway_replicas)


@pytest.fixture(scope="module")
def enforcing(api_client: k8s_client.ApiClient) -> Iterator[dict[Level, str]]:
    with enforcing_namespaces(api_client) as names:
        yield names


@pytest.mark.parametrize("case", CASES)
def test_each_rendered_pod_meets_its_stated_level_and_no_stricter_one(
    api_client: k8s_client.ApiClient, enforcing: dict[Level, str], case: str
) -> None:
    pods = rendered_pods(plan_of(case))
    assert pods
    for pod in pods:
        level = pod.security.level
        refusal = admission_refusal(api_client, enforcing[level], pod.name, pod.spec)
        assert refusal == "", f"{case}: {pod.name} does not meet {level}: {refusal}"
        if level in STRICTER:
            stricter = STRICTER[level]
            refusal = admission_refusal(api_client, enforcing[stricter], pod.name, pod.spec)
            assert "violates PodSecurity" in refusal, f"{case}: {pod.name} meets {stricter}"


def test_the_cases_cover_every_level_and_every_pod_kind() -> None:
    """A case list that lost its host folders or its aggregator would prove less than it says."""
    pods = [pod for case in CASES for pod in rendered_pods(plan_of(case))]
    assert {pod.security.level for pod in pods if pod.name == "chat"} == set(Level)
    assert {pod.name for pod in pods} >= {"chat", "chat-gateway", "chat-scaler", "chat-prewarm"}
