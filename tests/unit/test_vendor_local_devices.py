"""The vendor plugins' `LocalDevices`: the machine's devices as the vendor's own tool lists them,
run as a process (a script standing in for the driver tool, printing what the real one prints),
and the variable a process reads its devices from."""

from __future__ import annotations

from pathlib import Path

import pytest
from noctaya.core.plugins import VendorRegistry
from noctaya.core.ports import LocalDevices
from noctaya.vendor_ascend import AscendAdapter
from noctaya.vendor_ascend.adapter import chip_logic_ids
from noctaya.vendor_nvidia import NvidiaAdapter
from noctaya.vendor_nvidia.adapter import gpu_indexes

NVIDIA_SMI_L = """\
GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5e7a0d36-1c1f-4e2f-9e9b-3c1c6f2f4a11)
  MIG 3g.40gb     Device  0: (UUID: MIG-2f0b8c6e-8a62-5d0c-9f1b-0c3e1f6a7b21)
  MIG 3g.40gb     Device  1: (UUID: MIG-7c1d2e3f-4a5b-5c6d-8e7f-9a0b1c2d3e41)
GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d51)
"""
NPU_SMI_INFO_M = "".join(
    f"        {npu:<31}{chip:<31}{logic:<31}{name}\n"
    for npu, chip, logic, name in (
        ("NPU ID", "Chip ID", "Chip Logic ID", "Chip Name"),
        ("0", "0", "0", "Ascend 310P3"),
        ("0", "1", "1", "Ascend 310P3"),
        ("0", "2", "-", "Mcu"),
        ("1", "0", "2", "Ascend 310P3"),
    )
)
"""`npu-smi info -m` for two boards: two chips and the management chip of one, a chip of the
other."""


def tool(folder: Path, name: str, output: str, code: int = 0) -> None:
    script = folder / name
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}EOF\nexit {code}\n", encoding="utf-8")
    script.chmod(0o755)


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder first on PATH, and nothing else there: no real driver tool is found."""
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    return tmp_path


def test_the_installed_vendor_plugins_know_their_devices() -> None:
    registry = VendorRegistry.discover()
    variables = {}
    for vendor in ("nvidia", "ascend"):
        adapter = registry.adapter(vendor)
        assert isinstance(adapter, LocalDevices)
        variables[vendor] = adapter.visible_devices_env
    assert variables == {"nvidia": "CUDA_VISIBLE_DEVICES", "ascend": "ASCEND_RT_VISIBLE_DEVICES"}


def test_nvidia_lists_the_gpus_cuda_numbers_and_not_their_mig_instances(tools: Path) -> None:
    assert gpu_indexes(NVIDIA_SMI_L) == ("0", "1")
    tool(tools, "nvidia-smi", NVIDIA_SMI_L)
    assert NvidiaAdapter().local_devices() == ("0", "1")


def test_ascend_lists_the_chips_by_logic_id_without_the_management_chip(tools: Path) -> None:
    assert chip_logic_ids(NPU_SMI_INFO_M) == ("0", "1", "2")
    tool(tools, "npu-smi", NPU_SMI_INFO_M)
    assert AscendAdapter().local_devices() == ("0", "1", "2")


@pytest.mark.parametrize("adapter", [NvidiaAdapter(), AscendAdapter()])
def test_without_a_working_tool_the_devices_are_unknown(
    tools: Path, adapter: NvidiaAdapter | AscendAdapter
) -> None:
    assert adapter.local_devices() is None  # not installed
    name = "nvidia-smi" if isinstance(adapter, NvidiaAdapter) else "npu-smi"
    tool(tools, name, "NVIDIA-SMI has failed because it couldn't communicate with the driver\n", 9)
    assert adapter.local_devices() is None  # installed, failing
