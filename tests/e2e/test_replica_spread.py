"""Two ready backend replicas of unequal capacity behind one gateway that follows their
EndpointSlices. Cache `None`.

One replica is the service's own Deployment pod; the other is a copy of its pod with half the
engine stub's concurrency (`STUB_CONCURRENCY`) and the backend's labels, so the backend Service
lists both. A fixed request rate that the two serve together, but the slow one alone cannot
serve half of, is sent from the control-plane node's network namespace once through the
gateway Service (the gateway picks the replica with the fewest requests in flight) and once
through the backend Service (kube-proxy picks at random): the gateway's p99 is at most 0.6× the
Service's, in the same run. Then the slow replica is deleted while streams run on it and stays
terminating (a preStop sleep): its streams finish, and it gets no new request meanwhile, as its
own count of finished completions shows.
"""

from __future__ import annotations

import http.client
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client
from support.cluster.host import connect_in_box
from support.custom_resources import CustomResources

from .pods import BACKEND_PODS, SERVICE_NAME, is_ready, live_pods, routed, settled_gateways
from .serving import (
    chat_lines_in_box,
    diagnosed,
    example,
    example_runtime,
    gateway_metric,
    routed_in_box,
    start_chat_in_box,
)
from .workloads import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
RUNTIME = "engine-stub-spread"
TOKENS = 20
TOKEN_DELAY = "25ms"
"""A stream takes about 0.5 s of its replica's slot."""
FAST, SLOW = 4, 2
"""Streams each replica generates at once: about 8 and 4 streams a second."""
RATE = 9.0
"""Requests a second: 75 % of the two replicas' 12, more than twice the slow one's 4."""
SECONDS = 30.0
SLOW_POD = f"{SERVICE_NAME}-slow"
PRE_STOP_SECONDS = 40
"""How long the deleted slow replica stays terminating, serving its streams."""
LONG = 200
"""Tokens of the streams running when the slow replica is deleted: about 5 s each."""
KV_CAPACITY = 100
"""Makes the stub's KV-cache gauge its streams in flight / 100: how a test sees them."""
MAX_QUEUE = 100
"""The contract's default, not the example's 10: the Service path admits without a bound, and
a moment when both replicas lag (the box busy) must show in the gateway's latency, as it does
in the Service's, not as a 429 a few requests get."""


def spread_runtime() -> dict[str, Any]:
    """The example's runtime, ready at once, pacing a stream over about half a second and
    generating FAST streams at once."""
    env = {"STUB_STARTUP_DELAY": "0s", "STUB_TOKEN_COUNT": str(TOKENS)}
    env |= {"STUB_TOKEN_DELAY": TOKEN_DELAY, "STUB_CONCURRENCY": str(FAST)}
    return example_runtime(RUNTIME, env | {"STUB_KV_CACHE_CAPACITY": str(KV_CAPACITY)})


@pytest.fixture
def two_replicas(
    api_client: k8s_client.ApiClient, namespace: str, installed: None, gpus: None
) -> Iterator[k8s_client.V1Pod]:
    """The service at one replica (min = max = 1) and the slow copy of its pod; yields the
    slow pod once both are Ready."""
    resources = CustomResources(api_client)
    resources.create(spread_runtime())
    _, service = example(
        runtime={"name": RUNTIME}, scaling={"min": 1, "max": 1}, endpoint={"maxQueue": MAX_QUEUE}
    )
    resources.create(service, namespace)
    try:
        core = k8s_client.CoreV1Api(api_client)
        (pod,) = wait_for(
            "the service's one backend pod Ready",
            lambda: (
                [p for p in live_pods(api_client, namespace, BACKEND_PODS) if is_ready(p)] or None
            ),
            timeout=300,
        )
        core.create_namespaced_pod(namespace, slow_copy(pod))
        wait_for(
            "the slow replica Ready",
            lambda: is_ready(core.read_namespaced_pod(SLOW_POD, namespace)),
            timeout=180,
        )
        settled_gateways(api_client, namespace, 1)
        yield core.read_namespaced_pod(SLOW_POD, namespace)
    finally:
        resources.delete("LLMService", SERVICE_NAME, namespace)
        resources.delete("InferenceRuntime", RUNTIME)


def slow_copy(pod: k8s_client.V1Pod) -> dict[str, Any]:
    """The backend pod as a bare pod with half its concurrency: the backend's labels (so its
    Service lists it), not the ReplicaSet's hash (so no ReplicaSet adopts it), and a preStop
    sleep that keeps it serving while it terminates."""
    manifest = k8s_client.ApiClient().sanitize_for_serialization(pod)
    labels = dict(manifest["metadata"]["labels"])
    labels.pop("pod-template-hash", None)
    spec = manifest["spec"]
    spec.pop("nodeName", None)
    spec["terminationGracePeriodSeconds"] = PRE_STOP_SECONDS + 20
    (serving,) = [c for c in spec["containers"] if c["name"] == "serving"]
    serving["lifecycle"] = {"preStop": {"sleep": {"seconds": PRE_STOP_SECONDS}}}
    for variable in serving["env"]:
        if variable["name"] == "STUB_CONCURRENCY":
            variable["value"] = str(SLOW)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": SLOW_POD, "labels": labels},
        "spec": spec,
    }


def completion_seconds(address: tuple[str, int]) -> float:
    """Seconds from sending a streamed completion to `address` (from the control-plane node's
    network namespace) to its `[DONE]`; fails on any other answer."""
    started = time.monotonic()
    lines = list(chat_lines_in_box(address, SERVICE_NAME, timeout=120))
    assert b"data: [DONE]" in lines, lines
    return time.monotonic() - started


def at_fixed_rate(address: tuple[str, int]) -> list[float]:
    """Each request's completion time, RATE requests a second for SECONDS, each sent on time
    whatever the earlier ones are doing (an open loop, as independent clients send)."""
    times: list[float] = []
    failures: list[tuple[float, BaseException]] = []

    def one() -> None:
        sent = time.monotonic()
        try:
            times.append(completion_seconds(address))
        except BaseException as error:  # reported below, with the others, by when it was sent
            failures.append((round(sent - start, 2), error))

    threads = []
    start = time.monotonic()
    for index in range(int(RATE * SECONDS)):
        delay = start + index / RATE - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        thread = threading.Thread(target=one, daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(timeout=180)
    assert not failures, (address, len(failures), sorted(failures, key=lambda f: f[0])[:5])
    assert len(times) == len(threads)
    return times


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def cluster_ip(api_client: k8s_client.ApiClient, namespace: str, name: str) -> tuple[str, int]:
    service = k8s_client.CoreV1Api(api_client).read_namespaced_service(name, namespace)
    return str(service.spec.cluster_ip), 80


def stub_metric(pod: k8s_client.V1Pod, port: int, name: str) -> float:
    """A series of the engine stub's metrics page, read from the pod's own address."""
    connection = http.client.HTTPConnection(pod.status.pod_ip, port, timeout=10)
    connection.sock = connect_in_box((pod.status.pod_ip, port), 10)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    (line,) = [x for x in text.splitlines() if x.startswith(f"{name} ")]
    return float(line.split()[1])


def finished(pod: k8s_client.V1Pod, port: int) -> int:
    """The completions the stub has answered in full."""
    return int(stub_metric(pod, port, "vllm:request_success_total"))


def streaming(pod: k8s_client.V1Pod, port: int) -> int:
    """The streams the stub is generating now (its KV-cache gauge times KV_CAPACITY)."""
    return round(stub_metric(pod, port, "vllm:kv_cache_usage_perc") * KV_CAPACITY)


def test_requests_go_to_the_replica_with_fewest_in_flight_and_never_to_a_terminating_one(
    api_client: k8s_client.ApiClient, namespace: str, two_replicas: k8s_client.V1Pod
) -> None:
    core = k8s_client.CoreV1Api(api_client)
    with diagnosed(api_client, namespace):
        gateway = cluster_ip(api_client, namespace, SERVICE_NAME)
        backend_name = f"{SERVICE_NAME}-backend"
        backend = cluster_ip(api_client, namespace, backend_name)
        (pod,) = settled_gateways(api_client, namespace, 1)
        watching = 'noctaya_gateway_endpoints_watch{state="watching"}'
        wait_for(
            "the gateway following the backend's pods",
            lambda: gateway_metric(api_client, namespace, pod.metadata.name, watching) == 1.0,
            timeout=30,
        )
        # A pod is Ready before kube-proxy on the node sending the load routes its Service to
        # it: both Services are measured once they route there.
        wait_for(
            "the backend Service listing both replicas",
            lambda: (found := routed(api_client, namespace, backend_name)) and len(found) == 2,
            timeout=30,
        )
        routed_in_box(gateway)
        routed_in_box(backend, "/health")
        through_gateway = at_fixed_rate(gateway)
        through_service = at_fixed_rate(backend)
        print(
            f"p50/p99 through the gateway {statistics.median(through_gateway):.2f}/"
            f"{p99(through_gateway):.2f} s, through the Service "
            f"{statistics.median(through_service):.2f}/{p99(through_service):.2f} s"
        )
        assert p99(through_gateway) <= 0.6 * p99(through_service)

        slow = two_replicas
        port = slow.spec.containers[0].ports[0].container_port
        streams = [
            start_chat_in_box(gateway, SERVICE_NAME, tokens=LONG) for _ in range(FAST + SLOW)
        ]
        wait_for("streams running on the slow replica", lambda: streaming(slow, port) > 0, 30)
        core.delete_namespaced_pod(SLOW_POD, namespace)
        wait_for(
            "the slow replica listed as terminating",
            lambda: _terminating(api_client, namespace, slow.status.pod_ip),
            timeout=30,
        )
        for stream in streams:
            wait_for("a stream running at the delete to end", stream.over.is_set, timeout=30)
            assert stream.completed, stream.describe()
        before = finished(slow, port)
        for _ in range(3):
            later = [start_chat_in_box(gateway, SERVICE_NAME) for _ in range(FAST + SLOW)]
            for stream in later:
                wait_for("a stream sent while the slow replica terminates", stream.over.is_set)
                assert stream.completed, stream.describe()
        assert core.read_namespaced_pod(SLOW_POD, namespace).metadata.deletion_timestamp
        assert finished(slow, port) == before


def _terminating(api_client: k8s_client.ApiClient, namespace: str, address: str) -> bool:
    slices = k8s_client.DiscoveryV1Api(api_client).list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={SERVICE_NAME}-backend"
    )
    return any(
        address in endpoint.addresses and bool(endpoint.conditions.terminating)
        for found in slices.items
        for endpoint in found.endpoints or []
    )
