"""Ascend: the whole-device request plus the host's driver files, read-only.

Device assignment is left to the Ascend device plugin, so this adds no environment, no device
nodes and no privileged mode: only the four host paths the runtime image expects to find.
"""

from __future__ import annotations

from typing import Final

from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest, HostMount


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

    def accelerator_plan(self, request: AcceleratorRequest) -> AcceleratorPlan:
        return AcceleratorPlan(
            vendor=self.vendor, limits=request.whole_device_limits(), host_mounts=HOST_MOUNTS
        )
