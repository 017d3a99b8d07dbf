"""`helm template` with no values: two leader-elected operators and one gateway per service,
as config/ has them."""

from __future__ import annotations

import pytest

from .chart import CHART, DEFAULT_NAMESPACE, Helm, Manifest, find, kinds, manager_container

pytestmark = pytest.mark.helm

OPERATOR_SELECTOR = {"app.kubernetes.io/name": "noctaya", "app.kubernetes.io/component": "operator"}


def test_helm_lint_passes_strictly_with_defaults_and_with_monitoring(helm: Helm) -> None:
    for extra in ([], ["--set", "monitoring.serviceMonitor.enabled=true"]):
        result = helm.run("lint", "--strict", str(CHART), *extra)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_defaults_render_the_operator_its_budget_account_and_rbac(
    default_render: list[Manifest],
) -> None:
    assert kinds(default_render) == {
        ("Deployment", "noctaya-controller-manager"),
        ("PodDisruptionBudget", "noctaya-controller-manager"),
        ("ServiceAccount", "noctaya-controller-manager"),
        ("ClusterRole", "noctaya-manager-role"),
        ("ClusterRoleBinding", "noctaya-manager-rolebinding"),
        ("Role", "noctaya-leader-election-role"),
        ("RoleBinding", "noctaya-leader-election-rolebinding"),
        ("ClusterRole", "noctaya-metrics-auth-role"),
        ("ClusterRoleBinding", "noctaya-metrics-auth-rolebinding"),
        ("ClusterRole", "noctaya-metrics-reader"),
    }


def test_namespaced_objects_live_in_the_release_namespace(default_render: list[Manifest]) -> None:
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding"}
    for obj in default_render:
        namespace = obj["metadata"].get("namespace")
        expected = None if obj["kind"] in cluster_scoped else DEFAULT_NAMESPACE
        assert namespace == expected, (obj["kind"], obj["metadata"]["name"])


def test_operator_runs_two_replicas_spread_over_nodes(default_render: list[Manifest]) -> None:
    deployment = find(default_render, "Deployment", "noctaya-controller-manager")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"] == OPERATOR_SELECTOR
    assert OPERATOR_SELECTOR.items() <= spec["template"]["metadata"]["labels"].items()
    assert pod["serviceAccountName"] == "noctaya-controller-manager"
    assert pod["terminationGracePeriodSeconds"] == 10
    assert pod["affinity"]["podAntiAffinity"] == {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": OPERATOR_SELECTOR},
                },
            }
        ]
    }
    assert "nodeSelector" not in pod
    assert "tolerations" not in pod
    assert "imagePullSecrets" not in pod


def test_manager_runs_the_operator_with_the_packaging_args(default_render: list[Manifest]) -> None:
    container = manager_container(default_render)
    assert container["image"] == "ghcr.io/noctaya/noctaya:0.1.0"
    assert container["command"] == ["noctaya-operator"]
    assert container["args"] == [
        "--leader-elect=true",
        "--health-probe-bind-address=:8081",
        "--metrics-bind-address=0",
        "--gateway-image=ghcr.io/noctaya/noctaya:0.1.0",
        "--gateway-replicas=1",
        "--max-concurrent-reconciles=8",
        "--log-format=json",
        "--log-level=info",
    ]


def test_manager_probes_resources_and_namespace_discovery(default_render: list[Manifest]) -> None:
    container = manager_container(default_render)
    assert container["ports"] == [{"name": "health", "containerPort": 8081, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["resources"] == {
        "requests": {"cpu": "10m", "memory": "128Mi"},
        "limits": {"cpu": "500m", "memory": "256Mi"},
    }
    assert container["env"] == [
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
    ]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]


def test_disruption_budget_keeps_one_operator_replica(default_render: list[Manifest]) -> None:
    budget = find(default_render, "PodDisruptionBudget", "noctaya-controller-manager")
    assert budget["apiVersion"] == "policy/v1"
    assert budget["spec"] == {"minAvailable": 1, "selector": {"matchLabels": OPERATOR_SELECTOR}}


@pytest.mark.parametrize(
    ("binding", "role_kind", "role"),
    [
        ("noctaya-manager-rolebinding", "ClusterRole", "noctaya-manager-role"),
        ("noctaya-metrics-auth-rolebinding", "ClusterRole", "noctaya-metrics-auth-role"),
        ("noctaya-leader-election-rolebinding", "Role", "noctaya-leader-election-role"),
    ],
)
def test_every_operator_role_is_bound_to_the_release_service_account(
    default_render: list[Manifest], binding: str, role_kind: str, role: str
) -> None:
    kind = "RoleBinding" if role_kind == "Role" else "ClusterRoleBinding"
    document = find(default_render, kind, binding)
    assert document["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role_kind,
        "name": role,
    }
    assert document["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "noctaya-controller-manager",
            "namespace": DEFAULT_NAMESPACE,
        }
    ]


def test_objects_carry_the_helm_release_labels(default_render: list[Manifest]) -> None:
    for obj in default_render:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "noctaya"
        assert labels["app.kubernetes.io/instance"] == "noctaya"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["helm.sh/chart"] == "noctaya-0.1.0"


def test_every_document_holds_only_kubernetes_object_fields(default_render: list[Manifest]) -> None:
    """Stray template output (a helper printing a value) would become a bogus top-level key."""
    fields = {"apiVersion", "kind", "metadata", "spec", "rules", "roleRef", "subjects"}
    for obj in default_render:
        assert set(obj) <= fields, (obj["kind"], set(obj) - fields)
