"""The chart upgraded to non-default values on the box: the operator's pods, logs and metrics
and the gateways it creates follow them, and a plain upgrade brings the defaults back.

Every value the box can honour is set (the ServiceMonitors need the Prometheus Operator's CRDs,
which the box has not: tests/helm checks those renders).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm.chart import DEFAULT_NAMESPACE, Helm
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from support.cluster import Cluster
from support.custom_resources import CustomResources

from .pods import ready_gateways
from .serving import OPERATOR, diagnosed, example, operator_pods, upgrade
from .workloads import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

PRIORITY_CLASS = "noctaya-e2e-operators"
GATEWAY_NODES = "noctaya.io/e2e-gateways"
TAINT_KEY = "noctaya.io/e2e-gateway-only"
VALUES: dict[str, Any] = {
    "image": {"fetch": "noctaya", "pullPolicy": "Always"},
    "operator": {
        "replicas": 1,
        "maxConcurrentReconciles": 4,
        "logFormat": "console",
        "logLevel": "debug",
        "resources": {"requests": {"cpu": "20m", "memory": "160Mi"}},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": GATEWAY_NODES, "operator": "Exists"}]}
                    ]
                }
            }
        },
        "priorityClassName": PRIORITY_CLASS,
        "podAnnotations": {"example.com/owner": "platform"},
        "podLabels": {"team": "platform"},
        "podSecurityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "runAsGroup": 65532,
        },
        "extraArgs": ["--max-concurrent-reconciles=3"],
        "extraEnv": [{"name": "NOCTAYA_E2E_OWNER", "value": "platform"}],
        "metrics": {"enabled": True, "port": 9443},
    },
    "gateway": {
        "resources": {"requests": {"cpu": "15m", "memory": "48Mi"}},
        "maxRequestBody": "2Mi",
        "timeouts": {"requestBody": "45s", "backendRead": "15m"},
        "nodeSelector": {GATEWAY_NODES: "true"},
        "tolerations": [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
    },
}


@pytest.fixture
def prepared_node(cluster: Cluster, api_client: k8s_client.ApiClient) -> Iterator[str]:
    """One of the box's workers labelled for the gateways, and the operators' PriorityClass;
    both gone afterwards. A worker, and only one node: the operator and the gateways land there
    because the values say so, not because the control plane's node is where pods go anyway."""
    core = k8s_client.CoreV1Api(api_client)
    scheduling = k8s_client.SchedulingV1Api(api_client)
    name = next(node.name for node in cluster.nodes if not node.holds_control_plane)
    core.patch_node(name, {"metadata": {"labels": {GATEWAY_NODES: "true"}}})
    try:  # the label is the node's, not the test's: it goes even if what follows fails
        scheduling.create_priority_class(
            k8s_client.V1PriorityClass(
                metadata=k8s_client.V1ObjectMeta(name=PRIORITY_CLASS), value=1000
            )
        )
        yield name
    finally:
        core.patch_node(name, {"metadata": {"labels": {GATEWAY_NODES: None}}})
        with contextlib.suppress(ApiException):
            scheduling.delete_priority_class(PRIORITY_CLASS)


@pytest.fixture
def non_default_values(
    cluster: Cluster, helm: Helm, installed: None, prepared_node: str, tmp_path: Path
) -> Iterator[None]:
    """The release upgraded to `VALUES` (a values file, as users write them), then back to the
    chart's defaults."""
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(VALUES))
    upgrade(cluster, helm, values=["--reset-values", "--values", str(values_file)])
    try:
        yield
    finally:
        upgrade(cluster, helm, values=["--reset-values"])


def test_the_chart_with_non_default_values_runs_an_operator_that_follows_them(
    api_client: k8s_client.ApiClient,
    namespace: str,
    non_default_values: None,
    prepared_node: str,
) -> None:
    (pod,) = operator_pods(api_client)
    spec, container = pod.spec, pod.spec.containers[0]
    assert pod.metadata.annotations["example.com/owner"] == "platform"
    assert pod.metadata.labels["team"] == "platform"
    assert spec.priority_class_name == PRIORITY_CLASS
    assert spec.priority == 1000
    assert spec.node_name == prepared_node
    assert container.security_context.run_as_group == 65532
    assert container.resources.requests == {"cpu": "20m", "memory": "160Mi"}
    assert {"NOCTAYA_E2E_OWNER": "platform"}.items() <= {
        e.name: e.value for e in container.env
    }.items()
    assert container.args[-1] == "--max-concurrent-reconciles=3"

    core = k8s_client.CoreV1Api(api_client)

    def debug_and_info() -> str | None:
        """The log once it holds a console line at each level: the pod has only just taken
        the Lease, and what it logs at debug comes as it works."""
        log = str(core.read_namespaced_pod_log(pod.metadata.name, DEFAULT_NAMESPACE))
        lines = [line.split("\t") for line in log.splitlines() if line.count("\t") >= 3]
        return log if {"DEBUG", "INFO"} <= {fields[1] for fields in lines} else None

    log = wait_for("DEBUG and INFO console lines in the operator's log", debug_and_info, 60)
    assert not any(line.startswith("{") for line in log.splitlines()), log[-2000:]

    _metrics_served_only_to_authorized_callers(api_client)

    with diagnosed(api_client, namespace):
        _, service = example(cache={"strategy": "None"})
        CustomResources(api_client).create(service, namespace)
        # Not being deleted, and made by the upgraded operator: the namespace is newer.
        gateway = wait_for(
            "the gateway Ready with the operator's gateway defaults",
            lambda: ready_gateways(api_client, namespace) or None,
            timeout=300,
        )[0]
    assert gateway.spec.node_name == prepared_node
    env = {e.name: e.value for e in gateway.spec.containers[0].env}
    assert env["NOCTAYA_MAX_REQUEST_BODY"] == str(2 * 1024 * 1024)
    assert env["NOCTAYA_REQUEST_BODY_TIMEOUT"] == "45s"
    assert env["NOCTAYA_BACKEND_READ_TIMEOUT"] == "15m0s"
    assert gateway.spec.node_selector == {GATEWAY_NODES: "true"}
    assert (TAINT_KEY, "Exists", "NoSchedule") in [
        (t.key, t.operator, t.effect) for t in gateway.spec.tolerations or []
    ]
    assert gateway.spec.containers[0].resources.requests == {"cpu": "15m", "memory": "48Mi"}


def _metrics_served_only_to_authorized_callers(api_client: k8s_client.ApiClient) -> None:
    """The metrics Service reaches the operator's HTTPS endpoint, which refuses a caller the
    API server has not authorized (the API server's own proxy sends no bearer token)."""
    core = k8s_client.CoreV1Api(api_client)
    service = core.read_namespaced_service(f"{OPERATOR}-metrics", DEFAULT_NAMESPACE)
    assert [(p.name, p.port) for p in service.spec.ports] == [("metrics", 9443)]

    def answer() -> int | None:
        config = api_client.configuration
        path = (
            f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/services/"
            f"https:{OPERATOR}-metrics:metrics/proxy/metrics"
        )
        response = api_client.rest_client.pool_manager.request(
            "GET", f"{config.host}{path}", timeout=30
        )
        return None if response.status in (502, 503) else int(response.status)

    assert wait_for("the operator's metrics endpoint", answer, timeout=120) in (401, 403)
