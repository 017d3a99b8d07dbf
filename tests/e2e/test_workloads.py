"""The box is a real cluster: pods run on its node, Services resolve through CoreDNS and
answer through kube-proxy, Jobs complete, the garbage collector and the scheduler act."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s_client
from support.cluster import layout

from .workloads import (
    GPU,
    advertise_gpus,
    agent_deployment,
    agent_service,
    create,
    pod_phase,
    ready_replicas,
    shell_pod,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_deployment_is_ready_and_its_service_answers_by_name_from_another_pod(
    api_client: k8s_client.ApiClient, namespace: str
) -> None:
    core, apps = k8s_client.CoreV1Api(api_client), k8s_client.AppsV1Api(api_client)
    create(api_client, agent_deployment("web"), namespace)
    create(api_client, agent_service("web"), namespace)
    wait_for("Deployment web Ready", lambda: ready_replicas(apps, namespace, "web") == 1)
    (pod,) = core.list_namespaced_pod(namespace, label_selector="app=web").items
    nodes = [node.name for node in layout.default_nodes()]
    assert pod.spec.node_name in nodes
    cluster_ip = core.read_namespaced_service("web", namespace).spec.cluster_ip

    name = f"web.{namespace}.svc.{layout.CLUSTER_DOMAIN}"
    script = f"nslookup -type=A {name} && wget -q -O - http://web/"
    elsewhere = next(node for node in nodes if node != pod.spec.node_name)
    create(api_client, shell_pod("client", script, nodeName=elsewhere), namespace)
    phase = wait_for(
        "the client pod to finish",
        lambda: (p := pod_phase(core, namespace, "client")) in {"Succeeded", "Failed"} and p,
    )
    log = core.read_namespaced_pod_log("client", namespace)
    assert phase == "Succeeded", log
    assert f"Address: {cluster_ip}" in log  # resolved by CoreDNS to the Service IP
    assert f"hello from {pod.metadata.name}" in log  # answered through kube-proxy


def test_job_runs_to_completion(api_client: k8s_client.ApiClient, namespace: str) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {"backoffLimit": 0, "template": {"spec": shell_pod("once", "echo done")["spec"]}},
    }
    create(api_client, job, namespace)
    batch = k8s_client.BatchV1Api(api_client)
    wait_for(
        "Job once to succeed", lambda: batch.read_namespaced_job("once", namespace).status.succeeded
    )


def test_deleting_an_owner_deletes_its_dependents(
    api_client: k8s_client.ApiClient, namespace: str
) -> None:
    core = k8s_client.CoreV1Api(api_client)
    owner = core.create_namespaced_config_map(
        namespace, k8s_client.V1ConfigMap(metadata=k8s_client.V1ObjectMeta(name="owner"))
    )
    reference = k8s_client.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
    )
    core.create_namespaced_config_map(
        namespace,
        k8s_client.V1ConfigMap(
            metadata=k8s_client.V1ObjectMeta(name="dependent", owner_references=[reference])
        ),
    )
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Background")
    wait_for(
        "the garbage collector to delete the dependent",
        lambda: (
            not core.list_namespaced_config_map(
                namespace, field_selector="metadata.name=dependent"
            ).items
        ),
    )


@pytest.fixture
def gpus_advertised(api_client: k8s_client.ApiClient) -> Iterator[None]:
    """After the test, the node advertises no GPUs again."""
    yield
    advertise_gpus(k8s_client.CoreV1Api(api_client), None)


def test_gpu_pod_waits_for_the_node_to_advertise_gpus(
    api_client: k8s_client.ApiClient, namespace: str, gpus_advertised: None
) -> None:
    core = k8s_client.CoreV1Api(api_client)
    pod = shell_pod("gpu", "sleep 3600")
    pod["spec"]["containers"][0]["resources"] = {"limits": {GPU: "1"}}
    create(api_client, pod, namespace)

    def failed_scheduling() -> str | None:
        events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=gpu")
        messages = [e.message for e in events.items if e.reason == "FailedScheduling"]
        return messages[0] if messages else None

    message = wait_for("a FailedScheduling event", failed_scheduling)
    assert f"Insufficient {GPU}" in message
    assert pod_phase(core, namespace, "gpu") == "Pending"

    advertise_gpus(core, "2")
    wait_for("the GPU pod to run", lambda: pod_phase(core, namespace, "gpu") == "Running")
    assert core.read_namespaced_pod("gpu", namespace).spec.node_name == layout.CONTROL_PLANE.name
