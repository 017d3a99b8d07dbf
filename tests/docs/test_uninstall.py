"""Uninstalling: the release, namespace, CRDs and object names the page gives are the ones the
chart, the install page and the renderer use, and what it says goes with a service does."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm.chart import DEFAULT_NAMESPACE, RELEASE, Helm
from helm.conftest import helm  # noqa: F401  (the pinned helm binary)
from noctaya.k8s import apply
from noctaya.k8s.runtime.leader_election import LEADER_ELECTION_ID

from .rendering import rendered

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "operations" / "uninstall.md"
INSTALL_PAGE = REPO / "docs" / "operations" / "index.md"
EXAMPLE = REPO / "examples" / "nvidia" / "a10"
SERVICE = "qwen3-8b-a10"
NAMESPACE = "ai"


def text() -> str:
    return PAGE.read_text(encoding="utf-8")


def step(number: int) -> str:
    """One `## N. ...` section, its lines joined."""
    body = text().split(f"\n## {number}. ", 1)[1].split("\n## ", 1)[0]
    return " ".join(body.split())


def chart_crds() -> dict[str, dict[str, Any]]:
    crds = [yaml.safe_load(p.read_text()) for p in (REPO / "charts/noctaya/crds").glob("*.yaml")]
    return {crd["metadata"]["name"]: crd for crd in crds}


def render(tmp_path: Path, cache: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The a10 example with two gateway replicas (every object a service can have)."""
    documents = [yaml.safe_load(p.read_text()) for p in sorted(EXAMPLE.glob("*.yaml"))]
    for document in documents:
        if document["kind"] == "LLMService" and cache is not None:
            document["spec"]["cache"] = cache
    source = tmp_path / "example.yaml"
    source.write_text(yaml.safe_dump_all(documents))
    return list(rendered([source], NAMESPACE, gateway_replicas=2).values())


def test_helm_uninstall_names_the_release_and_namespace_the_install_page_installs() -> None:
    assert f"helm uninstall {RELEASE} --namespace {DEFAULT_NAMESPACE}" in text()
    install = f"helm install {RELEASE} charts/noctaya --namespace {DEFAULT_NAMESPACE}"
    assert install in INSTALL_PAGE.read_text()
    assert f"kubectl delete namespace {DEFAULT_NAMESPACE}" in text()


def test_the_crds_deleted_are_the_charts_which_helm_installs_from_crds() -> None:
    (command,) = re.findall(r"^kubectl delete crd (.+)$", text(), re.MULTILINE)
    assert set(command.split()) == set(chart_crds())
    templates = " ".join(p.read_text() for p in (REPO / "charts/noctaya/templates").iterdir())
    assert "CustomResourceDefinition" not in templates  # so `helm uninstall` never deletes them
    assert "the chart's `crds/` folder" in step(4)


def test_the_commands_use_the_crds_short_names_and_plurals() -> None:
    names = {crd["spec"]["names"]["kind"]: crd["spec"]["names"] for crd in chart_crds().values()}
    assert "llms" in names["LLMService"]["shortNames"]
    assert "kubectl get llms --all-namespaces" in text()
    assert f"kubectl delete llms --all -n {NAMESPACE}" in text()
    assert f"kubectl delete llmservice {SERVICE} -n {NAMESPACE}" in text()
    assert names["LLMService"]["singular"] == "llmservice"
    assert f"kubectl delete {names['InferenceRuntime']['plural']} --all" in text()
    assert chart_crds()["inferenceruntimes.serving.noctaya.io"]["spec"]["scope"] == "Cluster"


def test_the_objects_said_to_go_with_a_service_are_every_object_rendered_for_it(
    tmp_path: Path,
) -> None:
    listed = set(re.findall(r"`(<service>[-a-z]*)`", step(1).split("What deleting a service")[0]))
    rendered = {obj["metadata"]["name"].replace(SERVICE, "<service>") for obj in render(tmp_path)}
    assert listed == rendered


def test_every_object_is_written_with_a_controller_owner_reference_and_no_finalizer() -> None:
    for method in (apply.Applier.apply, apply.Applier.create_once):
        assert 'meta["ownerReferences"] = [owner_reference(owner)]' in inspect.getsource(method)
    reference = apply.owner_reference(
        {"apiVersion": "v", "kind": "LLMService", "metadata": {"name": "n", "uid": "u"}}
    )
    assert reference["controller"] is True
    sources = (REPO / "packages" / "noctaya-k8s" / "src").rglob("*.py")
    assert not any('"finalizers"' in path.read_text() for path in sources)


def test_the_cache_claim_and_the_host_path_folder_are_the_rendered_ones(tmp_path: Path) -> None:
    claims = [o for o in render(tmp_path) if o["kind"] == "PersistentVolumeClaim"]
    assert [claim["metadata"]["name"] for claim in claims] == [f"{SERVICE}-cache"]
    assert f"kubectl -n {NAMESPACE} get pvc {SERVICE}-cache" in text()

    host = render(tmp_path, {"strategy": "HostPath"})
    paths = {
        volume["hostPath"]["path"]
        for obj in host
        if obj["kind"] in {"Deployment", "Job"}
        for volume in obj["spec"]["template"]["spec"].get("volumes", [])
        if "hostPath" in volume
    }
    assert paths == {f"/var/lib/noctaya/cache/{NAMESPACE}-{SERVICE}"}
    assert "`/var/lib/noctaya/cache/<namespace>-<service>`" in step(1)


def test_the_operators_lease_and_the_kustomize_build_are_as_the_page_says() -> None:
    assert f"`Lease` `{LEADER_ELECTION_ID}`" in step(3)
    kustomization = yaml.safe_load((REPO / "config/default/kustomization.yaml").read_text())
    assert "../crd" in kustomization["resources"]
    manager = list(yaml.safe_load_all((REPO / "config/manager/manager.yaml").read_text()))
    assert any(doc and doc["kind"] == "Namespace" for doc in manager)
    assert "`kubectl delete -k config/default`" in step(3)


@pytest.mark.helm
def test_the_objects_helm_uninstall_removes_are_what_the_chart_renders(
    helm: Helm,  # noqa: F811
) -> None:
    everything = {
        "operator": {"metrics": {"enabled": True, "serviceMonitor": {"enabled": True}}},
        "monitoring": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
    }
    section = step(3)
    for values in (None, everything):
        for obj in helm.render(values):
            kind, name = obj["kind"], obj["metadata"]["name"]
            if kind.endswith("Binding"):
                assert "binding" in section
            elif kind in {"ServiceMonitor", "PrometheusRule"}:
                assert kind in section, kind
            else:
                assert f"`{name}`" in section, (kind, name)
                assert kind in section, kind
