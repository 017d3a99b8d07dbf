"""The operator's RBAC, generated so that the rules live in one reviewed table.

Four roles, each for one reason to talk to the API server:
- the manager ClusterRole: exactly the verbs the reconciler and its watches use, nothing more
  (secrets have no update/patch: create-once never rewrites a Secret; StorageClasses are only
  listed, to tell the cluster's default class from one a cache claim named; a cache claim's
  PersistentVolume is read and Nodes are listed by hostname, to tell a lost node from one
  that is merely unreachable; ServiceAccounts, Roles and RoleBindings are the gateway's
  endpoint reader, and get, list and watch on EndpointSlices is what that Role grants, which
  the API server lets only a holder of those verbs grant);
- the leader-election Role, namespaced to the manager's namespace: the Lease it campaigns for,
  and core Events because the elected leader records a `LeaderElection` event on that Lease
  (it lets `kubectl describe lease` show who took over when);
- the metrics-auth ClusterRole: TokenReviews and SubjectAccessReviews, which the secure metrics
  endpoint needs to authenticate and authorize its scrapers;
- the metrics-reader ClusterRole, for whoever scrapes `/metrics` (bind it to Prometheus).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from noctaya.core.api import API_GROUP
from noctaya.k8s.manifest_yaml import dump_manifest, write_files

NAMESPACE = "noctaya-system"
SERVICE_ACCOUNT = "noctaya-controller-manager"
MANAGER_ROLE = "noctaya-manager-role"
LEADER_ELECTION_ROLE = "noctaya-leader-election-role"
METRICS_AUTH_ROLE = "noctaya-metrics-auth-role"
METRICS_READER_ROLE = "noctaya-metrics-reader"
RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"

CRUD = ("create", "delete", "get", "list", "patch", "update", "watch")
READ = ("get", "list", "watch")

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Rule:
    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]

    def to_manifest(self) -> Manifest:
        return {
            "apiGroups": [self.group],
            "resources": sorted(self.resources),
            "verbs": sorted(self.verbs),
        }


MANAGER_RULES = (
    Rule(API_GROUP, ("inferenceruntimes", "llmservices"), READ),
    Rule(API_GROUP, ("llmservices/status",), ("get", "patch", "update")),
    Rule("apps", ("deployments",), CRUD),
    Rule("", ("services", "persistentvolumeclaims"), CRUD),
    Rule("batch", ("jobs",), CRUD),
    Rule("policy", ("poddisruptionbudgets",), CRUD),
    Rule("keda.sh", ("scaledobjects",), CRUD),
    Rule("", ("pods",), READ),
    Rule("", ("secrets",), ("create", "delete", "get", "list", "watch")),
    Rule("events.k8s.io", ("events",), ("create", "list", "patch", "watch")),
    Rule("storage.k8s.io", ("storageclasses",), ("list",)),
    Rule("", ("persistentvolumes",), ("get",)),
    Rule("", ("nodes",), ("list",)),
    Rule("", ("serviceaccounts",), CRUD),
    Rule("rbac.authorization.k8s.io", ("roles", "rolebindings"), CRUD),
    Rule("discovery.k8s.io", ("endpointslices",), READ),
)
LEADER_ELECTION_RULES = (
    Rule("coordination.k8s.io", ("leases",), CRUD),
    Rule("", ("events",), ("create", "patch")),
)
METRICS_AUTH_RULES = (
    Rule("authentication.k8s.io", ("tokenreviews",), ("create",)),
    Rule("authorization.k8s.io", ("subjectaccessreviews",), ("create",)),
)


def _metadata(name: str, namespace: str | None = None) -> Manifest:
    labels = {"app.kubernetes.io/name": "noctaya", "app.kubernetes.io/managed-by": "kustomize"}
    meta: Manifest = {"name": name, "labels": labels}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _role(kind: str, name: str, rules: tuple[Rule, ...], namespace: str | None = None) -> Manifest:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": kind,
        "metadata": _metadata(name, namespace),
        "rules": [rule.to_manifest() for rule in rules],
    }


def _binding(kind: str, role_kind: str, role: str, namespace: str | None = None) -> Manifest:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": kind,
        "metadata": _metadata(role.removesuffix("-role") + "-rolebinding", namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}],
    }


def rbac_manifests() -> dict[str, Manifest]:
    """File name → object, one object per file, as `config/rbac` holds them beside the
    kustomization that lists them."""
    return {
        "service_account.yaml": {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _metadata(SERVICE_ACCOUNT, NAMESPACE),
        },
        "role.yaml": _role("ClusterRole", MANAGER_ROLE, MANAGER_RULES),
        "role_binding.yaml": _binding("ClusterRoleBinding", "ClusterRole", MANAGER_ROLE),
        "leader_election_role.yaml": _role(
            "Role", LEADER_ELECTION_ROLE, LEADER_ELECTION_RULES, NAMESPACE
        ),
        "leader_election_role_binding.yaml": _binding(
            "RoleBinding", "Role", LEADER_ELECTION_ROLE, NAMESPACE
        ),
        "metrics_auth_role.yaml": _role("ClusterRole", METRICS_AUTH_ROLE, METRICS_AUTH_RULES),
        "metrics_auth_role_binding.yaml": _binding(
            "ClusterRoleBinding", "ClusterRole", METRICS_AUTH_ROLE
        ),
        "metrics_reader_role.yaml": {
            "apiVersion": RBAC_API_VERSION,
            "kind": "ClusterRole",
            "metadata": _metadata(METRICS_READER_ROLE),
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        },
    }


def rendered_rbac() -> dict[str, str]:
    """File name → YAML text, exactly as `noctaya rbac` writes them, kustomization included."""
    files = {name: dump_manifest(obj) for name, obj in rbac_manifests().items()}
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": sorted(files),
    }
    return {**files, "kustomization.yaml": dump_manifest(kustomization)}


def write_rbac(directory: Path) -> list[Path]:
    return write_files(directory, rendered_rbac())
