"""The args the chart renders are accepted by the operator's own command line, so the two cannot
drift: a renamed or removed flag fails here, not in a crash-looping pod."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from noctaya.k8s.operator.flags import parse_flags, validate

from .chart import Helm, Manifest, manager_container

pytestmark = pytest.mark.helm

OPERATOR = Path(sys.executable).parent / "noctaya-operator"
GATEWAY = "noctaya"
CASES = [
    pytest.param(None, True, 1, f"ghcr.io/noctaya/{GATEWAY}:0.1.0", id="defaults"),
    pytest.param(
        {"operator": {"replicas": 1, "leaderElect": False}, "gateway": {"replicas": 3}},
        False,
        3,
        f"ghcr.io/noctaya/{GATEWAY}:0.1.0",
        id="one operator, three gateways",
    ),
    pytest.param(
        {"image": {"registry": "registry.example.com/ai", "tag": "9.9.9"}},
        True,
        1,
        f"registry.example.com/ai/{GATEWAY}:9.9.9",
        id="own registry and tag",
    ),
]


@pytest.mark.parametrize(("values", "leader_elect", "gateway_replicas", "gateway_image"), CASES)
def test_rendered_args_parse_and_validate_with_the_operator_parser(
    helm: Helm,
    values: Manifest | None,
    leader_elect: bool,
    gateway_replicas: int,
    gateway_image: str,
) -> None:
    flags = parse_flags(manager_container(helm.render(values))["args"])
    validate(flags)
    assert flags.leader_elect is leader_elect
    assert flags.gateway_replicas == gateway_replicas
    assert flags.gateway_image == gateway_image
    assert flags.max_concurrent_reconciles == 8
    assert flags.health_probe_bind_address == ":8081"
    assert not flags.metrics_enabled
    assert flags.plain_http_registries == ()


def test_plain_http_registries_reach_the_operator_one_flag_each(helm: Helm) -> None:
    registries = ["registry.ai.svc:5000", "10.0.0.7:5000"]
    values = {"fetch": {"plainHTTPRegistries": registries}}
    flags = parse_flags(manager_container(helm.render(values))["args"])
    validate(flags)
    assert flags.plain_http_registries == tuple(registries)


def test_the_installed_operator_command_accepts_the_rendered_args(
    default_render: list[Manifest],
) -> None:
    """The real process: argparse exits 2 on an unknown flag before `--version` is honoured."""
    container = manager_container(default_render)
    (command,) = container["command"]
    assert OPERATOR.name == command
    result = subprocess.run(
        [str(OPERATOR), *container["args"], "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("noctaya-operator ")


def test_the_operator_command_would_reject_a_flag_it_does_not_know() -> None:
    """The check above can fail: a flag the operator lacks (the removed --scaler-mode) exits 2."""
    result = subprocess.run(
        [str(OPERATOR), "--scaler-mode=external-push", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--scaler-mode" in result.stderr
