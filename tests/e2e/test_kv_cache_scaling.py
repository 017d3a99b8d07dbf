"""`spec.scaling.metric: kvCacheUtil` through the real KEDA, with two gateways (so with the
aggregator, which reads the pods' KV-cache gauges itself). Cache `None`.

The engine stub's gauge is its streams in flight over `STUB_KV_CACHE_CAPACITY` (4 here), so
three long streams on the one replica are 75 % against a target of 50: the service scales
1 → 2, and KEDA's value is the sum over the backend's pods (75), not over the gateways (150),
which the HPA's average times its replicas shows. Once the streams end it is back to 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.utils import parse_quantity
from support.custom_resources import CustomResources

from .pods import SERVICE_NAME, settled_gateways
from .serving import (
    backend_replicas,
    diagnosed,
    example,
    example_runtime,
    routed_in_box,
    start_chat_in_box,
)
from .test_availability import two_gateways  # noqa: F401  (the module's two gateways)
from .workloads import ready_replicas, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
RUNTIME = "engine-stub-kv-cache"
CAPACITY = 4
TARGET = 50
STREAMS = 3
TOKENS = 900
"""About 90 s a stream at the example's 100 ms a token: longer than the scale-up takes."""


def kv_runtime() -> dict[str, Any]:
    """The example's runtime, ready at once, naming the stub's KV-cache gauge."""
    metrics = {"path": "/metrics", "port": "http", "queueDepth": "vllm:num_requests_waiting"}
    return example_runtime(
        RUNTIME,
        {"STUB_STARTUP_DELAY": "0s", "STUB_KV_CACHE_CAPACITY": str(CAPACITY)},
        metrics=metrics | {"kvCacheUtil": "vllm:kv_cache_usage_perc"},
    )


@pytest.fixture
def kv_service(
    api_client: k8s_client.ApiClient,
    namespace: str,
    two_gateways: None,  # noqa: F811
    gpus: None,
) -> Iterator[None]:
    resources = CustomResources(api_client)
    resources.create(kv_runtime())
    _, service = example(
        runtime={"name": RUNTIME},
        scaling={"metric": "kvCacheUtil", "target": TARGET, "min": 1, "max": 2},
    )
    resources.create(service, namespace)
    try:
        yield
    finally:
        resources.delete("LLMService", SERVICE_NAME, namespace)
        resources.delete("InferenceRuntime", RUNTIME)


def kv_sum_seen_by_the_hpa(api_client: k8s_client.ApiClient, namespace: str) -> float | None:
    """The HPA's current average of the external metric times its current replicas: the
    value KEDA gets from the scaler, in percent."""
    autoscaler = k8s_client.AutoscalingV2Api(api_client)
    (hpa,) = autoscaler.list_namespaced_horizontal_pod_autoscaler(namespace).items
    found = hpa.status
    for metric in found.current_metrics or []:
        if metric.external and metric.external.current.average_value is not None:
            average = float(parse_quantity(metric.external.current.average_value))
            return average * (found.current_replicas or 0)
    return None


def test_replicas_follow_the_kv_cache_use_summed_over_pods_not_gateways(
    api_client: k8s_client.ApiClient, namespace: str, kv_service: None
) -> None:
    apps = k8s_client.AppsV1Api(api_client)
    with diagnosed(api_client, namespace):
        settled_gateways(api_client, namespace, 2)
        wait_for("one ready backend", lambda: ready_replicas(apps, namespace, SERVICE_NAME) == 1)
        core = k8s_client.CoreV1Api(api_client)
        gateway = core.read_namespaced_service(SERVICE_NAME, namespace).spec.cluster_ip
        routed_in_box((gateway, 80))
        streams = [
            start_chat_in_box((gateway, 80), SERVICE_NAME, tokens=TOKENS) for _ in range(STREAMS)
        ]
        wait_for(
            "two ready backends for 75 % of one replica's KV cache at target 50",
            lambda: ready_replicas(apps, namespace, SERVICE_NAME) == 2,
            timeout=180,
        )
        expected = 100 * STREAMS / CAPACITY
        seen = wait_for(
            "the HPA at two replicas, seeing the pods' sum",
            lambda: (
                (value := kv_sum_seen_by_the_hpa(api_client, namespace)) is not None
                and backend_replicas(api_client, namespace, SERVICE_NAME) == 2
                and abs(value - expected) < 1
                and value
            ),
            timeout=120,
        )
        print(f"KEDA's value with two gateways and two replicas: {seen:.1f} %")
        for stream in streams:
            wait_for("a long stream to end", stream.over.is_set, timeout=150)
            assert stream.completed, stream.describe()
        wait_for(
            "back to one backend once the KV cache is free",
            lambda: backend_replicas(api_client, namespace, SERVICE_NAME) == 1,
            timeout=300,
        )
