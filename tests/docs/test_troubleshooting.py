"""Troubleshooting has one entry per condition of the contract and per reason in the code."""

from __future__ import annotations

import re
from pathlib import Path

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
