"""The NetworkPolicy examples select the pods and ports `noctaya render` gives the example."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from noctaya.core.plugins import VendorRegistry
from noctaya.k8s.offline import render_files

REPO = Path(__file__).resolve().parents[2]
POLICIES = REPO / "docs" / "snippets" / "networkpolicies.yaml"
METRICS_POLICIES = REPO / "docs" / "snippets" / "networkpolicy-metrics.yaml"
Manifest = dict[str, Any]


@cache
def pods(gateway_replicas: int) -> list[Manifest]:
    """Pod templates of the example service: one gateway serves the scaler itself, several
    report to an aggregator."""
    outcome = render_files(
        [REPO / "examples" / "nvidia" / "a10"],
        VendorRegistry.discover(),
        gateway_image="gateway:test",
        gateway_replicas=gateway_replicas,
        namespace="ai",
    )
    assert outcome.problems == []
    return [o["spec"]["template"] for o in outcome.objects if o["kind"] == "Deployment"]


def everywhere() -> list[Manifest]:
    return pods(1) + pods(2)


def selected(selector: Manifest, templates: list[Manifest]) -> list[Manifest]:
    wanted = selector["matchLabels"].items()
    return [pod for pod in templates if wanted <= pod["metadata"]["labels"].items()]


def port_names(templates: list[Manifest]) -> set[str]:
    return {
        port["name"]
        for pod in templates
        for container in pod["spec"]["containers"]
        for port in container.get("ports", [])
    }


def policies(path: Path = POLICIES) -> list[Manifest]:
    return list(yaml.safe_load_all(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize(
    "policy", policies() + policies(METRICS_POLICIES), ids=lambda p: p["metadata"]["name"]
)
def test_policy_selects_one_workload_and_only_its_ports(policy: Manifest) -> None:
    assert policy["metadata"]["namespace"] == "ai"
    selector = policy["spec"]["podSelector"]
    assert all(len(selected(selector, pods(n))) <= 1 for n in (1, 2))
    targets = selected(selector, everywhere())
    assert targets, selector
    for rule in policy["spec"]["ingress"]:
        assert {port["port"] for port in rule["ports"]} <= port_names(targets)
        for peer in rule["from"]:
            if "podSelector" in peer:
                assert selected(peer["podSelector"], everywhere())


@pytest.mark.parametrize("gateway_replicas", [1, 2])
def test_every_noctaya_workload_is_covered(gateway_replicas: int) -> None:
    templates = pods(gateway_replicas)
    covered = [pod for p in policies() for pod in selected(p["spec"]["podSelector"], templates)]
    assert len(covered) == len(templates) == gateway_replicas + 1
