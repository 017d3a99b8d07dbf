"""CPU: runtimes that need no accelerator (llama.cpp on plain nodes, a laptop cluster).

The contract's accelerator fields keep their shape and mean CPU here: `resourceName: cpu`, and
a service's `resources.accelerators` is the number of cores its backend requests and is limited
to. No device plugin and no extended resource is involved, so nothing but `cpu` is rendered.

On one machine (local mode) the cores this process may run on are the slots the device budget
hands out; no variable tells an engine which ones, so none is named.
"""

from __future__ import annotations

import json
import os
from typing import Final

from noctaya.core.errors import NoctayaError
from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest

RESOURCE_NAME: Final = "cpu"


class CpuAdapter:
    """Sets the `cpu` limit (and, through the renderer, the request) to the accelerator count."""

    vendor: Final = "cpu"
    visible_devices_env: Final = None

    def accelerator_plan(self, request: AcceleratorRequest) -> AcceleratorPlan:
        if request.resource_name != RESOURCE_NAME:
            # Any other name would be rendered as an extended resource no node advertises.
            raise NoctayaError(
                "Render",
                f"runtime {json.dumps(request.runtime)} has vendor cpu but accelerator."
                f"resourceName {json.dumps(request.resource_name)}; the cpu vendor takes only "
                f"{json.dumps(RESOURCE_NAME)}",
            )
        return AcceleratorPlan(vendor=self.vendor, limits=request.whole_device_limits())

    def local_devices(self) -> tuple[str, ...] | None:
        return tuple(str(core) for core in sorted(os.sched_getaffinity(0)))
