"""The gateway follows its backend's EndpointSlices as a per-service account that may read
nothing else, with a projected token of bounded lifetime; the aggregator reads pods only to
scale on KV-cache use; where the account cannot be had, the pods run as before."""

from __future__ import annotations

import dataclasses
from typing import Any

from noctaya.core.observation import TierObservation
from noctaya.core.plan import gateway_env as contract
from noctaya.core.plan.gateway import KvCacheScaling
from noctaya.core.plan.serving import ServingPlan
from noctaya.k8s.endpoint_access import REASON, with_refusal
from noctaya.k8s.render.endpoint_access import TOKEN_LIFETIME
from noctaya.k8s.render.objects import RESTRICTED_CONTAINER_SECURITY, RESTRICTED_POD_SECURITY
from noctaya.k8s.render.serving import RenderedService, render_serving
from support.plans import serving_plan

ACCOUNT = "chat-endpoint-reader"
KV_CACHE = KvCacheScaling(metric="vllm:kv_cache_usage_perc", port=8000, path="/metrics")
ACCESS_ENV = {
    "NOCTAYA_BACKEND_ENDPOINTS": "tenant/chat-backend",
    "NOCTAYA_KUBERNETES_TOKEN_FILE": "/var/run/noctaya/kubernetes/token",
    "NOCTAYA_KUBERNETES_CA_FILE": "/var/run/noctaya/kubernetes/ca.crt",
}
KV_CACHE_ENV = {
    "NOCTAYA_SCALING_METRIC": "kvCacheUtil",
    "NOCTAYA_BACKEND_METRICS_PORT": "8000",
    "NOCTAYA_BACKEND_METRICS_PATH": "/metrics",
    "NOCTAYA_BACKEND_KV_CACHE_METRIC": "vllm:kv_cache_usage_perc",
}
PROJECTED_TOKEN = {
    "name": "kubernetes-api",
    "projected": {
        "defaultMode": 0o440,
        "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_LIFETIME}},
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
        ],
    },
}
TOKEN_MOUNT = {
    "name": "kubernetes-api",
    "mountPath": "/var/run/noctaya/kubernetes",
    "readOnly": True,
}


def with_kv_cache(plan: ServingPlan) -> ServingPlan:
    return dataclasses.replace(plan, gateway=dataclasses.replace(plan.gateway, kv_cache=KV_CACHE))


def pod(deployment: dict[str, Any] | None) -> dict[str, Any]:
    assert deployment is not None
    return dict(deployment["spec"]["template"]["spec"])


def env(deployment: dict[str, Any] | None) -> dict[str, str]:
    [container] = pod(deployment)["containers"]
    return {entry["name"]: entry.get("value", "") for entry in container["env"]}


def access_objects(rendered: RenderedService) -> dict[str, dict[str, Any]]:
    return {obj["kind"]: obj for obj in rendered.endpoint_access}


def test_the_endpoint_reader_may_only_get_list_and_watch_endpointslices_of_its_namespace() -> None:
    objects = access_objects(render_serving(serving_plan()))
    assert list(objects) == ["ServiceAccount", "Role", "RoleBinding"]
    assert {o["metadata"]["name"] for o in objects.values()} == {ACCOUNT}
    assert {o["metadata"]["namespace"] for o in objects.values()} == {"tenant"}
    assert objects["Role"]["rules"] == [
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    assert objects["RoleBinding"]["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": ACCOUNT,
    }
    assert objects["RoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": "tenant"}
    ]
    assert objects["ServiceAccount"]["automountServiceAccountToken"] is False
    labels = objects["Role"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "noctaya"
    assert labels["serving.noctaya.io/llmservice"] == "chat"


def test_the_gateway_runs_as_the_reader_with_a_projected_read_only_token_and_stays_restricted() -> (
    None
):
    gateway = render_serving(serving_plan()).gateway_deployment
    spec = pod(gateway)
    assert spec["serviceAccountName"] == ACCOUNT
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"] == RESTRICTED_POD_SECURITY
    assert spec["volumes"] == [PROJECTED_TOKEN]
    [container] = spec["containers"]
    assert container["volumeMounts"] == [TOKEN_MOUNT]
    assert container["securityContext"] == RESTRICTED_CONTAINER_SECURITY
    assert ACCESS_ENV.items() <= env(gateway).items()
    assert 600 <= TOKEN_LIFETIME <= 3600  # the API server's floor; an hour at most


def test_a_lone_gateway_scales_on_kv_cache_use_it_reads_from_the_pods() -> None:
    rendered = render_serving(with_kv_cache(serving_plan()))
    assert (ACCESS_ENV | KV_CACHE_ENV).items() <= env(rendered.gateway_deployment).items()


def test_an_aggregator_runs_as_the_reader_only_to_scale_on_kv_cache_use() -> None:
    queue_depth = render_serving(serving_plan(gateway_replicas=2))
    assert "serviceAccountName" not in pod(queue_depth.aggregator)
    assert not {*ACCESS_ENV, *KV_CACHE_ENV} & env(queue_depth.aggregator).keys()
    assert pod(queue_depth.aggregator)["automountServiceAccountToken"] is False

    kv_cache = render_serving(with_kv_cache(serving_plan(gateway_replicas=2)))
    aggregator = pod(kv_cache.aggregator)
    assert aggregator["serviceAccountName"] == ACCOUNT
    assert aggregator["automountServiceAccountToken"] is False
    assert PROJECTED_TOKEN in aggregator["volumes"]
    assert TOKEN_MOUNT in aggregator["containers"][0]["volumeMounts"]
    assert (ACCESS_ENV | KV_CACHE_ENV).items() <= env(kv_cache.aggregator).items()
    # The gateways follow the pods to send to them; the aggregator is the one KEDA asks.
    assert ACCESS_ENV.items() <= env(kv_cache.gateway_deployment).items()
    assert not KV_CACHE_ENV.keys() & env(kv_cache.gateway_deployment).keys()


def test_the_planned_kv_cache_gauge_reaches_the_aggregator_as_its_runtime_names_it() -> None:
    plan = serving_plan(
        {"scaling": {"metric": "kvCacheUtil", "target": 80}},
        {
            "container": {"port": {"name": "http", "containerPort": 8000}},
            "metrics": {
                "path": "/metrics",
                "port": "http",
                "queueDepth": "vllm:num_requests_waiting",
                "kvCacheUtil": KV_CACHE.metric,
            },
        },
        gateway_replicas=2,
    )
    assert (ACCESS_ENV | KV_CACHE_ENV).items() <= env(render_serving(plan).aggregator).items()


def test_without_the_reader_the_gateway_tier_runs_as_no_account_and_knows_only_the_service() -> (
    None
):
    for plan in (with_kv_cache(serving_plan()), with_kv_cache(serving_plan(gateway_replicas=2))):
        rendered = render_serving(plan, endpoint_access=False)
        for deployment in filter(None, (rendered.gateway_deployment, rendered.aggregator)):
            assert "serviceAccountName" not in pod(deployment)
            assert PROJECTED_TOKEN not in pod(deployment).get("volumes", [])
            assert not {*ACCESS_ENV, *KV_CACHE_ENV} & env(deployment).keys()


def test_a_placement_without_endpoints_reports_the_queue_depth_whatever_the_plan_says() -> None:
    """Local mode's placement: no EndpointSlices, so no pod to read a gauge from."""
    placement = contract.GatewayPlacement("http://127.0.0.1:1", ":8080", ":9090")
    names = dict(contract.gateway_env(with_kv_cache(serving_plan()).gateway, placement))
    assert not {*ACCESS_ENV, *KV_CACHE_ENV} & names.keys()


STARTING = TierObservation("Starting", "gateway-0 is starting", False, 1, 0, 1)
SERVING = TierObservation("Starting", "", False, 1, 1, 1, available_replicas=1)
FAILING = TierObservation("ImagePullFailed", "gateway-0 cannot pull", True, 1, 0, 1)


def test_a_refusal_degrades_a_serving_gateway_tier_with_its_own_reason() -> None:
    assert with_refusal(SERVING, "may not") == dataclasses.replace(
        SERVING, reason=REASON, message="may not", degraded=True
    )


def test_a_refusal_is_added_to_what_keeps_a_gateway_from_serving_never_put_in_its_place() -> None:
    assert with_refusal(STARTING, "may not") == dataclasses.replace(
        STARTING, message="gateway-0 is starting; may not"
    )
    assert with_refusal(FAILING, "may not") == FAILING
    assert with_refusal(SERVING, None) == SERVING
