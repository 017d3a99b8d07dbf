"""Installing and upgrading: its RBAC and alert tables are what the packaging holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from helm.chart import Helm
from helm.conftest import helm  # noqa: F401  (the pinned helm binary)

from . import markdown_tables

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "operations" / "index.md"
ROLE = REPO / "config" / "rbac" / "role.yaml"


def table_after(marker: str) -> list[list[str]]:
    return markdown_tables.table_after(PAGE, marker)


def test_the_rbac_table_is_the_generated_cluster_role_rule_for_rule() -> None:
    role = yaml.safe_load(ROLE.read_text())
    generated = {(frozenset(rule["resources"]), frozenset(rule["verbs"])) for rule in role["rules"]}
    documented = {
        (
            frozenset(re.findall(r"`([a-z/]+)`", resources.split(" (")[0])),
            frozenset(verb.strip() for verb in verbs.split(",")),
        )
        for resources, verbs, *_ in table_after("Its ClusterRole `noctaya-manager-role` holds")
    }
    assert documented == generated


def test_secrets_are_said_to_be_readable_cluster_wide_and_never_patched() -> None:
    role = yaml.safe_load(ROLE.read_text())
    (secrets,) = [rule for rule in role["rules"] if rule["resources"] == ["secrets"]]
    assert not {"patch", "update"} & set(secrets["verbs"])
    assert {"get", "list", "watch"} <= set(secrets["verbs"])
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert "Secrets are created once and never patched or updated" in text
    assert "the operator may read every Secret in the cluster" in text


@pytest.mark.helm
def test_the_alert_table_is_the_charts_prometheus_rule(helm: Helm) -> None:  # noqa: F811
    objects = helm.render({"monitoring": {"prometheusRule": {"enabled": True}}})
    (rule,) = [obj for obj in objects if obj["kind"] == "PrometheusRule"]
    alerts = {
        alert["alert"]: (alert["labels"]["severity"], alert["for"])
        for group in rule["spec"]["groups"]
        for alert in group["rules"]
    }
    documented = {
        name.strip("`"): (severity, duration)
        for name, severity, _, duration in table_after("| Alert | Severity |")
    }
    assert documented == alerts
