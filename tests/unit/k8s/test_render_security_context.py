"""A runtime's security context in the rendered backend: copied to the serving container and to
the `wait-for-prewarm` init container (the same image), the pod-level fields derived from it;
without one, the backend carries no security context at all, as before."""

from __future__ import annotations

from noctaya.k8s.render.backend import render_backend_deployment
from support.plans import serving_plan

CONTEXT = {
    "runAsUser": 1000,
    "runAsGroup": 1001,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"], "add": []},
    "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/vllm.json"},
}
AS_STORED = {**CONTEXT, "capabilities": {"drop": ["ALL"]}}  # an empty list is not kept


def test_the_context_reaches_both_containers_and_the_pod_gets_what_restricted_asks() -> None:
    plan = serving_plan(
        {"cache": {"strategy": "SharedPVC", "prewarm": True}},
        {"container": {"securityContext": CONTEXT}},
    )

    pod = render_backend_deployment(plan.service, plan.backend)["spec"]["template"]["spec"]

    [serving] = pod["containers"]
    [wait] = pod["initContainers"]
    assert serving["securityContext"] == AS_STORED
    assert wait["securityContext"] == AS_STORED
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/vllm.json"},
        "fsGroup": 1001,
        "fsGroupChangePolicy": "OnRootMismatch",
    }


def test_without_a_context_the_backend_has_none() -> None:
    plan = serving_plan({"cache": {"strategy": "SharedPVC", "prewarm": True}})

    pod = render_backend_deployment(plan.service, plan.backend)["spec"]["template"]["spec"]

    assert "securityContext" not in pod
    assert "securityContext" not in pod["containers"][0]
    assert "securityContext" not in pod["initContainers"][0]
