"""Where the platform has not granted the operator what the gateway's endpoint reader needs
(no `roles` and `rolebindings` in its ClusterRole), the service is still served, through its
backend Service, and its status says why the gateway cannot see its pods. Cache `None`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client
from support.custom_resources import CustomResources

from .pods import SERVICE_NAME, settled_gateways
from .serving import condition, diagnosed, example, status, stream_chat, wait_idle
from .workloads import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
OPERATOR_ROLE = "noctaya-manager-role"
READER = f"{SERVICE_NAME}-endpoint-reader"


@pytest.fixture
def without_role_rules(api_client: k8s_client.ApiClient, installed: None) -> Iterator[None]:
    """The operator's ClusterRole without its rules on roles and rolebindings, restored after."""
    rbac = k8s_client.RbacAuthorizationV1Api(api_client)
    original = rbac.read_cluster_role(OPERATOR_ROLE)
    kept = [
        rule
        for rule in original.rules
        if not ({"roles", "rolebindings"} & set(rule.resources or []))
    ]
    assert len(kept) < len(original.rules)
    rbac.patch_cluster_role(OPERATOR_ROLE, {"rules": kept})
    try:
        yield
    finally:
        rbac.patch_cluster_role(OPERATOR_ROLE, {"rules": original.rules})


def test_a_gateway_without_its_endpoint_reader_serves_through_the_service_and_status_says_why(
    api_client: k8s_client.ApiClient, namespace: str, without_role_rules: None, gpus: None
) -> None:
    with diagnosed(api_client, namespace):
        _, service = example()
        CustomResources(api_client).create(service, namespace)
        wait_idle(api_client, namespace)

        def refused() -> dict[str, Any] | None:
            found = status(api_client, namespace, SERVICE_NAME)
            forbidden = condition(found, "Degraded") == ("True", "GatewayEndpointsForbidden")
            return found if forbidden else None

        found = wait_for("the refusal in the service's status", refused, timeout=120)
        message = next(c["message"] for c in found["conditions"] if c["type"] == "Degraded")
        assert "roles" in message or "rolebindings" in message, message
        (gateway,) = settled_gateways(api_client, namespace, 1)
        assert gateway.spec.service_account_name in (None, "default"), gateway.spec
        env = {e.name for e in gateway.spec.containers[0].env or []}
        assert "NOCTAYA_BACKEND_ENDPOINTS" not in env, env
        rbac = k8s_client.RbacAuthorizationV1Api(api_client)
        with pytest.raises(k8s_client.ApiException) as missing:
            rbac.read_namespaced_role_binding(READER, namespace)
        assert missing.value.status == 404

        lines = [chunk.line for chunk in stream_chat(api_client, namespace, SERVICE_NAME)]
        assert b"data: [DONE]" in lines, lines
