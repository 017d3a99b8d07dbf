"""The real kube-apiserver accepts what the chart renders, and the RBAC it grants works.

Every object (the CRDs included, which already exist in the test cluster) is sent as a
server-side apply with dryRun=All: the API server runs defaulting, schema validation and
admission, persists nothing, and (unlike a plain create) rejects fields its schema does not
declare instead of dropping them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError

from .chart import CHART, REPO, Helm, Manifest, find

pytestmark = [pytest.mark.helm, pytest.mark.integration]

FIELD_MANAGER = "noctaya-chart-test"
RENDERS: list[tuple[str, Manifest | None]] = [
    ("defaults", None),
    (
        "every knob",
        {
            "image": {
                "registry": "registry.example.com/ai",
                "tag": "1.2.3",
                "pullPolicy": "Always",
                "fetch": "noctaya-fetch",
            },
            "imagePullSecrets": [{"name": "ghcr"}],
            "operator": {
                "replicas": 3,
                "nodeSelector": {"node-role/ops": "true"},
                "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "ops", "operator": "Exists"}]}
                            ]
                        }
                    }
                },
                "priorityClassName": "system-cluster-critical",
                "podAnnotations": {"example.com/owner": "platform"},
                "podLabels": {"team": "platform"},
                "podSecurityContext": {"runAsNonRoot": True, "runAsUser": 65532},
                "extraArgs": ["--enable-http2=false"],
                "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy.example:3128"}],
                "logFormat": "console",
                "logLevel": "debug",
                "metrics": {"enabled": True},
            },
            "gateway": {"replicas": 2},
            "serviceAccount": {"annotations": {"example.com/owner": "platform"}},
        },
    ),
    ("one operator", {"operator": {"replicas": 1, "leaderElect": False}}),
]


@pytest.fixture(scope="module")
def dynamic(api_client: k8s.ApiClient) -> DynamicClient:
    return DynamicClient(api_client)  # type: ignore[no-untyped-call]


def apply(dynamic: DynamicClient, obj: Manifest, *, dry_run: bool) -> Any:
    resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    return dynamic.server_side_apply(  # type: ignore[no-untyped-call]
        resource,
        body=obj,
        namespace=obj["metadata"].get("namespace"),
        field_manager=FIELD_MANAGER,
        force_conflicts=True,
        dry_run="All" if dry_run else None,
    )


@pytest.mark.parametrize(("name", "values"), RENDERS, ids=[name for name, _ in RENDERS])
def test_api_server_accepts_every_rendered_object(
    helm: Helm, dynamic: DynamicClient, namespace: str, name: str, values: Manifest | None
) -> None:
    objects = helm.render(values, namespace=namespace, include_crds=True)
    assert {o["kind"] for o in objects} >= {"CustomResourceDefinition", "Deployment", "ClusterRole"}
    for obj in objects:
        accepted = apply(dynamic, obj, dry_run=True)
        assert accepted.metadata.name == obj["metadata"]["name"]
        assert accepted.kind == obj["kind"]


def test_dry_run_apply_does_persist_nothing(
    helm: Helm, dynamic: DynamicClient, namespace: str
) -> None:
    deployment = find(helm.render(namespace=namespace), "Deployment", "noctaya-controller-manager")
    apply(dynamic, deployment, dry_run=True)
    resource = dynamic.resources.get(api_version="apps/v1", kind="Deployment")
    with pytest.raises(NotFoundError):
        resource.get(name="noctaya-controller-manager", namespace=namespace)


def test_apply_would_reject_a_misspelled_field(
    helm: Helm, dynamic: DynamicClient, namespace: str
) -> None:
    """The acceptance check above can fail: a typo in a template is an error, not a warning."""
    deployment = find(helm.render(namespace=namespace), "Deployment", "noctaya-controller-manager")
    deployment["spec"]["template"]["spec"]["terminationGracePeriod"] = 10
    with pytest.raises(DynamicApiError) as rejected:
        apply(dynamic, deployment, dry_run=True)
    assert ".spec.template.spec.terminationGracePeriod: field not declared in schema" in str(
        rejected.value
    )


@pytest.fixture
def installed_rbac(helm: Helm, dynamic: DynamicClient, namespace: str) -> Iterator[str]:
    """The chart's ServiceAccount and RBAC created for real in `namespace`; its account name."""
    rbac_kinds = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
    objects = [o for o in helm.render(namespace=namespace) if o["kind"] in rbac_kinds]
    created: list[Manifest] = []
    try:
        for obj in objects:
            apply(dynamic, obj, dry_run=False)
            created.append(obj)
        yield find(objects, "ServiceAccount", "noctaya-controller-manager")["metadata"]["name"]
    finally:
        for obj in reversed(created):
            resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            with contextlib.suppress(NotFoundError):
                resource.delete(
                    name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace")
                )


def _allowed(
    api_client: k8s.ApiClient,
    namespace: str,
    account: str,
    verb: str,
    resource: str,
    *,
    group: str = "",
    subresource: str | None = None,
    in_namespace: str | None = None,
) -> bool:
    review = k8s.V1SubjectAccessReview(
        spec=k8s.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{namespace}:{account}",
            groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
            resource_attributes=k8s.V1ResourceAttributes(
                verb=verb,
                group=group,
                resource=resource,
                subresource=subresource,
                namespace=in_namespace,
            ),
        )
    )
    answer = k8s.AuthorizationV1Api(api_client).create_subject_access_review(review)
    assert answer.status is not None
    return bool(answer.status.allowed)


def test_installed_rbac_lets_the_operator_account_do_its_job_and_no_more(
    api_client: k8s.ApiClient, namespace: str, installed_rbac: str
) -> None:
    def allowed(verb: str, resource: str, **where: Any) -> bool:
        return _allowed(api_client, namespace, installed_rbac, verb, resource, **where)

    assert allowed("create", "deployments", group="apps", in_namespace="ai")
    assert allowed("watch", "llmservices", group="serving.noctaya.io")
    assert allowed(
        "update", "llmservices", group="serving.noctaya.io", subresource="status", in_namespace="ai"
    )
    assert allowed("create", "scaledobjects", group="keda.sh", in_namespace="ai")
    assert allowed("create", "secrets", in_namespace="ai")
    assert not allowed("update", "secrets", in_namespace="ai")
    assert not allowed("update", "llmservices", group="serving.noctaya.io", in_namespace="ai")
    assert allowed("patch", "events", group="events.k8s.io", in_namespace="ai")
    assert allowed("create", "tokenreviews", group="authentication.k8s.io")
    assert allowed("update", "leases", group="coordination.k8s.io", in_namespace=namespace)
    assert not allowed("update", "leases", group="coordination.k8s.io", in_namespace="ai")


def test_the_notes_crd_command_works_from_outside_the_chart(
    helm: Helm, dynamic: DynamicClient, kubeconfig: Path, tmp_path: Path
) -> None:
    """What `helm install` prints after installing: its CRD command, run from elsewhere than
    the chart's folder, yields CRDs the API server takes (server-side apply, dry run)."""
    installed = helm.run(
        "install",
        "noctaya",
        str(CHART),
        "--dry-run=client",
        "--kubeconfig",
        str(kubeconfig),
        "--namespace",
        "noctaya-system",
    )
    assert installed.returncode == 0, installed.stderr
    notes = installed.stdout.split("NOTES:\n", 1)[1]
    (command,) = [line.strip() for line in notes.splitlines() if "kubectl apply" in line]
    assert command == "helm show crds CHART | kubectl apply --server-side --force-conflicts -f -"
    shown = helm.run("show", "crds", str(CHART.relative_to(REPO)), cwd=REPO)
    assert shown.returncode == 0, shown.stderr
    from_elsewhere = helm.run("show", "crds", str(CHART), cwd=tmp_path)
    assert from_elsewhere.stdout == shown.stdout
    crds = [doc for doc in yaml.safe_load_all(shown.stdout) if doc]
    assert {crd["metadata"]["name"] for crd in crds} == {
        "llmservices.serving.noctaya.io",
        "inferenceruntimes.serving.noctaya.io",
    }
    for crd in crds:
        apply(dynamic, crd, dry_run=True)
