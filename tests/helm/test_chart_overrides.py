"""`helm template` with values: every knob lands where the operator and the cluster read it."""

from __future__ import annotations

import pytest

from .chart import Helm, find, kinds, manager_container

pytestmark = pytest.mark.helm


def test_image_registry_repositories_and_tag_build_both_images(helm: Helm) -> None:
    objects = helm.render(
        {
            "image": {
                "registry": "registry.example.com/ai/",
                "operator": "op",
                "gateway": "gw",
                "tag": "1.2.3",
                "pullPolicy": "Always",
            }
        }
    )
    container = manager_container(objects)
    assert container["image"] == "registry.example.com/ai/op:1.2.3"
    assert container["imagePullPolicy"] == "Always"
    assert "--gateway-image=registry.example.com/ai/gw:1.2.3" in container["args"]


def test_a_numeric_looking_tag_from_set_stays_the_tag_as_typed(helm: Helm) -> None:
    container = manager_container(helm.render(None, "image.tag=20250101"))
    assert container["image"] == "ghcr.io/noctaya/noctaya:20250101"


@pytest.mark.parametrize("how", ["values", "set"])
def test_gateway_replicas_reach_the_operator_flag(helm: Helm, how: str) -> None:
    objects = (
        helm.render({"gateway": {"replicas": 3}})
        if how == "values"
        else helm.render(None, "gateway.replicas=3")
    )
    assert "--gateway-replicas=3" in manager_container(objects)["args"]


def test_max_concurrent_reconciles_reach_the_operator_flag(helm: Helm) -> None:
    objects = helm.render(None, "operator.maxConcurrentReconciles=3")
    assert "--max-concurrent-reconciles=3" in manager_container(objects)["args"]


def test_largest_int32_replica_counts_render_as_plain_integers(helm: Helm) -> None:
    objects = helm.render(
        {"operator": {"replicas": 2147483647}, "gateway": {"replicas": 2147483647}}
    )
    deployment = find(objects, "Deployment", "noctaya-controller-manager")
    assert deployment["spec"]["replicas"] == 2147483647
    assert "--gateway-replicas=2147483647" in manager_container(objects)["args"]


def test_single_operator_without_leader_election_has_no_disruption_budget(helm: Helm) -> None:
    objects = helm.render({"operator": {"replicas": 1, "leaderElect": False}})
    deployment = find(objects, "Deployment", "noctaya-controller-manager")
    assert deployment["spec"]["replicas"] == 1
    assert manager_container(objects)["args"][0] == "--leader-elect=false"
    assert ("PodDisruptionBudget", "noctaya-controller-manager") not in kinds(objects)


def test_three_leader_elected_operators_keep_the_budget(helm: Helm) -> None:
    objects = helm.render(None, "operator.replicas=3")
    assert find(objects, "Deployment", "noctaya-controller-manager")["spec"]["replicas"] == 3
    budget = find(objects, "PodDisruptionBudget", "noctaya-controller-manager")
    assert budget["spec"]["minAvailable"] == 1


def test_an_existing_service_account_is_used_and_not_created(helm: Helm) -> None:
    objects = helm.render({"serviceAccount": {"create": False, "name": "platform-operator"}})
    assert not any(obj["kind"] == "ServiceAccount" for obj in objects)
    pod = find(objects, "Deployment", "noctaya-controller-manager")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "platform-operator"
    for binding in [obj for obj in objects if obj["kind"].endswith("Binding")]:
        assert [s["name"] for s in binding["subjects"]] == ["platform-operator"]


def test_service_account_annotations_are_passed_through(helm: Helm) -> None:
    annotations = {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/noctaya"}
    objects = helm.render({"serviceAccount": {"annotations": annotations}})
    account = find(objects, "ServiceAccount", "noctaya-controller-manager")
    assert account["metadata"]["annotations"] == annotations


def test_release_namespace_is_where_the_operator_and_its_lease_role_live(helm: Helm) -> None:
    objects = helm.render(namespace="platform")
    for kind in ("Deployment", "ServiceAccount", "Role", "RoleBinding", "PodDisruptionBudget"):
        assert {o["metadata"]["namespace"] for o in objects if o["kind"] == kind} == {"platform"}
    for binding in [obj for obj in objects if obj["kind"].endswith("Binding")]:
        assert [s["namespace"] for s in binding["subjects"]] == ["platform"]


def test_resources_scheduling_and_pull_secrets_are_passed_through(helm: Helm) -> None:
    """Helm merges maps into the defaults; null removes a default (here: the CPU limit)."""
    toleration = {"key": "dedicated", "operator": "Equal", "value": "ops", "effect": "NoSchedule"}
    objects = helm.render(
        {
            "operator": {
                "resources": {"requests": {"cpu": "50m"}, "limits": {"cpu": None}},
                "nodeSelector": {"node-role/ops": "true"},
                "tolerations": [toleration],
            },
            "imagePullSecrets": [{"name": "ghcr"}],
        }
    )
    pod = find(objects, "Deployment", "noctaya-controller-manager")["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"] == {
        "requests": {"cpu": "50m", "memory": "128Mi"},
        "limits": {"memory": "256Mi"},
    }
    assert pod["nodeSelector"] == {"node-role/ops": "true"}
    assert pod["tolerations"] == [toleration]
    assert pod["imagePullSecrets"] == [{"name": "ghcr"}]
