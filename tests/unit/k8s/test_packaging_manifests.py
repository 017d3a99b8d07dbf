"""The kustomize packaging: one build of CRDs, RBAC and a manager with the documented defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from noctaya.k8s.operator.flags import parse_flags, validate
from noctaya.k8s.rbac import SERVICE_ACCOUNT

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / "config"


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def _kustomized(directory: Path) -> list[dict[str, Any]]:
    """Every object a kustomization pulls in, following directories (no patches are used)."""
    kustomization = _documents(directory / "kustomization.yaml")[0]
    objects = []
    for entry in kustomization["resources"]:
        path = (directory / entry).resolve()
        assert path.exists(), f"{directory / 'kustomization.yaml'} lists missing {entry}"
        objects += _kustomized(path) if path.is_dir() else _documents(path)
    return objects


def _manager_objects() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in _documents(CONFIG / "manager" / "manager.yaml")}


def test_default_build_holds_crds_rbac_and_the_manager() -> None:
    kinds = {(doc["kind"], doc["metadata"]["name"]) for doc in _kustomized(CONFIG / "default")}
    assert {
        ("CustomResourceDefinition", "llmservices.serving.noctaya.io"),
        ("CustomResourceDefinition", "inferenceruntimes.serving.noctaya.io"),
        ("ClusterRole", "noctaya-manager-role"),
        ("Role", "noctaya-leader-election-role"),
        ("ServiceAccount", SERVICE_ACCOUNT),
        ("Namespace", "noctaya-system"),
        ("Deployment", "noctaya-controller-manager"),
        ("PodDisruptionBudget", "noctaya-controller-manager"),
    } <= kinds


def test_every_generated_crd_is_listed_in_the_crd_kustomization() -> None:
    listed = _documents(CONFIG / "crd" / "kustomization.yaml")[0]["resources"]
    assert sorted(listed) == sorted(
        f"bases/{p.name}" for p in (CONFIG / "crd" / "bases").glob("*.yaml")
    )


def test_manager_runs_two_leader_elected_replicas_spread_over_nodes() -> None:
    deployment = _manager_objects()["Deployment"]
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert deployment["metadata"]["namespace"] == "noctaya-system"
    assert spec["replicas"] == 2
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT
    assert pod["terminationGracePeriodSeconds"] == 10
    (preference,) = pod["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert preference["weight"] == 100
    term = preference["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]


def test_manager_args_are_the_packaging_defaults_and_pass_the_operator_parser() -> None:
    (container,) = _manager_objects()["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["noctaya-operator"]
    assert container["args"] == [
        "--leader-elect=true",
        "--health-probe-bind-address=:8081",
        "--metrics-bind-address=0",
        "--gateway-image=ghcr.io/noctaya/noctaya:0.1.0",
        "--gateway-replicas=1",
    ]
    flags = parse_flags(container["args"])
    validate(flags)
    assert flags.leader_elect
    assert not flags.metrics_enabled


def test_manager_probes_resources_and_namespace_discovery() -> None:
    (container,) = _manager_objects()["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert {"name": "health", "containerPort": 8081, "protocol": "TCP"} in container["ports"]
    assert container["resources"] == {
        "requests": {"cpu": "10m", "memory": "128Mi"},
        "limits": {"cpu": "500m", "memory": "256Mi"},
    }
    (env,) = container["env"]
    assert env == {
        "name": "POD_NAMESPACE",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
    }


def test_a_disruption_budget_keeps_one_manager_replica() -> None:
    objects = _manager_objects()
    budget = objects["PodDisruptionBudget"]["spec"]
    assert budget["minAvailable"] == 1
    assert budget["selector"] == objects["Deployment"]["spec"]["selector"]
