"""Ascend: the whole-device request plus the host's driver files, read-only.

Device assignment is left to the Ascend device plugin, so this adds no environment, no device
nodes and no privileged mode: only the four host paths the runtime image expects to find.

On one machine (local mode) it also lists the NPU chips with `npu-smi info -m` and names the
variable the CANN runtime reads the visible ones from.
"""

from __future__ import annotations

from typing import Final

from noctaya.core.devices import tool_output
from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest, HostMount

LIST_COMMAND: Final = ("npu-smi", "info", "-m")


def _same_path(name: str, path: str) -> HostMount:
    return HostMount(name=name, host_path=path, mount_path=path, read_only=True)


HOST_MOUNTS: Final = (
    _same_path("ascend-driver", "/usr/local/Ascend/driver"),
    _same_path("npu-smi", "/usr/local/bin/npu-smi"),
    _same_path("dcmi", "/usr/local/dcmi"),
    _same_path("ascend-install-info", "/etc/ascend_install.info"),
)


class AscendAdapter:
    """Adds `limits[<resourceName>]` (for example `huawei.com/Ascend910`) and `HOST_MOUNTS`."""

    vendor: Final = "ascend"
    visible_devices_env: Final = "ASCEND_RT_VISIBLE_DEVICES"

    def accelerator_plan(self, request: AcceleratorRequest) -> AcceleratorPlan:
        return AcceleratorPlan(
            vendor=self.vendor, limits=request.whole_device_limits(), host_mounts=HOST_MOUNTS
        )

    def local_devices(self) -> tuple[str, ...] | None:
        listing = tool_output(LIST_COMMAND)
        return None if listing is None else chip_logic_ids(listing)


def chip_logic_ids(listing: str) -> tuple[str, ...]:
    """The `Chip Logic ID` column of `npu-smi info -m`, the ids ASCEND_RT_VISIBLE_DEVICES takes.

    Rows are `NPU ID  Chip ID  Chip Logic ID  Chip Name`; a board's management chip (`Mcu`) has
    no logic id (`-`) and is no device.
    """
    ids = []
    for line in listing.splitlines():
        fields = line.split(None, 3)
        if len(fields) == 4 and fields[0].isdigit() and fields[2].isdigit():
            ids.append(fields[2])
    return tuple(ids)
