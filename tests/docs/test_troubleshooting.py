"""Troubleshooting has one entry per condition of the contract and per reason in the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from noctaya.core import observation
from noctaya.k8s import cli

from .status_reasons import code_reasons

PAGE = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"
CONDITIONS = {"Ready", "Degraded", "AutoscalingReady"}
_ENTRY = re.compile(r"^### `(\w+)`$", re.MULTILINE)


def entries() -> list[str]:
    return _ENTRY.findall(PAGE.read_text(encoding="utf-8"))


def test_every_reason_the_code_can_report_has_an_entry() -> None:
    missing = sorted(code_reasons() - set(entries()))
    assert missing == [], f"docs/troubleshooting.md has no `### `Reason`` entry for {missing}"


def test_every_condition_of_the_contract_has_an_entry() -> None:
    assert set(entries()) >= CONDITIONS


def test_no_entry_describes_a_reason_the_code_no_longer_has() -> None:
    stale = sorted(set(entries()) - code_reasons() - CONDITIONS)
    assert stale == []


def test_each_entry_appears_once() -> None:
    assert len(entries()) == len(set(entries()))


def test_the_scan_finds_reasons_of_every_shape() -> None:
    """One reason per way of writing it, so a broken scan cannot pass as an empty one."""
    assert {
        "InvalidSpec",  # super().__init__ of a NoctayaError subclass
        "RuntimeResolution",  # REASON constant
        "UnsupportedVendor",  # NoctayaError("...") literal
        "ObserveBackendPods",  # api_step("...")
        "ApplyScaledObject",  # applier.apply(obj, owner, "...")
        "OOMKilled",  # observation constant
        "Healthy",  # status condition value
        "BackendRecovered",  # StatusEvent reason
    } <= code_reasons()
    assert "ContainerCreating" not in code_reasons()  # the kubelet's word, read, never written


def section(reason: str) -> str:
    """The text of one `### `Reason`` entry, up to the next heading."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"### `{reason}`\n")
    end = text.find("\n#", start + 1)
    return " ".join(text[start : end if end > 0 else None].split())


def test_image_pull_failed_lists_exactly_the_waiting_reasons_that_map_to_it() -> None:
    listed = set(re.findall(r"`([A-Za-z]+)`", section("ImagePullFailed"))) - {"ImagePullFailed"}
    waiting = listed - {"imagePullSecrets"}
    assert waiting == set(observation._IMAGE_PULL_WAITING_REASONS)
    for reason in waiting:
        found = observation.classify_pod(observation.PodFacts("p", waiting_reason=reason))
        assert found.reason == observation.IMAGE_PULL_FAILED, reason


def test_gateway_config_is_said_to_come_from_planning_not_from_a_running_operator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The operator exits 1 on these flags before reconciling anything
    (tests/integration/test_operator_process.py); `noctaya validate` reports the reason."""
    text = section("GatewayConfig")
    assert "a running operator never reports this reason" in text
    assert "exits 1" in text
    examples = PAGE.parents[1] / "examples" / "nvidia" / "a10"
    code = cli.main(["validate", "-f", str(examples), "--gateway-replicas=-1"])
    assert code == 1
    assert "GatewayConfig: gateway replicas must be at least 1" in capsys.readouterr().err
