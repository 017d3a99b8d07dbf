"""Every pod Noctaya renders meets the Pod Security level its plan states, and no stricter one.

The judge is the API server's own Pod Security admission: each rendered pod template is created
(dry run) in a namespace that enforces the stated level, which must admit it, and in one that
enforces the next stricter level, which must refuse it. The services vary what decides a level:
the cache (claim, shared with prewarm, host folder), the model source (hub, OCI with registry
credentials, claim), the vendor (Ascend's host paths), a probe that names a host, several
gateways (the aggregator), and the drain hook.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from noctaya.core.api import parse_inferenceruntime, parse_llmservice
from noctaya.core.model_source import resolve_model_spec
from noctaya.core.plan.pod_security import ENFORCE_LABEL, RESTRICTED, Level, PodSecurity
from noctaya.core.plan.serving import ServingPlan, plan_serving
from noctaya.core.plugins import VendorRegistry
from noctaya.k8s.render.serving import render_serving
from support.manifests import inference_runtime, llmservice

pytestmark = pytest.mark.integration

STRICTER = {Level.PRIVILEGED: Level.BASELINE, Level.BASELINE: Level.RESTRICTED}
OCI_DIGEST = "sha256:" + "ab" * 32
PROBE_WITH_HOST = {"httpGet": {"path": "/health", "port": "http", "host": "10.1.2.3"}}

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
    service_changes, runtime_changes, gateway_replicas = CASES[case]
    service = parse_llmservice(llmservice("chat", {"runtime": {"name": "rt"}, **service_changes}))
    service.metadata.namespace = "tenant"
    runtime = parse_inferenceruntime(inference_runtime("rt", runtime_changes))
    adapter = VendorRegistry.discover().adapter(runtime.spec.vendor)
    return plan_serving(
        service,
        runtime,
        adapter,
        resolve_model_spec(service.spec.model),
        gateway_image="ghcr.io/noctaya/noctaya:test",
        gateway_replicas=gateway_replicas,
    )


@pytest.fixture(scope="module")
def enforcing(api_client: k8s_client.ApiClient) -> Iterator[dict[Level, str]]:
    """A namespace per level, each enforcing it (at the server's own version of the rules)."""
    core = k8s_client.CoreV1Api(api_client)
    suffix = secrets.token_hex(3)
    names = {level: f"pod-security-{level}-{suffix}" for level in Level}
    for level, name in names.items():
        labels = {ENFORCE_LABEL: str(level)}
        core.create_namespace({"metadata": {"name": name, "labels": labels}})
    yield names
    for name in names.values():
        core.delete_namespace(name)


def admission_refusal(api_client: k8s_client.ApiClient, namespace: str, pod: RenderedPod) -> str:
    """Why the namespace's admission refuses the pod (dry run); empty if it admits it."""
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod.name}, "spec": pod.spec}
    try:
        k8s_client.CoreV1Api(api_client).create_namespaced_pod(namespace, body, dry_run="All")
    except ApiException as refused:
        if refused.status != 403:
            raise
        return str(refused.body)
    return ""


@pytest.mark.parametrize("case", CASES)
def test_each_rendered_pod_meets_its_stated_level_and_no_stricter_one(
    api_client: k8s_client.ApiClient, enforcing: dict[Level, str], case: str
) -> None:
    pods = rendered_pods(plan_of(case))
    assert pods
    for pod in pods:
        level = pod.security.level
        refusal = admission_refusal(api_client, enforcing[level], pod)
        assert refusal == "", f"{case}: {pod.name} does not meet {level}: {refusal}"
        if level in STRICTER:
            stricter = STRICTER[level]
            refusal = admission_refusal(api_client, enforcing[stricter], pod)
            assert "violates PodSecurity" in refusal, f"{case}: {pod.name} meets {stricter}"


def test_the_cases_cover_every_level_and_every_pod_kind() -> None:
    """A case list that lost its host folders or its aggregator would prove less than it says."""
    pods = [pod for case in CASES for pod in rendered_pods(plan_of(case))]
    assert {pod.security.level for pod in pods} >= {Level.PRIVILEGED, Level.BASELINE}
    assert {pod.name for pod in pods} >= {"chat", "chat-gateway", "chat-scaler", "chat-prewarm"}
