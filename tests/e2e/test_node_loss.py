"""A node lost on the box: its power cut, so its kubelet, containerd and every container on it
end at once and nothing reports why. Cache `None`: nothing ties the backend to that node.

What a user relies on: once the node controller marks the node unreachable (after the box's
`NODE_MONITOR_GRACE`), the service stops saying `Ready=True` while no gateway can answer; once the
pods' toleration of that runs out (`UNREACHABLE_TOLERATION`), the gateway and the backend are
replaced on other nodes, and requests are answered again.
"""

from __future__ import annotations

import time

import pytest
from kubernetes import client as k8s_client
from support.cluster import Cluster
from support.cluster.components import NODE_MONITOR_GRACE, UNREACHABLE_TOLERATION
from support.custom_resources import CustomResources

from .conftest import GPUS
from .pods import BACKEND_PODS, SERVICE_NAME, is_ready, live_pods, ready_gateways, settled_gateways
from .serving import condition, diagnosed, example, start_chat, status
from .workloads import advertise_gpus, cordoned, node_back, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
NOT_READY_BOUND = NODE_MONITOR_GRACE + 20
"""Seconds from the power cut to `Ready` no longer `True`: the node controller's grace, then
its next look (every 5 s), the pods' Ready condition turned False, the gateway Deployment's
available count, and the operator's reconcile of it."""
FAILOVER_BOUND = NODE_MONITOR_GRACE + UNREACHABLE_TOLERATION + 90
"""Seconds from the power cut to an answer again: eviction after the toleration, then a new
gateway and a new backend started and Ready."""


def test_a_lost_nodes_gateway_and_backend_are_replaced_elsewhere_and_status_says_so_meanwhile(
    cluster: Cluster, api_client: k8s_client.ApiClient, namespace: str, installed: None
) -> None:
    core = k8s_client.CoreV1Api(api_client)
    control_plane, *workers = cluster.nodes
    _, service = example(scaling={"min": 1})
    with diagnosed(api_client, namespace):
        with cordoned(core, control_plane.name):  # the control plane's node is never lost
            CustomResources(api_client).create(service, namespace)
            (gateway,) = settled_gateways(api_client, namespace, 1)
        lost = cluster.node(gateway.spec.node_name)
        (spare,) = (node for node in workers if node != lost)
        advertise_gpus(core, GPUS, lost.name)  # the backend lands beside the gateway
        try:
            _serving(api_client, namespace, on=lost.name)
            advertise_gpus(core, GPUS, spare.name)

            cut = time.monotonic()
            cluster.power_off(lost)
            wait_for(
                "the service no longer Ready=True",
                lambda: (
                    condition(status(api_client, namespace, SERVICE_NAME), "Ready")[0] != "True"
                ),
                timeout=NOT_READY_BOUND,
            )
            not_ready_after = time.monotonic() - cut

            backend = _serving(api_client, namespace, timeout=FAILOVER_BOUND)
            assert backend.spec.node_name != lost.name
            answered_after = time.monotonic() - cut
            for gateway in ready_gateways(api_client, namespace):
                assert gateway.spec.node_name != lost.name
            print(
                f"node {lost.name} lost: Ready not True after {not_ready_after:.1f} s"
                f" (bound {NOT_READY_BOUND} s), answered again after {answered_after:.1f} s"
            )
        finally:
            cluster.power_on(lost)
            wait_for("the lost node Ready, untainted", lambda: node_back(core, lost.name), 180)
            for node in workers:
                advertise_gpus(core, None, node.name)


def _serving(
    api_client: k8s_client.ApiClient, namespace: str, *, on: str | None = None, timeout: float = 180
) -> k8s_client.V1Pod:
    """Waits until the service is Ready and a chat through its Service is answered whole; the
    backend pod that is Ready then (on node `on`, if given)."""

    def answered() -> k8s_client.V1Pod | None:
        if condition(status(api_client, namespace, SERVICE_NAME), "Ready")[0] != "True":
            return None
        backends = [pod for pod in live_pods(api_client, namespace, BACKEND_PODS) if is_ready(pod)]
        if len(backends) != 1 or (on is not None and backends[0].spec.node_name != on):
            return None
        exchange = start_chat(api_client, namespace, SERVICE_NAME)
        exchange.over.wait(60)
        return backends[0] if exchange.completed else None

    return wait_for("the service answering", answered, timeout)
