"""Values the operator cannot run with fail the render, with a message naming the value."""

from __future__ import annotations

import pytest

from .chart import CHART, REPO, Helm

pytestmark = pytest.mark.helm

SCALER_MODE_REMOVED = "gateway.scalerMode has been removed; Noctaya always uses KEDA External Push"


@pytest.mark.parametrize("mode", ["external-push", "metrics-api", ""])
def test_any_gateway_scaler_mode_fails_because_the_option_was_removed(
    helm: Helm, mode: str
) -> None:
    assert SCALER_MODE_REMOVED in helm.failure({"gateway": {"scalerMode": mode}})


COUNTS = ["operator.replicas", "gateway.replicas", "operator.maxConcurrentReconciles"]


@pytest.mark.parametrize("field", COUNTS)
@pytest.mark.parametrize(
    ("value", "refusal"),
    [
        (0, "minimum: got 0, want 1"),
        (-1, "minimum: got -1, want 1"),
        (2147483648, "maximum: got 2.147483648"),
        (1.5, "got number, want integer"),
        ("two", "got string, want integer"),
    ],
)
def test_replica_counts_outside_int32_or_not_whole_fail_naming_the_value(
    helm: Helm, field: str, value: object, refusal: str
) -> None:
    section, key = field.split(".")
    message = helm.failure({section: {key: value}})
    assert f"at '/{section}/{key}': {refusal}" in message


@pytest.mark.parametrize("field", COUNTS)
def test_an_emptied_replica_count_fails_instead_of_rendering_zero(helm: Helm, field: str) -> None:
    """A null in values deletes the key: the schema requires it back."""
    section, key = field.split(".")
    assert f"at '/{section}': missing property '{key}'" in helm.failure({section: {key: None}})


@pytest.mark.parametrize("field", COUNTS)
def test_replica_counts_from_set_are_checked_too(helm: Helm, field: str) -> None:
    section, key = field.split(".")
    assert f"at '/{section}/{key}': minimum: got 0, want 1" in helm.failure(None, f"{field}=0")


@pytest.mark.parametrize(
    ("values", "refusal"),
    [
        (
            {"operator": {"leaderElect": "yes"}},
            "at '/operator/leaderElect': got string, want boolean",
        ),
        ({"operator": {"logFormat": "xml"}}, "at '/operator/logFormat': value must be one of"),
        ({"operator": {"logLevel": "loud"}}, "at '/operator/logLevel': 'anyOf' failed"),
        ({"operator": {"extraArgs": "--x"}}, "at '/operator/extraArgs': got string, want array"),
        ({"operator": {"podLabels": {"team": 1}}}, "at '/operator/podLabels/team': got number"),
        ({"operator": {"metrics": {"port": 70000}}}, "at '/operator/metrics/port': maximum"),
        ({"image": {"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy': value must be one of"),
        (
            {"operator": {"replica": 3}},
            "at '/operator': additional properties 'replica' not allowed",
        ),
    ],
)
def test_values_of_the_wrong_type_or_unknown_fail_naming_the_value(
    helm: Helm, values: dict[str, object], refusal: str
) -> None:
    assert refusal in helm.failure(values)


def test_helm_lint_refuses_a_value_the_schema_refuses(helm: Helm) -> None:
    result = helm.run("lint", "--strict", str(CHART), "--set", "operator.replicas=0")
    assert result.returncode != 0
    assert "at '/operator/replicas': minimum: got 0, want 1" in result.stdout + result.stderr


def test_several_operators_without_leader_election_fail(helm: Helm) -> None:
    message = helm.failure({"operator": {"leaderElect": False}})
    assert "operator.replicas > 1 requires operator.leaderElect=true" in message


def test_clusters_older_than_the_tested_matrix_are_refused(helm: Helm) -> None:
    oldest = oldest_tested_release()
    minor = ".".join(oldest.removeprefix("v").split(".")[:2])
    below = f"1.{int(minor.split('.')[1]) - 1}.99"
    result = helm.run("template", "noctaya", str(CHART), "--kube-version", below)
    assert result.returncode != 0
    assert f"chart requires kubeVersion: >={minor}.0-0" in result.stderr
    assert helm.run("template", "noctaya", str(CHART), "--kube-version", oldest).returncode == 0


def oldest_tested_release() -> str:
    for line in (REPO / "hack" / "kubernetes-matrix.env").read_text().splitlines():
        if line.startswith("KUBERNETES_MATRIX="):
            return line.split("=", 1)[1].strip('"').split()[0]
    raise AssertionError("hack/kubernetes-matrix.env names no KUBERNETES_MATRIX")
