"""`kubectl drain` of a node holding one of two gateways and the backend, while streams run
through both gateways and cold requests come in. Cache `None`.

What a user relies on: the gateways' PodDisruptionBudget keeps one serving throughout, every
admitted request is answered (whole, or with an answer a client may retry), and the backend is
rescheduled on another node and serves. The runtime drains its backend before it stops
(`lifecycle.preStopDrain`, for the service's `scaling.drainTimeout`), so the streams it is
serving when evicted finish.
"""

from __future__ import annotations

import secrets
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s_client
from support.cluster import Cluster, locate_programs
from support.custom_resources import CustomResources

from .conftest import GPUS
from .pods import SERVICE_NAME, one_ready_backend, ready_gateways, settled_gateways
from .serving import diagnosed, example, example_runtime, start_chat
from .test_availability import two_gateways  # noqa: F401  (the module's two gateways)
from .workloads import advertise_gpus, cordoned, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
STREAM_TOKENS = 150
"""At the stub's 100 ms a token, a stream of 15 s: still running when the drain starts."""


@pytest.fixture
def draining_runtime(api_client: k8s_client.ApiClient) -> Iterator[str]:
    """The example's engine-stub runtime, draining its backends before they stop."""
    name = f"drain-{secrets.token_hex(3)}"
    lifecycle = {"preStopDrain": True, "terminationGracePeriodSeconds": 5}
    resources = CustomResources(api_client)
    resources.create(example_runtime(name, {}, lifecycle=lifecycle))
    yield name
    resources.delete("InferenceRuntime", name)


@pytest.fixture
def gpus_on_workers(cluster: Cluster, api_client: k8s_client.ApiClient) -> Iterator[None]:
    core = k8s_client.CoreV1Api(api_client)
    _, *workers = cluster.nodes
    for node in workers:
        advertise_gpus(core, GPUS, node.name)
    yield
    for node in workers:
        advertise_gpus(core, None, node.name)


def test_a_drained_node_loses_no_admitted_request_and_its_backend_serves_elsewhere(
    cluster: Cluster,
    api_client: k8s_client.ApiClient,
    namespace: str,
    two_gateways: None,  # noqa: F811
    gpus_on_workers: None,
    draining_runtime: str,
) -> None:
    core = k8s_client.CoreV1Api(api_client)
    control_plane, *_ = cluster.nodes
    _, service = example(
        runtime={"name": draining_runtime}, scaling={"min": 1, "max": 1, "drainTimeout": "25s"}
    )
    with diagnosed(api_client, namespace):
        with cordoned(core, control_plane.name):  # the two gateways on the two workers
            CustomResources(api_client).create(service, namespace)
            gateways = settled_gateways(api_client, namespace, 2)
            backend = one_ready_backend(api_client, namespace)
        drained = backend.spec.node_name
        assert drained in {gateway.spec.node_name for gateway in gateways}
        assert len({gateway.spec.node_name for gateway in gateways}) == 2, "spread on two nodes"

        streams = [  # two through each gateway
            start_chat(
                api_client, namespace, SERVICE_NAME, pod=str(g.metadata.name), tokens=STREAM_TOKENS
            )
            for g in gateways
            for _ in range(2)
        ]
        wait_for("every stream under way", lambda: all(len(e.lines) > 2 for e in streams))
        fewest_gateways = _watch_ready_gateways(api_client, namespace)
        kubectl = [str(locate_programs().path("kubectl")), "--kubeconfig", str(cluster.kubeconfig)]
        gateway_logs = [  # the evicted gateway's log is gone with its pod by the end
            subprocess.Popen(
                [*kubectl, "logs", "--follow", "--namespace", namespace, str(g.metadata.name)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for g in gateways
        ]
        drain = subprocess.Popen(
            [*kubectl, "drain", drained, "--ignore-daemonsets", "--delete-emptydir-data",
             "--timeout=240s"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        drain_began = time.monotonic()
        during = [start_chat(api_client, namespace, SERVICE_NAME) for _ in range(4)]
        try:
            output, _ = drain.communicate(timeout=300)
            assert drain.returncode == 0, output
            moved = one_ready_backend(api_client, namespace, not_on=drained, timeout=240)
            after = start_chat(api_client, namespace, SERVICE_NAME)
            exchanges = [*streams, *during, after]
            wait_for(
                "every admitted request answered",
                lambda: all(e.over.is_set() for e in exchanges),
                timeout=240,
            )
        finally:
            fewest_gateways.stop.set()
            subprocess.run(
                [*kubectl, "uncordon", drained], check=True, capture_output=True, timeout=60
            )
            logs = "\n".join(_log(g, log) for g, log in zip(gateways, gateway_logs, strict=True))
        roles = ["stream"] * len(streams) + ["during"] * len(during) + ["after"]
        for role, exchange in zip(roles, exchanges, strict=True):
            assert exchange.completed or exchange.retryable, (
                f"{role} request sent {exchange.started - drain_began:+.2f} s after the drain "
                f"began, ended {exchange.ended - drain_began:+.2f} s: {exchange.describe()}\n"
                + logs
            )
        assert after.completed, after.describe()
        assert moved.spec.node_name != drained
        assert fewest_gateways.fewest >= 1, "the PodDisruptionBudget kept a gateway serving"


class _Watch:
    def __init__(self) -> None:
        self.stop = threading.Event()
        self.fewest = 2


def _watch_ready_gateways(api_client: k8s_client.ApiClient, namespace: str) -> _Watch:
    """The fewest Ready gateways seen, every half second, until `stop` is set."""
    watch = _Watch()

    def look() -> None:
        while not watch.stop.wait(0.5):
            watch.fewest = min(watch.fewest, len(ready_gateways(api_client, namespace)))

    threading.Thread(target=look, daemon=True).start()
    return watch


def _log(gateway: k8s_client.V1Pod, follower: subprocess.Popen[str]) -> str:
    """What `gateway` logged from before the drain on (`kubectl logs --follow`, stopped here)."""
    follower.terminate()
    return f"---- {gateway.metadata.name} log\n{follower.communicate(timeout=30)[0]}"
