"""The chart repeats nothing by hand that a generator owns: CRDs, RBAC rules, the version.

The chart's crds/ holds copies of the generated CRDs, because helm only installs CRDs from files
inside the chart. The copies are checked here rather than produced by a make step: a forgotten
copy then fails CI instead of shipping a stale CRD, and the check needs no tool beyond pytest.
"""

from __future__ import annotations

from importlib.metadata import entry_points, version
from typing import Any

import pytest
import yaml
from noctaya.k8s.crds import rendered_crds
from noctaya.k8s.rbac import rbac_manifests

from .chart import CHART, REPO, Helm, Manifest, find

pytestmark = pytest.mark.helm

CRDS = CHART / "crds"
COPY_CRDS = "run `.venv/bin/noctaya crds --output charts/noctaya/crds` and commit"


def _chart_yaml() -> dict[str, Any]:
    document = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def test_chart_crds_are_exactly_the_generated_files() -> None:
    assert {path.name for path in CRDS.iterdir()} == set(rendered_crds()), COPY_CRDS
    for name, text in rendered_crds().items():
        assert (CRDS / name).read_text(encoding="utf-8") == text, f"crds/{name}: {COPY_CRDS}"


def test_chart_crds_are_the_committed_kustomize_bases() -> None:
    bases = REPO / "config" / "crd" / "bases"
    for path in bases.glob("*.yaml"):
        assert (CRDS / path.name).read_bytes() == path.read_bytes(), COPY_CRDS


def test_helm_installs_the_crds_it_ships(helm_crds: list[Manifest]) -> None:
    names = {crd["metadata"]["name"] for crd in helm_crds}
    assert names == {"llmservices.serving.noctaya.io", "inferenceruntimes.serving.noctaya.io"}


@pytest.mark.parametrize(
    ("kind", "generated"),
    [
        ("ClusterRole", "role.yaml"),
        ("Role", "leader_election_role.yaml"),
        ("ClusterRole", "metrics_auth_role.yaml"),
        ("ClusterRole", "metrics_reader_role.yaml"),
    ],
)
def test_chart_role_rules_equal_the_generated_rbac(
    default_render: list[Manifest], kind: str, generated: str
) -> None:
    expected = rbac_manifests()[generated]
    rendered = find(default_render, kind, expected["metadata"]["name"])
    assert rendered["rules"] == expected["rules"], (
        f"the chart's {kind} {expected['metadata']['name']} drifted from noctaya.k8s.rbac: "
        "copy the rules of config/rbac/" + generated
    )


def test_chart_renders_every_generated_rbac_object(default_render: list[Manifest]) -> None:
    rendered = {(o["kind"], o["metadata"]["name"]) for o in default_render}
    generated = {(o["kind"], o["metadata"]["name"]) for o in rbac_manifests().values()}
    assert generated <= rendered


def test_app_version_is_the_operator_distribution_version() -> None:
    assert _chart_yaml()["appVersion"] == version("noctaya-k8s")


def test_the_command_the_chart_runs_is_the_operator_entry_point() -> None:
    (script,) = entry_points(group="console_scripts", name="noctaya-operator")
    assert script.value == "noctaya.k8s.operator.main:main"


def test_helm_binary_is_the_pinned_build(helm: Helm) -> None:
    result = helm.run("version", "--template", "{{ .Version }}")
    assert result.returncode == 0, result.stderr
    assert helm.binary.parent.name == f"helm-{result.stdout}"
