"""Values the operator cannot run with fail the render, with a message naming the value."""

from __future__ import annotations

import pytest

from .chart import CHART, Helm

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
    ("value", "shown"),
    [(0, "0"), (-1, "-1"), (2147483648, "2147483648"), (1.5, "1.5"), ("two", '"two"')],
)
def test_replica_counts_outside_int32_or_not_whole_fail(
    helm: Helm, field: str, value: object, shown: str
) -> None:
    section, key = field.split(".")
    message = helm.failure({section: {key: value}})
    assert f"{field} must be an integer between 1 and 2147483647, got {shown}" in message


@pytest.mark.parametrize("field", COUNTS)
def test_replica_counts_from_set_are_checked_too(helm: Helm, field: str) -> None:
    message = helm.failure(None, f"{field}=0")
    assert f"{field} must be an integer between 1 and 2147483647, got 0" in message


def test_an_emptied_replica_count_fails_instead_of_rendering_null(helm: Helm) -> None:
    message = helm.failure({"gateway": {"replicas": None}})
    assert "gateway.replicas must be an integer between 1 and 2147483647, got null" in message


def test_several_operators_without_leader_election_fail(helm: Helm) -> None:
    message = helm.failure({"operator": {"leaderElect": False}})
    assert "operator.replicas > 1 requires operator.leaderElect=true" in message


def test_leader_election_must_be_a_boolean(helm: Helm) -> None:
    message = helm.failure(None, "operator.leaderElect=yes")
    assert 'operator.leaderElect must be true or false, got "yes"' in message


def test_clusters_older_than_the_chart_supports_are_refused(helm: Helm) -> None:
    result = helm.run("template", "noctaya", str(CHART), "--kube-version", "1.24.0")
    assert result.returncode != 0
    assert "chart requires kubeVersion: >=1.25.0-0" in result.stderr
