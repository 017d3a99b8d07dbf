"""The operator pod the chart renders meets the restricted Pod Security level, as the API
server's own Pod Security admission judges it (a dry-run create in a namespace that enforces
restricted), with the chart's defaults and with every scheduling and image value set."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from noctaya.core.plan.pod_security import Level
from support.pod_security import admission_refusal, enforcing_namespaces

from .chart import Helm, Manifest, find

pytestmark = [pytest.mark.helm, pytest.mark.integration]

VALUES: dict[str, Manifest | None] = {
    "defaults": None,
    "scheduling and images": {
        "image": {"registry": "registry.example.com/ai", "tag": "1.2.3"},
        "imagePullSecrets": [{"name": "ghcr"}],
        "operator": {"replicas": 1, "leaderElect": False, "nodeSelector": {"pool": "ops"}},
    },
}


def operator_pod(objects: list[Manifest]) -> Manifest:
    deployment = find(objects, "Deployment", "noctaya-controller-manager")
    return dict(deployment["spec"]["template"]["spec"])


@pytest.fixture(scope="module")
def enforcing(api_client: k8s.ApiClient) -> Iterator[dict[Level, str]]:
    with enforcing_namespaces(api_client) as names:
        yield names


@pytest.mark.parametrize("values", VALUES.values(), ids=VALUES)
def test_the_operator_pod_meets_restricted(
    helm: Helm,
    api_client: k8s.ApiClient,
    enforcing: dict[Level, str],
    values: Manifest | None,
) -> None:
    namespace = enforcing[Level.RESTRICTED]
    deployment = find(
        helm.render(values, namespace=namespace), "Deployment", "noctaya-controller-manager"
    )
    pod = deployment["spec"]["template"]["spec"]

    assert admission_refusal(api_client, namespace, "operator", pod) == ""


def test_the_judge_refuses_an_operator_pod_that_could_escalate(
    helm: Helm, api_client: k8s.ApiClient, enforcing: dict[Level, str]
) -> None:
    """The check above can fail: the same pod, allowed to gain privileges, is refused."""
    namespace = enforcing[Level.RESTRICTED]
    pod = operator_pod(helm.render(namespace=namespace))
    pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True

    assert "allowPrivilegeEscalation != false" in admission_refusal(
        api_client, namespace, "operator", pod
    )
