"""Going from several gateways back to one (the PDB, aggregate scaler and demand Secret go) and
the demand token's checks.

The extras of several gateways are deleted only if this service controls them: an object of
the same name that belongs to somebody else is left alone, silently.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import condition_values, create, patch, read
from .failures import reconcile_failure

pytestmark = pytest.mark.integration

MakeReconciler = Callable[..., LLMServiceReconciler]
EXTRAS = (
    ("policy/v1", "PodDisruptionBudget", "-gateway"),
    ("apps/v1", "Deployment", "-scaler"),
    ("v1", "Secret", "-demand-auth"),
)


def extras(api_client: k8s_client.ApiClient, namespace: str, svc: str) -> list[Manifest | None]:
    return [read(api_client, v, kind, namespace, svc + suffix) for v, kind, suffix in EXTRAS]


def versions(objects: list[Manifest | None]) -> list[str]:
    return [obj["metadata"]["resourceVersion"] for obj in objects if obj is not None]


def token_of(api_client: k8s_client.ApiClient, namespace: str, svc: str) -> str:
    secret = read(api_client, "v1", "Secret", namespace, f"{svc}-demand-auth")
    return base64.b64decode(secret["data"]["token"]).decode()


@pytest.fixture
def service(resources: CustomResources, namespace: str, runtime_name: str) -> Manifest:
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"strategy": "None"}}
    return resources.create(llmservice("edge", changes), namespace)


def test_back_to_one_gateway_deletes_the_budget_the_aggregator_and_the_demand_token(
    api_client: k8s_client.ApiClient,
    namespace: str,
    service: Manifest,
    make_reconciler: MakeReconciler,
) -> None:
    several = make_reconciler(gateway_replicas=2)
    several.reconcile((namespace, "edge"))
    token = token_of(api_client, namespace, "edge")
    several.reconcile((namespace, "edge"))
    assert token_of(api_client, namespace, "edge") == token, "the token is never rotated"
    assert all(extras(api_client, namespace, "edge"))

    make_reconciler(gateway_replicas=1).reconcile((namespace, "edge"))

    assert extras(api_client, namespace, "edge") == [None, None, None]
    gateway = read(api_client, "apps/v1", "Deployment", namespace, "edge-gateway")
    assert gateway["spec"]["replicas"] == 1
    pod = gateway["spec"]["template"]["spec"]
    assert "affinity" not in pod
    assert [v["name"] for v in pod["volumes"]] == ["kubernetes-api"]  # the demand token is gone
    [container] = pod["containers"]
    assert [e["name"] for e in container["env"]] == [
        "NOCTAYA_BACKEND_URL",
        "NOCTAYA_BACKEND_ENDPOINTS",
        "NOCTAYA_KUBERNETES_TOKEN_FILE",
        "NOCTAYA_KUBERNETES_CA_FILE",
        "NOCTAYA_LISTEN_ADDR",
        "NOCTAYA_MAX_QUEUE",
        "NOCTAYA_SCALER_LISTEN_ADDR",
        "NOCTAYA_ACTIVATION_TIMEOUT",
        "NOCTAYA_COLDSTART_MODE",
        "NOCTAYA_HEARTBEAT_INTERVAL",
        "NOCTAYA_SERVED_MODELS",
    ]
    assert [p["name"] for p in container["ports"]] == ["http", "grpc"]
    assert [m["name"] for m in container["volumeMounts"]] == ["kubernetes-api"]
    scaler = read(api_client, "v1", "Service", namespace, "edge-scaler")
    assert scaler["spec"]["selector"]["app.kubernetes.io/name"] == "edge-gateway"
    assert [p["port"] for p in scaler["spec"]["ports"]] == [9090]


def test_back_to_one_gateway_leaves_same_named_objects_it_does_not_control(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    service: Manifest,
    make_reconciler: MakeReconciler,
) -> None:
    other = resources.create(llmservice("other", {"runtime": {"name": "unused"}}), namespace)

    def reference(owner: Manifest, *, controller: bool) -> list[Manifest]:
        meta = owner["metadata"]
        return [
            {
                "apiVersion": "serving.noctaya.io/v1alpha1",
                "kind": "LLMService",
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": controller,
            }
        ]

    selector = {"matchLabels": {"app": "someone-else"}}
    create(  # nobody's
        api_client,
        namespace,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "edge-gateway"},
            "spec": {"minAvailable": 2, "selector": selector},
        },
    )
    create(  # refers to the service, but as a plain owner
        api_client,
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "edge-scaler",
                "ownerReferences": reference(service, controller=False),
            },
            "spec": {
                "selector": selector,
                "template": {
                    "metadata": {"labels": selector["matchLabels"]},
                    "spec": {"containers": [{"name": "x", "image": "busybox"}]},
                },
            },
        },
    )
    create(  # controlled by another LLMService
        api_client,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "edge-demand-auth",
                "ownerReferences": reference(other, controller=True),
            },
            "stringData": {"token": "x" * 40},
        },
    )
    before = versions(extras(api_client, namespace, "edge"))

    make_reconciler(gateway_replicas=1).reconcile((namespace, "edge"))

    after = extras(api_client, namespace, "edge")
    assert all(after), "an object this service does not control was deleted"
    assert versions(after) == before
    status = resources.get("LLMService", "edge", namespace)["status"]
    assert condition_values(status)["Degraded"][:2] == ("False", "Inactive")


def test_several_gateways_refuse_a_demand_secret_of_somebody_else(
    api_client: k8s_client.ApiClient,
    namespace: str,
    service: Manifest,
    make_reconciler: MakeReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "edge-demand-auth"}}
    create(api_client, namespace, {**secret, "stringData": {"token": "y" * 43}})

    error = reconcile_failure(make_reconciler(gateway_replicas=2), namespace, "edge")

    message = (
        f"resource {namespace}/edge-demand-auth already exists and is not controlled by "
        "LLMService edge"
    )
    assert (error.reason, error.message) == ("ApplyDemandAuthentication", message)
    conditions = condition_values(status_of("edge", namespace))
    assert conditions["AutoscalingReady"][:2] == ("True", "ScaledObjectApplied")
    assert conditions["Degraded"] == ("True", "ApplyDemandAuthentication", message)
    assert read(api_client, "apps/v1", "Deployment", namespace, "edge-scaler") is None


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        pytest.param(
            {"token": base64.b64encode(b"  too-short-token  ").decode()},
            "is invalid: demand authentication token must contain at least 32 characters",
            id="short-token",
        ),
        pytest.param(
            {"token": None, "other": base64.b64encode(b"z" * 43).decode()},
            'is missing key "token"',
            id="missing-key",
        ),
    ],
)
def test_a_malformed_owned_demand_secret_fails_closed_and_is_not_repaired(
    api_client: k8s_client.ApiClient,
    namespace: str,
    service: Manifest,
    make_reconciler: MakeReconciler,
    status_of: Callable[[str, str], Manifest],
    data: Manifest,
    problem: str,
) -> None:
    several = make_reconciler(gateway_replicas=2)
    several.reconcile((namespace, "edge"))
    broken = patch(api_client, "v1", "Secret", namespace, "edge-demand-auth", {"data": data})

    error = reconcile_failure(several, namespace, "edge")

    message = f"demand authentication Secret edge-demand-auth {problem}"
    assert (error.reason, error.message) == ("DemandAuthentication", message)
    assert condition_values(status_of("edge", namespace))["Ready"] == (
        "False",
        "DemandAuthentication",
        message,
    )
    live = read(api_client, "v1", "Secret", namespace, "edge-demand-auth")
    assert live["metadata"]["resourceVersion"] == broken["metadata"]["resourceVersion"]
