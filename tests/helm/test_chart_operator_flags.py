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
OVERRIDES: list[tuple[str, Manifest | None]] = [
    ("defaults", None),
    (
        "one operator, three gateways",
        {"operator": {"replicas": 1, "leaderElect": False}, "gateway": {"replicas": 3}},
    ),
    ("own registry and tag", {"image": {"registry": "registry.example.com/ai", "tag": "9.9.9"}}),
]


@pytest.mark.parametrize(("name", "values"), OVERRIDES, ids=[name for name, _ in OVERRIDES])
def test_rendered_args_parse_and_validate_with_the_operator_parser(
    helm: Helm, name: str, values: Manifest | None
) -> None:
    objects = helm.render(values)
    args = manager_container(objects)["args"]
    flags = parse_flags(args)
    validate(flags)
    operator = (values or {}).get("operator", {})
    gateway = (values or {}).get("gateway", {})
    image = (values or {}).get("image", {})
    assert flags.leader_elect is operator.get("leaderElect", True)
    assert flags.gateway_replicas == gateway.get("replicas", 1)
    registry, tag = image.get("registry", "ghcr.io/noctaya"), image.get("tag", "0.1.0")
    assert flags.gateway_image == f"{registry}/noctaya-gateway:{tag}"
    assert flags.health_probe_bind_address == ":8081"
    assert not flags.metrics_enabled


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
