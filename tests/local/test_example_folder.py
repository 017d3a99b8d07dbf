"""The multi-model example folder passes everything local mode checks before it serves, as
written (its engines start on a request, so nothing is downloaded here; the manual's test serves
it with generated models)."""

from __future__ import annotations

from pathlib import Path

from noctaya.core.plugins import VendorRegistry
from noctaya.local.admission import AdmissionSettings, admit
from noctaya.local.devices import MachineDevices
from noctaya.local.live_files import ServedFiles

FOLDER = Path(__file__).resolve().parents[2] / "examples" / "local" / "multi-model"


def test_the_multi_model_example_is_served_as_written() -> None:
    """Three services on ports of their own, the stub pinned."""
    vendors = VendorRegistry.discover()
    settings = AdmissionSettings("127.0.0.1:8080", vendors, MachineDevices([], vendors), {})
    admitted = admit(ServedFiles([FOLDER]).read_all(), settings, {})
    assert sorted(admitted.plans) == ["coder", "demo", "qwen"]
    assert len({plan.engine.port for plan in admitted.plans.values()}) == 3
    assert [name for name, plan in admitted.plans.items() if plan.pinned] == ["demo"]
    assert admitted.plans["coder"].model_names == ("coder",)
