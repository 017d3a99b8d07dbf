"""The gateway follows its backend's EndpointSlices as an account of its own, which the operator
creates holding only its generated RBAC; where the platform withheld the RBAC to create it, the
service still gets its gateway, which sends to the backend Service, and its status says why.

The scenarios run the reconciler with the credentials of the operator's ServiceAccount and read
the account's reach with a token of the gateway's: the API server's RBAC is the judge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice
from support.operator_process import (
    generated_rbac,
    grant,
    service_account_token,
    token_kubeconfig,
)

from .cluster import (
    ENDPOINT_READER_MOUNT,
    ENDPOINT_READER_VOLUME,
    condition_values,
    controller_reference,
    endpoint_reader_env,
    eventually,
    read,
    set_gateway_available,
)
from .conftest import RunningController

pytestmark = pytest.mark.integration

SVC = "chat"
ACCOUNT = f"{SVC}-endpoint-reader"
RBAC = "rbac.authorization.k8s.io/v1"
ENDPOINT_ENV = {
    "NOCTAYA_BACKEND_ENDPOINTS",
    "NOCTAYA_KUBERNETES_TOKEN_FILE",
    "NOCTAYA_KUBERNETES_CA_FILE",
}
REFUSED = f'the operator may not write Role "{ACCOUNT}"'


def client_of(admin_kubeconfig: Path, token: str, path: Path) -> k8s_client.ApiClient:
    config = token_kubeconfig(admin_kubeconfig, token, path)
    client: k8s_client.ApiClient = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(config)
    )
    return client


def without_rbac_rules(objects: list[Manifest]) -> list[Manifest]:
    """The operator's generated RBAC less what lets it write Roles and RoleBindings."""
    for obj in objects:
        if obj["kind"] == "ClusterRole":
            obj["rules"] = [
                rule
                for rule in obj["rules"]
                if "rbac.authorization.k8s.io" not in rule.get("apiGroups", [])
            ]
    return objects


Edit = Callable[[list[Manifest]], list[Manifest]]


def unchanged(objects: list[Manifest]) -> list[Manifest]:
    return objects


@pytest.fixture
def operator_client(
    api_client: k8s_client.ApiClient, kubeconfig: Path, namespace: str, tmp_path: Path
) -> Iterator[Callable[[Edit], k8s_client.ApiClient]]:
    """Credentials of the operator's ServiceAccount holding its generated RBAC, as `edit`
    leaves it."""
    cleanups: list[Callable[[], None]] = []
    clients: list[k8s_client.ApiClient] = []

    def make(edit: Edit) -> k8s_client.ApiClient:
        cleanups.append(grant(api_client, edit(generated_rbac(namespace, namespace))))
        token = service_account_token(api_client, namespace, "noctaya-controller-manager")
        clients.append(client_of(kubeconfig, token, tmp_path / "operator.kubeconfig"))
        return clients[-1]

    yield make
    for client in clients:
        client.close()  # type: ignore[no-untyped-call]
    for cleanup in cleanups:
        cleanup()


@pytest.fixture
def operator_as(
    operator_client: Callable[[Edit], k8s_client.ApiClient],
    make_reconciler: Callable[..., LLMServiceReconciler],
) -> Callable[[Edit], LLMServiceReconciler]:
    """A reconciler, driven key by key, with the operator's RBAC as `edit` leaves it."""
    return lambda edit: make_reconciler(client=operator_client(edit))


@pytest.fixture
def service(resources: CustomResources, namespace: str, runtime_name: str) -> Manifest:
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"strategy": "None"}}
    resources.create(llmservice(SVC, changes), namespace)
    return resources.get("LLMService", SVC, namespace)


def gateway_pod(api_client: k8s_client.ApiClient, namespace: str) -> Any:
    deployment = read(api_client, "apps/v1", "Deployment", namespace, f"{SVC}-gateway")
    assert deployment is not None, "the gateway Deployment was not created"
    return deployment["spec"]["template"]["spec"]


def env_of(pod: Manifest) -> dict[str, str]:
    [container] = pod["containers"]
    return {entry["name"]: entry.get("value", "") for entry in container["env"]}


def refused(call: Callable[[], object]) -> int | None:
    try:
        call()
    except ApiException as error:
        return int(error.status)
    return None


def test_the_gateway_runs_as_an_account_that_may_only_read_its_namespaces_endpointslices(
    api_client: k8s_client.ApiClient,
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
    service: Manifest,
    operator_as: Callable[[Edit], LLMServiceReconciler],
) -> None:
    operator_as(unchanged).reconcile((namespace, SVC))

    account = read(api_client, "v1", "ServiceAccount", namespace, ACCOUNT)
    role = read(api_client, RBAC, "Role", namespace, ACCOUNT)
    binding = read(api_client, RBAC, "RoleBinding", namespace, ACCOUNT)
    for obj in (account, role, binding):
        assert obj is not None
        assert controller_reference(obj, service) is not None, obj["kind"]
        assert obj["metadata"]["labels"]["serving.noctaya.io/llmservice"] == SVC
    assert account["automountServiceAccountToken"] is False
    assert role["rules"] == [
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": ACCOUNT,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": namespace}
    ]

    pod = gateway_pod(api_client, namespace)
    assert pod["serviceAccountName"] == ACCOUNT
    assert pod["automountServiceAccountToken"] is False
    assert pod["volumes"] == [ENDPOINT_READER_VOLUME]
    [container] = pod["containers"]
    assert container["volumeMounts"] == [ENDPOINT_READER_MOUNT]
    assert set(endpoint_reader_env(namespace, SVC)) <= env_of(pod).items()

    token = service_account_token(api_client, namespace, ACCOUNT)
    gateway = client_of(kubeconfig, token, tmp_path / "gateway.kubeconfig")
    try:
        slices, core = k8s_client.DiscoveryV1Api(gateway), k8s_client.CoreV1Api(gateway)
        assert refused(lambda: slices.list_namespaced_endpoint_slice(namespace)) is None
        assert (
            refused(lambda: slices.list_namespaced_endpoint_slice(namespace, watch=False)) is None
        )
        assert refused(lambda: slices.list_namespaced_endpoint_slice("default")) == 403
        assert refused(lambda: slices.list_endpoint_slice_for_all_namespaces()) == 403
        assert refused(lambda: core.list_namespaced_pod(namespace)) == 403
        assert refused(lambda: core.list_namespaced_secret(namespace)) == 403
    finally:
        gateway.close()  # type: ignore[no-untyped-call]


def test_without_rbac_for_roles_the_gateway_serves_through_the_service_and_the_status_says_why(
    api_client: k8s_client.ApiClient,
    namespace: str,
    service: Manifest,
    status_of: Callable[[str, str], Manifest],
    operator_as: Callable[[Edit], LLMServiceReconciler],
) -> None:
    reconciler = operator_as(without_rbac_rules)
    reconciler.reconcile((namespace, SVC))

    assert read(api_client, RBAC, "Role", namespace, ACCOUNT) is None
    pod = gateway_pod(api_client, namespace)
    assert "serviceAccountName" not in pod
    assert pod["automountServiceAccountToken"] is False
    assert "volumes" not in pod
    assert not ENDPOINT_ENV & env_of(pod).keys()
    assert env_of(pod)["NOCTAYA_BACKEND_URL"] == f"http://{SVC}-backend.{namespace}.svc:80"

    # No gateway replica yet: Ready says so, and adds why the gateway will not see the pods.
    ready = condition_values(status_of(SVC, namespace))["Ready"]
    assert ready[:2] == ("False", "GatewayUnavailable")
    assert REFUSED in ready[2]
    assert "forbidden" in ready[2]

    # A serving gateway: the service is as ready as its backend, and degraded for the reason.
    set_gateway_available(api_client, namespace, SVC)
    reconciler.reconcile((namespace, SVC))
    values = condition_values(status_of(SVC, namespace))
    assert values["Ready"] == ("False", "ScaledToZero", "Backend is scaled to zero")
    status, reason, message = values["Degraded"]
    assert (status, reason) == ("True", "GatewayEndpointsForbidden")
    assert message.startswith(
        f'the gateway cannot see the backend pods and sends to Service "{SVC}-backend": {REFUSED}'
    )
    assert status_of(SVC, namespace)["phase"] == "ScaledToZero"


def test_the_running_operator_restores_a_deleted_role_binding(
    api_client: k8s_client.ApiClient,
    namespace: str,
    service: Manifest,
    operator_client: Callable[[Edit], k8s_client.ApiClient],
    start_controller: Callable[..., RunningController],
) -> None:
    start_controller(client=operator_client(unchanged)).wait_reconciling()
    first = eventually(
        lambda: read(api_client, RBAC, "RoleBinding", namespace, ACCOUNT), "the RoleBinding"
    )
    k8s_client.RbacAuthorizationV1Api(api_client).delete_namespaced_role_binding(ACCOUNT, namespace)

    def recreated() -> Any:
        again = read(api_client, RBAC, "RoleBinding", namespace, ACCOUNT)
        return again and again["metadata"]["uid"] != first["metadata"]["uid"]

    eventually(recreated, "the deleted RoleBinding to be applied again")


def test_a_running_operator_without_rbac_for_roles_starts_and_gives_the_service_its_gateway(
    api_client: k8s_client.ApiClient,
    namespace: str,
    service: Manifest,
    status_of: Callable[[str, str], Manifest],
    operator_client: Callable[[Edit], k8s_client.ApiClient],
    start_controller: Callable[..., RunningController],
) -> None:
    """Its watches of Roles and RoleBindings are refused: they must not hold up the start."""
    start_controller(client=operator_client(without_rbac_rules)).wait_reconciling()

    def ready_message() -> str | None:
        ready = condition_values(status_of(SVC, namespace)).get("Ready")
        return ready[2] if ready is not None and REFUSED in ready[2] else None

    eventually(ready_message, "the status to say why the gateway cannot see the pods")
    assert "serviceAccountName" not in gateway_pod(api_client, namespace)


def test_without_rbac_for_roles_kv_cache_scaling_says_it_scales_on_queued_requests(
    api_client: k8s_client.ApiClient,
    namespace: str,
    resources: CustomResources,
    runtime_name: str,
    status_of: Callable[[str, str], Manifest],
    operator_as: Callable[[Edit], LLMServiceReconciler],
) -> None:
    """The scaler reads the KV-cache gauge from the pods as the same account: without it the
    ScaledObject still scales, on what the gateways report, and the reason says so."""
    gauge = {"queueDepth": "vllm:num_requests_waiting", "kvCacheUtil": "vllm:kv_cache_usage_perc"}
    resources.create(inference_runtime(runtime_name, {"metrics": gauge}))
    changes = {
        "runtime": {"name": runtime_name},
        "cache": {"strategy": "None"},
        "scaling": {"metric": "kvCacheUtil", "target": 80},
    }
    resources.create(llmservice(SVC, changes), namespace)
    reconciler = operator_as(without_rbac_rules)
    reconciler.reconcile((namespace, SVC))
    set_gateway_available(api_client, namespace, SVC)
    reconciler.reconcile((namespace, SVC))

    status, reason, message = condition_values(status_of(SVC, namespace))["Degraded"]
    assert (status, reason) == ("True", "GatewayEndpointsForbidden")
    assert REFUSED in message
    assert "kvCacheUtil cannot read the backend pods' KV cache" in message
    assert "scales on queued requests (queueDepth)" in message
    pod = gateway_pod(api_client, namespace)  # the lone gateway serves KEDA itself
    assert "serviceAccountName" not in pod
    assert not (ENDPOINT_ENV | {"NOCTAYA_BACKEND_KV_CACHE_METRIC"}) & env_of(pod).keys()
