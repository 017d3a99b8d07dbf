"""The committed RBAC is what the generator writes; the ClusterRole grants exactly the contract."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from noctaya.k8s.cli import main
from noctaya.k8s.rbac import rendered_rbac

REPO = Path(__file__).resolve().parents[3]
RBAC = REPO / "config" / "rbac"
CRUD = {"create", "delete", "get", "list", "patch", "update", "watch"}

# The contract's rules, written out independently of the generator: (group, resource) -> verbs.
MANAGER_GRANTS = {
    ("serving.noctaya.io", "llmservices"): {"get", "list", "watch"},
    ("serving.noctaya.io", "inferenceruntimes"): {"get", "list", "watch"},
    ("serving.noctaya.io", "llmservices/status"): {"get", "update", "patch"},
    ("apps", "deployments"): CRUD,
    ("", "services"): CRUD,
    ("", "persistentvolumeclaims"): CRUD,
    ("batch", "jobs"): CRUD,
    ("policy", "poddisruptionbudgets"): CRUD,
    ("keda.sh", "scaledobjects"): CRUD,
    ("", "pods"): {"get", "list", "watch"},
    ("", "secrets"): {"create", "delete", "get", "list", "watch"},
    # Beyond the reference's rules: the kubelet's FailedMount events say why a gateway pod
    # cannot start (a missing API-key Secret), which its own status never does.
    ("events.k8s.io", "events"): {"create", "list", "patch", "watch"},
    # Beyond the reference's rules: a cache claim adopted from another operator needs the
    # cluster's default StorageClass to tell a server-filled class from a dropped one.
    ("storage.k8s.io", "storageclasses"): {"list"},
    # Beyond the reference's rules: a NodeLocalPVC claim pinned to a Node that no longer exists
    # is given up, which needs its volume's node affinity and the Nodes of that hostname.
    ("", "persistentvolumes"): {"get"},
    ("", "nodes"): {"list"},
    # Each service's gateway endpoint reader, and the one rule its Role grants, which the
    # API server lets the operator grant only while it holds it.
    ("", "serviceaccounts"): CRUD,
    ("rbac.authorization.k8s.io", "roles"): CRUD,
    ("rbac.authorization.k8s.io", "rolebindings"): CRUD,
    ("discovery.k8s.io", "endpointslices"): {"get", "list", "watch"},
}


def _object(name: str) -> dict[str, object]:
    document = yaml.safe_load(rendered_rbac()[name])
    assert isinstance(document, dict)
    return document


def _grants(role: dict[str, object]) -> dict[tuple[str, str], set[str]]:
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:  # type: ignore[attr-defined]
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants


@pytest.mark.parametrize("name", sorted(rendered_rbac()))
def test_committed_rbac_matches_the_generated_one(name: str) -> None:
    committed = RBAC / name
    assert committed.exists(), f"{committed} is missing: run `make crds`"
    assert committed.read_text(encoding="utf-8") == rendered_rbac()[name], (
        f"{committed.relative_to(REPO)} differs from noctaya.k8s.rbac: run `make crds` and commit"
    )


def test_no_stale_files_linger_in_the_rbac_directory() -> None:
    assert {path.name for path in RBAC.iterdir()} == set(rendered_rbac())


def test_manager_cluster_role_grants_exactly_the_contract_verbs() -> None:
    role = _object("role.yaml")
    assert role["kind"] == "ClusterRole"
    assert _grants(role) == MANAGER_GRANTS


def test_secrets_can_never_be_rewritten_by_the_operator() -> None:
    verbs = _grants(_object("role.yaml"))[("", "secrets")]
    assert not verbs & {"update", "patch"}


def test_leader_election_role_is_namespaced_and_covers_leases_and_their_events() -> None:
    role = _object("leader_election_role.yaml")
    assert role["kind"] == "Role"
    assert role["metadata"]["namespace"] == "noctaya-system"  # type: ignore[index]
    assert _grants(role) == {
        ("coordination.k8s.io", "leases"): CRUD,
        ("", "events"): {"create", "patch"},
    }


def test_metrics_roles_allow_reviews_for_the_operator_and_reading_for_scrapers() -> None:
    assert _grants(_object("metrics_auth_role.yaml")) == {
        ("authentication.k8s.io", "tokenreviews"): {"create"},
        ("authorization.k8s.io", "subjectaccessreviews"): {"create"},
    }
    assert _object("metrics_reader_role.yaml")["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    ]


@pytest.mark.parametrize(
    ("binding", "role_kind", "role"),
    [
        ("role_binding.yaml", "ClusterRole", "noctaya-manager-role"),
        ("leader_election_role_binding.yaml", "Role", "noctaya-leader-election-role"),
        ("metrics_auth_role_binding.yaml", "ClusterRole", "noctaya-metrics-auth-role"),
    ],
)
def test_every_operator_role_is_bound_to_the_operator_service_account(
    binding: str, role_kind: str, role: str
) -> None:
    document = _object(binding)
    assert document["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role_kind,
        "name": role,
    }
    account = _object("service_account.yaml")["metadata"]
    assert document["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}  # type: ignore[index]
    ]


def test_kustomization_lists_every_generated_object() -> None:
    listed = _object("kustomization.yaml")["resources"]
    assert listed == sorted(set(rendered_rbac()) - {"kustomization.yaml"})


def test_rbac_command_writes_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rbac", "--output", str(tmp_path)]) == 0
    written = {path.name: path.read_text(encoding="utf-8") for path in tmp_path.iterdir()}
    assert written == rendered_rbac()
    assert capsys.readouterr().out.count(".yaml") == len(written)
